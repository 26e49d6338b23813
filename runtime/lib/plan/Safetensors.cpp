//===- Safetensors.cpp - .safetensors files in and out --------------------===//

#include "rp/runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace rp::runtime;

namespace {
struct DTypeName {
  DType dtype;
  const char *name;
};
constexpr DTypeName kNames[] = {
    {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::f64, "F64"}, {DType::i32, "I32"}, {DType::i64, "I64"},
    {DType::i1, "BOOL"},
};
} // namespace

Status rp::runtime::writeSafetensors(const std::string &path,
                                     const std::vector<NamedTensor> &tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  size_t offset = 0;
  for (const NamedTensor &t : tensors) {
    const char *dtype = nullptr;
    for (const DTypeName &n : kNames)
      if (n.dtype == t.tensor.dtype)
        dtype = n.name;
    header[t.name] = {{"dtype", dtype},
                      {"shape", t.tensor.shape},
                      {"data_offsets", {offset, offset + t.tensor.bytes()}}};
    offset += t.tensor.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out)
      return notFound("cannot write '" + path + "'");
    uint64_t len = text.size();
    char lenBytes[8];
    for (int i = 0; i < 8; ++i)
      lenBytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    out.write(lenBytes, 8);
    out.write(text.data(), text.size());
    for (const NamedTensor &t : tensors)
      out.write(static_cast<const char *>(t.tensor.data), t.tensor.bytes());
    if (!out)
      return notFound("cannot write '" + path + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return notFound("cannot move '" + tmp + "' to '" + path + "'");
  return Status::ok();
}

Expected<SafetensorsFile> rp::runtime::readSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return notFound("cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  auto bad = [&](const std::string &what) {
    return invalidArgument(path + ": not a usable .safetensors file: " + what);
  };
  if (bytes.size() < 8)
    return bad("too short");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t(bytes[i]) << (8 * i);
  if (len > bytes.size() - 8)
    return bad("the header runs past the end");
  nlohmann::json header = nlohmann::json::parse(
      bytes.begin() + 8, bytes.begin() + 8 + len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return bad("the header is not a JSON object");
  SafetensorsFile file;
  size_t base = 8 + len;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    SafetensorsFile::Entry e;
    std::string dtype = entry.value("dtype", "");
    bool known = false;
    for (const DTypeName &n : kNames)
      if (dtype == n.name) {
        e.dtype = n.dtype;
        known = true;
      }
    if (!known)
      return bad("tensor '" + name + "' has dtype '" + dtype + "'");
    for (auto &d : entry["shape"])
      e.shape.push_back(d.get<int64_t>());
    auto offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
      return bad("tensor '" + name + "' has no data_offsets");
    size_t b = offsets[0].get<size_t>(), end = offsets[1].get<size_t>();
    if (b > end || base + end > bytes.size() ||
        end - b != numElements(e.shape) * dtypeSize(e.dtype))
      return bad("tensor '" + name + "' has a bad byte range");
    e.data.assign(bytes.begin() + base + b, bytes.begin() + base + end);
    file.tensors.emplace(name, std::move(e));
  }
  return file;
}
