//===- Npy.cpp - numpy .npy files in and out ------------------------------===//

#include "rp/runtime/Npy.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
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

Expected<NpyArray> rp::runtime::readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return notFound("cannot open '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
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
  if (start + headerLen > bytes.size())
    return bad("truncated header");
  std::string header(bytes.data() + start, headerLen);
  std::smatch m;
  if (!std::regex_search(header, m,
                         std::regex("'descr'\\s*:\\s*'([^']*)'")))
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
  if (std::regex_search(header, m,
                        std::regex("'fortran_order'\\s*:\\s*True")))
    return bad("Fortran order; save a C-order array");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return bad("no 'shape' in the header");
  std::string dims = m[1];
  std::regex number("[0-9]+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), number);
       it != std::sregex_iterator(); ++it)
    out.shape.push_back(std::stoll(it->str()));
  size_t need = numElements(out.shape) * dtypeSize(out.dtype);
  size_t have = bytes.size() - start - headerLen;
  if (have != need)
    return bad("it holds " + std::to_string(have) + " data bytes but its "
               "header declares " + std::to_string(need));
  out.data.assign(bytes.begin() + start + headerLen, bytes.end());
  return out;
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
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out)
      return notFound("cannot write '" + path + "'");
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = static_cast<uint16_t>(header.size());
    char lenBytes[2] = {static_cast<char>(len & 0xff),
                        static_cast<char>(len >> 8)};
    out.write(lenBytes, 2);
    out.write(header.data(), header.size());
    out.write(static_cast<const char *>(data),
              numElements(shape) * dtypeSize(dtype));
    if (!out)
      return notFound("cannot write '" + path + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return notFound("cannot move '" + tmp + "' to '" + path +
                    "': " + ec.message());
  return Status::ok();
}
