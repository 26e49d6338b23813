//===- Safetensors.h - .safetensors files in and out ------------*- C++ -*-===//
//
// Gradient dumps, weight overrides and checkpoints use the safetensors
// format (an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the data). Writing is atomic.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_SAFETENSORS_H
#define RP_RUNTIME_SAFETENSORS_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rp::runtime {

struct NamedTensor {
  std::string name;
  TensorRef tensor;
};

/// Writes `tensors` (in the given order) to `path`.
Status writeSafetensors(const std::string &path,
                        const std::vector<NamedTensor> &tensors);

struct SafetensorsFile {
  struct Entry {
    DType dtype;
    Shape shape;
    std::vector<uint8_t> data;
  };
  std::map<std::string, Entry> tensors;
};

/// Reads every tensor of `path` (F32, F16, BF16, F64, I32, I64, BOOL).
/// Reads a .safetensors file (a regular file; FileIO.h), checking every
/// header field's type and range, and that no two tensors share bytes,
/// before it allocates; each tensor is read straight into its own buffer.
Expected<SafetensorsFile> readSafetensors(const std::string &path);

/// The largest weight magnitude a load accepts: above it, the square of
/// the value (a norm, AdamW's second moment of a gradient that size)
/// overflows f32, and the run trains on infinities.
constexpr double kMaxWeightMagnitude = 1.8e19;

/// What is wrong with the values of float tensor `e`: its first element
/// that is NaN or infinite, above `limit` in magnitude, or (with
/// `nonNegative`) below 0, as "element 3 is nan"; "" when none is (and for
/// tensors that are not floats).
std::string firstBadValue(const SafetensorsFile::Entry &e, double limit,
                          bool nonNegative = false);

/// The most dimensions a .safetensors entry may declare.
constexpr size_t kMaxSafetensorsRank = 32;

/// The longest header a .safetensors file may have: the safetensors
/// library's own cap (its MAX_HEADER_SIZE), so a file it writes always reads.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// Parses the bytes of a .safetensors file; `path` names it in messages.
Expected<SafetensorsFile> parseSafetensors(std::string_view bytes,
                                           const std::string &path);

} // namespace rp::runtime

#endif // RP_RUNTIME_SAFETENSORS_H
