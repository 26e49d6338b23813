//===- CudaLinearLoss.cu - the fused LM-head loss's row kernels -----------===//
//
// The device half of rp.linear_cross_entropy and its gradient
// (CudaLinearLoss.h), and the unfused rp.cross_entropy's (CudaNN.cu calls
// the same row kernels on the whole logits): per chunk of rows, one block per
// row reduces the row's logits (max, then the sum of exp(x - max)) and writes
// the row's loss, or rewrites the row as scale * (softmax - onehot) in place;
// at the end the per-row losses are summed in the host's fixed blocks.
//
// A chunk holds a few hundred rows of a vocabulary-wide row (151,936 for
// Qwen3), so one thread per row (the unfused cross_entropy's kernel) would
// leave the GPU idle; a block of rowThreads(classes) threads shares a row
// instead. Thread t takes the logits t, t + threads, ... in order and the
// block combines the threads' values in a fixed tree (shared memory, no
// atomics), so a row's statistics are the same bits run after run. They
// are not the host's bits: the host sums a row in orderedSum's 8 lanes,
// which only 8 threads could follow. Each element's gradient is
// crossEntropyGradRow's expression (kernels/SoftmaxGrad.h).
//
//===----------------------------------------------------------------------===//

#include "CudaLinearLoss.h"
#include "CudaLoss.cuh"

#include "rp/runtime/kernels/SoftmaxGrad.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

constexpr int kMaxRowThreads = 256;

/// NaN wins, as rowMax returns the first NaN it meets.
template <typename Acc> __device__ inline Acc maxOrNan(Acc a, Acc b) {
  if (kIsNan(a))
    return a;
  if (kIsNan(b))
    return b;
  return b > a ? b : a;
}

/// `value` of every thread combined by `combine` in a fixed tree: thread t
/// with t + s for s = threads / 2, ..., 1. Every thread gets the result.
template <typename Acc, typename Combine>
__device__ inline Acc blockReduce(Acc *shared, Acc value, Combine combine) {
  const unsigned t = threadIdx.x, threads = blockDim.x;
  shared[t] = value;
  __syncthreads();
  for (unsigned s = threads / 2; s > 0; s /= 2) {
    if (t < s)
      shared[t] = combine(shared[t], shared[t + s]);
    __syncthreads();
  }
  Acc result = shared[0];
  __syncthreads(); // Before the next reduction writes shared[0].
  return result;
}

/// The row's maximum and sum(exp(x - max)), from the block's threads.
template <typename T, typename Acc>
__device__ inline LogitsRowStats<Acc> blockRowStats(const T *x,
                                                    int64_t classes) {
  __shared__ Acc shared[kMaxRowThreads];
  Acc m = -kInfinity<Acc>();
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
    m = maxOrNan(m, load(x[i]));
  m = blockReduce(shared, m, [](Acc a, Acc b) { return maxOrNan(a, b); });
  Acc sum = Acc(0);
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
    sum += kExp(load(x[i]) - m);
  sum = blockReduce(shared, sum, [](Acc a, Acc b) { return a + b; });
  return {m, sum};
}

template <typename T, typename I>
__global__ void lossRowsKernel(LaunchContext ctx, const T *logits,
                               const I *labels, int64_t ignoreIndex,
                               int64_t begin, int64_t classes,
                               double *rowLoss) {
  using C = Compute<T>;
  const int64_t r = blockIdx.x;
  // Every thread reads the label, so the branch is the block's (a bad
  // label is reported once: the record keeps the first report).
  int64_t label = 0;
  if (!readLabel(ctx, labels, begin + r, ignoreIndex, classes, label)) {
    if (threadIdx.x == 0)
      rowLoss[begin + r] = 0.0;
    return;
  }
  const T *x = logits + r * classes;
  LogitsRowStats<C> stats = blockRowStats<T, C>(x, classes);
  if (threadIdx.x == 0)
    rowLoss[begin + r] =
        static_cast<double>(-((load(x[label]) - stats.max) - kLog(stats.sum)));
}

template <typename T, typename I>
__global__ void gradRowsKernel(LaunchContext ctx, const T *logits, T *grad,
                               const I *labels, int64_t ignoreIndex,
                               int64_t begin, int64_t classes, DType scaleType,
                               const void *scale) {
  using C = Compute<T>;
  const int64_t r = blockIdx.x;
  const T *x = logits + r * classes;
  T *dx = grad + r * classes;
  int64_t label = 0;
  if (!readLabel(ctx, labels, begin + r, ignoreIndex, classes, label)) {
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
      dx[i] = store<T>(C(0));
    return;
  }
  // The statistics read the whole row; blockReduce's barriers put every
  // read before the first write below (dx may be x: the fused loss
  // rewrites its chunk in place).
  LogitsRowStats<C> stats = blockRowStats<T, C>(x, classes);
  const C s = static_cast<C>(readScalar(scaleType, scale));
  for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) {
    C p = kExp(load(x[i]) - stats.max) / stats.sum;
    dx[i] = store<T>(s * (i == label ? p - C(1) : p));
  }
}

template <typename I>
__global__ void lossPartialsKernel(const double *rowLoss, const I *labels,
                                   int64_t ignoreIndex, int64_t rows,
                                   LossPartial *partials, int64_t chunks) {
  RP_GRID_LOOP(chunk, chunks) {
    LossPartial p{0.0, 0};
    int64_t end = (chunk + 1) * kLossRowGrain;
    for (int64_t row = chunk * kLossRowGrain; row < end && row < rows; ++row) {
      if (int64_t(labels[row]) == ignoreIndex)
        continue;
      p.sum += rowLoss[row];
      ++p.count;
    }
    partials[chunk] = p;
  }
}

template <typename T>
__global__ void storeAccumulatorKernel(const float *acc, T *out, int64_t n) {
  RP_GRID_LOOP(i, n) { out[i] = store<T>(acc[i]); }
}

/// Row blocks per launch: the grid's x dimension is below 2^31.
constexpr int64_t kMaxRowBlocks = int64_t(1) << 30;

} // namespace

int rowThreads(int64_t classes) {
  int threads = 32;
  while (threads < kMaxRowThreads && int64_t(threads) * 16 < classes)
    threads *= 2;
  return threads;
}

cudaError_t launchLinearLossRows(const LaunchContext &ctx, DType dtype,
                                 const void *logits, const void *labels,
                                 bool labels64, int64_t ignoreIndex,
                                 int64_t begin, int64_t n, int64_t classes,
                                 double *rowLoss) {
  const int threads = rowThreads(classes);
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = static_cast<const T *>(logits);
    for (int64_t r = 0; r < n; r += kMaxRowBlocks) {
      unsigned blocks = unsigned(n - r < kMaxRowBlocks ? n - r : kMaxRowBlocks);
      if (labels64)
        lossRowsKernel<<<blocks, threads, 0, ctx.stream>>>(
            ctx, x + r * classes, static_cast<const int64_t *>(labels),
            ignoreIndex, begin + r, classes, rowLoss);
      else
        lossRowsKernel<<<blocks, threads, 0, ctx.stream>>>(
            ctx, x + r * classes, static_cast<const int32_t *>(labels),
            ignoreIndex, begin + r, classes, rowLoss);
    }
  });
  return lastLaunchError();
}

size_t linearLossPartialsBytes(int64_t rows) {
  return sizeof(LossPartial) *
         size_t((rows + kLossRowGrain - 1) / kLossRowGrain + 1);
}

cudaError_t launchLinearLossTotal(const LaunchContext &ctx, DType dtype,
                                  const double *rowLoss, const void *labels,
                                  bool labels64, int64_t ignoreIndex,
                                  int64_t rows, void *partials, void *lossSum,
                                  int64_t *count) {
  const int64_t chunks = (rows + kLossRowGrain - 1) / kLossRowGrain;
  auto *p = static_cast<LossPartial *>(partials);
  if (chunks > 0) {
    if (labels64)
      lossPartialsKernel<<<blocksFor(chunks), kThreadsPerBlock, 0,
                           ctx.stream>>>(rowLoss,
                                         static_cast<const int64_t *>(labels),
                                         ignoreIndex, rows, p, chunks);
    else
      lossPartialsKernel<<<blocksFor(chunks), kThreadsPerBlock, 0,
                           ctx.stream>>>(rowLoss,
                                         static_cast<const int32_t *>(labels),
                                         ignoreIndex, rows, p, chunks);
    if (cudaError_t error = lastLaunchError(); error != cudaSuccess)
      return error;
  }
  if (dtype == DType::f64)
    lossTotalKernel<<<1, 1, 0, ctx.stream>>>(
        p, chunks, static_cast<double *>(lossSum), count);
  else
    lossTotalKernel<<<1, 1, 0, ctx.stream>>>(
        p, chunks, static_cast<float *>(lossSum), count);
  return lastLaunchError();
}

cudaError_t launchLinearLossGradRows(const LaunchContext &ctx, DType dtype,
                                     void *logits, const void *labels,
                                     bool labels64, int64_t ignoreIndex,
                                     int64_t begin, int64_t n, int64_t classes,
                                     DType scaleType, const void *scale) {
  return launchCrossEntropyGradRows(ctx, dtype, logits, logits, labels,
                                    labels64, ignoreIndex, begin, n, classes,
                                    scaleType, scale);
}

cudaError_t launchCrossEntropyGradRows(const LaunchContext &ctx, DType dtype,
                                       const void *logits, void *grad,
                                       const void *labels, bool labels64,
                                       int64_t ignoreIndex, int64_t begin,
                                       int64_t n, int64_t classes,
                                       DType scaleType, const void *scale) {
  const int threads = rowThreads(classes);
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = static_cast<const T *>(logits);
    T *dx = static_cast<T *>(grad);
    for (int64_t r = 0; r < n; r += kMaxRowBlocks) {
      unsigned blocks = unsigned(n - r < kMaxRowBlocks ? n - r : kMaxRowBlocks);
      if (labels64)
        gradRowsKernel<<<blocks, threads, 0, ctx.stream>>>(
            ctx, x + r * classes, dx + r * classes,
            static_cast<const int64_t *>(labels), ignoreIndex, begin + r,
            classes, scaleType, scale);
      else
        gradRowsKernel<<<blocks, threads, 0, ctx.stream>>>(
            ctx, x + r * classes, dx + r * classes,
            static_cast<const int32_t *>(labels), ignoreIndex, begin + r,
            classes, scaleType, scale);
    }
  });
  return lastLaunchError();
}

cudaError_t launchStoreAccumulator(const LaunchContext &ctx, DType dtype,
                                   const float *acc, void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  if (dtype == DType::bf16)
    storeAccumulatorKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        acc, static_cast<bf16 *>(out), n);
  else if (dtype == DType::f16)
    storeAccumulatorKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        acc, static_cast<f16 *>(out), n);
  else
    return cudaErrorInvalidValue; // Only 16-bit types use an accumulator.
  return lastLaunchError();
}

cudaError_t launchZero(const LaunchContext &ctx, void *p, size_t bytes) {
  return bytes ? cudaMemsetAsync(p, 0, bytes, ctx.stream) : cudaSuccess;
}

} // namespace rp::runtime::cuda
