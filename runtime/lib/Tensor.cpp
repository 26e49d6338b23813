//===- Tensor.cpp - element types and tensor views of the runtime ---------===//
//
// Part of the runtime's core library, not of the plan library: the kernels
// name tensors in their messages, and the plan library already depends on
// this one. Names match what the compiler prints for the same types, so that
// a runtime message and the IR it came from read alike.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Tensor.h"

namespace rp::runtime {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::f32:
    return "f32";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::f64:
    return "f64";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  case DType::i1:
    return "i1";
  case DType::u8:
    return "u8";
  }
  return "?";
}

std::string describeShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string describe(const TensorRef &t) {
  return dtypeName(t.dtype) + describeShape(t.shape);
}

} // namespace rp::runtime
