//===- CudaNN.cu - reductions, softmax and the loss on the GPU ------------===//
//
// Row kernels: one thread computes one output element (reduce with few
// elements per output, extremum_grad) or one whole strided row (softmax
// over a dimension other than the last; the last is below) with the
// row functions of kernels/Softmax.h and SoftmaxGrad.h, in the order the
// host kernels use (host/HostNN.cpp). Nothing is combined with a float
// atomic, so every run gives the same bits.
//
// The norms are in CudaNorms.cu; cross_entropy runs the fused loss's
// block-per-row kernels (CudaLinearLoss.cu), its total in the host's fixed
// blocks of rows.
//
// A reduce with few outputs and many elements each (a bias gradient,
// [2048, 1024] -> [1024]) is two-level, so that it fills the GPU: each
// output's elements are split into chunks fixed by the shape, a thread
// folds one chunk of one output into a partial in row-major order, then a
// thread per output folds its partials in chunk order (reduceChunks).
//
// softmax and log_softmax over the last dimension, and their gradients,
// give each row 8 threads, one per lane of orderedSum (kernels/Numeric.h),
// as the norms do (CudaNorms.cu): a lane's thread folds its elements in
// the host lane's order, the lanes meet in orderedSum's tree, and the
// eight threads write every eighth element with the host's expression, so
// the outputs are bitwise the host's. Over another dimension (rows strided
// by the inner size), one thread per row, whose neighbours read
// neighbouring columns.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaLinearLoss.h"
#include "CudaRowLanes.cuh"
#include "rp/contract/ReduceChunks.h"

#include "rp/runtime/kernels/Elementwise.h"
#include "rp/runtime/kernels/ElementwiseGrad.h"
#include "rp/runtime/kernels/Softmax.h"
#include "rp/runtime/kernels/SoftmaxGrad.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

/// Steps `offset` to the next reduced index in row-major order.
__device__ inline void nextReduced(const ReduceMap &map, int64_t *index,
                                   int64_t &offset) {
  for (int k = map.numReduced; k-- > 0;) {
    offset += map.reducedStride[k];
    if (++index[k] < map.reducedSize[k])
      return;
    offset -= index[k] * map.reducedStride[k];
    index[k] = 0;
  }
}

/// Folds the reduced elements of each output from the first, in row-major
/// order of the reduced indices (host/HostNN.cpp's order).
template <typename T, typename Combine>
__global__ void reduceKernel(ReduceMap map, bool mean, const T *x, T *out,
                             int64_t numOut, Combine combine) {
  using C = Compute<T>;
  RP_GRID_LOOP(o, numOut) {
    if (map.reducedCount == 0) {
      C value = C(0);
      if constexpr (std::is_floating_point_v<C>)
        if (mean)
          value = value / value; // 0 / 0: NaN, as the host's mean of nothing.
      out[o] = store<T>(value);
      continue;
    }
    int64_t index[kMaxRank] = {};
    const int64_t base = keptOffset(map, o);
    int64_t offset = 0;
    C acc = load(x[base]);
    for (int64_t r = 1; r < map.reducedCount; ++r) {
      nextReduced(map, index, offset);
      acc = combine(acc, load(x[base + offset]));
    }
    if constexpr (std::is_floating_point_v<C>)
      if (mean)
        acc /= static_cast<C>(map.reducedCount);
    out[o] = store<T>(acc);
  }
}

/// The two-level reduce's split: the reduced elements of each output in
/// `chunks` runs of `length` (the last one shorter), in row-major order.
/// It depends on the shape alone, so the order of the sums, hence the
/// bits, is the same on every GPU.
struct ReduceChunks {
  int64_t chunks = 1, length = 0;
};

ReduceChunks reduceChunks(const ReduceMap &map, int64_t numOut) {
  ReduceChunks split;
  split.length = map.reducedCount;
  // rp/contract/ReduceChunks.h: the compiler counts the launches by it.
  int64_t chunks = ::rp::plan::reduceChunkTarget(map.reducedCount, numOut);
  if (chunks < 2)
    return split;
  split.length = (map.reducedCount + chunks - 1) / chunks;
  split.chunks = (map.reducedCount + split.length - 1) / split.length;
  return split;
}

/// Level one: partial[c * numOut + o] folds the reduced elements of output
/// o in chunk c, in row-major order (consecutive threads take consecutive
/// outputs, so a reduce over leading dimensions reads whole rows).
template <typename T, typename Combine>
__global__ void reducePartialKernel(ReduceMap map, ReduceChunks split,
                                    const T *x, Compute<T> *partial,
                                    int64_t numOut, Combine combine) {
  using C = Compute<T>;
  RP_GRID_LOOP(item, numOut * split.chunks) {
    const int64_t o = item % numOut, chunk = item / numOut;
    const int64_t first = chunk * split.length;
    const int64_t last = first + split.length < map.reducedCount
                             ? first + split.length
                             : map.reducedCount;
    // The reduced index of `first`, digit by digit, for nextReduced.
    int64_t index[kMaxRank] = {};
    int64_t offset = 0;
    for (int64_t k = map.numReduced, rest = first; k-- > 0;) {
      index[k] = rest % map.reducedSize[k];
      offset += index[k] * map.reducedStride[k];
      rest /= map.reducedSize[k];
    }
    const int64_t base = keptOffset(map, o);
    C acc = load(x[base + offset]);
    for (int64_t r = first + 1; r < last; ++r) {
      nextReduced(map, index, offset);
      acc = combine(acc, load(x[base + offset]));
    }
    partial[item] = acc;
  }
}

/// Level two: each output folds its chunks' partials in chunk order.
template <typename T, typename Combine>
__global__ void reduceChunksKernel(ReduceMap map, ReduceChunks split, bool mean,
                                   const Compute<T> *partial, T *out,
                                   int64_t numOut, Combine combine) {
  using C = Compute<T>;
  RP_GRID_LOOP(o, numOut) {
    C acc = partial[o];
    for (int64_t c = 1; c < split.chunks; ++c)
      acc = combine(acc, partial[c * numOut + o]);
    if constexpr (std::is_floating_point_v<C>)
      if (mean)
        acc /= static_cast<C>(map.reducedCount);
    out[o] = store<T>(acc);
  }
}

template <typename T>
__global__ void extremumGradKernel(ReduceMap map, bool isMax, const T *x,
                                   const T *dy, T *dx, int64_t numOut) {
  using C = Compute<T>;
  RP_GRID_LOOP(o, numOut) {
    int64_t index[kMaxRank] = {};
    const int64_t base = keptOffset(map, o);
    int64_t offset = 0, best = base;
    C acc = load(x[base]);
    for (int64_t r = 0; r < map.reducedCount; ++r) {
      int64_t at = base + offset;
      dx[at] = store<T>(C(0));
      C value = load(x[at]);
      if (!extremumPicksLhs(isMax, acc, value)) {
        acc = value;
        best = at;
      }
      nextReduced(map, index, offset);
    }
    dx[best] = dy[o];
  }
}

/// Threads per softmax block: kLaneRows rows of kRowLanes (CudaRowLanes.cuh).
constexpr int kLaneThreads = 128;
constexpr int kLaneRows = kLaneThreads / kRowLanes;

/// rowMax (kernels/Softmax.h) by the row's lanes: a maximum is exact in any
/// order; a NaN anywhere makes it NaN, as on the host.
template <typename T, typename Acc>
__device__ Acc laneMax(Acc *lanes, int lane, bool active, const T *x,
                       int64_t n) {
  Acc m = -kInfinity<Acc>();
  if (active)
    for (int64_t i = lane; i < n; i += kRowLanes) {
      Acc v = load(x[i]);
      if (kIsNan(v)) {
        m = v;
        break;
      }
      if (v > m)
        m = v;
    }
  lanes[lane] = m;
  __syncthreads();
  Acc best = -kInfinity<Acc>();
  for (int l = 0; l < kRowLanes; ++l) {
    Acc v = lanes[l];
    if (kIsNan(v)) {
      best = v;
      break;
    }
    if (v > best)
      best = v;
  }
  __syncthreads();
  return best;
}

/// The lane kernels' row loop: kLaneRows contiguous rows of n a block, each
/// on its kRowLanes lanes, `f(lanes, lane, active, base)` per row (an
/// inactive lane's row starts at 0: read, never written). The loop's bounds
/// are the block's, so all its threads meet at f's barriers.
template <typename C, typename F>
__device__ void forEachLaneRow(int64_t rows, int64_t n, F f) {
  __shared__ C shared[kLaneThreads];
  const int lane = int(threadIdx.x) % kRowLanes;
  C *lanes = shared + (int(threadIdx.x) - lane);
  for (int64_t first = int64_t(blockIdx.x) * kLaneRows; first < rows;
       first += int64_t(gridDim.x) * kLaneRows) {
    const int64_t row = first + int64_t(threadIdx.x) / kRowLanes;
    const bool active = row < rows;
    f(lanes, lane, active, (active ? row : 0) * n);
  }
}

/// softmaxRow / logSoftmaxRow (kernels/Softmax.h) over contiguous rows.
template <typename T>
__global__ void softmaxLanesKernel(bool log, const T *x, T *y, int64_t rows,
                                   int64_t n) {
  using C = Compute<T>;
  forEachLaneRow<C>(
      rows, n, [&](C *lanes, int lane, bool active, int64_t base) {
        const T *xr = x + base;
        T *yr = y + base;
        const C m = laneMax<T, C>(lanes, lane, active, xr, n);
        if (!log && std::is_same_v<T, C>) {
          // As the host: exp(x - m) written once, summed from the output.
          C sum = rowSum<C>(lanes, lane, active, n, [&](int64_t i) {
            C e = kExp(load(xr[i]) - m);
            yr[i] = store<T>(e);
            return load(yr[i]);
          });
          if (active)
            for (int64_t i = lane; i < n; i += kRowLanes)
              yr[i] = store<T>(load(yr[i]) / sum);
          return;
        }
        C sum = rowSum<C>(lanes, lane, active, n,
                          [&](int64_t i) { return kExp(load(xr[i]) - m); });
        if (!active)
          return;
        if (log) {
          C logSum = kLog(sum);
          for (int64_t i = lane; i < n; i += kRowLanes)
            yr[i] = store<T>((load(xr[i]) - m) - logSum);
        } else {
          for (int64_t i = lane; i < n; i += kRowLanes)
            yr[i] = store<T>(kExp(load(xr[i]) - m) / sum);
        }
      });
}

/// softmaxGradRow / logSoftmaxGradRow (kernels/SoftmaxGrad.h) over
/// contiguous rows.
template <typename T>
__global__ void softmaxGradLanesKernel(bool log, const T *y, const T *dy, T *dx,
                                       int64_t rows, int64_t n) {
  using C = Compute<T>;
  forEachLaneRow<C>(
      rows, n, [&](C *lanes, int lane, bool active, int64_t base) {
        const T *yr = y + base, *dyr = dy + base;
        T *dxr = dx + base;
        if (log) {
          C sum = rowSum<C>(lanes, lane, active, n,
                            [&](int64_t i) { return load(dyr[i]); });
          if (active)
            for (int64_t i = lane; i < n; i += kRowLanes)
              dxr[i] = store<T>(load(dyr[i]) - kExp(load(yr[i])) * sum);
        } else {
          C dot = rowSum<C>(lanes, lane, active, n, [&](int64_t i) {
            return load(yr[i]) * load(dyr[i]);
          });
          if (active)
            for (int64_t i = lane; i < n; i += kRowLanes)
              dxr[i] = store<T>(load(yr[i]) * (load(dyr[i]) - dot));
        }
      });
}

template <typename T>
__global__ void softmaxKernel(bool log, const T *x, T *y, int64_t rows,
                              int64_t n, int64_t inner) {
  RP_GRID_LOOP(row, rows) {
    int64_t base = (row / inner) * n * inner + row % inner;
    if (log)
      logSoftmaxRow(x + base, y + base, n, inner);
    else
      softmaxRow(x + base, y + base, n, inner);
  }
}

template <typename T>
__global__ void softmaxGradKernel(bool log, const T *y, const T *dy, T *dx,
                                  int64_t rows, int64_t n, int64_t inner) {
  RP_GRID_LOOP(row, rows) {
    int64_t base = (row / inner) * n * inner + row % inner;
    if (log)
      logSoftmaxGradRow(y + base, dy + base, dx + base, n, inner);
    else
      softmaxGradRow(y + base, dy + base, dx + base, n, inner);
  }
}

} // namespace

size_t reduceScratchBytes(const ReduceMap &map, int64_t numOut) {
  ReduceChunks split = reduceChunks(map, numOut);
  // Compute types are at most 8 bytes (f64, i64).
  return split.chunks > 1 ? size_t(split.chunks * numOut) * 8 : 0;
}

cudaError_t launchReduce(const LaunchContext &ctx, DType dtype, int kind,
                         const ReduceMap &map, const void *x, void *out,
                         int64_t numOut, void *scratch) {
  if (numOut == 0)
    return cudaSuccess;
  const ReduceChunks split = reduceChunks(map, numOut);
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Bool8>) {
      const T *in = static_cast<const T *>(x);
      T *y = static_cast<T *>(out);
      auto run = [&](bool mean, auto combine) {
        if (split.chunks == 1) {
          reduceKernel<<<blocksFor(numOut), kThreadsPerBlock, 0, ctx.stream>>>(
              map, mean, in, y, numOut, combine);
          return;
        }
        auto *partial = static_cast<Compute<T> *>(scratch);
        reducePartialKernel<<<blocksFor(numOut * split.chunks),
                              kThreadsPerBlock, 0, ctx.stream>>>(
            map, split, in, partial, numOut, combine);
        reduceChunksKernel<<<blocksFor(numOut), kThreadsPerBlock, 0,
                             ctx.stream>>>(map, split, mean, partial, y, numOut,
                                           combine);
      };
      // ReduceKind: sum, mean, max, min.
      if (kind == 0 || kind == 1)
        run(kind == 1, AddOp{});
      else if (kind == 2)
        run(false, MaxOp{});
      else
        run(false, MinOp{});
    }
  });
  return lastLaunchError();
}

cudaError_t launchExtremumGrad(const LaunchContext &ctx, DType dtype,
                               bool isMax, const ReduceMap &map, const void *x,
                               const void *dy, void *dx, int64_t numOut) {
  if (numOut == 0 || map.reducedCount == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    extremumGradKernel<<<blocksFor(numOut), kThreadsPerBlock, 0, ctx.stream>>>(
        map, isMax, static_cast<const T *>(x), static_cast<const T *>(dy),
        static_cast<T *>(dx), numOut);
  });
  return lastLaunchError();
}

cudaError_t launchSoftmax(const LaunchContext &ctx, DType dtype, bool log,
                          const void *x, void *out, int64_t outer, int64_t n,
                          int64_t inner) {
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1)
      softmaxLanesKernel<<<rowLaneBlocks(rows, kLaneRows), kLaneThreads, 0,
                           ctx.stream>>>(log, static_cast<const T *>(x),
                                         static_cast<T *>(out), rows, n);
    else
      softmaxKernel<<<blocksFor(rows), kThreadsPerBlock, 0, ctx.stream>>>(
          log, static_cast<const T *>(x), static_cast<T *>(out), rows, n,
          inner);
  });
  return lastLaunchError();
}

cudaError_t launchSoftmaxGrad(const LaunchContext &ctx, DType dtype, bool log,
                              const void *y, const void *dy, void *dx,
                              int64_t outer, int64_t n, int64_t inner) {
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1)
      softmaxGradLanesKernel<<<rowLaneBlocks(rows, kLaneRows), kLaneThreads, 0,
                               ctx.stream>>>(log, static_cast<const T *>(y),
                                             static_cast<const T *>(dy),
                                             static_cast<T *>(dx), rows, n);
    else
      softmaxGradKernel<<<blocksFor(rows), kThreadsPerBlock, 0, ctx.stream>>>(
          log, static_cast<const T *>(y), static_cast<const T *>(dy),
          static_cast<T *>(dx), rows, n, inner);
  });
  return lastLaunchError();
}

// The unfused loss runs the fused loss's row kernels (CudaLinearLoss.cu) on
// the whole logits: a block per row, the per-row losses summed in the host's
// fixed blocks. One thread per row left a [2048, 4096] loss at 55 ms on an
// H200 (3,000x the row kernels).
size_t crossEntropyScratchBytes(int64_t rows) {
  return sizeof(double) * size_t(rows) + linearLossPartialsBytes(rows);
}

cudaError_t launchCrossEntropy(const LaunchContext &ctx, DType dtype,
                               const void *logits, const void *labels,
                               bool labels64, int64_t ignoreIndex, int64_t rows,
                               int64_t classes, void *lossSum, void *count,
                               void *scratch) {
  auto *rowLoss = static_cast<double *>(scratch);
  if (cudaError_t error =
          launchLinearLossRows(ctx, dtype, logits, labels, labels64,
                               ignoreIndex, 0, rows, classes, rowLoss);
      error != cudaSuccess)
    return error;
  return launchLinearLossTotal(ctx, dtype, rowLoss, labels, labels64,
                               ignoreIndex, rows, rowLoss + rows, lossSum,
                               static_cast<int64_t *>(count));
}

cudaError_t launchCrossEntropyGrad(const LaunchContext &ctx, DType dtype,
                                   const void *logits, const void *labels,
                                   bool labels64, int64_t ignoreIndex,
                                   int64_t rows, int64_t classes,
                                   DType scaleType, const void *scale,
                                   void *dlogits) {
  if (rows == 0)
    return cudaSuccess;
  return launchCrossEntropyGradRows(ctx, dtype, logits, dlogits, labels,
                                    labels64, ignoreIndex, 0, rows, classes,
                                    scaleType, scale);
}

} // namespace rp::runtime::cuda
