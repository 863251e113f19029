/// @file examples/common/cli.hpp
/// @brief Command-line helpers shared by the examples and the benchmark: a usage error type, strict
/// number parsing, a reader for `--key value` / `--key=value` / flag arguments, and checks on output paths
/// that need no GPU.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace convred_examples {

/// A bad command line or inconsistent input (the program names the problem and points to --help).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// True if `v` is an optionally signed decimal integer (digits only).
inline bool looks_like_int(const std::string& v) {
  std::size_t i = (!v.empty() && (v[0] == '-' || v[0] == '+')) ? 1 : 0;
  if (i >= v.size()) return false;
  for (; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return false;
  return true;
}

/// Parses a decimal integer in [lo, hi]; throws usage_error naming `key` otherwise: "is not an integer"
/// for anything but an optionally signed run of digits, "out of range" for an integer outside [lo, hi]
/// (also one too long for 64 bits).
inline long long parse_int(const std::string& key, const std::string& v, long long lo, long long hi) {
  if (!looks_like_int(v)) throw usage_error(key + ": '" + v + "' is not an integer");
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  errno = 0;
  const long long r = std::strtoll(v.c_str(), nullptr, 10);
  if (errno == ERANGE || r < lo || r > hi)
    throw usage_error(key + " " + v + " is out of range: it must be in " + range);
  return r;
}

/// Parses a finite decimal number; throws usage_error naming `key` otherwise.
inline double parse_real(const std::string& key, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double r = v.empty() ? 0.0 : std::strtod(v.c_str(), &end);
  if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !std::isfinite(r))
    throw usage_error(key + ": '" + v + "' is not a finite number");
  return r;
}

/// Parses a non-negative 64-bit seed; throws usage_error naming `key` otherwise.
inline std::uint64_t parse_seed(const std::string& key, const std::string& v) {
  if (!looks_like_int(v) || v[0] == '-') throw usage_error(key + " must be a non-negative integer, got '" + v + "'");
  errno = 0;
  const unsigned long long r = std::strtoull(v.c_str(), nullptr, 10);
  if (errno == ERANGE) throw usage_error(key + " out of range: '" + v + "'");
  return r;
}

/// Walks argv as `--key value`, `--key=value` or `--flag`; `-h` / `--help` is reported by help().
///
///     for (arg_reader a(argc, argv); a.next();) {
///       if (a.help()) ...;
///       else if (a.key() == "--n") n = parse_int(a.key(), a.value(), 1, 1 << 20);
///       else if (a.key() == "--no-bias") a.flag(), bias = false;
///       else a.unknown();
///     }
class arg_reader {
 public:
  /// Reads the arguments after argv[0].
  arg_reader(int argc, char** argv) : argc_(argc), argv_(argv) {}
  /// Moves to the next argument; false when there is none. Throws usage_error for a non-option word.
  bool next() {
    if (++i_ >= argc_) return false;
    const std::string a = argv_[i_];
    inline_ = false;
    key_ = a;
    val_.clear();
    if (a == "-h" || a == "--help") return true;
    if (a.rfind("--", 0) != 0 || a.size() == 2) throw usage_error("unexpected argument '" + a + "'");
    if (const auto eq = a.find('='); eq != std::string::npos) {
      key_ = a.substr(0, eq);
      val_ = a.substr(eq + 1);
      inline_ = true;
    }
    return true;
  }
  /// True for -h or --help.
  bool help() const { return key_ == "-h" || key_ == "--help"; }
  /// The option name, e.g. "--n" (without any "=value").
  const std::string& key() const { return key_; }
  /// The option's value: after '=', or the next argument. Throws usage_error if there is none.
  std::string value() {
    if (inline_) return val_;
    if (i_ + 1 >= argc_) throw usage_error(key_ + " needs a value");
    return argv_[++i_];
  }
  /// Asserts that the option is a flag (no "=value"); throws usage_error otherwise.
  void flag() const {
    if (inline_) throw usage_error(key_ + " takes no value");
  }
  /// Throws usage_error("unknown option ...").
  [[noreturn]] void unknown() const { throw usage_error("unknown option '" + key_ + "'"); }

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  bool inline_ = false;
  std::string key_, val_;
};

/// Throws usage_error unless `path` can be created or overwritten: its folder must exist and be a
/// writable directory, and the path itself must not be a directory. Checked before any work, so a run is
/// not lost at the end for a typo in an output path.
inline void require_writable_path(const std::string& option, const std::string& path) {
  if (path.empty()) throw usage_error(option + " needs a file name");
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw usage_error(path + ": cannot write " + option + ": the folder '" + dir + "' does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw usage_error(path + ": cannot write " + option + ": the folder '" + dir + "' is not writable");
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw usage_error(path + ": cannot write " + option + ": it is a folder");
}

/// `path` with its folder resolved to an absolute name without links or `..` (realpath), or "" when the
/// folder does not exist; the file itself need not exist.
inline std::string resolved_path(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char buf[PATH_MAX];
  if (!realpath(dir.c_str(), buf)) return "";
  const std::string d = buf;
  return (d == "/" ? d : d + "/") + base;
}

/// True if `a` and `b` name the same file: the same inode when both exist, else the same resolved path
/// (resolved_path). Used to refuse an output written over an input or over another output.
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  const std::string ra = resolved_path(a);
  return !ra.empty() && ra == resolved_path(b);
}

/// The command line of the small examples: `--seed N` and `--help` (which prints "Usage: prog [--seed N]"
/// and `about`). Returns -1 to go on (`seed` set when given), else the exit code to return at once: 0 after
/// --help, 1 after a usage error (printed to stderr).
inline int parse_seed_only(int argc, char** argv, const char* about, std::uint64_t& seed) {
  try {
    for (arg_reader a(argc, argv); a.next();) {
      if (a.help()) {
        std::printf("Usage: %s [--seed N]\n%s\n", argv[0], about);
        return 0;
      } else if (a.key() == "--seed") {
        seed = parse_seed(a.key(), a.value());
      } else {
        a.unknown();
      }
    }
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s (see --help)\n", argv[0], e.what());
    return 1;
  }
  return -1;
}

}  // namespace convred_examples
