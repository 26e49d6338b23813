//===- CudaTypes.h - rp's element types as CUDA library types --*- C++ -*-===//
//
// One mapping for every library call that names a data type (cuBLAS,
// cuBLASLt), so the GEMM paths cannot disagree on it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_CUDA_CUDATYPES_H
#define RP_RUNTIME_CUDA_CUDATYPES_H

#include "rp/runtime/Tensor.h"

#include <library_types.h>

namespace rp::runtime::cuda {

/// f16, bf16 and f64 as themselves; every other type is stored as f32.
inline cudaDataType_t cudaDataTypeOf(DType t) {
  switch (t) {
  case DType::f16:
    return CUDA_R_16F;
  case DType::bf16:
    return CUDA_R_16BF;
  case DType::f64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

} // namespace rp::runtime::cuda

#endif // RP_RUNTIME_CUDA_CUDATYPES_H
