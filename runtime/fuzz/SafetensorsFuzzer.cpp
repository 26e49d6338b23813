//===- SafetensorsFuzzer.cpp - libFuzzer target of the .safetensors reader ===//
//
// Parses the input as a .safetensors file; every parsed tensor must hold
// exactly the bytes its shape and element type need.

#include "FuzzCheck.h"
#include "rp/runtime/Safetensors.h"

#include <string_view>

using namespace rp::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  Expected<SafetensorsFile> file = parseSafetensors(bytes, "fuzz.safetensors");
  if (!file) {
    rp::fuzz::requireUserError(file.getStatus());
    return 0;
  }
  for (const auto &[name, e] : file->tensors) {
    rp::fuzz::require(e.shape.size() <= kMaxSafetensorsRank,
                      "rank over the cap");
    rp::fuzz::require(e.data.size() ==
                          size_t(numElements(e.shape)) * dtypeSize(e.dtype),
                      "data size disagrees with the shape");
    rp::fuzz::require(e.data.size() <= size, "more data than the input");
  }
  return 0;
}
