//===- CudaLinearLoss.h - the fused LM-head loss on cuda --------*- C++ -*-===//
//
// Private to lib/cuda. rp.linear_cross_entropy and its gradient without the
// [tokens, classes] logits, as host/HostLinearLoss.cpp defines them: rows
// (tokens) a chunk at a time, each chunk's logits hidden * weight^T computed
// by one GEMM into a [chunk, classes] buffer of the storage type (as the
// unfused matmul would store them), then
//  - forward: a row kernel writes each row's loss (f64) to a per-token
//    array, summed at the end in host/HostLoss.cpp's fixed order;
//  - backward: the row kernel turns the buffer into scale * (softmax -
//    onehot) in place, then two GEMMs: the chunk's rows of dhidden = dl *
//    weight, and dweight += dl^T * hidden, chunk after chunk on one stream
//    (in f32 scratch for 16-bit types when there is more than one chunk,
//    rounded once at the end).
//
// Three parts: the kernels (CudaLinearLoss.cu), the chunk loops
// (CudaLinearLossLoop.cpp), which call the GEMMs through LinearLossGemms,
// and the dispatch with its checks and cuBLAS (CudaLinearLossDispatch.cpp).
// The loops and kernels use no CUDA API besides launches, so
// rp-cuda-emu-tests runs them on the CPU with a plain GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDALINEARLOSS_H
#define RP_LIB_CUDA_CUDALINEARLOSS_H

#include "CudaKernels.h"

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

namespace rp::runtime::cuda {

//===----------------------------------------------------------------------===//
// Kernels (CudaLinearLoss.cu)
//===----------------------------------------------------------------------===//

/// Threads of the block that reduces one row of `classes` logits: a power
/// of two from 32 to 256, about 16 logits a thread. Part of the numerics
/// (the order of the row sums), fixed by the shape.
int rowThreads(int64_t classes);

/// One block per row r of a chunk of `n` rows starting at token `begin`:
/// rowLoss[begin + r] = the row's cross-entropy (0 on an ignored row; a
/// label out of range is reported to the error record).
cudaError_t launchLinearLossRows(const LaunchContext &ctx, DType dtype,
                                 const void *logits, const void *labels,
                                 bool labels64, int64_t ignoreIndex,
                                 int64_t begin, int64_t n, int64_t classes,
                                 double *rowLoss);

/// Bytes of the loss total's partials for `rows` tokens.
size_t linearLossPartialsBytes(int64_t rows);
/// lossSum (f32; f64 for f64) and count from the per-row losses: the
/// non-ignored rows summed in f64 in blocks of 64, the blocks in order.
cudaError_t launchLinearLossTotal(const LaunchContext &ctx, DType dtype,
                                  const double *rowLoss, const void *labels,
                                  bool labels64, int64_t ignoreIndex,
                                  int64_t rows, void *partials, void *lossSum,
                                  int64_t *count);

/// In place, one block per row of the chunk: logits become scale *
/// (softmax - onehot(label)), zeros on an ignored row. `scale` is a
/// one-element tensor of `scaleType` in device memory.
cudaError_t launchLinearLossGradRows(const LaunchContext &ctx, DType dtype,
                                     void *logits, const void *labels,
                                     bool labels64, int64_t ignoreIndex,
                                     int64_t begin, int64_t n, int64_t classes,
                                     DType scaleType, const void *scale);

/// The same rows written to `grad` instead of in place (`grad` may be
/// `logits`): the unfused cross_entropy_grad.
cudaError_t launchCrossEntropyGradRows(const LaunchContext &ctx, DType dtype,
                                       const void *logits, void *grad,
                                       const void *labels, bool labels64,
                                       int64_t ignoreIndex, int64_t begin,
                                       int64_t n, int64_t classes,
                                       DType scaleType, const void *scale);

/// out[i] (dtype, 16-bit) = the f32 accumulator rounded once.
cudaError_t launchStoreAccumulator(const LaunchContext &ctx, DType dtype,
                                   const float *acc, void *out, int64_t n);

/// `bytes` of zeros at `p` (the weight gradient of no tokens).
cudaError_t launchZero(const LaunchContext &ctx, void *p, size_t bytes);

//===----------------------------------------------------------------------===//
// The chunk loops (CudaLinearLossLoop.cpp)
//===----------------------------------------------------------------------===//

/// One GEMM as cublasGemmEx takes it: column-major C [m, n] = op(A) [m, k]
/// * op(B) [k, n] (+ C when `accumulate`), A and B of `abType`, C of
/// `cType`, products and sums in f32 (f64 for f64).
struct ColumnMajorGemm {
  bool transposeA = false, transposeB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr, *b = nullptr;
  void *c = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  DType abType = DType::f32, cType = DType::f32;
  bool accumulate = false;
};

/// The weight gradient's GEMM: row-major acc [classes, K] = dl [n,
/// classes]^T * h [n, K] (+ acc), acc of dl's dtype or f32.
ColumnMajorGemm weightGradGemm(const TensorRef &dl, const TensorRef &h,
                               bool accumulate, const TensorRef &acc);

/// The loops' GEMMs, enqueued in call order on the launches' stream:
/// cuBLAS on the device, a plain GEMM in the emulation test.
class LinearLossGemms {
public:
  virtual ~LinearLossGemms() = default;
  /// rp.matmul's out = a * op(b), one storage type, f32 arithmetic (f64 for
  /// f64): the chunk's logits (b = weight, transposed) and its dhidden.
  virtual Status matmul(const TensorRef &a, const TensorRef &b, bool transposeB,
                        const TensorRef &out) = 0;
  /// One cublasGemmEx: the weight gradient (weightGradGemm).
  virtual Status gemm(const ColumnMajorGemm &g) = 0;
};

/// One call's operands, checked (CudaLinearLossDispatch.cpp).
struct LinearLossArgs {
  TensorRef hidden, weight, labels; ///< [..., K], [classes, K], [...]
  int64_t ignoreIndex = -100, chunk = 1;
  int64_t rows = 0, k = 0, classes = 0;
};

/// host/HostLinearLoss.cpp's argument checks and messages but the labels'
/// values (which the row kernels check), in one place (Checks.h is where a
/// shared one would go), and the outputs': the loss sum and count, or the
/// two gradients and the loss scale. Fills `args` but its ignore index and
/// chunk, which the caller sets first.
Status checkLinearLoss(const char *op, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &outs, bool grad,
                       LinearLossArgs &args);

/// Where a call's scratch lies in one allocation of `bytes`.
struct LinearLossScratch {
  int64_t step = 0;         ///< Rows per chunk: the op's chunk, or all rows.
  size_t logitsAt = 0;      ///< [step, classes] of the storage type
  size_t rowLossAt = 0;     ///< forward: [rows] f64
  size_t partialsAt = 0;    ///< forward: the loss total's partials
  bool accumulator = false; ///< backward: dweight summed in f32 scratch
  size_t accumulatorAt = 0; ///< [classes, K] f32
  size_t bytes = 0;
};
LinearLossScratch linearLossScratch(const LinearLossArgs &args, bool grad);

/// The forward: lossSum (f32; f64 for f64) and count (i64), both scalars in
/// device memory.
Status linearCrossEntropyChunks(const LaunchContext &ctx,
                                LinearLossGemms &gemms,
                                const LinearLossArgs &args,
                                const LinearLossScratch &layout, void *scratch,
                                void *lossSum, int64_t *count);

/// The backward: dhidden and dweight, of the shapes and dtype of hidden and
/// weight; `scale` a one-element float tensor in device memory.
Status linearCrossEntropyGradChunks(const LaunchContext &ctx,
                                    LinearLossGemms &gemms,
                                    const LinearLossArgs &args,
                                    const LinearLossScratch &layout,
                                    void *scratch, DType scaleType,
                                    const void *scale, const TensorRef &dhidden,
                                    const TensorRef &dweight);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDALINEARLOSS_H
