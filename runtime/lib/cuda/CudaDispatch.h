//===- CudaDispatch.h - a plan program on the cuda kernels ------*- C++ -*-===//
//
// Private to lib/cuda: what Queue::launch of a compute queue runs. The
// mapping from a plan's kernel calls (OpKind, ints, floats; plan.fbs and
// lib/Target/PlanExport) to kernels is the host dispatch's
// (host/HostDispatch.cpp), call for call.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDADISPATCH_H
#define RP_LIB_CUDA_CUDADISPATCH_H

#include "CudaKernels.h"

#include "rp/runtime/Device.h"

#include <cublas_api.h>

namespace rp::runtime::cuda {

/// One GPU's compute stream and what its kernels need.
struct DispatchContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  /// Bound to `stream`, with a fixed workspace.
  cublasHandle_t blas = nullptr;
  /// The device's view of its KernelErrorRecord.
  KernelErrorRecord *errors = nullptr;
};

/// Enqueues program `program` of `plan` on ctx.stream, buffer b at
/// `buffers[b]` (device memory). Kernel scratch comes from the device's
/// stream-ordered pool (cudaMallocAsync / cudaFreeAsync on the stream), so
/// a step allocates nothing from the driver once the pool has grown to the
/// largest call. A failure names the program, the call and its op.
Status runProgram(const DispatchContext &ctx, const Plan &plan,
                  uint32_t program, const BufferAddresses &buffers);

/// rp.matmul through cuBLAS (CudaMatmul.cpp).
Status matmul(const DispatchContext &ctx, const TensorRef &a,
              const TensorRef &b, bool transposeA, bool transposeB,
              const TensorRef &out);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDADISPATCH_H
