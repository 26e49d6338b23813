//===- CudaKernels.h - the cuda device's kernel launchers -------*- C++ -*-===//
//
// Private to lib/cuda: the boundary between the dispatch (CudaDispatch.cpp,
// host C++ that checks arguments with the host kernels' own checks) and the
// .cu files that hold the kernels. Everything crossing it is plain data:
// device pointers, element counts and index maps, so that nvcc sees none of
// the runtime's host machinery.
//
// Every launcher enqueues on `ctx.stream` and returns the launch's error
// (cudaGetLastError); errors the kernels find in the data (an index or a
// label out of range) go to the device's KernelErrorRecord and surface at
// the next synchronize (CudaDevice.cpp).
//
// The per-element and per-row math is the RP_HD code of
// include/rp/runtime/kernels/, the same functions the host kernels run; a
// kernel computes each output element (or row) in one thread in the very
// order the host kernel does, so reductions have a fixed order and no float
// is ever combined with an atomic.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDAKERNELS_H
#define RP_LIB_CUDA_CUDAKERNELS_H

#include "rp/runtime/Tensor.h"
#include "rp/runtime/kernels/Indexing.h"
#include "rp/runtime/kernels/Philox.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace rp::runtime::cuda {

/// What a kernel reports about its data, written once (the first report
/// wins) into device memory that the compute queue's synchronize reads.
struct KernelErrorRecord {
  int32_t code; ///< KernelErrorCode; 0: no error.
  int32_t pad;
  int64_t site;     ///< (program << 32) | call, from the launch.
  int64_t position; ///< The element whose value is wrong.
  int64_t value;
  int64_t limit; ///< Valid values are [0, limit).
};

enum KernelErrorCode : int32_t {
  kNoKernelError = 0,
  kIndexOutOfRange = 1,    ///< gather, gather_grad
  kLabelOutOfRange = 2,    ///< cross_entropy, cross_entropy_grad
  kDivisionByZero = 3,     ///< integer div
  kExpertOutOfRange = 4,   ///< moe_route_grad, moe_dispatch
  kPositionOutOfRange = 5, ///< moe_combine, moe_combine_grad
  kDuplicatePosition = 6,  ///< moe_combine_grad
  kGroupsOverflow = 7,     ///< the moe grouped matmuls' counts
};

/// Where and how a launcher enqueues.
struct LaunchContext {
  cudaStream_t stream;
  KernelErrorRecord *errors; ///< The device's record.
  int64_t site;
};

/// Up to three operands read at the indices of a contiguous output, each
/// through its own stride per dimension (kernels/Checks.h's StridedPlan,
/// dimensions already merged).
struct ElementMap {
  int rank = 1;
  int numOperands = 0;
  int64_t shape[kernels::kMaxRank];
  int64_t strides[3][kernels::kMaxRank];
};

/// Dimensions grouped for reduce and its gradient: the output's (kept)
/// dimensions and the reduced ones, each with its stride in the input, in
/// row-major order.
struct ReduceMap {
  int numKept = 0, numReduced = 0;
  int64_t keptSize[kernels::kMaxRank], keptStride[kernels::kMaxRank];
  int64_t reducedSize[kernels::kMaxRank], reducedStride[kernels::kMaxRank];
  int64_t reducedCount = 1;
};

/// Kinds as kernels/Kinds.h numbers them (BinaryKind, CmpKind, UnaryKind,
/// ReduceKind), passed as ints in that order.
cudaError_t launchBinary(const LaunchContext &ctx, DType dtype, int kind,
                         const ElementMap &map, const void *a, const void *b,
                         void *out, int64_t n);
cudaError_t launchCompare(const LaunchContext &ctx, DType dtype, int kind,
                          const ElementMap &map, const void *a, const void *b,
                          void *out, int64_t n);
cudaError_t launchWhere(const LaunchContext &ctx, size_t elementSize,
                        const ElementMap &map, const void *cond,
                        const void *onTrue, const void *onFalse, void *out,
                        int64_t n);
cudaError_t launchUnary(const LaunchContext &ctx, DType dtype, int kind,
                        const void *x, void *out, int64_t n);
/// matmul's epilogue after the GEMM (CudaEpilogue.cu): x [rows, n] plus
/// bias [n] (nullable: already added) into pre (nullable), then the
/// activation of `epilogue` (kernels::MatmulEpilogue) into out; x may be
/// pre or out.
cudaError_t launchBiasActivation(const LaunchContext &ctx, DType dtype,
                                 int epilogue, const void *x, const void *bias,
                                 void *pre, void *out, int64_t rows, int64_t n);
/// The gelu-gradient epilogues' pass after the GEMM (CudaEpilogue.cu): out
/// = dy times gelu's derivative at pre (erf or tanh form by `epilogue`,
/// dGelu or dGeluTanh), unary_grad's functor and rounding; dy may be out.
cudaError_t launchGeluGradEpilogue(const LaunchContext &ctx, DType dtype,
                                   int epilogue, const void *pre,
                                   const void *dy, void *out, int64_t n);
/// Dropout with kernels/Philox.h's counter-based mask (floats), its key
/// the dropout_key row (seed, step, microbatch, on) at device `row`.
cudaError_t launchDropout(const LaunchContext &ctx, DType dtype,
                          const int64_t *row, uint32_t tensor, float p,
                          const void *x, void *out, int64_t n);
cudaError_t launchUnaryGrad(const LaunchContext &ctx, DType dtype, int kind,
                            const void *x, const void *dy, void *dx, int64_t n);
cudaError_t launchCast(const LaunchContext &ctx, DType from, DType to,
                       const void *x, void *out, int64_t n);

/// out[i] = in[map offset of i] for elements of `elementSize` bytes:
/// transpose, slice, broadcast.
cudaError_t launchStridedCopy(const LaunchContext &ctx, size_t elementSize,
                              const ElementMap &map, const void *in, void *out,
                              int64_t n);
/// out[map offset of i] = in[i]: slice_grad's write into the zeroed dx.
cudaError_t launchStridedScatter(const LaunchContext &ctx, size_t elementSize,
                                 const ElementMap &map, const void *in,
                                 void *out, int64_t n);
/// x [outer, axisSize, inner] gathered at `indices` (i32 or i64, negative
/// from the end) into out [outer, numIndices, inner].
cudaError_t launchGather(const LaunchContext &ctx, size_t elementSize,
                         const void *x, const void *indices, bool indices64,
                         int64_t outer, int64_t axisSize, int64_t numIndices,
                         int64_t inner, void *out);
/// Bytes of scratch launchGatherGrad needs.
size_t gatherGradScratchBytes(int64_t axisSize, int64_t numIndices);
cudaError_t launchGatherGrad(const LaunchContext &ctx, DType dtype,
                             const void *indices, bool indices64, int64_t outer,
                             int64_t axisSize, int64_t numIndices,
                             int64_t inner, const void *dy, void *dx,
                             void *scratch);

/// Scratch of launchReduce: the partials of a two-level reduce, 0 when the
/// reduce is one level (many outputs, or few elements each).
size_t reduceScratchBytes(const ReduceMap &map, int64_t numOut);
cudaError_t launchReduce(const LaunchContext &ctx, DType dtype, int kind,
                         const ReduceMap &map, const void *x, void *out,
                         int64_t numOut, void *scratch);
cudaError_t launchExtremumGrad(const LaunchContext &ctx, DType dtype,
                               bool isMax, const ReduceMap &map, const void *x,
                               const void *dy, void *dx, int64_t numOut);
/// Rows of `n` elements `inner` apart: (outer * inner) rows.
cudaError_t launchSoftmax(const LaunchContext &ctx, DType dtype, bool log,
                          const void *x, void *out, int64_t outer, int64_t n,
                          int64_t inner);
cudaError_t launchSoftmaxGrad(const LaunchContext &ctx, DType dtype, bool log,
                              const void *y, const void *dy, void *dx,
                              int64_t outer, int64_t n, int64_t inner);
/// Contiguous rows of n; `bias` only for layer norm (`centered`).
cudaError_t launchNorm(const LaunchContext &ctx, DType dtype, bool centered,
                       const void *x, const void *scale, const void *bias,
                       void *out, int64_t rows, int64_t n, double epsilon);
size_t normGradScratchBytes(DType dtype, int64_t rows, int64_t n);
cudaError_t launchNormGrad(const LaunchContext &ctx, DType dtype, bool centered,
                           const void *x, const void *scale, const void *dy,
                           void *dx, void *dscale, void *dbias, int64_t rows,
                           int64_t n, double epsilon, void *scratch);

size_t crossEntropyScratchBytes(int64_t rows);
/// lossSum is f32 (f64 for f64 logits), count i64.
cudaError_t launchCrossEntropy(const LaunchContext &ctx, DType dtype,
                               const void *logits, const void *labels,
                               bool labels64, int64_t ignoreIndex, int64_t rows,
                               int64_t classes, void *lossSum, void *count,
                               void *scratch);
/// scale = 1-element tensor of `scaleType` in device memory.
cudaError_t launchCrossEntropyGrad(const LaunchContext &ctx, DType dtype,
                                   const void *logits, const void *labels,
                                   bool labels64, int64_t ignoreIndex,
                                   int64_t rows, int64_t classes,
                                   DType scaleType, const void *scale,
                                   void *dlogits);

/// Shapes as kernels/Checks.h's AttentionDims.
struct AttentionShape {
  int64_t b, h, s, d, hkv, t, dv;
  int64_t maskStrides[4];
  /// 0 none, 1 boolean (i1), 2 additive (q's dtype), 3 segments (i64
  /// [b, t], kernels::MaskKind::segments).
  int maskKind;
  bool causal; ///< bottom-right: query i is at position i + t - s
  double scale;
  int64_t window = 0; ///< sliding window (causal only); 0 for none
  double softcap = 0; ///< cap * tanh(scaled score / cap); 0 for none
  /// GPT-OSS's attention sinks [h] (q's dtype) and attention_grad's
  /// gradient of them [h]; null for none.
  const void *sinks = nullptr;
  void *sinksGrad = nullptr;
};
/// The widest head (d and dv) the attention kernels keep per thread.
constexpr int64_t kMaxHeadDim = 256;
cudaError_t launchAttention(const LaunchContext &ctx, DType dtype,
                            const AttentionShape &shape, const void *q,
                            const void *k, const void *v, const void *mask,
                            void *out);
size_t attentionGradScratchBytes(DType dtype, const AttentionShape &shape);
cudaError_t launchAttentionGrad(const LaunchContext &ctx, DType dtype,
                                const AttentionShape &shape, const void *q,
                                const void *k, const void *v, const void *mask,
                                const void *dy, void *dq, void *dk, void *dv,
                                void *scratch);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAKERNELS_H
