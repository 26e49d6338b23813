//===- CudaMoE.cu - mixture-of-experts kernels on the cuda device ---------===//
//
// host/HostMoE.cpp's semantics, deterministic with no float atomics:
// - route and its gradient: one thread per token, in double as the host,
//   each sum in the host's order. Top-k is k selection passes over the
//   scores (greater first, NaN first), so no per-thread array is needed;
//   exactly equal scores go lowest expert first, which can differ from the
//   host's (PyTorch's) order on an exact tie only.
// - dispatch: one block per expert ranks that expert's choices in choice
//   order with a block scan (the host's counting sort gives the same
//   positions), one thread turns counts into offsets, then the rows move.
// - the grouped matmuls: CudaMoEGemm.cu.
// - combine sums a token's slots in slot order; its gradient writes each
//   row from the one (token, slot) naming it, duplicates reported.
// Integer atomics only count (dispatch none; combine_grad's duplicate check).
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaMoE.h"

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

/// "a before b" in top-k order: greater first, NaN before any number.
__device__ inline bool greaterScore(double a, double b) {
  return (a != a && b == b) || a > b;
}
/// (a, i) before (b, j): by score, equal scores by lower index.
__device__ inline bool before(double a, int64_t i, double b, int64_t j) {
  return greaterScore(a, b) || (!greaterScore(b, a) && i < j);
}

/// std::max's rule (keeps the first on NaN), as softmaxRow uses it.
__device__ inline double maxOf(double m, double v) { return m < v ? v : m; }

template <typename T> __device__ double loadD(const T *p, int64_t i) {
  return double(load(p[i]));
}

template <typename T>
__global__ void routeKernel(const T *logits, int64_t tokens, int64_t n,
                            int64_t k, bool softmaxFirst, bool normalize, T *w,
                            int64_t *experts) {
  RP_GRID_LOOP(t, tokens) {
    const T *x = logits + t * n;
    T *wt = w + t * k;
    int64_t *et = experts + t * k;
    double max = -INFINITY, sum = 0;
    if (softmaxFirst) {
      for (int64_t j = 0; j < n; ++j)
        max = maxOf(max, loadD(x, j));
      for (int64_t j = 0; j < n; ++j)
        sum += ::exp(loadD(x, j) - max);
    }
    // The probability as stored (PyTorch picks among those), or the logit.
    auto score = [&](int64_t j) {
      if (!softmaxFirst)
        return loadD(x, j);
      double p = ::exp(loadD(x, j) - max) / sum;
      return double(load(store<T>(Compute<T>(p))));
    };
    double prev = 0;
    int64_t prevIndex = -1;
    for (int64_t s = 0; s < k; ++s) {
      double best = 0;
      int64_t bestIndex = -1;
      for (int64_t j = 0; j < n; ++j) {
        double v = score(j);
        if (prevIndex >= 0 && !before(prev, prevIndex, v, j))
          continue;
        if (bestIndex < 0 || before(v, j, best, bestIndex)) {
          best = v;
          bestIndex = j;
        }
      }
      prev = best;
      prevIndex = bestIndex;
      et[s] = bestIndex;
      // Exact in T: a stored probability or a logit read from T.
      wt[s] = store<T>(Compute<T>(best));
    }
    if (softmaxFirst) {
      if (!normalize)
        continue;
      double chosen = 0;
      for (int64_t s = 0; s < k; ++s)
        chosen += loadD(wt, s);
      for (int64_t s = 0; s < k; ++s)
        wt[s] = store<T>(Compute<T>(loadD(wt, s) / chosen));
      continue;
    }
    double m = -INFINITY, total = 0;
    for (int64_t s = 0; s < k; ++s)
      m = maxOf(m, loadD(wt, s));
    for (int64_t s = 0; s < k; ++s)
      total += ::exp(loadD(wt, s) - m);
    for (int64_t s = 0; s < k; ++s)
      wt[s] = store<T>(Compute<T>(::exp(loadD(wt, s) - m) / total));
  }
}

template <typename T>
__global__ void routeGradKernel(LaunchContext ctx, const T *logits,
                                const int64_t *experts, const T *dw,
                                int64_t tokens, int64_t n, int64_t k,
                                bool softmaxFirst, bool normalize, T *dl) {
  RP_GRID_LOOP(t, tokens) {
    const T *x = logits + t * n;
    const int64_t *et = experts + t * k;
    const T *g = dw + t * k;
    bool valid = true;
    for (int64_t j = 0; j < k; ++j)
      if (et[j] < 0 || et[j] >= n) {
        reportError(ctx, kExpertOutOfRange, t * k + j, et[j], n);
        valid = false;
      }
    if (!valid)
      continue;
    T *out = dl + t * n;
    if (softmaxFirst) {
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j)
        max = maxOf(max, loadD(x, j));
      for (int64_t j = 0; j < n; ++j)
        sum += ::exp(loadD(x, j) - max);
      auto p = [&](int64_t i) { return ::exp(loadD(x, i) - max) / sum; };
      // w = q / S: dq = (dw - sum(dw * w)) / S.
      double chosen = 0, dot = 0;
      if (normalize) {
        for (int64_t j = 0; j < k; ++j)
          chosen += p(et[j]);
        for (int64_t j = 0; j < k; ++j)
          dot += loadD(g, j) * p(et[j]) / chosen;
      }
      auto dp = [&](int64_t i) {
        double d = 0;
        for (int64_t j = 0; j < k; ++j)
          if (et[j] == i)
            d += normalize ? (loadD(g, j) - dot) / chosen : loadD(g, j);
        return d;
      };
      double inner = 0;
      for (int64_t i = 0; i < n; ++i)
        inner += dp(i) * p(i);
      for (int64_t i = 0; i < n; ++i)
        out[i] = store<T>(Compute<T>(p(i) * (dp(i) - inner)));
      continue;
    }
    double m = -INFINITY, total = 0, dot = 0;
    for (int64_t j = 0; j < k; ++j)
      m = maxOf(m, loadD(x, et[j]));
    for (int64_t j = 0; j < k; ++j)
      total += ::exp(loadD(x, et[j]) - m);
    auto soft = [&](int64_t j) { return ::exp(loadD(x, et[j]) - m) / total; };
    for (int64_t j = 0; j < k; ++j)
      dot += loadD(g, j) * soft(j);
    for (int64_t i = 0; i < n; ++i) {
      double d = 0;
      for (int64_t j = 0; j < k; ++j)
        if (et[j] == i)
          d += soft(j) * (loadD(g, j) - dot);
      out[i] = store<T>(Compute<T>(d));
    }
  }
}

constexpr int kScanThreads = 256;

/// Block e ranks the choices of expert e in choice order: positions get the
/// rank, counts[e] the total.
__global__ void rankKernel(const int64_t *experts, int64_t choices,
                           int64_t numExperts, int32_t *positions,
                           int32_t *counts) {
  __shared__ int32_t scan[kScanThreads];
  for (int64_t e = blockIdx.x; e < numExperts; e += gridDim.x) {
    int32_t running = 0;
    for (int64_t base = 0; base < choices; base += kScanThreads) {
      int64_t i = base + threadIdx.x;
      int32_t mine = i < choices && experts[i] == e;
      scan[threadIdx.x] = mine;
      __syncthreads();
      for (int step = 1; step < kScanThreads; step <<= 1) {
        int32_t add = int(threadIdx.x) >= step ? scan[threadIdx.x - step] : 0;
        __syncthreads();
        scan[threadIdx.x] += add;
        __syncthreads();
      }
      if (mine)
        positions[i] = running + scan[threadIdx.x] - 1;
      running += scan[kScanThreads - 1];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      counts[e] = running;
  }
}

__global__ void countOffsetsKernel(const int32_t *counts, int64_t numExperts,
                                   int64_t *offsets) {
  offsets[0] = 0;
  for (int64_t e = 0; e < numExperts; ++e)
    offsets[e + 1] = offsets[e] + counts[e];
}

__global__ void placeKernel(LaunchContext ctx, const int64_t *experts,
                            int64_t choices, int64_t numExperts,
                            const int64_t *offsets, int32_t *positions) {
  RP_GRID_LOOP(i, choices) {
    int64_t e = experts[i];
    if (e < 0 || e >= numExperts)
      reportError(ctx, kExpertOutOfRange, i, e, numExperts);
    else
      positions[i] += int32_t(offsets[e]);
  }
}

template <typename U>
__global__ void moveRowsKernel(const U *x, const int64_t *experts,
                               const int32_t *positions, int64_t k,
                               int64_t hidden, int64_t numExperts, U *rows,
                               int64_t n) {
  RP_GRID_LOOP(item, n) {
    int64_t i = item / hidden, h = item % hidden;
    if (experts[i] >= 0 && experts[i] < numExperts)
      rows[int64_t(positions[i]) * hidden + h] = x[(i / k) * hidden + h];
  }
}

template <typename T>
__global__ void combineKernel(LaunchContext ctx, const T *rows, int64_t numRows,
                              const int32_t *positions, const T *w, int64_t k,
                              int64_t hidden, T *out, int64_t n) {
  using C = Compute<T>;
  RP_GRID_LOOP(item, n) {
    const int64_t t = item / hidden, h = item % hidden;
    C acc = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t pos = positions[t * k + j];
      if (pos < 0 || pos >= numRows) {
        if (h == 0)
          reportError(ctx, kPositionOutOfRange, t * k + j, pos, numRows);
        continue;
      }
      C wt = w ? load(w[t * k + j]) : C(1);
      acc += wt * load(rows[pos * hidden + h]);
    }
    out[item] = store<T>(acc);
  }
}

/// Range and uniqueness of positions; `seen` zeroed, one counter per row.
__global__ void checkPositionsKernel(LaunchContext ctx,
                                     const int32_t *positions, int64_t choices,
                                     int64_t numRows, int32_t *seen) {
  RP_GRID_LOOP(i, choices) {
    int64_t pos = positions[i];
    if (pos < 0 || pos >= numRows)
      reportError(ctx, kPositionOutOfRange, i, pos, numRows);
    else if (atomicAdd(&seen[pos], 1) > 0)
      reportError(ctx, kDuplicatePosition, i, pos, numRows);
  }
}

template <typename T>
__global__ void combineGradRowsKernel(const int32_t *positions, int64_t numRows,
                                      const T *w, const T *dy, int64_t k,
                                      int64_t hidden, T *drows, int64_t n) {
  using C = Compute<T>;
  RP_GRID_LOOP(item, n) {
    const int64_t i = item / hidden, h = item % hidden;
    int64_t pos = positions[i];
    if (pos < 0 || pos >= numRows)
      continue;
    C wt = w ? load(w[i]) : C(1);
    drows[pos * hidden + h] = store<T>(wt * load(dy[(i / k) * hidden + h]));
  }
}

template <typename T>
__global__ void combineGradWeightsKernel(const T *rows, int64_t numRows,
                                         const int32_t *positions, const T *dy,
                                         int64_t k, int64_t hidden, T *dw,
                                         int64_t choices) {
  using C = Compute<T>;
  RP_GRID_LOOP(i, choices) {
    int64_t pos = positions[i];
    if (pos < 0 || pos >= numRows)
      continue;
    const T *g = dy + (i / k) * hidden;
    C dot = 0;
    for (int64_t h = 0; h < hidden; ++h)
      dot += load(g[h]) * load(rows[pos * hidden + h]);
    dw[i] = store<T>(dot);
  }
}

} // namespace

cudaError_t
rp::runtime::cuda::launchMoERoute(const LaunchContext &ctx, DType dtype,
                                  bool before, bool normalize,
                                  const void *logits, int64_t tokens, int64_t n,
                                  int64_t k, void *weights, int64_t *experts) {
  if (tokens == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    routeKernel<T><<<blocksFor(tokens), kThreadsPerBlock, 0, ctx.stream>>>(
        static_cast<const T *>(logits), tokens, n, k, before, normalize,
        static_cast<T *>(weights), experts);
  });
  return lastLaunchError();
}

cudaError_t rp::runtime::cuda::launchMoERouteGrad(
    const LaunchContext &ctx, DType dtype, bool before, bool normalize,
    const void *logits, const int64_t *experts, const void *dweights,
    int64_t tokens, int64_t n, int64_t k, void *dlogits) {
  if (tokens == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    routeGradKernel<T><<<blocksFor(tokens), kThreadsPerBlock, 0, ctx.stream>>>(
        ctx, static_cast<const T *>(logits), experts,
        static_cast<const T *>(dweights), tokens, n, k, before, normalize,
        static_cast<T *>(dlogits));
  });
  return lastLaunchError();
}

size_t rp::runtime::cuda::moeDispatchScratchBytes(int64_t numExperts) {
  return size_t(numExperts + 1) * sizeof(int64_t);
}

cudaError_t rp::runtime::cuda::launchMoEDispatch(
    const LaunchContext &ctx, size_t elementSize, const void *x,
    const int64_t *experts, int64_t tokens, int64_t k, int64_t hidden,
    int64_t numExperts, void *rows, int32_t *positions, int32_t *counts,
    void *scratch) {
  const int64_t choices = tokens * k;
  int64_t *offsets = static_cast<int64_t *>(scratch);
  if (numExperts > 0) {
    unsigned blocks = unsigned(numExperts < 65535 ? numExperts : 65535);
    rankKernel<<<blocks, kScanThreads, 0, ctx.stream>>>(
        experts, choices, numExperts, positions, counts);
  }
  countOffsetsKernel<<<1, 1, 0, ctx.stream>>>(counts, numExperts, offsets);
  if (choices > 0)
    placeKernel<<<blocksFor(choices), kThreadsPerBlock, 0, ctx.stream>>>(
        ctx, experts, choices, numExperts, offsets, positions);
  const int64_t n = choices * hidden;
  if (n > 0)
    visitElementSize(elementSize, [&](auto tag) {
      using U = typename decltype(tag)::type;
      moveRowsKernel<U><<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          static_cast<const U *>(x), experts, positions, k, hidden, numExperts,
          static_cast<U *>(rows), n);
    });
  return lastLaunchError();
}

cudaError_t rp::runtime::cuda::launchMoECombine(
    const LaunchContext &ctx, DType dtype, const void *rows, int64_t numRows,
    const int32_t *positions, const void *weights, int64_t tokens, int64_t k,
    int64_t hidden, void *out) {
  const int64_t n = tokens * hidden;
  if (n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    combineKernel<T><<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        ctx, static_cast<const T *>(rows), numRows, positions,
        static_cast<const T *>(weights), k, hidden, static_cast<T *>(out), n);
  });
  return lastLaunchError();
}

size_t rp::runtime::cuda::moeCombineGradScratchBytes(int64_t numRows) {
  return size_t(numRows) * sizeof(int32_t);
}

cudaError_t rp::runtime::cuda::launchMoECombineGrad(
    const LaunchContext &ctx, DType dtype, const void *rows, int64_t numRows,
    const int32_t *positions, const void *weights, const void *dy,
    int64_t tokens, int64_t k, int64_t hidden, void *drows, void *dweights,
    void *scratch) {
  const int64_t choices = tokens * k, n = choices * hidden;
  const size_t es = dtypeSize(dtype);
  if (numRows * hidden > 0)
    if (cudaError_t e = cudaMemsetAsync(drows, 0, size_t(numRows * hidden) * es,
                                        ctx.stream);
        e != cudaSuccess)
      return e;
  if (choices == 0)
    return cudaSuccess;
  if (numRows > 0)
    if (cudaError_t e = cudaMemsetAsync(
            scratch, 0, moeCombineGradScratchBytes(numRows), ctx.stream);
        e != cudaSuccess)
      return e;
  checkPositionsKernel<<<blocksFor(choices), kThreadsPerBlock, 0, ctx.stream>>>(
      ctx, positions, choices, numRows, static_cast<int32_t *>(scratch));
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *w = static_cast<const T *>(weights);
    if (n > 0)
      combineGradRowsKernel<T>
          <<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
              positions, numRows, w, static_cast<const T *>(dy), k, hidden,
              static_cast<T *>(drows), n);
    if (dweights)
      combineGradWeightsKernel<T>
          <<<blocksFor(choices), kThreadsPerBlock, 0, ctx.stream>>>(
              static_cast<const T *>(rows), numRows, positions,
              static_cast<const T *>(dy), k, hidden, static_cast<T *>(dweights),
              choices);
  });
  return lastLaunchError();
}
