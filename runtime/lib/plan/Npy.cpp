//===- Npy.cpp - numpy .npy files in and out ------------------------------===//

#include "rp/runtime/Npy.h"
#include "PlanInternal.h"
#include "rp/runtime/FileIO.h"

#include <cctype>
#include <cstdio>
#include <cstring>

using namespace rp::runtime;

namespace {

struct Descr {
  const char *text;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f4", DType::f32}, {"<f8", DType::f64}, {"<f2", DType::f16},
    {"<i4", DType::i32}, {"<i8", DType::i64}, {"|b1", DType::i1},
};

/// The largest header rp reads: numpy writes about a hundred bytes (and
/// itself refuses more than 10,000 by default); anything far larger is not
/// an array header.
constexpr size_t kMaxHeaderBytes = 1 << 20;

/// The header's dict literal as numpy writes it,
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
/// read in one pass without regex or recursion (std::regex recursed per
/// character and overflowed the stack on a 60 KB header). Keys and strings
/// take single or double quotes, as Python's literal_eval does.
struct HeaderFields {
  std::string descr, shape, unknownKey;
  bool hasDescr = false, hasShape = false, hasFortran = false, fortran = false;
};

class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : s(text) {}

  /// Fills `out`, or returns what is wrong.
  std::string parse(HeaderFields &out) {
    if (!eat('{'))
      return "the header is not a dict";
    while (!eat('}')) {
      std::string key;
      if (!quoted(key) || !eat(':'))
        return at("a quoted key and ':'");
      bool *seen = key == "descr"           ? &out.hasDescr
                   : key == "shape"         ? &out.hasShape
                   : key == "fortran_order" ? &out.hasFortran
                                            : nullptr;
      if (seen && *seen)
        return "'" + key + "' appears twice in the header";
      if (seen)
        *seen = true;
      if (key == "descr") {
        if (!quoted(out.descr))
          return "'descr' is not a string (rp reads plain arrays, not "
                 "structured ones)";
      } else if (key == "fortran_order") {
        std::string_view word = identifier();
        if (word != "True" && word != "False")
          return "'fortran_order' is neither True nor False";
        out.fortran = word == "True";
      } else if (key == "shape") {
        if (!tuple(out.shape))
          return "its shape is not a tuple";
      } else {
        if (out.unknownKey.empty())
          out.unknownKey = key;
        skipValue();
      }
      if (!eat(',') && !(peek('}')))
        return at("',' or '}'");
    }
    skipSpace();
    if (i != s.size())
      return at("the end of the header");
    return "";
  }

private:
  void skipSpace() {
    while (i < s.size() &&
           (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
      ++i;
  }
  bool peek(char c) {
    skipSpace();
    return i < s.size() && s[i] == c;
  }
  bool eat(char c) {
    if (!peek(c))
      return false;
    ++i;
    return true;
  }
  std::string at(const char *expected) {
    return "the header has no " + std::string(expected) + " at byte " +
           std::to_string(i);
  }
  /// A string in single or double quotes, without escapes.
  bool quoted(std::string &out) {
    skipSpace();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return false;
    char quote = s[i++];
    size_t end = s.find(quote, i);
    if (end == std::string_view::npos ||
        s.substr(i, end - i).find('\\') != std::string_view::npos)
      return false;
    out.assign(s.substr(i, end - i));
    i = end + 1;
    return true;
  }
  std::string_view identifier() {
    skipSpace();
    size_t start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i])))
      ++i;
    return s.substr(start, i - start);
  }
  /// The text between '(' and ')'; parseDims reads the numbers.
  bool tuple(std::string &out) {
    if (!eat('('))
      return false;
    size_t end = s.find(')', i);
    if (end == std::string_view::npos)
      return false;
    out.assign(s.substr(i, end - i));
    i = end + 1;
    return true;
  }
  /// An unknown key's value: a string, a tuple, or a bare word or number.
  void skipValue() {
    std::string ignored;
    if (quoted(ignored) || tuple(ignored))
      return;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) ||
                            s[i] == '.' || s[i] == '-' || s[i] == '+'))
      ++i;
  }

  std::string_view s;
  size_t i = 0;
};

} // namespace

/// The dimensions of a header's shape tuple text ("2, 3" or "4," or ""):
/// decimal numbers of at most 18 digits, so that none overflows.
static bool parseDims(const std::string &text, Shape &shape) {
  size_t i = 0;
  auto skipSpace = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
      ++i;
  };
  skipSpace();
  while (i < text.size()) {
    size_t digits = 0;
    uint64_t value = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits)
      value = value * 10 + uint64_t(text[i] - '0');
    if (digits == 0 || digits > 18 || shape.size() >= kMaxNpyRank)
      return false;
    shape.push_back(int64_t(value));
    skipSpace();
    if (i == text.size())
      break;
    if (text[i] != ',')
      return false;
    ++i;
    skipSpace();
  }
  return true;
}

Expected<NpyArray> rp::runtime::parseNpy(std::string_view bytes,
                                         const std::string &path) {
  auto bad = [&](const std::string &what) {
    return invalidArgument(path + ": not a usable .npy file: " + what);
  };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return bad("no .npy magic (write it with numpy.save)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, start;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) |
                static_cast<unsigned char>(bytes[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    start = 12;
  } else {
    return bad("format version " + std::to_string(major));
  }
  if (headerLen > bytes.size() - start)
    return bad("truncated header (it declares " + std::to_string(headerLen) +
               " header bytes; the file has " +
               std::to_string(bytes.size() - start) + " after the magic)");
  if (headerLen > kMaxHeaderBytes)
    return bad("its header declares " + std::to_string(headerLen) +
               " bytes, more than the " + std::to_string(kMaxHeaderBytes) +
               " of any array header");
  HeaderFields fields;
  std::string error =
      HeaderParser(bytes.substr(start, headerLen)).parse(fields);
  if (!error.empty())
    return bad(error);
  if (!fields.hasDescr)
    return bad("no 'descr' in the header");
  if (!fields.unknownKey.empty())
    return bad("unknown key '" + fields.unknownKey +
               "' in the header (numpy writes descr, fortran_order and "
               "shape)");
  std::string descr = fields.descr;
  NpyArray out;
  bool known = false;
  for (const Descr &d : kDescrs)
    if (descr == d.text || (descr == "<b1" && d.dtype == DType::i1)) {
      out.dtype = d.dtype;
      known = true;
    }
  if (!known)
    return bad("element type '" + descr +
               "' (rp reads float16/32/64, int32/64 and bool)");
  if (!fields.hasFortran)
    return bad("no 'fortran_order' in the header");
  // Read as C order it would be silently transposed.
  if (fields.fortran)
    return bad("Fortran order; save a C-order array");
  if (!fields.hasShape)
    return bad("no 'shape' in the header");
  // The shape text is quoted back in messages: at most its first 64 bytes.
  std::string shapeText = fields.shape.size() > 64
                              ? fields.shape.substr(0, 64) + "..."
                              : fields.shape;
  if (!parseDims(fields.shape, out.shape))
    return bad("its shape (" + shapeText + ") is not a tuple of at most " +
               std::to_string(kMaxNpyRank) + " dimensions below 10^18");
  uint64_t need = 0;
  if (!checkedByteSize(out.shape, out.dtype, need))
    return bad("its shape (" + shapeText +
               ") holds more bytes than fit in 63 bits (its nonzero "
               "dimensions' product, as numpy counts it)");
  size_t have = bytes.size() - start - headerLen;
  if (have != need)
    return bad("it holds " + std::to_string(have) +
               " data bytes but its "
               "header declares " +
               std::to_string(need));
  out.data.assign(bytes.begin() + start + headerLen, bytes.end());
  return out;
}

Expected<NpyArray> rp::runtime::readNpy(const std::string &path) {
  Expected<std::string> bytes =
      readRegularFile(path, ".npy file", physicalMemoryBytes());
  if (!bytes)
    return bytes.getStatus();
  return parseNpy(*bytes, path);
}

Status rp::runtime::writeNpy(const std::string &path, DType dtype,
                             const Shape &shape, const void *data) {
  const char *descr = nullptr;
  for (const Descr &d : kDescrs)
    if (d.dtype == dtype)
      descr = d.text;
  if (!descr)
    return invalidArgument(std::string("cannot write ") + dtypeName(dtype) +
                           " to .npy");
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 1); // "(2, 3)" but "(2,)"
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version and length take 10 bytes; data starts 64-aligned.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  uint16_t len = static_cast<uint16_t>(header.size());
  char prefix[10] = {'\x93',
                     'N',
                     'U',
                     'M',
                     'P',
                     'Y',
                     1,
                     0,
                     static_cast<char>(len & 0xff),
                     static_cast<char>(len >> 8)};
  return writeFileAtomic(
      path, {{prefix, sizeof(prefix)},
             {header.data(), header.size()},
             {data, size_t(numElements(shape)) * dtypeSize(dtype)}});
}
