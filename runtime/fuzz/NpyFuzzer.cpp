//===- NpyFuzzer.cpp - libFuzzer target of the .npy reader ----------------===//
//
// Parses the input as an .npy file; a parsed array must hold exactly the
// bytes its shape and element type need.

#include "FuzzCheck.h"
#include "rp/runtime/Npy.h"

#include <string_view>

using namespace rp::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  Expected<NpyArray> array = parseNpy(bytes, "fuzz.npy");
  if (!array) {
    rp::fuzz::requireUserError(array.getStatus());
    return 0;
  }
  rp::fuzz::require(array->shape.size() <= kMaxNpyRank, "rank over the cap");
  rp::fuzz::require(array->data.size() == size_t(numElements(array->shape)) *
                                              dtypeSize(array->dtype),
                    "data size disagrees with the shape");
  return 0;
}
