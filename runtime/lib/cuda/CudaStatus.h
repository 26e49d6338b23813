//===- CudaStatus.h - CUDA errors as runtime Status values ------*- C++ -*-===//
//
// The one place cudaError_t and cublasStatus_t become a Status: the call
// that failed, CUDA's name and text for the error, and the code a user acts
// on.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDASTATUS_H
#define RP_LIB_CUDA_CUDASTATUS_H

#include "rp/runtime/Status.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string>

namespace rp::runtime::cuda {

inline Status fromCuda(cudaError_t error, const std::string &what) {
  if (error == cudaSuccess)
    return Status::ok();
  std::string text = what + ": " + cudaGetErrorName(error) + " (" +
                     cudaGetErrorString(error) + ")";
  switch (error) {
  case cudaErrorMemoryAllocation:
    return resourceExhausted(text + "; the plan needs more memory than the "
                                    "GPU has free: recompile it with a "
                                    "smaller budget (rp-compile --budget-gib)");
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
  case cudaErrorInvalidDevice:
    return unavailable(text);
  default:
    return internalError(text);
  }
}

inline Status fromCublas(cublasStatus_t status, const std::string &what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  std::string text = what + ": " + cublasGetStatusName(status) + " (" +
                     cublasGetStatusString(status) + ")";
  switch (status) {
  case CUBLAS_STATUS_ALLOC_FAILED:
    return resourceExhausted(text + "; the GPU has no memory left for "
                                    "cuBLAS: recompile the plan with a "
                                    "smaller budget (rp-compile --budget-gib)");
  case CUBLAS_STATUS_NOT_INITIALIZED:
  case CUBLAS_STATUS_ARCH_MISMATCH:
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return unavailable(text);
  default:
    return internalError(text);
  }
}

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDASTATUS_H
