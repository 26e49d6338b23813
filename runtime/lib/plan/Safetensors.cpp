//===- Safetensors.cpp - .safetensors files in and out --------------------===//

#include "rp/runtime/Safetensors.h"
#include "PlanInternal.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/Half.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace rp::runtime;

namespace {
struct DTypeName {
  DType dtype;
  const char *name;
};
constexpr DTypeName kNames[] = {
    {DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
    {DType::f64, "F64"}, {DType::i32, "I32"}, {DType::i64, "I64"},
    {DType::i1, "BOOL"}, {DType::u8, "U8"},
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
  uint64_t len = text.size();
  char lenBytes[8];
  for (int i = 0; i < 8; ++i)
    lenBytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  std::vector<ByteSpan> pieces = {{lenBytes, 8}, {text.data(), text.size()}};
  for (const NamedTensor &t : tensors)
    pieces.push_back({t.tensor.data, t.tensor.bytes()});
  return writeFileAtomic(path, pieces);
}

Expected<SafetensorsFile>
rp::runtime::parseSafetensors(std::string_view bytes, const std::string &path) {
  auto bad = [&](const std::string &what) {
    return invalidArgument(path + ": not a usable .safetensors file: " + what);
  };
  if (bytes.size() < 8)
    return bad("too short");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (len > bytes.size() - 8)
    return bad("the header runs past the end");
  nlohmann::json header = nlohmann::json::parse(
      bytes.begin() + 8, bytes.begin() + 8 + len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return bad("the header is not a JSON object");
  SafetensorsFile file;
  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  size_t base = 8 + len, dataBytes = bytes.size() - base;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__")
      continue;
    std::string where = "tensor '" + name + "'";
    if (!entry.is_object())
      return bad(where + " is not a JSON object");
    SafetensorsFile::Entry e;
    auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string())
      return bad(where + " has no dtype string");
    bool known = false;
    for (const DTypeName &n : kNames)
      if (*dtype == n.name) {
        e.dtype = n.dtype;
        known = true;
      }
    if (!known)
      return bad(where + " has dtype " + dtype->dump());
    auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array() ||
        shape->size() > kMaxSafetensorsRank)
      return bad(where + " has no shape (an array of at most " +
                 std::to_string(kMaxSafetensorsRank) + " sizes)");
    for (auto &d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 62))
        return bad(where + " has shape " + shape->dump() +
                   "; sizes are integers from 0 to 2^62");
      e.shape.push_back(d.get<int64_t>());
    }
    auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() ||
        offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      return bad(where + " has no data_offsets (two byte offsets)");
    uint64_t b = (*offsets)[0].get<uint64_t>(),
             end = (*offsets)[1].get<uint64_t>(), need = 0;
    if (!checkedByteSize(e.shape, e.dtype, need) || b > end ||
        end > dataBytes || end - b != need)
      return bad(where + " has a bad byte range: data_offsets " +
                 offsets->dump() + " for " + std::to_string(need) +
                 " bytes of shape " + shape->dump() + ", in " +
                 std::to_string(dataBytes) + " data bytes");
    e.data.assign(bytes.begin() + base + b, bytes.begin() + base + end);
    file.tensors.emplace(name, std::move(e));
    if (end > b)
      ranges.push_back({b, end, name});
  }
  // Two tensors sharing bytes: writing one would change the other, and the
  // safetensors library refuses such a file.
  std::sort(ranges.begin(), ranges.end(),
            [](const Range &x, const Range &y) { return x.begin < y.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      return bad("tensors '" + ranges[i - 1].name + "' and '" + ranges[i].name +
                 "' overlap (data_offsets [" +
                 std::to_string(ranges[i - 1].begin) + ", " +
                 std::to_string(ranges[i - 1].end) + "] and [" +
                 std::to_string(ranges[i].begin) + ", " +
                 std::to_string(ranges[i].end) + "])");
  // Every reader of rp's (weights, checkpoints) needs tensors: an empty file
  // would replace nothing without a word.
  if (file.tensors.empty())
    return bad("it holds no tensors");
  return file;
}

std::string rp::runtime::firstBadValue(const SafetensorsFile::Entry &e,
                                       double limit, bool nonNegative) {
  size_t n = e.data.size() / std::max<size_t>(1, dtypeSize(e.dtype));
  const uint8_t *p = e.data.data();
  auto at = [&](size_t i) -> double {
    switch (e.dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return e.dtype == DType::f16 ? half_detail::f16BitsToFloat(v)
                                   : half_detail::bf16BitsToFloat(v);
    }
    default:
      return 0;
    }
  };
  if (!isFloat(e.dtype))
    return "";
  for (size_t i = 0; i < n; ++i) {
    double v = at(i);
    if (std::isfinite(v) && std::fabs(v) <= limit && !(nonNegative && v < 0))
      continue;
    char text[96];
    std::snprintf(text, sizeof(text), "element %zu is %g", i, v);
    return text;
  }
  return "";
}

Expected<SafetensorsFile>
rp::runtime::readSafetensors(const std::string &path) {
  Expected<std::string> bytes =
      readRegularFile(path, ".safetensors file", physicalMemoryBytes());
  if (!bytes)
    return bytes.getStatus();
  return parseSafetensors(*bytes, path);
}
