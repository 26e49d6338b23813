//===- Safetensors.cpp - .safetensors files in and out --------------------===//

#include "rp/runtime/Safetensors.h"
#include "PlanInternal.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/Half.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

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

namespace {
/// One tensor of a header, its bytes not yet read.
struct Pending {
  std::string name;
  SafetensorsFile::Entry entry;
  uint64_t begin, end; // in the data section
};

/// Copies the bytes [begin, end) of the data section into `out`.
using FillBytes =
    std::function<Status(uint64_t begin, uint64_t end, uint8_t *out)>;

/// Checks the header `text` of a file whose data section holds `dataBytes`,
/// then reads each tensor's bytes through `fill`. Every check comes before
/// any tensor is allocated: overlapping ranges would let a small file claim
/// its bytes many times over.
Expected<SafetensorsFile> parseHeader(std::string_view text, uint64_t dataBytes,
                                      const std::string &path,
                                      const FillBytes &fill) {
  auto bad = [&](const std::string &what) {
    return invalidArgument(path + ": not a usable .safetensors file: " + what);
  };
  nlohmann::json header =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return bad("the header is not a JSON object");
  std::vector<Pending> pending;
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
    pending.push_back({name, std::move(e), b, end});
  }
  // Two tensors sharing bytes: writing one would change the other, and the
  // safetensors library refuses such a file.
  std::vector<const Pending *> order;
  for (const Pending &p : pending)
    if (p.end > p.begin)
      order.push_back(&p);
  std::sort(order.begin(), order.end(), [](const Pending *x, const Pending *y) {
    return x->begin < y->begin;
  });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      return bad("tensors '" + order[i - 1]->name + "' and '" + order[i]->name +
                 "' overlap (data_offsets [" +
                 std::to_string(order[i - 1]->begin) + ", " +
                 std::to_string(order[i - 1]->end) + "] and [" +
                 std::to_string(order[i]->begin) + ", " +
                 std::to_string(order[i]->end) + "])");
  // Every reader of rp's (weights, checkpoints) needs tensors: an empty file
  // would replace nothing without a word.
  if (pending.empty())
    return bad("it holds no tensors");
  SafetensorsFile file;
  for (Pending &p : pending) {
    p.entry.data.resize(p.end - p.begin);
    if (Status s = fill(p.begin, p.end, p.entry.data.data()); s.failed())
      return s;
    file.tensors.emplace(std::move(p.name), std::move(p.entry));
  }
  return file;
}

/// The header's length from the file's first 8 bytes, checked against the
/// file's size and the safetensors library's own cap.
Expected<uint64_t> headerLength(const unsigned char first[8], uint64_t size,
                                const std::string &path) {
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t(first[i]) << (8 * i);
  if (len > size - 8)
    return invalidArgument(path + ": not a usable .safetensors file: the "
                                  "header runs past the end");
  if (len > kMaxSafetensorsHeaderBytes)
    return invalidArgument(path +
                           ": not a usable .safetensors file: a header of " +
                           std::to_string(len) + " bytes, more than the " +
                           std::to_string(kMaxSafetensorsHeaderBytes) +
                           " the safetensors library reads");
  return len;
}
} // namespace

Expected<SafetensorsFile>
rp::runtime::parseSafetensors(std::string_view bytes, const std::string &path) {
  if (bytes.size() < 8)
    return invalidArgument(path +
                           ": not a usable .safetensors file: too short");
  Expected<uint64_t> len =
      headerLength(reinterpret_cast<const unsigned char *>(bytes.data()),
                   bytes.size(), path);
  if (!len)
    return len.getStatus();
  std::string_view data = bytes.substr(8 + *len);
  return parseHeader(bytes.substr(8, *len), data.size(), path,
                     [&](uint64_t begin, uint64_t end, uint8_t *out) {
                       std::memcpy(out, data.data() + begin, end - begin);
                       return Status::ok();
                     });
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
  // The header, then each tensor straight into its own buffer: a
  // checkpoint of many GB is held once, not also as the file's bytes.
  Expected<PieceReader> file = PieceReader::open(path, ".safetensors file");
  if (!file)
    return file.getStatus();
  if (file->size() > physicalMemoryBytes())
    return invalidArgument(".safetensors file '" + path + "' holds " +
                           std::to_string(file->size()) +
                           " bytes, more than this machine's memory");
  unsigned char first[8];
  if (file->size() < 8)
    return invalidArgument(path +
                           ": not a usable .safetensors file: too short");
  if (Status s = file->readAt(0, first, 8); s.failed())
    return s;
  Expected<uint64_t> len = headerLength(first, file->size(), path);
  if (!len)
    return len.getStatus();
  std::string text(size_t(*len), '\0');
  if (Status s = file->readAt(8, text.data(), text.size()); s.failed())
    return s;
  uint64_t base = 8 + *len;
  return parseHeader(text, file->size() - base, path,
                     [&](uint64_t begin, uint64_t end, uint8_t *out) {
                       return file->readAt(base + begin, out, end - begin);
                     });
}
