//===- Npy.cpp - numpy .npy files in and out ------------------------------===//

#include "rp/runtime/Npy.h"
#include "PlanInternal.h"
#include "rp/runtime/FileIO.h"

#include <cstdio>
#include <cstring>
#include <regex>

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
  std::string header(bytes.data() + start, headerLen);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    return bad("no 'descr' in the header");
  std::string descr = m[1];
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
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True")))
    return bad("Fortran order; save a C-order array");
  if (!std::regex_search(header, m,
                         std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return bad("no 'shape' in the header");
  if (!parseDims(m[1], out.shape))
    return bad("its shape (" + std::string(m[1]) +
               ") is not a tuple of at most " + std::to_string(kMaxNpyRank) +
               " dimensions below 10^18");
  uint64_t need = 0;
  if (!checkedByteSize(out.shape, out.dtype, need))
    return bad("its shape (" + std::string(m[1]) +
               ") holds more bytes than fit in 64 bits");
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
