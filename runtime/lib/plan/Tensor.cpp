//===- Tensor.cpp - element type names and tensor descriptions ------------===//

#include "rp/runtime/Tensor.h"

using namespace rp::runtime;

const char *rp::runtime::dtypeName(DType t) {
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
  }
  return "?";
}

std::string rp::runtime::describeShape(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string rp::runtime::describe(const TensorRef &t) {
  return dtypeName(t.dtype) + describeShape(t.shape);
}
