/// @file bench/plan_table.cu
/// @brief The planner's choice for a list of layers, on the host, for a named device: each layer's plan
/// description and estimated time under TF32, bf16 and math::accurate, for float x in NCHW (what the
/// PyTorch op plans for float32 tensors: conv2d_reduce_plan<float, Math> with the default family list).
/// It needs no GPU: the device is given (an H200 unless told otherwise), so a change to the planner's rules
/// or constants can be checked, before any GPU run, for the plans it moves (bench/plan_changes.py compares
/// this table with the kernels a torchvision_sweep.py result recorded).
///
///   plan_table [--sm 90] [--sms 132] [FILE...]    # FILE, or stdin: one layer per line
///
/// A layer line: `N C H W K R S stride_h stride_w pad_h pad_w dil_h dil_w groups [name]`; blank lines and
/// lines starting with '#' are skipped. Output, one line per layer and math, tab-separated:
/// `name  math  estimate_us  description` (estimate_us: plan_config::seconds in microseconds, 0 where the
/// chosen family has no model; the description "error: <status>" where no family serves the layer).
/// Exit 0; 1 on an unreadable file or line (named on stderr).
#include <convred/convred.cuh>
#include <convred/device/conv2d_reduce_plan.cuh>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

namespace dev = convred::device;

template <class Math>
void print_plan(const convred::conv2d_problem& p, const dev::device_info& d, const std::string& name,
                const char* math) {
  const dev::conv2d_reduce_plan<float, Math> plan(p, d);
  if (plan.state() != convred::status::success) {
    std::printf("%s\t%s\t0\terror: %s\n", name.c_str(), math, convred::to_string(plan.state()));
    return;
  }
  std::printf("%s\t%s\t%.3f\t%s\n", name.c_str(), math, plan.config().seconds * 1e6, plan.description().c_str());
}

/// reads one stream's layer lines; false on a malformed line (named on stderr)
bool read_layers(std::istream& in, const char* source, const dev::device_info& d) {
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream s(line);
    convred::conv2d_problem p;
    if (!(s >> p.N >> p.C >> p.H >> p.W >> p.K >> p.R >> p.S >> p.stride_h >> p.stride_w >> p.pad_h >> p.pad_w >>
          p.dil_h >> p.dil_w >> p.groups)) {
      std::fprintf(stderr, "plan_table: %s:%d: expected 14 integers (N C H W K R S stride_h stride_w pad_h pad_w "
                           "dil_h dil_w groups), got '%s'\n", source, n, line.c_str());
      return false;
    }
    std::string name;
    std::getline(s >> std::ws, name);
    if (name.empty()) name = line.substr(first);
    print_plan<convred::math::tf32>(p, d, name, "tf32");
    print_plan<convred::math::bf16>(p, d, name, "bf16");
    print_plan<convred::math::accurate>(p, d, name, "accurate");
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  dev::device_info d;
  d.cc_major = 9, d.cc_minor = 0, d.wgmma_image = true, d.sm_count = 132;  // an H200
  int i = 1;
  for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--sm") && v > 0) {
      d.cc_major = v / 10, d.cc_minor = v % 10, d.wgmma_image = v == 90;
    } else if (!std::strcmp(argv[i], "--sms") && v > 0) {
      d.sm_count = v;
    } else {
      std::fprintf(stderr, "usage: plan_table [--sm 90] [--sms 132] [FILE...]\n");
      return 1;
    }
  }
  if (i == argc) return read_layers(std::cin, "stdin", d) ? 0 : 1;
  for (; i < argc; ++i) {
    std::ifstream f(argv[i]);
    if (!f) {
      std::fprintf(stderr, "plan_table: cannot read %s\n", argv[i]);
      return 1;
    }
    if (!read_layers(f, argv[i], d)) return 1;
  }
  return 0;
}
