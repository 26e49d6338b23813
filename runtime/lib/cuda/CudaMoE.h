//===- CudaMoE.h - the cuda device's MoE launchers --------------*- C++ -*-===//
//
// Private to lib/cuda: the boundary between CudaMoEDispatch.cpp (argument
// checks, cuBLAS) and CudaMoE.cu / CudaMoEGemm.cu (the kernels), plain data
// only, as CudaKernels.h. The semantics are host/HostMoE.cpp's; every
// per-expert row count stays on the device: dispatch writes it, the grouped
// matmuls read it there (no host copy, no synchronize), and a bad count, expert
// or position goes to the device's KernelErrorRecord like a bad gather index.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDAMOE_H
#define RP_LIB_CUDA_CUDAMOE_H

#include "CudaKernels.h"

namespace rp::runtime::cuda {

/// Top-k routing of logits [tokens, n] into weights [tokens, k] (logits'
/// dtype) and experts [tokens, k] i64; `before`: softmax over all n, then
/// top-k (optionally renormalised); otherwise top-k of the logits, then a
/// softmax over the k.
cudaError_t launchMoERoute(const LaunchContext &ctx, DType dtype, bool before,
                           bool normalize, const void *logits, int64_t tokens,
                           int64_t n, int64_t k, void *weights,
                           int64_t *experts);
cudaError_t launchMoERouteGrad(const LaunchContext &ctx, DType dtype,
                               bool before, bool normalize, const void *logits,
                               const int64_t *experts, const void *dweights,
                               int64_t tokens, int64_t n, int64_t k,
                               void *dlogits);

size_t moeDispatchScratchBytes(int64_t numExperts);
/// x [tokens, hidden] copied to rows [tokens * k, hidden] grouped by expert;
/// positions [tokens, k] i32 and counts [numExperts] i32 written.
cudaError_t launchMoEDispatch(const LaunchContext &ctx, size_t elementSize,
                              const void *x, const int64_t *experts,
                              int64_t tokens, int64_t k, int64_t hidden,
                              int64_t numExperts, void *rows,
                              int32_t *positions, int32_t *counts,
                              void *scratch);

/// The layout of the grouped matmul's scratch: group offsets, then the
/// tiles' pointer arrays for cublasGemmBatchedEx, then the partial tiles'
/// outputs (one per expert, and one more that idle tiles write).
struct MoEGemmTiles {
  int64_t tileRows = 0; ///< Rows of every batched GEMM.
  int64_t numTiles = 0; ///< Batch count: full tiles + one partial per expert.
  size_t offsetsAt = 0, pointersAt = 0, partialAt = 0, bytes = 0;
};
MoEGemmTiles moeGemmTiles(int64_t numRows, int64_t experts, int64_t nOut,
                          size_t elementSize);
/// Checks counts and fills the scratch's offsets and pointer arrays
/// (A: weight of the tile's expert, B: its input rows, C: its output rows).
cudaError_t launchMoEGemmPlan(const LaunchContext &ctx, const MoEGemmTiles &t,
                              const int32_t *counts, int64_t experts,
                              int64_t numRows, const void *x, int64_t kIn,
                              const void *weight, int64_t weightMatrix,
                              void *out, int64_t nOut, size_t elementSize,
                              void *scratch);
/// After the batched GEMM: the partial tiles' rows into `out`, and the
/// rows past the groups zeroed.
cudaError_t launchMoEGemmFinish(const LaunchContext &ctx, const MoEGemmTiles &t,
                                int64_t experts, int64_t numRows, int64_t nOut,
                                size_t elementSize, void *out,
                                const void *scratch);
/// Offsets only (counts checked): for the weight gradient.
size_t moeOffsetsScratchBytes(int64_t experts);
/// dW[e] [pCols, qCols] = sum over the rows r of group e, in row order, of
/// p[r]^T q[r]; an empty group gives zeros.
cudaError_t launchMoEWGrad(const LaunchContext &ctx, DType dtype,
                           const int32_t *counts, int64_t experts,
                           int64_t numRows, const void *p, int64_t pCols,
                           const void *q, int64_t qCols, void *dweight,
                           void *scratch);

/// The scratch of the weight gradient's grouped GEMM (CudaMoECutlass.cu),
/// filled on the device from the counts so that the host reads none:
/// offsets, then per expert its problem (m, n, k: three int32, CUTLASS's
/// GemmCoord), its A, B and D pointers, and lda, ldb, ldd (int64).
struct MoEGroupedProblems {
  size_t offsetsAt = 0, sizesAt = 0, pointersAt = 0, ldsAt = 0, bytes = 0;
};
MoEGroupedProblems moeGroupedProblems(int64_t experts);
/// Counts checked (reported as the host reports them), then problem e:
/// dW[e] [pCols, qCols] = P_e^T Q_e with A = P_e column-major (ld pCols),
/// B = Q_e row-major (ld qCols), D = dW[e] row-major (ld qCols). An empty
/// group (every group, after a bad count) is a 0 x 0 x 0 problem: the
/// caller zeroes dW first.
cudaError_t launchMoEGroupedProblems(const LaunchContext &ctx,
                                     const MoEGroupedProblems &layout,
                                     const int32_t *counts, int64_t experts,
                                     int64_t numRows, const void *p,
                                     int64_t pCols, const void *q,
                                     int64_t qCols, void *dweight,
                                     size_t elementSize, void *scratch);
/// Whether CudaMoECutlass.cu's grouped GEMM takes the weight gradient of
/// this dtype and these widths (built with CUTLASS; bf16 and f16 on tensor
/// cores, 16-byte aligned rows; f32 on CUDA cores, any width); `why` says
/// why not.
bool moeCutlassTakes(DType dtype, int64_t pCols, int64_t qCols, const void *p,
                     const void *q, const void *dweight, const char *&why);
/// The grouped GEMM over the problems launchMoEGroupedProblems wrote;
/// cudaErrorNotSupported where CUTLASS refuses it before launching (no
/// occupancy for its tile on this GPU): nothing ran.
cudaError_t launchMoECutlassWGrad(const LaunchContext &ctx, DType dtype,
                                  int64_t experts,
                                  const MoEGroupedProblems &layout,
                                  void *scratch);

/// out [tokens, hidden] = sum over the k slots, in slot order, of
/// weight * rows[position]; `weights` may be null (weight 1).
cudaError_t launchMoECombine(const LaunchContext &ctx, DType dtype,
                             const void *rows, int64_t numRows,
                             const int32_t *positions, const void *weights,
                             int64_t tokens, int64_t k, int64_t hidden,
                             void *out);
size_t moeCombineGradScratchBytes(int64_t numRows);
/// drows zeroed, then each named row written from its one (token, slot);
/// dweights (null without weights) the dot of the row and dy.
cudaError_t launchMoECombineGrad(const LaunchContext &ctx, DType dtype,
                                 const void *rows, int64_t numRows,
                                 const int32_t *positions, const void *weights,
                                 const void *dy, int64_t tokens, int64_t k,
                                 int64_t hidden, void *drows, void *dweights,
                                 void *scratch);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAMOE_H
