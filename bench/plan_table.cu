/// @file bench/plan_table.cu
/// @brief The planner's choice for a list of layers, on the host, for a named device: each layer's plan
/// description and estimated time under TF32, bf16 and math::accurate, for float x in NCHW (what the
/// PyTorch op plans for float32 tensors: conv2d_reduce_plan<float, Math> with the default family list).
/// It needs no GPU: the device is given (an H200 unless told otherwise), so a change to the planner's rules
/// or constants can be checked, before any GPU run, for the plans it moves (bench/plan_changes.py compares
/// this table with the kernels a torchvision_sweep.py result recorded).
///
///   plan_table [--sm 90] [--sms 132] [FILE...]    # FILE, or stdin: one layer per line
///   plan_table --expect SNAPSHOT FILE...          # the planner's snapshot test (ctest plan_snapshot_h200)
///
/// A layer line: `N C H W K R S stride_h stride_w pad_h pad_w dil_h dil_w groups [name]` (the name: the rest
/// of the line, no tabs; without one, the numbers); blank lines and lines starting with '#' are skipped.
/// Options come before the files. Output, one line per layer and math, tab-separated:
/// `name  math  estimate_us  description` (estimate_us: plan_config::seconds in microseconds, 0 where the
/// chosen family has no model; the description "error: <status>" where no family serves the layer).
/// Exit 0; 1 on an unreadable file or line (named on stderr).
///
/// With --expect, the output is not printed but compared with SNAPSHOT line by line: every differing line is
/// counted, the first ten printed (expected, then got), and the exit status is 1 if any differs. A difference
/// is a plan the working tree moves. When the move is meant, regenerate the snapshot (`plan_table
/// bench/plans/layers.txt bench/plans/layers_extra.txt > bench/plans/h200.tsv`) and list the moved plans with
/// their last measured times (bench/plan_changes.py) for the next GPU run. The estimates are printed to 3
/// decimals of a microsecond: a host compiler that rounds differently could move a near tie; regenerate on that
/// toolchain.
#include <convred/convred.cuh>
#include <convred/device/conv2d_reduce_plan.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace dev = convred::device;

/// the table's line for p's plan under Math
template <class Math>
std::string plan_line(const convred::conv2d_problem& p, const dev::device_info& d, const std::string& name,
                      const char* math) {
  const dev::conv2d_reduce_plan<float, Math> plan(p, d);
  char est[64];
  if (plan.state() != convred::status::success)
    return name + "\t" + math + "\t0\terror: " + convred::to_string(plan.state());
  std::snprintf(est, sizeof est, "%.3f", plan.config().seconds * 1e6);
  return name + "\t" + math + "\t" + est + "\t" + plan.description();
}

/// appends one stream's layer lines' table lines to `out`; false on a malformed line (named on stderr)
bool read_layers(std::istream& in, const char* source, const dev::device_info& d, std::vector<std::string>& out) {
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
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
    out.push_back(plan_line<convred::math::tf32>(p, d, name, "tf32"));
    out.push_back(plan_line<convred::math::bf16>(p, d, name, "bf16"));
    out.push_back(plan_line<convred::math::accurate>(p, d, name, "accurate"));
  }
  return true;
}

/// compares `got` with the snapshot file's lines; prints the differences; true when equal
bool matches(const std::vector<std::string>& got, const char* snapshot) {
  std::ifstream f(snapshot);
  if (!f) {
    std::fprintf(stderr, "plan_table: cannot read %s\n", snapshot);
    return false;
  }
  std::vector<std::string> expected;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    expected.push_back(line);
  }
  if (got.size() != expected.size())
    std::printf("%s holds %zu plan lines, the layers give %zu (a layer added or removed: every later line "
                "shifts)\n", snapshot, expected.size(), got.size());
  const std::size_t n = std::max(got.size(), expected.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string e = i < expected.size() ? expected[i] : "(none)", g = i < got.size() ? got[i] : "(none)";
    if (e == g) continue;
    if (++differ <= 10) std::printf("line %zu:\n  expected: %s\n  got:      %s\n", i + 1, e.c_str(), g.c_str());
  }
  if (differ)
    std::printf("%zu of %zu plan lines differ from %s (the first 10 above): the working tree moves them "
                "(bench/plan_table.cu says how to regenerate the snapshot when that is meant)\n", differ, n,
                snapshot);
  else
    std::printf("%zu plan lines equal %s\n", got.size(), snapshot);
  return differ == 0;
}

}  // namespace

int main(int argc, char** argv) {
  dev::device_info d;
  d.cc_major = 9, d.cc_minor = 0, d.wgmma_image = true, d.sm_count = 132;  // an H200
  const char* expect = nullptr;
  int i = 1;
  for (; i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--expect")) {
      expect = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--sm") && v > 0) {
      d.cc_major = v / 10, d.cc_minor = v % 10, d.wgmma_image = v == 90;
    } else if (!std::strcmp(argv[i], "--sms") && v > 0) {
      d.sm_count = v;
    } else {
      std::fprintf(stderr, "usage: plan_table [--sm 90] [--sms 132] [--expect SNAPSHOT] [FILE...]\n");
      return 1;
    }
  }
  std::vector<std::string> lines;
  if (i == argc && !read_layers(std::cin, "stdin", d, lines)) return 1;
  for (; i < argc; ++i) {
    std::ifstream f(argv[i]);
    if (!f) {
      std::fprintf(stderr, "plan_table: cannot read %s\n", argv[i]);
      return 1;
    }
    if (!read_layers(f, argv[i], d, lines)) return 1;
  }
  if (expect) return matches(lines, expect) ? 0 : 1;
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return 0;
}
