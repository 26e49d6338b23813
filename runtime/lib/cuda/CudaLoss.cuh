//===- CudaLoss.cuh - what the two cross-entropy kernels share --*- CUDA
//-*-===//
//
// The label check, the loss scale's read and the loss sum's fixed order,
// shared by cross_entropy (CudaNN.cu) and the fused LM-head loss
// (CudaLinearLoss.cu), so that both report a bad label alike and sum the
// per-row losses in host/HostLoss.cpp's order: f64 partials of
// kLossRowGrain rows, then the partials in order. Kernels and device
// functions only (no launches), so that the CPU emulation of a .cu file
// (test/cudaemu) can include it. Private to lib/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDALOSS_CUH
#define RP_LIB_CUDA_CUDALOSS_CUH

#include "CudaCommon.cuh"

namespace rp::runtime::cuda {

/// host/HostLoss.cpp's kLossRowGrain: rows per partial of the loss sum.
constexpr int64_t kLossRowGrain = 64;

/// The label of `row`; false for the ignore index, and for a label out of
/// [0, classes), which is reported.
template <typename I>
__device__ inline bool readLabel(const LaunchContext &ctx, const I *labels,
                                 int64_t row, int64_t ignoreIndex,
                                 int64_t classes, int64_t &label) {
  label = static_cast<int64_t>(labels[row]);
  if (label == ignoreIndex)
    return false;
  if (label < 0 || label >= classes) {
    reportError(ctx, kLabelOutOfRange, row, label, classes);
    return false;
  }
  return true;
}

struct LossPartial {
  double sum;
  int64_t count;
};

/// One thread: the partials in chunk order (the host's deterministicReduce).
template <typename S>
__global__ void lossTotalKernel(const LossPartial *partials, int64_t chunks,
                                S *lossSum, int64_t *count) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  LossPartial total{0.0, 0};
  for (int64_t c = 0; c < chunks; ++c) {
    total.sum = total.sum + partials[c].sum;
    total.count = total.count + partials[c].count;
  }
  *lossSum = static_cast<S>(total.sum);
  *count = total.count;
}

/// A one-element float tensor in device memory (the loss scale).
__device__ inline double readScalar(DType type, const void *p) {
  switch (type) {
  case DType::f64:
    return *static_cast<const double *>(p);
  case DType::bf16:
    return static_cast<float>(*static_cast<const bf16 *>(p));
  case DType::f16:
    return static_cast<float>(*static_cast<const f16 *>(p));
  default:
    return *static_cast<const float *>(p);
  }
}

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDALOSS_CUH
