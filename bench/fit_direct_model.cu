/// @file bench/fit_direct_model.cu
/// @brief Refits the constants of the direct kernel's tiling model (convred::device::direct_model_constants,
/// which estimate_direct_config weighs for choose_direct_config) to measured tilings, and the rate
/// plan_direct_clock_hz that turns the model's cycles into seconds. Host only: it calls no CUDA function and
/// needs no GPU (nvcc compiles it because every bench/*.cu is built so).
///
///   fit_direct_model [--sms 132] [--no-search] [--chooser] FILE...
///
/// The data: the output of `family_bench --direct-sweep N C H W K R stride pad groups` (bench/family_bench.cu),
/// any number of layers per file (e.g. bench/results/h200_2026-12-05_direct_sweep.txt): per layer a header,
/// `direct sweep N32 C2304 19x19 K2304 3x3 s1 p1 g2304: 78 tilings timed (us)`, then a line
/// `csv,tx,ty,groups,splits,cb,cycles,throughput,memory,latency,us` per timed tiling. Every other line (the
/// `pick` and `best` lines among them) is ignored, failed runs (us < 0) are skipped, and a layer found in
/// several files has its rows merged (a tiling timed more than once keeps its fastest time). The header
/// carries no dilation (1) and only the padding's height, so pad_w = pad_h unless it reads `p0x3`.
///
/// The criterion, for one set of constants: each layer's timed tilings are replayed through
/// estimate_direct_config (`--sms` SMs, 132 for an H200); the model's pick is the tiling of least estimated
/// cycles among those the model accepts (all timed tilings: a wider set than choose_direct_config's candidates,
/// so this ranks the model, not the planner's rules; the summary also gives the planner's own pick,
/// choose_direct_config with the same constants, where the sweep timed it) (ties, frequent among latency-bound
/// tilings: the first in (tx, ty, groups, splits) order, not the measured order; the summary gives the
/// geometric mean with every tie to its fastest and to its slowest tiling), and the layer's ratio is the pick's
/// measured time over the layer's fastest. Minimised: the geometric mean of the ratios over the layers (1 is
/// perfect; the maximum is reported too). The fit: a coordinate search from the planner's defaults
/// (`direct_model_constants{}`), each constant in turn multiplied by 0.8, 1.25, 0.67, 1.5, 0.5 or 2 where that
/// strictly lowers the criterion (ties keep the value nearer the start), in rounds until one changes nothing
/// (at most 8; well under a second on the 2,107 rows of 2026-12-05); `--no-search` evaluates the defaults only;
/// `--chooser` lists choose_direct_config's pick per layer (its tiling, and its measured time where timed).
/// With the defaults and the fitted constants: the clock, the geometric mean over all timed rows of model
/// cycles per measured second (what plan_direct_clock_hz is), and the rms of log(model seconds / measured
/// seconds) at it.
///
/// Prints the search's steps, the fitted constants as a C++ initializer, a table per layer (the fastest
/// time, the pick's measured time and ratio under each set) and a summary line per set; warnings on stderr.
/// Exit 0; 1 on a usage error, an unreadable file, or when no layer could be read.
#include <convred/convred.cuh>
#include <convred/device/conv2d_reduce_plan.cuh>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace dev = convred::device;
using convred::conv2d_problem;
using constants = dev::direct_model_constants;

// the constants in declaration order (the initializer printed relies on it: a constant added to the struct
// must be added here)
constexpr int n_constants = 8;
using member = double constants::*;
constexpr member members[n_constants] = {
    &constants::issue_per_warp, &constants::max_issue,  &constants::round_trip, &constants::block_start,
    &constants::combine,        &constants::dram_bytes, &constants::l2_bytes,   &constants::stage_item};
constexpr const char* names[n_constants] = {"issue_per_warp", "max_issue",  "round_trip", "block_start",
                                            "combine",        "dram_bytes", "l2_bytes",   "stage_item"};
static_assert(sizeof(constants) == n_constants * sizeof(double), "direct_model_constants changed: update members");
static_assert(offsetof(constants, issue_per_warp) < offsetof(constants, max_issue) &&
                  offsetof(constants, max_issue) < offsetof(constants, round_trip) &&
                  offsetof(constants, round_trip) < offsetof(constants, block_start) &&
                  offsetof(constants, block_start) < offsetof(constants, combine) &&
                  offsetof(constants, combine) < offsetof(constants, dram_bytes) &&
                  offsetof(constants, dram_bytes) < offsetof(constants, l2_bytes) &&
                  offsetof(constants, l2_bytes) < offsetof(constants, stage_item),
              "direct_model_constants reordered: update members");

/// one timed tiling: the candidate, the channels per stage the sweep printed, the median time (us)
struct timed_tiling {
  int tx = 1, ty = 1, groups = 1, splits = 1, cb = 0;
  double us = 0;
};

/// one layer: its problem, kernel variant, name and timed tilings (sorted by (tx, ty, groups, splits) once read)
struct layer_rows {
  conv2d_problem p;
  dev::direct_kernel_shape k;
  std::string name;
  std::vector<timed_tiling> rows;
  double fastest = 0;  ///< the least measured time (us)
};

/// the layer's name as family_bench's header prints it (pad_w and dilation added where they are not the default)
std::string layer_name(const conv2d_problem& p) {
  char b[200];
  std::snprintf(b, sizeof b, "N%lld C%lld %lldx%lld K%lld %lldx%lld s%lld p%lld", (long long)p.N, (long long)p.C,
                (long long)p.H, (long long)p.W, (long long)p.K, (long long)p.R, (long long)p.S, (long long)p.stride_h,
                (long long)p.pad_h);
  std::string s = b;
  if (p.stride_w != p.stride_h) s.insert(s.find(" p"), "x" + std::to_string(p.stride_w));
  if (p.pad_w != p.pad_h) s += "x" + std::to_string(p.pad_w);
  s += " g" + std::to_string(p.groups);
  if (p.dil_h != 1 || p.dil_w != 1)
    s += " d" + std::to_string(p.dil_h) + (p.dil_w != p.dil_h ? "x" + std::to_string(p.dil_w) : std::string());
  return s;
}

bool same_problem(const conv2d_problem& a, const conv2d_problem& b) {
  auto key = [](const conv2d_problem& p) {
    return std::make_tuple(p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h,
                           p.dil_w, p.groups, p.x_layout);
  };
  return key(a) == key(b);
}

/// a whole non-negative integer
bool parse_int(const char* s, long long& v) {
  char* end = nullptr;
  v = std::strtoll(s, &end, 10);
  return end != s && *end == '\0' && v >= 0 && !std::strchr(s, ' ');
}

/// "A" or "AxB" (B = A when there is no 'x', unless need_x)
bool parse_pair(const std::string& s, bool need_x, long long& a, long long& b) {
  const std::size_t x = s.find('x');
  if (x == std::string::npos) return !need_x && parse_int(s.c_str(), a) && ((b = a), true);
  return parse_int(s.substr(0, x).c_str(), a) && parse_int(s.substr(x + 1).c_str(), b);
}

/// family_bench's sweep header, from after "direct sweep " to the ':': N C HxW K RxS, then s, p, g and an
/// optional d (each "A" or "AxB"); pad_w_given: the padding read "PHxPW"
bool parse_header(const std::string& text, conv2d_problem& p, bool& pad_w_given) {
  std::istringstream in(text);
  std::vector<std::string> t;
  for (std::string w; in >> w;) t.push_back(w);
  if (t.size() < 8 || t.size() > 9) return false;
  long long a = 0, b = 0;
  auto one = [&](const std::string& s, char c, std::int64_t& v) {
    return s.size() > 1 && s[0] == c && parse_int(s.c_str() + 1, a) && ((v = a), true);
  };
  auto two = [&](const std::string& s, bool need_x, std::int64_t& v, std::int64_t& w) {
    return parse_pair(s, need_x, a, b) && ((v = a), (w = b), true);
  };
  if (!one(t[0], 'N', p.N) || !one(t[1], 'C', p.C) || !two(t[2], true, p.H, p.W) || !one(t[3], 'K', p.K) ||
      !two(t[4], true, p.R, p.S))
    return false;
  bool s = false, pad = false, g = false, d = false;
  for (std::size_t i = 5; i < t.size(); ++i) {
    const char c = t[i][0];
    const std::string rest = t[i].substr(1);
    if (c == 's' && !s) {
      s = two(rest, false, p.stride_h, p.stride_w);
      if (!s) return false;
    } else if (c == 'p' && !pad) {
      pad = two(rest, false, p.pad_h, p.pad_w);
      pad_w_given = rest.find('x') != std::string::npos;
      if (!pad) return false;
    } else if (c == 'g' && !g) {
      g = parse_int(rest.c_str(), a);
      p.groups = a;
      if (!g) return false;
    } else if (c == 'd' && !d) {
      d = two(rest, false, p.dil_h, p.dil_w);
      if (!d) return false;
    } else {
      return false;
    }
  }
  return s && pad && g;
}

/// "csv,tx,ty,groups,splits,cb,cycles,throughput,memory,latency,us" (after leading blanks)
bool parse_csv(const std::string& line, timed_tiling& r) {
  std::vector<std::string> f;
  std::size_t from = 0;
  for (std::size_t comma; (comma = line.find(',', from)) != std::string::npos; from = comma + 1)
    f.push_back(line.substr(from, comma - from));
  f.push_back(line.substr(from));
  if (f.size() != 11) return false;
  long long v[5];
  for (int i = 0; i < 5; ++i)
    if (!parse_int(f[1 + i].c_str(), v[i]) || v[i] < 1 || v[i] > 1 << 20) return false;
  for (int i = 6; i < 10; ++i) {
    char* end = nullptr;
    std::strtod(f[i].c_str(), &end);
    if (end == f[i].c_str() || *end != '\0') return false;
  }
  char* end = nullptr;
  r.us = std::strtod(f[10].c_str(), &end);
  while (end && (*end == '\r' || *end == ' ')) ++end;
  if (end == f[10].c_str() || *end != '\0' || !std::isfinite(r.us)) return false;
  r.tx = int(v[0]), r.ty = int(v[1]), r.groups = int(v[2]), r.splits = int(v[3]), r.cb = int(v[4]);
  return true;
}

/// reads one sweep output into `layers`; false when the file cannot be read
bool read_sweep(const char* path, std::vector<layer_rows>& layers, long& rows_read, long& rows_failed) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fit_direct_model: cannot read %s\n", path);
    return false;
  }
  static const std::string head = "direct sweep ";
  int current = -1;         // the layer the csv rows belong to; -1: none (or an unreadable header)
  bool skipping = false;    // rows of an unreadable header
  long block_rows = 0;      // csv rows under the current header
  int headers = 0, empty = 0;
  auto close_block = [&] {
    if (current >= 0 && block_rows == 0) ++empty;
  };
  std::string line;
  for (long n = 1; std::getline(in, line); ++n) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    if (line.compare(first, head.size(), head) == 0) {
      close_block();
      ++headers;
      block_rows = 0;
      const std::size_t colon = line.find(':', first);
      conv2d_problem p;
      bool pad_w_given = false;
      const bool read = colon != std::string::npos &&
                        parse_header(line.substr(first + head.size(), colon - first - head.size()), p, pad_w_given);
      const convred::status st = read ? convred::validate(p) : convred::status::invalid_argument;
      if (!read || st != convred::status::success || p.C_per_group() > convred::block::direct_max_group_channels) {
        std::fprintf(stderr, "fit_direct_model: %s:%ld: %s, its rows skipped: %s\n", path, n,
                     !read                            ? "unreadable layer header"
                     : st != convred::status::success ? convred::to_string(st)
                                                      : "C/groups above the direct kernel's 16",
                     line.c_str());
        current = -1, skipping = true;
        continue;
      }
      if (p.R != p.S && !pad_w_given)
        std::fprintf(stderr, "fit_direct_model: %s:%ld: pad_w taken as pad_h (%lld; the header prints one pad): %s\n",
                     path, n, (long long)p.pad_h, line.c_str());
      current = -1, skipping = false;
      for (std::size_t i = 0; i < layers.size() && current < 0; ++i)
        if (same_problem(layers[i].p, p)) current = static_cast<int>(i);
      if (current < 0) {
        layer_rows l;
        l.p = p, l.k = dev::direct_kernel_shape_of<float>(p), l.name = layer_name(p);
        layers.push_back(l);
        current = static_cast<int>(layers.size()) - 1;
      }
      continue;
    }
    if (line.compare(first, 4, "csv,") != 0) continue;  // pick, best and anything else
    ++block_rows;
    timed_tiling r;
    if (!parse_csv(line.substr(first), r)) {
      std::fprintf(stderr, "fit_direct_model: %s:%ld: unreadable csv row, skipped: %s\n", path, n, line.c_str());
      continue;
    }
    if (current < 0) {
      if (!skipping)
        std::fprintf(stderr, "fit_direct_model: %s:%ld: csv row before any layer header, skipped\n", path, n);
      continue;
    }
    if (r.us < 0) {
      ++rows_failed;
      continue;
    }
    ++rows_read;
    std::vector<timed_tiling>& rows = layers[current].rows;
    auto same = std::find_if(rows.begin(), rows.end(), [&](const timed_tiling& t) {
      return t.tx == r.tx && t.ty == r.ty && t.groups == r.groups && t.splits == r.splits;
    });
    if (same == rows.end())
      rows.push_back(r);
    else
      same->us = std::min(same->us, r.us);
  }
  close_block();
  if (headers == 0)
    std::fprintf(stderr, "fit_direct_model: %s: no `direct sweep` header (not family_bench --direct-sweep output?)\n",
                 path);
  if (empty > 0)
    std::fprintf(stderr, "fit_direct_model: %s: %d of %d layers have no csv rows (the pick and best lines are not "
                 "used): nothing read for them from this file\n", path, empty, headers);
  return true;
}

/// the criterion for one set of constants: per layer the pick (index into its rows, -1 where the model
/// accepts none) and its ratio to the fastest; the geometric mean and the largest ratio. Ties (estimates within
/// 1e-9 of the least) are common (latency-bound tilings): the pick is the first of them, and lo / hi are the
/// geometric means had every tie gone to its fastest / slowest tiling.
struct evaluation {
  std::vector<int> picks, ties;  // ties: the tilings at the least estimate
  std::vector<double> ratios;
  double geomean = 0, max_ratio = 0, lo = 0, hi = 0;
  int worst = -1, layers = 0, tied = 0;
};

evaluation evaluate(const std::vector<layer_rows>& layers, double sms, const constants& m) {
  evaluation v;
  double logs = 0, lo = 0, hi = 0;
  std::vector<double> cycles;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const layer_rows& l = layers[i];
    double least = -1;
    cycles.clear();
    for (const timed_tiling& r : l.rows) {
      const dev::direct_estimate e = dev::estimate_direct_config(l.p, l.k, sms, r.tx, r.ty, r.groups, r.splits, m);
      cycles.push_back(e.ok ? e.cycles : -1);
      if (e.ok && (least < 0 || e.cycles < least)) least = e.cycles;
    }
    int pick = -1, ties = 0;
    double fast = 0, slow = 0;
    for (std::size_t j = 0; j < l.rows.size(); ++j) {
      if (cycles[j] < 0 || cycles[j] > least * (1 + 1e-9)) continue;
      if (pick < 0) pick = static_cast<int>(j), fast = slow = l.rows[j].us;
      fast = std::min(fast, l.rows[j].us), slow = std::max(slow, l.rows[j].us), ++ties;
    }
    const double ratio = pick < 0 ? 0 : l.rows[pick].us / l.fastest;
    v.picks.push_back(pick);
    v.ties.push_back(ties);
    v.ratios.push_back(ratio);
    if (pick < 0) continue;
    ++v.layers;
    v.tied += ties > 1;
    logs += std::log(ratio), lo += std::log(fast / l.fastest), hi += std::log(slow / l.fastest);
    if (ratio > v.max_ratio) v.max_ratio = ratio, v.worst = static_cast<int>(i);
  }
  if (v.layers > 0)
    v.geomean = std::exp(logs / v.layers), v.lo = std::exp(lo / v.layers), v.hi = std::exp(hi / v.layers);
  return v;
}

/// the clock: the geometric mean over every accepted row of model cycles per measured second, and the rms of
/// log(model seconds / measured seconds) at it and at plan_direct_clock_hz
struct clock_fit {
  double hz = 0, rms = 0, rms_plan = 0;
  long rows = 0;
};

clock_fit fit_clock(const std::vector<layer_rows>& layers, double sms, const constants& m) {
  std::vector<double> x;  // log(cycles / measured seconds)
  for (const layer_rows& l : layers)
    for (const timed_tiling& r : l.rows) {
      const dev::direct_estimate e = dev::estimate_direct_config(l.p, l.k, sms, r.tx, r.ty, r.groups, r.splits, m);
      if (e.ok && e.cycles > 0 && r.us > 0) x.push_back(std::log(e.cycles / (r.us * 1e-6)));
    }
  clock_fit c;
  c.rows = static_cast<long>(x.size());
  if (x.empty()) return c;
  double mean = 0;
  for (double v : x) mean += v;
  mean /= double(x.size());
  const double plan = std::log(dev::plan_direct_clock_hz);
  for (double v : x) c.rms += (v - mean) * (v - mean), c.rms_plan += (v - plan) * (v - plan);
  c.hz = std::exp(mean);
  c.rms = std::sqrt(c.rms / double(x.size()));
  c.rms_plan = std::sqrt(c.rms_plan / double(x.size()));
  return c;
}

/// the coordinate search: each constant in turn times the factor (nearest 1 first) that lowers the
/// geometric mean most, strictly; rounds until one changes nothing, at most 8
constants coordinate_search(const std::vector<layer_rows>& layers, double sms, const constants& start) {
  const double factors[] = {0.8, 1.25, 0.67, 1.5, 0.5, 2.0};
  constants m = start;
  double score = evaluate(layers, sms, m).geomean;
  std::printf("search: start geomean %.4f\n", score);
  for (int round = 1; round <= 8; ++round) {
    bool moved = false;
    for (int c = 0; c < n_constants; ++c) {
      double best = score, best_factor = 1;
      for (double f : factors) {
        constants t = m;
        t.*members[c] *= f;
        const double s = evaluate(layers, sms, t).geomean;
        if (s < best * (1 - 1e-12)) best = s, best_factor = f;
      }
      if (best_factor == 1) continue;
      std::printf("  round %d: %-14s %8.4g -> %8.4g (x%.2f): geomean %.4f -> %.4f\n", round, names[c], m.*members[c],
                  m.*members[c] * best_factor, best_factor, score, best);
      m.*members[c] *= best_factor;
      score = best, moved = true;
    }
    if (!moved) {
      std::printf("  round %d: no constant moves it\n", round);
      break;
    }
  }
  return m;
}

void print_constants(const char* title, const constants& m, const constants& start) {
  std::printf("%s:\n  convred::device::direct_model_constants{", title);
  for (int c = 0; c < n_constants; ++c)  // two lines of four
    std::printf("/*%s*/ %.6g%s", names[c], m.*members[c],
                c + 1 == n_constants ? "};\n" : c == 3 ? ",\n                                          " : ", ");
  for (int c = 0; c < n_constants; ++c)
    if (m.*members[c] != start.*members[c])
      std::printf("  %-14s %g -> %.6g (x%.3g)\n", names[c], start.*members[c], m.*members[c],
                  m.*members[c] / start.*members[c]);
}

/// the planner's own pick (choose_direct_config with constants m, its candidates and rules) per layer, looked
/// up among the timed rows: prints on how many layers it was timed and its geometric mean over the fastest there
void print_chooser(const std::vector<layer_rows>& layers, double sms, const constants& m, bool each = false) {
  int timed = 0;
  double logs = 0;
  for (const layer_rows& l : layers) {
    const dev::direct_config c =
        dev::choose_direct_config(l.p, l.k, static_cast<int>(sms), dev::direct_max_splits_sm90, m);
    double us = -1;
    for (const timed_tiling& r : l.rows)
      if (r.tx == c.tx && r.ty == c.ty && r.groups == c.groups && r.splits == c.splits) {
        ++timed, logs += std::log(r.us / l.fastest), us = r.us;
        break;
      }
    if (each) {
      if (us > 0)
        std::printf("  chooser %-40s %d,%d,%d,%d %9.2f us %6.3f\n", l.name.c_str(), c.tx, c.ty, c.groups, c.splits, us,
                    us / l.fastest);
      else
        std::printf("  chooser %-40s %d,%d,%d,%d  untimed\n", l.name.c_str(), c.tx, c.ty, c.groups, c.splits);
    }
  }
  std::printf("%-9s choose_direct_config's own pick (its candidates): timed on %d of %zu layers, geomean pick / "
              "fastest %.4f there\n", "", timed, layers.size(), timed ? std::exp(logs / timed) : 0.0);
}

void print_summary(const char* label, const std::vector<layer_rows>& layers, const evaluation& v,
                   const clock_fit& c) {
  std::printf("%-9s geomean pick / fastest %.4f over %d layers, max %.3f (%s)\n", label, v.geomean, v.layers,
              v.max_ratio, v.worst >= 0 ? layers[v.worst].name.c_str() : "-");
  std::printf("%-9s ties at the least estimate on %d layers: geomean %.4f with each tie to its fastest tiling, %.4f "
              "to its slowest\n", "", v.tied, v.lo, v.hi);
  std::printf("%-9s clock %.4g model cycles per measured second over %ld rows, rms log(model / measured) %.3f "
              "(%.3f at plan_direct_clock_hz %.4g)\n", "", c.hz, c.rows, c.rms, c.rms_plan, dev::plan_direct_clock_hz);
}

void usage(std::FILE* to) {
  std::fprintf(to, "usage: fit_direct_model [--sms 132] [--no-search] [--chooser] FILE...   "
                   "(FILE: family_bench --direct-sweep output)\n");
}

}  // namespace

int main(int argc, char** argv) {
  double sms = 132;
  bool search = true, each = false;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sms") && i + 1 < argc) {
      char* end = nullptr;
      sms = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(sms >= 1 && sms <= 4096)) {
        std::fprintf(stderr, "fit_direct_model: --sms needs a count of SMs, not %s\n", argv[i]);
        return 1;
      }
    } else if (!std::strcmp(argv[i], "--no-search")) {
      search = false;
    } else if (!std::strcmp(argv[i], "--chooser")) {
      each = true;
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      usage(stderr);
      return 1;
    } else {
      files.push_back(argv[i]);
    }
  }
  if (files.empty()) {
    usage(stderr);
    return 1;
  }
  std::vector<layer_rows> layers;
  long rows_read = 0, rows_failed = 0;
  for (const char* f : files)
    if (!read_sweep(f, layers, rows_read, rows_failed)) return 1;
  // drop the layers without a timed row; sort the rest's rows (the pick's tie order), their fastest time
  layers.erase(std::remove_if(layers.begin(), layers.end(), [](const layer_rows& l) { return l.rows.empty(); }),
               layers.end());
  long rows = 0, rejected = 0, cb_differs = 0;
  for (layer_rows& l : layers) {
    std::sort(l.rows.begin(), l.rows.end(), [](const timed_tiling& a, const timed_tiling& b) {
      return std::tie(a.tx, a.ty, a.groups, a.splits) < std::tie(b.tx, b.ty, b.groups, b.splits);
    });
    l.fastest = l.rows.front().us;
    for (const timed_tiling& r : l.rows) {
      l.fastest = std::min(l.fastest, r.us);
      const dev::direct_estimate e = dev::estimate_direct_config(l.p, l.k, sms, r.tx, r.ty, r.groups, r.splits);
      rejected += !e.ok;
      cb_differs += e.ok && e.cb != r.cb;
    }
    rows += static_cast<long>(l.rows.size());
  }
  if (layers.empty()) {
    std::fprintf(stderr, "fit_direct_model: no layer with a timed tiling (csv row) could be read from the %zu file%s\n",
                 files.size(), files.size() == 1 ? "" : "s");
    return 1;
  }
  std::printf("fit_direct_model: %zu layers, %ld timed tilings (%ld csv rows read, failed runs skipped: %ld) from %zu "
              "file%s; %g SMs\n", layers.size(), rows, rows_read, rows_failed, files.size(),
              files.size() == 1 ? "" : "s", sms);
  if (rejected > 0)
    std::fprintf(stderr, "fit_direct_model: %ld timed tilings the model does not accept now (never picked)\n",
                 rejected);
  if (cb_differs > 0)
    std::fprintf(stderr, "fit_direct_model: %ld timed tilings whose channels per stage differ from the model's now "
                 "(timed with other code?)\n", cb_differs);

  const constants defaults{};
  const constants fitted = search ? coordinate_search(layers, sms, defaults) : defaults;
  if (search) print_constants("fitted constants", fitted, defaults);
  const evaluation v0 = evaluate(layers, sms, defaults), v1 = evaluate(layers, sms, fitted);
  const clock_fit c0 = fit_clock(layers, sms, defaults), c1 = fit_clock(layers, sms, fitted);

  // the table: the layer, its rows and fastest time, then per set the pick (tx,ty,groups,splits), its time, its ratio
  auto cell = [&](const layer_rows& l, const evaluation& v, std::size_t i) {
    if (v.picks[i] < 0) return std::printf(" | %-13s %9s %6s", "none", "-", "-");
    const timed_tiling& r = l.rows[v.picks[i]];
    char t[48];
    std::snprintf(t, sizeof t, "%d,%d,%d,%d%s", r.tx, r.ty, r.groups, r.splits, v.ties[i] > 1 ? "*" : "");
    return std::printf(" | %-13s %9.2f %6.3f", t, r.us, v.ratios[i]);
  };
  std::printf("\n%-40s %4s %9s | %-13s %9s %6s", "layer", "rows", "fastest", "defaults pick", "us", "ratio");
  if (search) std::printf(" | %-13s %9s %6s", "fitted pick", "us", "ratio");
  std::printf("\n");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::printf("%-40s %4zu %9.2f", layers[i].name.c_str(), layers[i].rows.size(), layers[i].fastest);
    cell(layers[i], v0, i);
    if (search) cell(layers[i], v1, i);
    std::printf("\n");
  }
  std::printf("(pick: tx,ty,groups,splits, * where other tilings tie with its estimate; us: its measured time; "
              "ratio: over the fastest)\n\n");
  print_summary("defaults:", layers, v0, c0);
  print_chooser(layers, sms, defaults, each);
  if (search) {
    print_summary("fitted:", layers, v1, c1);
    print_chooser(layers, sms, fitted, each);
  }
  return 0;
}
