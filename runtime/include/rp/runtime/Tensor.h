//===- Tensor.h - element types and tensor views of the runtime -*- C++ -*-===//
//
// What kernels see: a pointer to contiguous row-major data, its element
// type and its shape. Buffers are owned elsewhere (devices, the executor).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TENSOR_H
#define RP_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rp::runtime {

/// Element types of plan buffers, as the compiler's types map to them.
/// u8: bytes (a quantized weight's blob).
enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, i1, u8 };

/// Bytes per element as stored (i1 takes one byte).
inline size_t dtypeSize(DType t) {
  switch (t) {
  case DType::f64:
  case DType::i64:
    return 8;
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f16:
  case DType::bf16:
    return 2;
  case DType::i1:
  case DType::u8:
    return 1;
  }
  return 0;
}

inline bool isFloat(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 ||
         t == DType::f64;
}

/// The name the compiler prints: f32, bf16, i64, ...
const char *dtypeName(DType t);

using Shape = std::vector<int64_t>;

inline int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A view of contiguous row-major data.
struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::f32;
  Shape shape;

  int64_t size() const { return numElements(shape); }
  size_t bytes() const { return size() * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// "[2, 16, 64]" for messages.
std::string describeShape(const Shape &shape);

/// "f32[2, 16, 64]" for messages.
std::string describe(const TensorRef &t);

} // namespace rp::runtime

#endif // RP_RUNTIME_TENSOR_H
