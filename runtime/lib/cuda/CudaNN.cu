//===- CudaNN.cu - reductions, softmax, norms and the loss on the GPU -----===//
//
// Row kernels: one thread computes one output element (reduce with few
// elements per output, extremum_grad) or one whole row (softmax,
// cross-entropy) with the row functions of kernels/Softmax.h and
// SoftmaxGrad.h, in the order the host kernels use (host/HostNN.cpp,
// HostLoss.cpp). Sums across rows (the norms' scale and bias gradients, the
// loss) use the host's fixed blocks: partials per block in row order, then
// the partials in block order. Nothing is combined with a float atomic, so
// every run gives the same bits.
//
// The norms give each row 8 threads, one per lane of orderedSum
// (kernels/Numeric.h): a lane's thread folds its elements in the host
// lane's order and the lanes meet in shared memory in orderedSum's tree,
// so the norms are bitwise the host's (Norms.h, NormsGrad.h) with 8 times
// the threads and rows read by neighbouring threads, not a row apart.
//
// A reduce with few outputs and many elements each (a bias gradient,
// [2048, 1024] -> [1024]) is two-level, so that it fills the GPU: each
// output's elements are split into chunks fixed by the shape, a thread
// folds one chunk of one output into a partial in row-major order, then a
// thread per output folds its partials in chunk order (reduceChunks).
//
// One thread per row (softmax, cross-entropy) is the simple, exact form; a
// warp per row would be faster on long rows but would sum in another order
// than the host.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaLoss.cuh"

#include "rp/runtime/kernels/Elementwise.h"
#include "rp/runtime/kernels/ElementwiseGrad.h"
#include "rp/runtime/kernels/Norms.h"
#include "rp/runtime/kernels/NormsGrad.h"
#include "rp/runtime/kernels/Softmax.h"
#include "rp/runtime/kernels/SoftmaxGrad.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

/// host/HostGradientsNN.cpp's kParamRowBlock: rows summed into one partial
/// of the scale and bias gradients. Part of the numerics.
constexpr int64_t kParamRowBlock = 128;

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

/// Outputs times chunks aimed at: enough threads to fill a GPU.
constexpr int64_t kReduceThreads = int64_t(1) << 17;
/// Elements of a chunk at least, and chunks of an output at most (the
/// second level is one thread per output over its chunks).
constexpr int64_t kReduceMinChunk = 32, kReduceMaxChunks = 1024;

ReduceChunks reduceChunks(const ReduceMap &map, int64_t numOut) {
  ReduceChunks split;
  split.length = map.reducedCount;
  if (numOut <= 0 || numOut >= kReduceThreads ||
      map.reducedCount < 2 * kReduceMinChunk)
    return split;
  int64_t chunks = (kReduceThreads + numOut - 1) / numOut;
  int64_t most = map.reducedCount / kReduceMinChunk;
  chunks = chunks < most ? chunks : most;
  chunks = chunks < kReduceMaxChunks ? chunks : kReduceMaxChunks;
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

/// Threads that normalize one row: orderedSum's lanes. Thread l of a row
/// folds elements l, l + kRowLanes, ... in order, as the host's lane l does,
/// and the lanes meet in orderedSum's tree, so a row's sums have the host's
/// bits (and every element its host value).
constexpr int kRowLanes = kernels::kSumLanes;
/// A norm block: kNormRows rows of kRowLanes threads each. 128 threads keep
/// more blocks than SMs from a few thousand rows (2048 rows: 128 blocks).
constexpr int kNormThreads = 128;
constexpr int kNormRows = kNormThreads / kRowLanes;

inline unsigned normBlocks(int64_t rows) {
  int64_t blocks = (rows + kNormRows - 1) / kNormRows;
  return static_cast<unsigned>(blocks < (1 << 16) ? blocks : (1 << 16));
}

/// orderedSum(n, f) of one row by the row's kRowLanes threads (`lane` is
/// this thread's); `lanes` is the row's kRowLanes slots of shared memory.
/// Every thread of the block calls it together (it holds two barriers);
/// `active` is false past the last row.
template <typename Acc, typename F>
__device__ Acc rowSum(Acc *lanes, int lane, bool active, int64_t n,
                      const F &f) {
  static_assert(kRowLanes == 8, "the final combination assumes 8 lanes");
  Acc acc = Acc(0);
  if (active)
    for (int64_t i = lane; i < n; i += kRowLanes)
      acc += f(i);
  lanes[lane] = acc;
  __syncthreads();
  Acc sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  __syncthreads();
  return sum;
}

/// layerNormStats / rmsNormStats (kernels/Norms.h) with rowSum for
/// orderedSum: the same expressions, hence the same bits.
template <typename T, typename Acc>
__device__ NormStats<Acc> rowStats(bool centered, Acc *lanes, int lane,
                                   bool active, const T *x, int64_t n,
                                   Acc epsilon) {
  const Acc count = static_cast<Acc>(n);
  if (!centered) {
    Acc meanSquare = rowSum<Acc>(lanes, lane, active, n,
                                 [&](int64_t i) {
                                   Acc v = load(x[i]);
                                   return v * v;
                                 }) /
                     count;
    return {Acc(0), Acc(1) / kSqrt(meanSquare + epsilon)};
  }
  Acc mean = rowSum<Acc>(lanes, lane, active, n,
                         [&](int64_t i) { return load(x[i]); }) /
             count;
  Acc var = rowSum<Acc>(lanes, lane, active, n,
                        [&](int64_t i) {
                          Acc d = load(x[i]) - mean;
                          return d * d;
                        }) /
            count;
  return {mean, Acc(1) / kSqrt(var + epsilon)};
}

/// kNormRows rows a block, a row's kRowLanes threads each writing every
/// kRowLanes-th element (layerNormRow's / rmsNormRow's expression).
template <typename T>
__global__ void normKernel(bool centered, const T *x, const T *scale,
                           const T *bias, T *y, int64_t rows, int64_t n,
                           Compute<T> epsilon) {
  using C = Compute<T>;
  __shared__ C shared[kNormThreads];
  const int lane = int(threadIdx.x) % kRowLanes;
  C *lanes = shared + (int(threadIdx.x) - lane);
  // The loop's bounds are the block's, so all its threads meet at rowSum's
  // barriers; threads past the last row only take part in them.
  for (int64_t first = int64_t(blockIdx.x) * kNormRows; first < rows;
       first += int64_t(gridDim.x) * kNormRows) {
    const int64_t row = first + int64_t(threadIdx.x) / kRowLanes;
    const bool active = row < rows;
    const T *xRow = x + (active ? row : 0) * n;
    const NormStats<C> st =
        rowStats(centered, lanes, lane, active, xRow, n, epsilon);
    if (!active)
      continue;
    T *yRow = y + row * n;
    for (int64_t i = lane; i < n; i += kRowLanes) {
      if (centered) {
        C v = (load(xRow[i]) - st.mean) * st.rstd;
        if (scale)
          v *= load(scale[i]);
        if (bias)
          v += load(bias[i]);
        yRow[i] = store<T>(v);
      } else {
        C v = load(xRow[i]) * st.rstd;
        if (scale)
          v *= load(scale[i]);
        yRow[i] = store<T>(v);
      }
    }
  }
}

/// normGradRow (kernels/NormsGrad.h) with rowSum, rows as normKernel's;
/// each row's statistics go to `stats` for the scale and bias gradients.
template <typename T>
__global__ void normGradRowsKernel(bool centered, const T *x, const T *scale,
                                   const T *dy, T *dx, int64_t rows, int64_t n,
                                   Compute<T> epsilon,
                                   NormStats<Compute<T>> *stats) {
  using C = Compute<T>;
  __shared__ C shared[kNormThreads];
  const int lane = int(threadIdx.x) % kRowLanes;
  C *lanes = shared + (int(threadIdx.x) - lane);
  const C count = static_cast<C>(n);
  for (int64_t first = int64_t(blockIdx.x) * kNormRows; first < rows;
       first += int64_t(gridDim.x) * kNormRows) {
    const int64_t row = first + int64_t(threadIdx.x) / kRowLanes;
    const bool active = row < rows;
    const int64_t at = (active ? row : 0) * n;
    const T *xRow = x + at, *dyRow = dy + at;
    const NormStats<C> st =
        rowStats(centered, lanes, lane, active, xRow, n, epsilon);
    auto g = [&](int64_t i) {
      C v = load(dyRow[i]);
      return scale ? v * load(scale[i]) : v;
    };
    auto xhat = [&](int64_t i) { return (load(xRow[i]) - st.mean) * st.rstd; };
    const C meanG =
        centered ? rowSum<C>(lanes, lane, active, n, g) / count : C(0);
    const C meanGX = rowSum<C>(lanes, lane, active, n,
                               [&](int64_t i) { return g(i) * xhat(i); }) /
                     count;
    if (!active)
      continue;
    T *dxRow = dx + at;
    for (int64_t i = lane; i < n; i += kRowLanes)
      dxRow[i] = store<T>(st.rstd * ((g(i) - meanG) - xhat(i) * meanGX));
    if (stats && lane == 0)
      stats[row] = st;
  }
}

/// Partial sums of one block of kParamRowBlock rows for one column.
template <typename T>
__global__ void
normGradPartialsKernel(const T *x, const T *dy,
                       const NormStats<Compute<T>> *stats, int64_t rows,
                       int64_t n, Compute<T> *scalePartials,
                       Compute<T> *biasPartials, int64_t items) {
  using C = Compute<T>;
  RP_GRID_LOOP(item, items) {
    int64_t rb = item / n, c = item % n;
    int64_t r0 = rb * kParamRowBlock;
    int64_t r1 = r0 + kParamRowBlock < rows ? r0 + kParamRowBlock : rows;
    C s = C(0), b = C(0);
    for (int64_t r = r0; r < r1; ++r) {
      if (scalePartials)
        s += normScaleGradTerm(x[r * n + c], dy[r * n + c], stats[r]);
      if (biasPartials)
        b += load(dy[r * n + c]);
    }
    if (scalePartials)
      scalePartials[item] = s;
    if (biasPartials)
      biasPartials[item] = b;
  }
}

template <typename T>
__global__ void normGradParamsKernel(const Compute<T> *scalePartials,
                                     const Compute<T> *biasPartials,
                                     int64_t rowBlocks, int64_t n, T *dscale,
                                     T *dbias) {
  RP_GRID_LOOP(c, n) {
    kernels::normParamGradColumn(scalePartials, biasPartials, rowBlocks, n, c,
                                 dscale, dbias);
  }
}

template <typename T, typename I>
__global__ void
crossEntropyChunksKernel(LaunchContext ctx, const T *x, const I *labels,
                         int64_t ignoreIndex, int64_t rows, int64_t classes,
                         LossPartial *partials, int64_t chunks) {
  RP_GRID_LOOP(chunk, chunks) {
    LossPartial p{0.0, 0};
    int64_t end = (chunk + 1) * kLossRowGrain;
    for (int64_t row = chunk * kLossRowGrain; row < end && row < rows; ++row) {
      int64_t label;
      if (!readLabel(ctx, labels, row, ignoreIndex, classes, label))
        continue;
      p.sum += static_cast<double>(
          crossEntropyRow(x + row * classes, classes, label));
      ++p.count;
    }
    partials[chunk] = p;
  }
}

template <typename T, typename I>
__global__ void
crossEntropyGradKernel(LaunchContext ctx, const T *x, const I *labels,
                       int64_t ignoreIndex, int64_t rows, int64_t classes,
                       DType scaleType, const void *scale, T *dx) {
  using C = Compute<T>;
  RP_GRID_LOOP(row, rows) {
    int64_t label;
    T *dxRow = dx + row * classes;
    if (!readLabel(ctx, labels, row, ignoreIndex, classes, label)) {
      for (int64_t i = 0; i < classes; ++i)
        dxRow[i] = store<T>(C(0));
      continue;
    }
    crossEntropyGradRow(x + row * classes, dxRow, classes, label,
                        static_cast<C>(readScalar(scaleType, scale)));
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
    softmaxKernel<<<blocksFor(rows), kThreadsPerBlock, 0, ctx.stream>>>(
        log, static_cast<const T *>(x), static_cast<T *>(out), rows, n, inner);
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
    softmaxGradKernel<<<blocksFor(rows), kThreadsPerBlock, 0, ctx.stream>>>(
        log, static_cast<const T *>(y), static_cast<const T *>(dy),
        static_cast<T *>(dx), rows, n, inner);
  });
  return lastLaunchError();
}

cudaError_t launchNorm(const LaunchContext &ctx, DType dtype, bool centered,
                       const void *x, const void *scale, const void *bias,
                       void *out, int64_t rows, int64_t n, double epsilon) {
  if (rows == 0 || n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normKernel<<<normBlocks(rows), kNormThreads, 0, ctx.stream>>>(
        centered, static_cast<const T *>(x), static_cast<const T *>(scale),
        static_cast<const T *>(bias), static_cast<T *>(out), rows, n,
        static_cast<Compute<T>>(epsilon));
  });
  return lastLaunchError();
}

size_t normGradScratchBytes(DType dtype, int64_t rows, int64_t n) {
  size_t c = dtype == DType::f64 ? 8 : 4;
  int64_t rowBlocks = (rows + kParamRowBlock - 1) / kParamRowBlock;
  // Stats (mean, rstd) per row, then two partial arrays.
  return size_t(rows) * 2 * c + size_t(rowBlocks) * size_t(n) * 2 * c + 64;
}

cudaError_t launchNormGrad(const LaunchContext &ctx, DType dtype, bool centered,
                           const void *x, const void *scale, const void *dy,
                           void *dx, void *dscale, void *dbias, int64_t rows,
                           int64_t n, double epsilon, void *scratch) {
  if (rows == 0 || n == 0)
    return cudaSuccess;
  const bool params = dscale || dbias;
  const int64_t rowBlocks = (rows + kParamRowBlock - 1) / kParamRowBlock;
  cudaError_t error = cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    auto *stats = params ? static_cast<NormStats<C> *>(scratch) : nullptr;
    normGradRowsKernel<<<normBlocks(rows), kNormThreads, 0, ctx.stream>>>(
        centered, static_cast<const T *>(x), static_cast<const T *>(scale),
        static_cast<const T *>(dy), static_cast<T *>(dx), rows, n,
        static_cast<C>(epsilon), stats);
    if (!params || (error = lastLaunchError()) != cudaSuccess)
      return;
    C *scalePartials = reinterpret_cast<C *>(stats + rows);
    C *biasPartials = scalePartials + rowBlocks * n;
    const int64_t items = rowBlocks * n;
    normGradPartialsKernel<<<blocksFor(items), kThreadsPerBlock, 0,
                             ctx.stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(dy), stats, rows, n,
        dscale ? scalePartials : nullptr, dbias ? biasPartials : nullptr,
        items);
    if ((error = lastLaunchError()) != cudaSuccess)
      return;
    normGradParamsKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        scalePartials, biasPartials, rowBlocks, n, static_cast<T *>(dscale),
        static_cast<T *>(dbias));
  });
  return error != cudaSuccess ? error : lastLaunchError();
}

size_t crossEntropyScratchBytes(int64_t rows) {
  return sizeof(LossPartial) *
         size_t((rows + kLossRowGrain - 1) / kLossRowGrain + 1);
}

cudaError_t launchCrossEntropy(const LaunchContext &ctx, DType dtype,
                               const void *logits, const void *labels,
                               bool labels64, int64_t ignoreIndex, int64_t rows,
                               int64_t classes, void *lossSum, void *count,
                               void *scratch) {
  const int64_t chunks = (rows + kLossRowGrain - 1) / kLossRowGrain;
  auto *partials = static_cast<LossPartial *>(scratch);
  cudaError_t error = cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (chunks > 0) {
      if (labels64)
        crossEntropyChunksKernel<<<blocksFor(chunks), kThreadsPerBlock, 0,
                                   ctx.stream>>>(
            ctx, static_cast<const T *>(logits),
            static_cast<const int64_t *>(labels), ignoreIndex, rows, classes,
            partials, chunks);
      else
        crossEntropyChunksKernel<<<blocksFor(chunks), kThreadsPerBlock, 0,
                                   ctx.stream>>>(
            ctx, static_cast<const T *>(logits),
            static_cast<const int32_t *>(labels), ignoreIndex, rows, classes,
            partials, chunks);
      if ((error = lastLaunchError()) != cudaSuccess)
        return;
    }
    if constexpr (std::is_same_v<T, double>)
      lossTotalKernel<<<1, 1, 0, ctx.stream>>>(partials, chunks,
                                               static_cast<double *>(lossSum),
                                               static_cast<int64_t *>(count));
    else
      lossTotalKernel<<<1, 1, 0, ctx.stream>>>(partials, chunks,
                                               static_cast<float *>(lossSum),
                                               static_cast<int64_t *>(count));
  });
  return error != cudaSuccess ? error : lastLaunchError();
}

cudaError_t launchCrossEntropyGrad(const LaunchContext &ctx, DType dtype,
                                   const void *logits, const void *labels,
                                   bool labels64, int64_t ignoreIndex,
                                   int64_t rows, int64_t classes,
                                   DType scaleType, const void *scale,
                                   void *dlogits) {
  if (rows == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (labels64)
      crossEntropyGradKernel<<<blocksFor(rows), kThreadsPerBlock, 0,
                               ctx.stream>>>(
          ctx, static_cast<const T *>(logits),
          static_cast<const int64_t *>(labels), ignoreIndex, rows, classes,
          scaleType, scale, static_cast<T *>(dlogits));
    else
      crossEntropyGradKernel<<<blocksFor(rows), kThreadsPerBlock, 0,
                               ctx.stream>>>(
          ctx, static_cast<const T *>(logits),
          static_cast<const int32_t *>(labels), ignoreIndex, rows, classes,
          scaleType, scale, static_cast<T *>(dlogits));
  });
  return lastLaunchError();
}

} // namespace rp::runtime::cuda
