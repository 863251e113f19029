// Host suite: every planner description quoted in README.md and docs/*.md is what the planner says.
//
// A quote is marked in the Markdown by a comment line naming the problem, the element type, the math and
// the device, followed by a fenced code block holding conv2d_reduce_plan::description() (one line, or
// wrapped at spaces over several lines, which are joined with one space):
//
//   <!-- plan: T=float math=tf32 N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 stride=1 device=h200 -->
//   ```text
//   wgmma tf32 ping-pong (sm_90a, ...)
//   ```
//
// Keys: T (float, double, half, bfloat16), math (accurate, ieee, tf32, tf32x3, bf16, fp16), N C H W K R S
// (required), pad, stride, dil ("a" or "h,w"; defaults 0, 1, 1), groups (1), layout (nchw, nhwc; nchw),
// device (h200 and h100: compute capability 9.0 with sm_90a code, 132 SMs; a100: 8.0, 108 SMs). The plan
// is made from that device_info, so no GPU is needed. The test fails when a quote differs from the
// planner's description, when a marker is malformed, and when a code block or an inline code span of these
// files holds something that looks like a description ('wgmma ', 'mma.sync ', 'simt ', 'direct (') without
// a marker in front of it.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/device/conv2d_reduce_plan.cuh>

namespace {

namespace fs = std::filesystem;
using convred::conv2d_problem;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
namespace math = convred::math;

/// The repository root: CONVRED_SOURCE_DIR if the build defines it, else two levels above this file
/// (nvcc's __FILE__ is the path the compiler was given: absolute under CMake, relative to the working
/// directory for a command line run from the repository root).
fs::path source_dir() {
#ifdef CONVRED_SOURCE_DIR
  return fs::path(CONVRED_SOURCE_DIR);
#else
  const fs::path root = fs::path(__FILE__).parent_path().parent_path();
  return root.empty() ? fs::path(".") : root;
#endif
}

/// README.md and docs/*.md, sorted.
std::vector<fs::path> doc_files() {
  const fs::path root = source_dir();
  std::vector<fs::path> files{root / "README.md"};
  std::vector<fs::path> docs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root / "docs", ec))
    if (e.is_regular_file() && e.path().extension() == ".md") docs.push_back(e.path());
  std::sort(docs.begin(), docs.end());
  files.insert(files.end(), docs.begin(), docs.end());
  return files;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

/// True if s begins the way a plan description does.
bool looks_like_description(const std::string& s) {
  for (const char* prefix : {"wgmma ", "mma.sync ", "simt ", "direct ("})
    if (starts_with(s, prefix)) return true;
  return false;
}

/// A fence line: ``` or ~~~ (at most 3 spaces of indentation); returns the fence characters or "".
std::string fence_of(const std::string& line) {
  std::size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  for (const char* f : {"```", "~~~"})
    if (line.compare(i, 3, f) == 0) return f;
  return "";
}

struct quote {
  std::string file;
  int line = 0;          // of the marker
  std::string spec;      // the marker's text after "plan:"
  std::string text;      // the quoted description
};

struct scan_result {
  std::vector<quote> quotes;
  std::vector<std::string> errors;  // "file:line: what"
};

/// Reads one Markdown file: its markers and quotes, and every unmarked description-like text.
void scan(const fs::path& path, scan_result& out) {
  std::ifstream in(path);
  std::string name = path.lexically_relative(source_dir()).generic_string();
  if (name.empty()) name = path.string();
  if (!in) {
    out.errors.push_back(name + ": cannot be read (" + path.string() + ")");
    return;
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);

  const std::string open = "<!-- plan:", close = "-->";
  std::string fence;  // non-empty inside a code block
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    const std::string where = name + ":" + std::to_string(i + 1) + ": ";
    if (!fence.empty()) {
      if (starts_with(t, fence)) fence.clear();
      else if (looks_like_description(t))
        out.errors.push_back(where + "a plan description in a code block without a '<!-- plan: ... -->' marker");
      continue;
    }
    if (const std::string f = fence_of(lines[i]); !f.empty()) {
      fence = f;
      continue;
    }
    if (starts_with(t, open)) {
      if (t.size() < open.size() + close.size() || t.compare(t.size() - close.size(), close.size(), close) != 0) {
        out.errors.push_back(where + "a plan marker must be one line ending in '-->'");
        continue;
      }
      quote q;
      q.file = name, q.line = static_cast<int>(i + 1);
      q.spec = trim(t.substr(open.size(), t.size() - open.size() - close.size()));
      std::size_t j = i + 1;
      while (j < lines.size() && trim(lines[j]).empty()) ++j;
      const std::string f = j < lines.size() ? fence_of(lines[j]) : "";
      if (f.empty()) {
        out.errors.push_back(where + "a plan marker must be followed by a fenced code block holding the description");
        continue;
      }
      std::string text;
      std::size_t k = j + 1;
      for (; k < lines.size() && !starts_with(trim(lines[k]), f); ++k) {
        const std::string part = trim(lines[k]);
        if (part.empty()) continue;
        text += (text.empty() ? "" : " ") + part;
      }
      if (k == lines.size()) {
        out.errors.push_back(where + "the code block after the plan marker is not closed");
        return;
      }
      q.text = text;
      out.quotes.push_back(q);
      i = k;  // past the closing fence
      continue;
    }
    // Inline code spans outside code blocks: `wgmma tf32 (...)` is a quote too and needs a marked block.
    for (std::size_t a = lines[i].find('`'); a != std::string::npos;) {
      const std::size_t b = lines[i].find('`', a + 1);
      if (b == std::string::npos) break;
      const std::string span = lines[i].substr(a + 1, b - a - 1);
      if (looks_like_description(span) && span.find('(') != std::string::npos)
        out.errors.push_back(where + "a plan description in inline code ('" + span.substr(0, 40) +
                             "...'): quote it in a marked code block instead");
      a = lines[i].find('`', b + 1);
    }
  }
}

/// "a" or "h,w" into two integers; false if malformed.
bool parse_pair(const std::string& v, std::int64_t& h, std::int64_t& w) {
  try {
    std::size_t used = 0;
    const auto c = v.find(',');
    h = std::stoll(v.substr(0, c), &used);
    if (used != (c == std::string::npos ? v.size() : c)) return false;
    if (c == std::string::npos) {
      w = h;
      return true;
    }
    const std::string rest = v.substr(c + 1);
    w = std::stoll(rest, &used);
    return used == rest.size();
  } catch (...) {
    return false;
  }
}

template <class T, class Math>
std::string describe(const conv2d_problem& p, const device_info& dev) {
  return conv2d_reduce_plan<T, Math>(p, dev).description();
}

template <class T>
bool describe_math(const std::string& m, const conv2d_problem& p, const device_info& dev, std::string& out) {
  if (m == "accurate") out = describe<T, math::accurate>(p, dev);
  else if (m == "ieee") out = describe<T, math::ieee>(p, dev);
  else if constexpr (!std::is_same_v<T, double>) {
    if (m == "tf32") out = describe<T, math::tf32>(p, dev);
    else if (m == "tf32x3") out = describe<T, math::tf32x3>(p, dev);
    else if (m == "bf16") out = describe<T, math::bf16>(p, dev);
    else if (m == "fp16") out = describe<T, math::fp16>(p, dev);
    else return false;
  } else {
    return false;
  }
  return true;
}

/// The planner's description for a marker's spec, or an error message (returned false).
bool plan_for(const std::string& spec, std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream ss(spec);
  for (std::string item; ss >> item;) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      out = "malformed item '" + item + "' (key=value)";
      return false;
    }
    if (!kv.emplace(item.substr(0, eq), item.substr(eq + 1)).second) {
      out = "duplicate key '" + item.substr(0, eq) + "'";
      return false;
    }
  }
  conv2d_problem p;
  std::string T = "float", m, dev_name;
  for (const auto& [k, v] : kv) {
    std::int64_t a = 0, b = 0;
    const bool num = parse_pair(v, a, b);
    const bool single = num && v.find(',') == std::string::npos;
    if (k == "T") T = v;
    else if (k == "math") m = v;
    else if (k == "device") dev_name = v;
    else if (k == "layout" && (v == "nchw" || v == "nhwc")) p.x_layout = v == "nchw" ? convred::layout::nchw : convred::layout::nhwc;
    else if (k == "N" && single) p.N = a;
    else if (k == "C" && single) p.C = a;
    else if (k == "H" && single) p.H = a;
    else if (k == "W" && single) p.W = a;
    else if (k == "K" && single) p.K = a;
    else if (k == "R" && single) p.R = a;
    else if (k == "S" && single) p.S = a;
    else if (k == "groups" && single) p.groups = a;
    else if (k == "pad" && num) p.pad_h = a, p.pad_w = b;
    else if (k == "stride" && num) p.stride_h = a, p.stride_w = b;
    else if (k == "dil" && num) p.dil_h = a, p.dil_w = b;
    else {
      out = "unknown key or bad value '" + k + "=" + v + "'";
      return false;
    }
  }
  for (const char* required : {"math", "device", "N", "C", "H", "W", "K", "R", "S"})
    if (!kv.count(required)) {
      out = std::string("missing key '") + required + "'";
      return false;
    }
  device_info dev;
  if (dev_name == "h200" || dev_name == "h100") dev = device_info{9, 0, true, 132};
  else if (dev_name == "a100") dev = device_info{8, 0, false, 108};
  else {
    out = "unknown device '" + dev_name + "' (h200, h100, a100)";
    return false;
  }
  bool ok = false;
  if (T == "float") ok = describe_math<float>(m, p, dev, out);
  else if (T == "double") ok = describe_math<double>(m, p, dev, out);
  else if (T == "half") ok = describe_math<__half>(m, p, dev, out);
  else if (T == "bfloat16") ok = describe_math<__nv_bfloat16>(m, p, dev, out);
  else {
    out = "unknown T '" + T + "' (float, double, half, bfloat16)";
    return false;
  }
  if (!ok) out = "unknown math '" + m + "' for T=" + T + " (accurate, ieee, tf32, tf32x3, bf16, fp16; double: accurate, ieee)";
  return ok;
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("docs: every plan description quoted in README.md and docs/*.md is the planner's") {
  const std::vector<fs::path> files = doc_files();
  INFO("repository root: " << source_dir().string());
  REQUIRE(fs::exists(files.front()));
  REQUIRE(files.size() > 1);  // docs/*.md found

  scan_result r;
  for (const fs::path& f : files) scan(f, r);
  for (const std::string& e : r.errors) {
    INFO(e);
    CHECK(false);
  }
  // The README's C++ section quotes the main job's plan at least.
  CHECK(std::count_if(r.quotes.begin(), r.quotes.end(), [](const quote& q) { return q.file == "README.md"; }) >= 1);
  REQUIRE(!r.quotes.empty());

  for (const quote& q : r.quotes) {
    std::string described;
    const bool ok = plan_for(q.spec, described);
    INFO(q.file << ":" << q.line << ": <!-- plan: " << q.spec << " -->");
    INFO("planner: " << described);
    INFO("quoted:  " << q.text);
    REQUIRE(ok);
    CHECK(described == q.text);
  }
}

TEST_CASE("docs: the quote checker itself") {
  // A marked quote is read back whole (wrapped lines joined), and an unmarked description is an error.
  const fs::path dir = fs::temp_directory_path() / "convred_docs_plans_test";
  fs::create_directories(dir);
  const fs::path md = dir / "check.md";
  {
    std::ofstream o(md);
    o << "text\n<!-- plan: T=float math=tf32 N=64 C=64 H=256 W=256 K=128 R=3 S=3 device=h200 -->\n\n```text\n"
         "wgmma tf32 (sm_90a, packed filter streamed, 4 stages,\n  4x64-pixel tiles, 224976 bytes of shared memory)\n```\n"
         "```\nmma.sync tf32 (unmarked)\n```\nand `simt ieee (inline)` here\n";
  }
  scan_result r;
  scan(md, r);
  fs::remove_all(dir);
  REQUIRE(r.quotes.size() == 1);
  CHECK(r.quotes[0].line == 2);
  CHECK(r.quotes[0].text ==
        "wgmma tf32 (sm_90a, packed filter streamed, 4 stages, 4x64-pixel tiles, 224976 bytes of shared memory)");
  CHECK(r.errors.size() == 2);
  std::string described;
  REQUIRE(plan_for(r.quotes[0].spec, described));
  CHECK(described == r.quotes[0].text);
  CHECK(!plan_for("T=float math=tf32 N=1 C=1 H=1 W=1 K=1 R=1 S=1 device=v100", described));
  CHECK(!plan_for("T=float math=tf32 N=1 C=1 H=1 W=1 K=1 R=1 device=h200", described));
  CHECK(!plan_for("T=double math=tf32 N=1 C=1 H=1 W=1 K=1 R=1 S=1 device=h200", described));
  CHECK(!plan_for("T=float math=tf32 N=1 C=1 H=1 W=1 K=1 R=1 S=1 device=h200 pad=x", described));
}
}
