//===- Visit.h - a dtype's storage type as a template argument --*- C++ -*-===//
//
// The host and cuda dispatches turn a runtime DType into the storage type
// their kernel templates take, the same way.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_VISIT_H
#define RP_RUNTIME_KERNELS_VISIT_H

#include "rp/runtime/Half.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/kernels/Numeric.h"

#include <cstddef>
#include <cstdint>

namespace rp::runtime::kernels {

template <typename T> struct Tag { using type = T; };

/// Calls fn(Tag<S>{}) with the storage type S of `dtype`.
template <typename Fn> void visitDType(DType dtype, Fn &&fn) {
  switch (dtype) {
  case DType::f32:
    return fn(Tag<float>{});
  case DType::f16:
    return fn(Tag<f16>{});
  case DType::bf16:
    return fn(Tag<bf16>{});
  case DType::f64:
    return fn(Tag<double>{});
  case DType::i32:
    return fn(Tag<int32_t>{});
  case DType::i64:
    return fn(Tag<int64_t>{});
  case DType::i1:
    return fn(Tag<Bool8>{});
  case DType::u8:
    // Bytes (a quantized weight's blob) are only moved (visitElementSize)
    // and dequantized: no kernel template computes on them.
    return;
  }
}

/// Calls fn(Tag<U>{}) with an unsigned integer U of `bytes` bytes: data
/// movement only needs the element size.
template <typename Fn> void visitElementSize(size_t bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    return fn(Tag<uint8_t>{});
  case 2:
    return fn(Tag<uint16_t>{});
  case 4:
    return fn(Tag<uint32_t>{});
  default:
    return fn(Tag<uint64_t>{});
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_VISIT_H
