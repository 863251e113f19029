/// @file npy.hpp
/// @brief A small header-only reader and writer for NumPy `.npy` files (format versions 1.0, 2.0 and,
/// for reading, 3.0), for the examples.
///
/// Supported: little-endian `float16` ('<f2'), `float32` ('<f4'), `float64` ('<f8') and `int64` ('<i8')
/// arrays in C order (row-major, `fortran_order: False`), any number of dimensions (0-D included), on a
/// little-endian host. Anything else (big-endian data, other dtypes, structured dtypes, Fortran order
/// for 2-D and higher, truncated or oversized files, a file that is not `.npy`) is refused with an
/// `npy::error` whose message names the file and says what is wrong and how to fix it.
///
/// - `npy::read_header(path)`: only the header (dtype, shape), cheap even for a multi-GB file;
///   `npy::check_file(path)` also checks that the file size matches the header (no data read).
/// - `npy::load<T>(path)`: header and data, converted to T. T is `float`, `double`, `npy::float16`
///   (raw IEEE binary16 bits) or `std::int64_t`. Floating dtypes convert to any floating T (widening is
///   exact; narrowing rounds to nearest even); int64 loads only as `std::int64_t` (no silent
///   int <-> float conversion).
/// - `npy::save(path, data, shape)`: writes T = `float`, `double`, `npy::float16` or `std::int64_t`
///   as '<f4', '<f8', '<f2' or '<i8', C order, format 1.0 (2.0 if the header needs more than 64 KiB),
///   header padded to a multiple of 64 bytes as NumPy does. `np.load` reads it back.
///
/// bfloat16 has no NumPy dtype: the examples take float32 `.npy` inputs for bf16 runs and convert them on
/// load (round to nearest even), and write bf16 results as float32 (exact).
///
/// Example:
/// @code
///   npy::array<float> a = npy::load<float>("x.npy");   // a.shape == {64, 64, 256, 256}
///   npy::save("y.npy", a.data.data(), a.shape);
/// @endcode
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace npy {

/// @brief Error reading or writing a `.npy` file; `what()` names the file and the problem.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief An IEEE 754 binary16 value held as its raw bits (NumPy's float16, '<f2').
struct float16 {
  std::uint16_t bits;  ///< sign (1), exponent (5), mantissa (10)
};

/// @brief Exact conversion of binary16 bits to float (NaN payloads kept, as NumPy does).
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  std::uint32_t bits;
  if (exp == 31)
    bits = sign | 0x7f800000u | (man << 13);  // inf or NaN
  else
    bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// @brief float to binary16 bits, rounding to nearest even; overflow gives +-inf, NaN stays a (quiet) NaN.
/// Matches NumPy's `np.float32(v).astype(np.float16)`.
inline std::uint16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf or NaN (keep the top payload bits, force quiet)
    return static_cast<std::uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x3ffu) : 0x7c00u));
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal half (or zero); round(|f| * 2^24) to nearest even
    float a;
    std::memcpy(&a, &ax, sizeof a);
    const float scaled = a * 16777216.0f;  // exact: a < 2^-14, so the product is < 2^10
    float r = std::floor(scaled);
    const float frac = scaled - r;
    if (frac > 0.5f || (frac == 0.5f && std::fmod(r, 2.0f) != 0.0f)) r += 1.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r));  // r == 1024 encodes 2^-14
  }
  std::uint32_t h = ((((ax >> 23) - 127u + 15u) << 10) | ((ax & 0x7fffffu) >> 13));
  const std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is correct
  return static_cast<std::uint16_t>(sign | h);
}

/// @brief double to binary16 bits with a single rounding to nearest even (no double rounding through
/// float); overflow gives +-inf, NaN gives a quiet NaN. Matches NumPy's `np.float64(v).astype(np.float16)`.
inline std::uint16_t double_to_half(double v) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
  if (std::isnan(v)) return static_cast<std::uint16_t>(sign | 0x7e00u);
  const double a = std::fabs(v);
  if (a >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00u);  // includes inf
  auto round_even = [](double x) {  // x >= 0, exact in double
    double r = std::floor(x);
    const double frac = x - r;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
    return r;
  };
  if (a < 6.103515625e-05) {  // below 2^-14: subnormal half or zero, in units of 2^-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(round_even(a * 16777216.0)));
  }
  int ex = 0;
  std::frexp(a, &ex);                  // a = m * 2^ex, m in [0.5, 1)
  int e = ex - 1;                      // a in [2^e, 2^(e+1)), e in [-14, 15]
  double r = round_even(std::ldexp(a, 10 - e));  // in [1024, 2048]
  if (r == 2048.0) {
    r = 1024.0;
    ++e;
  }
  if (e > 15) return static_cast<std::uint16_t>(sign | 0x7c00u);
  return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | (static_cast<int>(r) - 1024));
}

/// @brief Element types of the supported `.npy` files.
enum class dtype {
  float16,  ///< '<f2'
  float32,  ///< '<f4'
  float64,  ///< '<f8'
  int64     ///< '<i8'
};

/// @brief NumPy's descr string of a dtype ('<f4', ...).
inline const char* descr(dtype t) {
  switch (t) {
    case dtype::float16: return "<f2";
    case dtype::float32: return "<f4";
    case dtype::float64: return "<f8";
    case dtype::int64: return "<i8";
  }
  return "?";
}

/// @brief NumPy's name of a dtype ("float32", ...).
inline const char* name(dtype t) {
  switch (t) {
    case dtype::float16: return "float16";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
    case dtype::int64: return "int64";
  }
  return "?";
}

/// @brief Bytes per element of a dtype.
inline std::size_t itemsize(dtype t) {
  switch (t) {
    case dtype::float16: return 2;
    case dtype::float32: return 4;
    case dtype::float64: return 8;
    case dtype::int64: return 8;
  }
  return 0;
}

/// @brief True for the floating dtypes (float16, float32, float64).
inline bool is_floating(dtype t) { return t != dtype::int64; }

/// @brief The dtype stored for C++ element type T (float, double, npy::float16, std::int64_t).
template <class T>
constexpr dtype dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, float16> ||
                    std::is_same_v<T, std::int64_t>,
                "npy: element type must be float, double, npy::float16 or std::int64_t");
  if constexpr (std::is_same_v<T, float>) return dtype::float32;
  else if constexpr (std::is_same_v<T, double>) return dtype::float64;
  else if constexpr (std::is_same_v<T, float16>) return dtype::float16;
  else return dtype::int64;
}

/// @brief Shape as NumPy prints it: "()", "(5,)", "(2, 3)".
inline std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

/// @brief The parsed header of a `.npy` file.
struct header {
  dtype type = dtype::float32;        ///< element type
  std::vector<std::int64_t> shape;    ///< dimensions (empty for a 0-D array)
  bool fortran_order = false;         ///< always false for accepted files of 2 or more dimensions
  int major = 1;                      ///< format version, major (1, 2 or 3)
  int minor = 0;                      ///< format version, minor (0)
  std::uint64_t data_offset = 0;      ///< byte offset of the data in the file
  /// Number of elements (product of the shape; 1 for 0-D).
  std::int64_t count() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

/// @brief A loaded array: C-order data converted to T, its shape and the dtype it had in the file.
template <class T>
struct array {
  std::vector<std::int64_t> shape;  ///< dimensions
  std::vector<T> data;              ///< elements in C order
  dtype file_type = dtype::float32; ///< dtype stored in the file before conversion to T
};

namespace detail {

inline bool host_is_little_endian() {
  const std::uint16_t probe = 1;
  unsigned char b;
  std::memcpy(&b, &probe, 1);
  return b == 1;
}

inline void require_little_endian_host(const std::string& path) {
  if (!host_is_little_endian()) throw error(path + ": npy.hpp supports only little-endian hosts");
}

/// Minimal parser of the Python dict literal in a .npy header, e.g.
/// {'descr': '<f4', 'fortran_order': False, 'shape': (64, 3, 256, 256), }
class dict_parser {
 public:
  dict_parser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  header parse() {
    header h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const std::string key = string_literal();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail("'descr' is not a simple dtype string (structured dtypes are not supported)");
        h.type = to_dtype(string_literal());
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' in the header dict");
      }
    }
    if (!have_descr || !have_order || !have_shape)
      fail("the header lacks one of the keys 'descr', 'fortran_order', 'shape'");
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the header dict");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw error(path_ + ": malformed .npy header (" + what + "): " + s_);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    ++i_;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) fail("unterminated string");
    return s_.substr(start, i_++ - start);
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> dims;
    expect('(');
    for (;;) {
      skip_ws();
      if (peek() == ')') {
        ++i_;
        break;
      }
      if (peek() < '0' || peek() > '9') fail("expected a non-negative integer in 'shape'");
      std::int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const int d = peek() - '0';
        if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) fail("dimension too large");
        v = v * 10 + d;
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in 'shape'");
      }
    }
    return dims;
  }
  dtype to_dtype(const std::string& d) const {
    if (d == "<f4") return dtype::float32;
    if (d == "<f8") return dtype::float64;
    if (d == "<f2") return dtype::float16;
    if (d == "<i8") return dtype::int64;
    if (d.size() > 1 && d[0] == '>')
      throw error(path_ + ": big-endian data ('" + d +
                  "') is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))");
    throw error(path_ + ": unsupported dtype '" + d +
                "'; supported are '<f2' (float16), '<f4' (float32), '<f8' (float64) and '<i8' (int64)");
  }

  const std::string& s_;
  const std::string& path_;
  std::size_t i_ = 0;
};

/// Reads and parses the header from an open stream positioned at the start of the file.
inline header read_header(std::istream& in, const std::string& path) {
  unsigned char pre[8];
  in.read(reinterpret_cast<char*>(pre), 8);
  if (in.gcount() != 8 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    throw error(path + ": not a .npy file (it does not start with the magic string \\x93NUMPY)");
  header h;
  h.major = pre[6];
  h.minor = pre[7];
  if ((h.major != 1 && h.major != 2 && h.major != 3) || h.minor != 0)
    throw error(path + ": unsupported .npy format version " + std::to_string(h.major) + "." +
                std::to_string(h.minor) + " (supported: 1.0, 2.0, 3.0)");
  const int len_bytes = h.major == 1 ? 2 : 4;
  unsigned char lb[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(lb), len_bytes);
  if (in.gcount() != len_bytes) throw error(path + ": truncated .npy header");
  const std::uint32_t len = std::uint32_t(lb[0]) | std::uint32_t(lb[1]) << 8 | std::uint32_t(lb[2]) << 16 |
                            std::uint32_t(lb[3]) << 24;
  if (len > (1u << 24)) throw error(path + ": implausible .npy header length " + std::to_string(len));
  std::string text(len, '\0');
  in.read(text.data(), len);
  if (static_cast<std::uint32_t>(in.gcount()) != len) throw error(path + ": truncated .npy header");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  header parsed = dict_parser(text, path).parse();
  parsed.major = h.major;
  parsed.minor = h.minor;
  parsed.data_offset = 6 + 2 + static_cast<std::uint64_t>(len_bytes) + len;
  // Check the element count and byte size for overflow.
  std::int64_t n = 1;
  for (auto d : parsed.shape) {
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / 16 / d)
      throw error(path + ": shape " + shape_string(parsed.shape) + " is too large");
    n *= d;
  }
  if (parsed.fortran_order && parsed.shape.size() >= 2)
    throw error(path + ": Fortran-order arrays are not supported; save a C-order copy with "
                       "np.save(path, np.ascontiguousarray(arr))");
  parsed.fortran_order = false;  // 0-D and 1-D arrays are the same in either order
  return parsed;
}

/// Converts n elements of file dtype `from` (raw little-endian bytes at src) to T at dst.
template <class T>
void convert(const unsigned char* src, dtype from, T* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* p = src + i * itemsize(from);
    if constexpr (std::is_same_v<T, std::int64_t>) {
      std::memcpy(&dst[i], p, 8);  // only int64 -> int64 reaches here
    } else {
      double v;
      switch (from) {
        case dtype::float16: {
          std::uint16_t b;
          std::memcpy(&b, p, 2);
          v = half_to_float(b);
          break;
        }
        case dtype::float32: {
          float f;
          std::memcpy(&f, p, 4);
          v = f;
          break;
        }
        default: std::memcpy(&v, p, 8); break;
      }
      if constexpr (std::is_same_v<T, float16>) {
        dst[i].bits = double_to_half(v);  // one rounding, also from float64
      } else {
        dst[i] = static_cast<T>(v);
      }
    }
  }
}

}  // namespace detail

/// @brief Reads only the header of a `.npy` file (dtype, shape, version). Throws npy::error.
inline header read_header(const std::string& path) {
  detail::require_little_endian_host(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open for reading");
  return detail::read_header(in, path);
}

namespace detail {
/// Throws unless the file (size `file_size`) holds exactly the data its header `h` describes.
inline void check_size(const std::string& path, const header& h, std::uint64_t file_size) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(h.count()) * itemsize(h.type);
  if (file_size < h.data_offset + bytes)
    throw error(path + ": truncated: shape " + shape_string(h.shape) + " of " + name(h.type) + " needs " +
                std::to_string(bytes) + " data bytes, the file has " +
                std::to_string(file_size > h.data_offset ? file_size - h.data_offset : 0));
  if (file_size > h.data_offset + bytes)
    throw error(path + ": " + std::to_string(file_size - h.data_offset - bytes) +
                " unexpected bytes after the data (not a single-array .npy file?)");
}
}  // namespace detail

/// @brief Reads the header of a `.npy` file and checks, without reading the data, that the file holds
/// exactly the data the header describes (neither truncated nor followed by extra bytes). Throws npy::error.
inline header check_file(const std::string& path) {
  detail::require_little_endian_host(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open for reading");
  const header h = detail::read_header(in, path);
  in.seekg(0, std::ios::end);
  detail::check_size(path, h, static_cast<std::uint64_t>(in.tellg()));
  return h;
}

/// @brief Loads a `.npy` file, converting its elements to T (float, double, npy::float16, std::int64_t).
///
/// Floating files convert to any floating T (widening exact, narrowing rounds to nearest even); int64
/// files load only as std::int64_t. The file must hold exactly the header's data: a truncated file or
/// trailing bytes are errors. Throws npy::error.
template <class T>
array<T> load(const std::string& path) {
  constexpr dtype want = dtype_of<T>();
  detail::require_little_endian_host(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open for reading");
  const header h = detail::read_header(in, path);
  if (is_floating(want) != is_floating(h.type))
    throw error(path + ": holds " + name(h.type) + " data but " + name(want) +
                " is needed (integer and floating data do not convert)");
  const std::int64_t count = h.count();
  const std::uint64_t bytes = static_cast<std::uint64_t>(count) * itemsize(h.type);
  in.seekg(0, std::ios::end);
  detail::check_size(path, h, static_cast<std::uint64_t>(in.tellg()));
  in.seekg(static_cast<std::streamoff>(h.data_offset), std::ios::beg);

  array<T> a;
  a.shape = h.shape;
  a.file_type = h.type;
  a.data.resize(static_cast<std::size_t>(count));
  if (h.type == want) {
    in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(bytes));
    if (static_cast<std::uint64_t>(in.gcount()) != bytes) throw error(path + ": read error");
    return a;
  }
  constexpr std::size_t chunk = std::size_t(1) << 20;  // elements per read
  std::vector<unsigned char> buf(chunk * itemsize(h.type));
  for (std::size_t done = 0; done < a.data.size();) {
    const std::size_t n = std::min(chunk, a.data.size() - done);
    const std::streamsize nb = static_cast<std::streamsize>(n * itemsize(h.type));
    in.read(reinterpret_cast<char*>(buf.data()), nb);
    if (in.gcount() != nb) throw error(path + ": read error");
    detail::convert(buf.data(), h.type, a.data.data() + done, n);
    done += n;
  }
  return a;
}

/// @brief Writes `count(shape)` elements of T at data as a C-order `.npy` file (format 1.0, or 2.0 for
/// a header over 64 KiB). T: float ('<f4'), double ('<f8'), npy::float16 ('<f2'), std::int64_t ('<i8').
/// Throws npy::error on a negative dimension or an I/O failure.
template <class T>
void save(const std::string& path, const T* data, const std::vector<std::int64_t>& shape) {
  constexpr dtype t = dtype_of<T>();
  detail::require_little_endian_host(path);
  std::int64_t count = 1;
  for (auto d : shape) {
    if (d < 0) throw error(path + ": cannot save a negative dimension " + shape_string(shape));
    if (d != 0 && count > std::numeric_limits<std::int64_t>::max() / 16 / d)
      throw error(path + ": shape " + shape_string(shape) + " is too large");
    count *= d;
  }
  if (count > 0 && !data) throw error(path + ": null data pointer");
  std::string dict = std::string("{'descr': '") + descr(t) + "', 'fortran_order': False, 'shape': " +
                     shape_string(shape) + ", }";
  // magic (6) + version (2) + length (2 or 4) + dict + padding + '\n' is a multiple of 64.
  int major = 1;
  std::size_t pre = 10;
  std::size_t total = pre + dict.size() + 1;
  std::size_t pad = (64 - total % 64) % 64;
  if (dict.size() + 1 + pad > 65535) {
    major = 2;
    pre = 12;
    total = pre + dict.size() + 1;
    pad = (64 - total % 64) % 64;
  }
  dict.append(pad, ' ');
  dict.push_back('\n');
  const std::uint32_t len = static_cast<std::uint32_t>(dict.size());

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw error(path + ": cannot open for writing");
  out.write("\x93NUMPY", 6);
  const char ver[2] = {static_cast<char>(major), 0};
  out.write(ver, 2);
  const char lb[4] = {static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                      static_cast<char>((len >> 16) & 0xff), static_cast<char>((len >> 24) & 0xff)};
  out.write(lb, major == 1 ? 2 : 4);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
  out.close();
  if (!out) throw error(path + ": write failed (disk full or no permission?)");
}

/// @brief Writes a vector as a `.npy` file of the given shape; its size must match the shape.
template <class T>
void save(const std::string& path, const std::vector<T>& data, const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  if (static_cast<std::int64_t>(data.size()) != count)
    throw error(path + ": " + std::to_string(data.size()) + " elements do not match shape " + shape_string(shape));
  save(path, data.data(), shape);
}

}  // namespace npy
