//===- CudaGemmLt.h - GEMMs through cuBLASLt --------------------*- C++ -*-===//
//
// One GEMM (strided batches, optional fused epilogue) through cuBLASLt with
// the algorithm GemmPlanCache chose for its shape: asked of cuBLASLt's
// heuristic once per process on the first device that runs the shape,
// restricted to reduction-free algorithms within the device's fixed
// workspace, and reused on every device (bitwise across device counts).
// Where no algorithm qualifies, or a pointer is less aligned than the
// 256 bytes the heuristic assumes, the caller runs cuBLAS's GEMM; that
// fallback is said once per process on stderr.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDAGEMMLT_H
#define RP_LIB_CUDA_CUDAGEMMLT_H

#include "CudaDispatch.h"
#include "GemmPlanCache.h"

namespace rp::runtime::cuda {

/// The process's plan cache, shared by every device.
GemmPlanCache &gemmPlans();

/// D = op(A) op(B) (column-major, as `key` describes it), then the
/// epilogue with `bias` (a vector of key.m elements; its gradient for
/// biasGrad and dGeluBiasGrad) and `aux` (dGelu, dGeluBiasGrad: the
/// pre-activation, laid out as D). `ran` is false when cuBLASLt has no
/// plan for the shape: the caller falls back, nothing was enqueued.
Status ltMatmul(const DispatchContext &ctx, const GemmKey &key, const void *a,
                const void *b, void *d, const void *bias, bool &ran,
                const void *aux = nullptr);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAGEMMLT_H
