//===- CudaAttention.cu - fused attention forward and backward ------------===//
//
// Flash-style and tiled: the S x T scores are never stored in global memory.
// Query rows and keys go in tiles of kRows rows (AttentionTile), staged in
// shared memory in the compute type and reused by every thread of the
// block; each row of a tile has kGroup threads, which split the row's
// scores of a key tile and own every kGroup-th column of its accumulators.
//
// - Forward, a block per (batch, head, query tile): the online softmax of
//   kernels/Attention.h over key tiles (running max, running sum, the
//   accumulator rescaled when the max grows).
// - Backward, pass 1 (dq), a block per (batch, head, query tile): a first
//   sweep over the key tiles finds each row's max, sum of exp(s - max) and
//   delta = sum_j P_j dP_j (online, rescaled as the forward's); a second
//   sweep sums dq = scale * sum_j P_j (dP_j - delta) k_j. The row keeps
//   (max, sum, delta): three values per query row, the only scratch.
// - Backward, pass 2 (dk, dv), a block per (batch, key/value head, key
//   tile): the query heads of the group, then their query tiles in order,
//   each pair's P and dS recomputed from the row's statistics; every key's
//   dk and dv rows are written by its own threads alone.
//
// Causal attention is aligned bottom-right (query i at position
// i + t - s); tiles above its diagonal and, with a sliding window, tiles
// before the window are skipped (a skipped tile would add nothing). A
// soft-cap applies softCap (kernels/Attention.h) to the scaled score and its
// slope to dS. Each output is a sum in a
// fixed order (key tiles in order; heads, then rows), with no atomics: the
// same bits every run. The order differs from the host kernels' (one key
// at a time in blocks of 16), so results agree within rounding, not
// bitwise. Head widths up to kMaxHeadDim, in buckets of 64, 128 and 256
// columns whose tile sizes keep the block's shared memory under 48 KiB.
//
// Masks, NaN scores, rows whose keys are all masked and probabilities that
// underflow behave as in kernels/Attention.h and AttentionGrad.h.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

#include "rp/runtime/kernels/AttentionGrad.h"

#include <climits>
#include <cmath>
#include <type_traits>

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

/// Threads of every attention block.
constexpr int kAttentionThreads = 128;

/// The tiling of a head-width bucket kD (the widest of d and dv, rounded up
/// to 64, 128 or 256) for compute type C: tiles of kRows rows, kGroup
/// threads per row, kCols accumulator columns per thread. Four tiles of
/// kRows x kD values plus two score tiles stay under 48 KiB.
template <typename C, int kD> struct AttentionTile {
  static constexpr int kRows = 8192 / int(sizeof(C) * kD);
  static constexpr int kGroup = kAttentionThreads / kRows;
  static constexpr int kCols = kD / kGroup;
  static constexpr int kPad = kD + 1; // Rows in different banks.
  /// Rows of the other tile a thread scores its row against: every
  /// kGroup-th (with more threads than rows, threads sub >= kRows idle).
  static constexpr int kPer = kRows >= kGroup ? kRows / kGroup : 1;
  static_assert(kRows * kGroup == kAttentionThreads && kCols * kGroup == kD);
};

/// The mask bias of key j for a query row (host/HostAttentionCommon.h's
/// MaskReader): i1 keeps true positions, a float mask is added, segments
/// (kind 3, i64 [b, t]) keep the keys of the query's own document.
template <typename T> struct DeviceMask {
  const void *mask;
  int kind;
  const int64_t *strides;
  /// t - s: query row i is at key position i + shift.
  int64_t shift;

  __device__ Compute<T> operator()(int64_t b, int64_t h, int64_t i,
                                   int64_t j) const {
    using C = Compute<T>;
    if (kind == 0)
      return C(0);
    if (kind == 3) {
      const int64_t *segment =
          static_cast<const int64_t *>(mask) + b * strides[0];
      return segment[i + shift] == segment[j] ? C(0) : -kInfinity<C>();
    }
    int64_t at =
        b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3];
    if (kind == 1)
      return static_cast<const Bool8 *>(mask)[at] ? C(0) : -kInfinity<C>();
    return load(static_cast<const T *>(mask)[at]);
  }
};

/// Copies rows [first, first + kRows) of a row-major [count, width] matrix
/// into a shared tile in the compute type; rows past `count` become zeros.
template <int kRows, int kPad, typename T, typename C>
__device__ void loadTile(C (*tile)[kPad], const T *src, int64_t first,
                         int64_t count, int64_t width) {
  // 32-bit index arithmetic: a tile is at most kRows x kMaxHeadDim values.
  const int w = static_cast<int>(width);
  const T *base = src + first * width;
  for (int e = threadIdx.x; e < kRows * w; e += kAttentionThreads) {
    int r = e / w, c = e - r * w;
    tile[r][c] = first + r < count ? load(base[e]) : C(0);
  }
}

/// a * b + c rounded once. The dot products and accumulators use fused
/// multiply-adds although the .cu files are built with --fmad=false (which
/// keeps the elementwise kernels' rounding the host's): attention sums in
/// its own order anyway, and a fused multiply-add is one instruction where
/// the inner loops would otherwise issue two.
__device__ inline float mulAdd(float a, float b, float c) {
  return fmaf(a, b, c);
}
__device__ inline double mulAdd(double a, double b, double c) {
  return fma(a, b, c);
}

/// dots[x] = a . rows[first + x * kGroup] over n columns, for the kPer tile
/// rows a thread scores: `a` is read once per column for all of them. Each
/// dot product sums its columns in order.
template <int kPer, int kGroup, int kPad, typename C>
__device__ void dotRows(C (&dots)[kPer], const C *a, const C (*rows)[kPad],
                        int first, int64_t n) {
  for (int x = 0; x < kPer; ++x)
    dots[x] = C(0);
  for (int64_t c = 0; c < n; ++c) {
    const C ac = a[c];
    for (int x = 0; x < kPer; ++x)
      dots[x] = mulAdd(ac, rows[first + x * kGroup][c], dots[x]);
  }
}

/// The score of query row i and key j given their dot product, or -inf
/// when the key is out of range, above the causal diagonal, before the
/// window or masked (the dot product is then not used, as the host never
/// computes it).
template <typename T, typename C = Compute<T>>
__device__ C scoreOf(const AttentionShape &sh, const DeviceMask<T> &mask, C dot,
                     int64_t b, int64_t h, int64_t i, int64_t j) {
  const C kNegInf = -kInfinity<C>();
  if (i >= sh.s || j >= sh.t)
    return kNegInf;
  const int64_t p = i + sh.t - sh.s;
  if (sh.causal && (j > p || (sh.window > 0 && j <= p - sh.window)))
    return kNegInf;
  C bias = mask(b, h, i, j);
  if (bias == kNegInf)
    return kNegInf;
  return softCap(dot * static_cast<C>(sh.scale), static_cast<C>(sh.softcap)) +
         bias;
}

/// The soft-cap's slope at a key's scaled score (1 without a cap).
template <typename C> __device__ C capSlope(const AttentionShape &sh, C dot) {
  return sh.softcap == 0.0 ? C(1)
                           : softCapSlope(dot * static_cast<C>(sh.scale),
                                          static_cast<C>(sh.softcap));
}

// A query-tile block's (head, tile) comes from blockIdx.x with the heads
// innermost and the last tiles first: under a causal mask those see the
// most keys, so on a grid of several waves the longest blocks start first.

/// The key tiles a query tile starting at i0 visits: all, or (causal) those
/// up to its last row's position.
__device__ inline int64_t keyEnd(const AttentionShape &sh, int64_t i0,
                                 int rows) {
  const int64_t end = i0 + rows + sh.t - sh.s;
  return sh.causal && end < sh.t ? end : sh.t;
}

/// The first key tile (a multiple of `rows`) a query tile starting at i0
/// visits: 0, or (sliding window) the tile of its first row's first key.
__device__ inline int64_t keyBegin(const AttentionShape &sh, int64_t i0,
                                   int rows) {
  if (!sh.causal || sh.window <= 0)
    return 0;
  const int64_t first = i0 + sh.t - sh.s - sh.window + 1;
  return first > 0 ? first / rows * rows : 0;
}

/// The largest score of a tile row, for the forward's and the dq pass's
/// online softmax; NaN scores are remembered (a NaN is never a maximum).
template <typename C>
__device__ C rowMax(const C *scores, int count, bool &sawNan) {
  C m = -kInfinity<C>();
  for (int jj = 0; jj < count; ++jj) {
    C s = scores[jj];
    sawNan = sawNan || kIsNan(s);
    if (s > m)
      m = s;
  }
  return m;
}

template <typename T, int kD>
__global__ void attentionKernel(AttentionShape sh, const T *q, const T *k,
                                const T *v, const void *mask, T *out) {
  using C = Compute<T>;
  using L = AttentionTile<C, kD>;
  constexpr int kRows = L::kRows, kGroup = L::kGroup, kPad = L::kPad,
                kPer = L::kPer;
  __shared__ C qs[kRows][kPad], ks[kRows][kPad], vs[kRows][kPad];
  __shared__ C ps[kRows][kRows + 1];
  const C kNegInf = -kInfinity<C>();
  const int r = threadIdx.x / kGroup, sub = threadIdx.x % kGroup;
  const int64_t tiles = (sh.s + kRows - 1) / kRows;
  const int64_t bh = blockIdx.x % (sh.b * sh.h),
                i0 = (tiles - 1 - blockIdx.x / (sh.b * sh.h)) * kRows;
  const int64_t b = bh / sh.h, h = bh % sh.h, hk = h / (sh.h / sh.hkv);
  const int64_t i = i0 + r;
  const T *kHead = k + (b * sh.hkv + hk) * sh.t * sh.d;
  const T *vHead = v + (b * sh.hkv + hk) * sh.t * sh.dv;
  const DeviceMask<T> maskAt{mask, sh.maskKind, sh.maskStrides, sh.t - sh.s};

  loadTile<kRows, kPad>(qs, q + bh * sh.s * sh.d, i0, sh.s, sh.d);
  C acc[L::kCols];
  for (int x = 0; x < L::kCols; ++x)
    acc[x] = C(0);
  C runningMax = kNegInf, runningSum = C(0);
  bool sawNan = false;
  const int64_t begin = keyBegin(sh, i0, kRows), end = keyEnd(sh, i0, kRows);
  for (int64_t j0 = begin; j0 < end; j0 += kRows) {
    loadTile<kRows, kPad>(ks, kHead, j0, sh.t, sh.d);
    loadTile<kRows, kPad>(vs, vHead, j0, sh.t, sh.dv);
    __syncthreads();
    if (sub < kRows) {
      C dots[kPer];
      dotRows<kPer, kGroup, kPad>(dots, qs[r], ks, sub, sh.d);
      for (int x = 0; x < kPer; ++x) {
        const int jj = sub + x * kGroup;
        ps[r][jj] = scoreOf<T>(sh, maskAt, dots[x], b, h, i, j0 + jj);
      }
    }
    __syncthreads();
    // Every thread of the row finds the row's max (cheap compares), so that
    // all hold the same running state without a reduction; each then takes
    // the exponentials of its own keys only, in place.
    C newMax = rowMax<C>(ps[r], kRows, sawNan);
    if (runningMax > newMax)
      newMax = runningMax;
    __syncthreads();
    if (newMax != kNegInf)
      for (int jj = sub; jj < kRows; jj += kGroup)
        ps[r][jj] = kExp(ps[r][jj] - newMax);
    __syncthreads();
    if (newMax != kNegInf) {
      if (newMax != runningMax) {
        C correction = kExp(runningMax - newMax);
        runningSum *= correction;
        for (int x = 0; x < L::kCols; ++x)
          acc[x] *= correction;
        runningMax = newMax;
      }
      for (int jj = 0; jj < kRows; ++jj) {
        C p = ps[r][jj];
        if (p == C(0))
          continue;
        runningSum += p;
        for (int x = 0; x < L::kCols; ++x)
          acc[x] = mulAdd(p, vs[jj][sub + x * kGroup], acc[x]);
      }
    }
    __syncthreads();
  }
  if (sh.sinks) {
    // GPT-OSS's sink: one more logit in the row's softmax, with no value,
    // after the keys (as kernels::attentionRow).
    const C sink = load(static_cast<const T *>(sh.sinks)[h]);
    sawNan = sawNan || kIsNan(sink);
    if (sink > runningMax) {
      C correction = kExp(runningMax - sink);
      runningSum *= correction;
      for (int x = 0; x < L::kCols; ++x)
        acc[x] *= correction;
      runningMax = sink;
    }
    runningSum += kExp(sink - runningMax);
  }
  if (i >= sh.s)
    return;
  T *outRow = out + (bh * sh.s + i) * sh.dv;
  for (int x = 0; x < L::kCols; ++x) {
    int64_t c = sub + x * kGroup;
    if (c >= sh.dv)
      break;
    C value = sawNan               ? kInfinity<C>() - kInfinity<C>()
              : runningSum == C(0) ? C(0)
                                   : acc[x] / runningSum;
    outRow[c] = store<T>(value);
  }
}

template <typename T, int kD>
__global__ void attentionGradQueryKernel(AttentionShape sh, const T *q,
                                         const T *k, const T *v,
                                         const void *mask, const T *dy, T *dq,
                                         AttentionRowStats<Compute<T>> *stats) {
  using C = Compute<T>;
  using L = AttentionTile<C, kD>;
  constexpr int kRows = L::kRows, kGroup = L::kGroup, kPad = L::kPad,
                kPer = L::kPer;
  __shared__ C qs[kRows][kPad], dos[kRows][kPad], ks[kRows][kPad],
      vs[kRows][kPad];
  __shared__ C ps[kRows][kRows + 1], dps[kRows][kRows + 1];
  const C kNegInf = -kInfinity<C>();
  const int r = threadIdx.x / kGroup, sub = threadIdx.x % kGroup;
  const int64_t tiles = (sh.s + kRows - 1) / kRows;
  const int64_t bh = blockIdx.x % (sh.b * sh.h),
                i0 = (tiles - 1 - blockIdx.x / (sh.b * sh.h)) * kRows;
  const int64_t b = bh / sh.h, h = bh % sh.h, hk = h / (sh.h / sh.hkv);
  const int64_t i = i0 + r;
  const T *kHead = k + (b * sh.hkv + hk) * sh.t * sh.d;
  const T *vHead = v + (b * sh.hkv + hk) * sh.t * sh.dv;
  const DeviceMask<T> maskAt{mask, sh.maskKind, sh.maskStrides, sh.t - sh.s};
  const int64_t begin = keyBegin(sh, i0, kRows), end = keyEnd(sh, i0, kRows);

  loadTile<kRows, kPad>(qs, q + bh * sh.s * sh.d, i0, sh.s, sh.d);
  loadTile<kRows, kPad>(dos, dy + bh * sh.s * sh.dv, i0, sh.s, sh.dv);

  // Sweep 1: max, sum and sum_j exp(s_j - max) dP_j, online.
  C m = kNegInf, sum = C(0), weighted = C(0);
  bool sawNan = false;
  for (int64_t j0 = begin; j0 < end; j0 += kRows) {
    loadTile<kRows, kPad>(ks, kHead, j0, sh.t, sh.d);
    loadTile<kRows, kPad>(vs, vHead, j0, sh.t, sh.dv);
    __syncthreads();
    if (sub < kRows) {
      C dots[kPer], dpDots[kPer];
      dotRows<kPer, kGroup, kPad>(dots, qs[r], ks, sub, sh.d);
      dotRows<kPer, kGroup, kPad>(dpDots, dos[r], vs, sub, sh.dv);
      for (int x = 0; x < kPer; ++x) {
        const int jj = sub + x * kGroup;
        C s = scoreOf<T>(sh, maskAt, dots[x], b, h, i, j0 + jj);
        ps[r][jj] = s;
        dps[r][jj] = s == kNegInf ? C(0) : dpDots[x];
      }
    }
    __syncthreads();
    C newMax = rowMax<C>(ps[r], kRows, sawNan);
    if (m > newMax)
      newMax = m;
    __syncthreads();
    if (newMax != kNegInf)
      for (int jj = sub; jj < kRows; jj += kGroup) {
        C e = kExp(ps[r][jj] - newMax);
        ps[r][jj] = e;
        dps[r][jj] = e == C(0) ? C(0) : e * dps[r][jj];
      }
    __syncthreads();
    if (newMax != kNegInf) {
      if (newMax != m) {
        C correction = kExp(m - newMax);
        sum *= correction;
        weighted *= correction;
        m = newMax;
      }
      for (int jj = 0; jj < kRows; ++jj) {
        sum += ps[r][jj];
        weighted += dps[r][jj];
      }
    }
    __syncthreads();
  }
  if (sh.sinks) {
    // The sink enters the row's max and sum; its dP is 0, so `weighted`
    // gains nothing.
    const C sink = load(static_cast<const T *>(sh.sinks)[h]);
    sawNan = sawNan || kIsNan(sink);
    if (sink > m) {
      C correction = kExp(m - sink);
      sum *= correction;
      weighted *= correction;
      m = sink;
    }
    sum += kExp(sink - m);
  }
  const C nan = kInfinity<C>() - kInfinity<C>();
  // A NaN score makes the row's statistics and gradients NaN; a row with
  // every key masked has dq = 0 and passes nothing to dk and dv.
  const bool live = !sawNan && m != kNegInf;
  const C delta = live ? weighted / sum : C(0);
  if (i < sh.s && sub == 0)
    stats[bh * sh.s + i] = sawNan ? AttentionRowStats<C>{nan, nan, nan}
                           : live ? AttentionRowStats<C>{m, sum, delta}
                                  : AttentionRowStats<C>{kNegInf, C(0), C(0)};

  // Sweep 2: dq = scale * sum_j P_j (dP_j - delta) k_j.
  C acc[L::kCols];
  for (int x = 0; x < L::kCols; ++x)
    acc[x] = C(0);
  for (int64_t j0 = begin; j0 < end; j0 += kRows) {
    loadTile<kRows, kPad>(ks, kHead, j0, sh.t, sh.d);
    loadTile<kRows, kPad>(vs, vHead, j0, sh.t, sh.dv);
    __syncthreads();
    if (sub < kRows) {
      C dots[kPer], dpDots[kPer];
      dotRows<kPer, kGroup, kPad>(dots, qs[r], ks, sub, sh.d);
      dotRows<kPer, kGroup, kPad>(dpDots, dos[r], vs, sub, sh.dv);
      for (int x = 0; x < kPer; ++x) {
        const int jj = sub + x * kGroup;
        C p = C(0), ds = C(0);
        if (live) {
          C s = scoreOf<T>(sh, maskAt, dots[x], b, h, i, j0 + jj);
          p = s == kNegInf ? C(0) : kExp(s - m) / sum;
          if (p != C(0))
            ds = p * (dpDots[x] - delta) * capSlope(sh, dots[x]);
        }
        ps[r][jj] = p;
        dps[r][jj] = ds;
      }
    }
    __syncthreads();
    for (int jj = 0; jj < kRows; ++jj) {
      if (ps[r][jj] == C(0))
        continue;
      C ds = dps[r][jj];
      for (int x = 0; x < L::kCols; ++x)
        acc[x] = mulAdd(ds, ks[jj][sub + x * kGroup], acc[x]);
    }
    __syncthreads();
  }
  if (i >= sh.s)
    return;
  T *dqRow = dq + (bh * sh.s + i) * sh.d;
  for (int x = 0; x < L::kCols; ++x) {
    int64_t c = sub + x * kGroup;
    if (c >= sh.d)
      break;
    dqRow[c] = store<T>(sawNan ? nan : acc[x] * static_cast<C>(sh.scale));
  }
}

template <typename T, int kD>
__global__ void
attentionGradKeyKernel(AttentionShape sh, const T *q, const T *k, const T *v,
                       const void *mask, const T *dy, T *dk, T *dv,
                       const AttentionRowStats<Compute<T>> *stats) {
  using C = Compute<T>;
  using L = AttentionTile<C, kD>;
  constexpr int kRows = L::kRows, kGroup = L::kGroup, kPad = L::kPad,
                kPer = L::kPer;
  __shared__ C ks[kRows][kPad], vs[kRows][kPad], qs[kRows][kPad],
      dos[kRows][kPad];
  __shared__ C ps[kRows][kRows + 1], dss[kRows][kRows + 1];
  __shared__ AttentionRowStats<C> rowStats[kRows];
  const C kNegInf = -kInfinity<C>();
  const C scale = static_cast<C>(sh.scale);
  // Thread (r, sub) owns key j0 + r: it scores the key against every
  // kGroup-th row of a query tile and sums the key's dk/dv columns.
  const int r = threadIdx.x / kGroup, sub = threadIdx.x % kGroup;
  const int64_t tiles = (sh.t + kRows - 1) / kRows;
  const int64_t bhk = blockIdx.x / tiles, j0 = (blockIdx.x % tiles) * kRows;
  const int64_t b = bhk / sh.hkv, hk = bhk % sh.hkv, group = sh.h / sh.hkv;
  const int64_t j = j0 + r;
  const DeviceMask<T> maskAt{mask, sh.maskKind, sh.maskStrides, sh.t - sh.s};

  loadTile<kRows, kPad>(ks, k + bhk * sh.t * sh.d, j0, sh.t, sh.d);
  loadTile<kRows, kPad>(vs, v + bhk * sh.t * sh.dv, j0, sh.t, sh.dv);
  C dkAcc[L::kCols], dvAcc[L::kCols];
  for (int x = 0; x < L::kCols; ++x)
    dkAcc[x] = dvAcc[x] = C(0);
  // Causal: rows at positions i + t - s >= j0 only; with a window, rows
  // whose window still reaches the tile's last key. Rows that see none of
  // the tile add nothing, so skipping them changes no bit.
  const int64_t shift = sh.t - sh.s;
  const int64_t first = sh.causal && j0 > shift ? j0 - shift : 0;
  int64_t last = sh.s;
  if (sh.causal && sh.window > 0 && j0 + kRows - 1 - shift + sh.window < last)
    last = j0 + kRows - 1 - shift + sh.window;
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = hk * group + g, bh = b * sh.h + h;
    for (int64_t i0 = first; i0 < last; i0 += kRows) {
      loadTile<kRows, kPad>(qs, q + bh * sh.s * sh.d, i0, sh.s, sh.d);
      loadTile<kRows, kPad>(dos, dy + bh * sh.s * sh.dv, i0, sh.s, sh.dv);
      if (threadIdx.x < kRows && i0 + threadIdx.x < sh.s)
        rowStats[threadIdx.x] = stats[bh * sh.s + i0 + threadIdx.x];
      __syncthreads();
      if (sub < kRows) {
        C dots[kPer], dpDots[kPer];
        dotRows<kPer, kGroup, kPad>(dots, ks[r], qs, sub, sh.d);
        dotRows<kPer, kGroup, kPad>(dpDots, vs[r], dos, sub, sh.dv);
        for (int x = 0; x < kPer; ++x) {
          const int ii = sub + x * kGroup;
          const int64_t i = i0 + ii;
          C p = C(0), ds = C(0);
          // sum == 0: every key of the row masked, no gradient flows.
          if (i < sh.s && rowStats[ii].sum != C(0)) {
            C s = scoreOf<T>(sh, maskAt, dots[x], b, h, i, j);
            if (s != kNegInf) {
              const AttentionRowStats<C> st = rowStats[ii];
              p = kExp(s - st.max) / st.sum;
              if (p != C(0))
                ds = p * (dpDots[x] - st.delta) * capSlope(sh, dots[x]) * scale;
            }
          }
          ps[r][ii] = p;
          dss[r][ii] = ds;
        }
      }
      __syncthreads();
      for (int ii = 0; ii < kRows; ++ii) {
        C p = ps[r][ii];
        if (p == C(0))
          continue;
        C ds = dss[r][ii];
        for (int x = 0; x < L::kCols; ++x) {
          dvAcc[x] = mulAdd(p, dos[ii][sub + x * kGroup], dvAcc[x]);
          dkAcc[x] = mulAdd(ds, qs[ii][sub + x * kGroup], dkAcc[x]);
        }
      }
      __syncthreads();
    }
  }
  if (j >= sh.t)
    return;
  for (int x = 0; x < L::kCols; ++x) {
    int64_t c = sub + x * kGroup;
    if (c < sh.d)
      dk[(bhk * sh.t + j) * sh.d + c] = store<T>(dkAcc[x]);
    if (c < sh.dv)
      dv[(bhk * sh.t + j) * sh.dv + c] = store<T>(dvAcc[x]);
  }
}

/// fn(std::integral_constant<int, kD>) for the head-width bucket of the
/// widest of d and dv (the dispatch refuses heads above kMaxHeadDim).
template <typename Fn> void visitHeadWidth(const AttentionShape &sh, Fn &&fn) {
  int64_t width = sh.d > sh.dv ? sh.d : sh.dv;
  if (width <= 64)
    fn(std::integral_constant<int, 64>{});
  else if (width <= 128)
    fn(std::integral_constant<int, 128>{});
  else
    fn(std::integral_constant<int, 256>{});
}

/// Blocks of `tiles` row tiles for each of `heads` heads; a grid past what
/// one launch takes is refused rather than cut short.
template <typename T, int kD>
bool tileBlocks(int64_t heads, int64_t length, unsigned &blocks) {
  constexpr int kRows = AttentionTile<Compute<T>, kD>::kRows;
  int64_t n = heads * ((length + kRows - 1) / kRows);
  if (n > INT_MAX)
    return false;
  blocks = static_cast<unsigned>(n);
  return true;
}

} // namespace

/// The sinks' gradient: one thread a head sums its rows' -P_sink delta
/// (kernels::attentionSinkGrad) in (batch, row) order, as the host does.
template <typename T>
__global__ void
attentionSinkGradKernel(AttentionShape sh,
                        const AttentionRowStats<Compute<T>> *stats) {
  using C = Compute<T>;
  const int64_t h = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h >= sh.h)
    return;
  const C sink = load(static_cast<const T *>(sh.sinks)[h]);
  C sum = C(0);
  for (int64_t b = 0; b < sh.b; ++b)
    for (int64_t i = 0; i < sh.s; ++i)
      sum += attentionSinkGrad(stats[(b * sh.h + h) * sh.s + i], sink);
  static_cast<T *>(sh.sinksGrad)[h] = store<T>(sum);
}

cudaError_t launchAttention(const LaunchContext &ctx, DType dtype,
                            const AttentionShape &shape, const void *q,
                            const void *k, const void *v, const void *mask,
                            void *out) {
  const int64_t rows = shape.b * shape.h * shape.s;
  if (rows == 0 || shape.dv == 0)
    return cudaSuccess;
  cudaError_t error = cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitHeadWidth(shape, [&](auto width) {
      constexpr int kD = decltype(width)::value;
      unsigned blocks = 0;
      if (!tileBlocks<T, kD>(shape.b * shape.h, shape.s, blocks)) {
        error = cudaErrorInvalidConfiguration;
        return;
      }
      attentionKernel<T, kD><<<blocks, kAttentionThreads, 0, ctx.stream>>>(
          shape, static_cast<const T *>(q), static_cast<const T *>(k),
          static_cast<const T *>(v), mask, static_cast<T *>(out));
    });
  });
  return error != cudaSuccess ? error : lastLaunchError();
}

size_t attentionGradScratchBytes(DType dtype, const AttentionShape &shape) {
  size_t c = dtype == DType::f64 ? 8 : 4;
  return size_t(shape.b * shape.h * shape.s) * 3 * c + 64;
}

cudaError_t launchAttentionGrad(const LaunchContext &ctx, DType dtype,
                                const AttentionShape &shape, const void *q,
                                const void *k, const void *v, const void *mask,
                                const void *dy, void *dq, void *dk, void *dv,
                                void *scratch) {
  const int64_t rows = shape.b * shape.h * shape.s;
  const int64_t keys = shape.b * shape.hkv * shape.t;
  cudaError_t error = cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto *stats = static_cast<AttentionRowStats<Compute<T>> *>(scratch);
    visitHeadWidth(shape, [&](auto width) {
      constexpr int kD = decltype(width)::value;
      unsigned queryBlocks = 0, keyBlocks = 0;
      if (!tileBlocks<T, kD>(shape.b * shape.h, shape.s, queryBlocks) ||
          !tileBlocks<T, kD>(shape.b * shape.hkv, shape.t, keyBlocks)) {
        error = cudaErrorInvalidConfiguration;
        return;
      }
      if (rows > 0) {
        attentionGradQueryKernel<T, kD>
            <<<queryBlocks, kAttentionThreads, 0, ctx.stream>>>(
                shape, static_cast<const T *>(q), static_cast<const T *>(k),
                static_cast<const T *>(v), mask, static_cast<const T *>(dy),
                static_cast<T *>(dq), stats);
        if ((error = lastLaunchError()) != cudaSuccess)
          return;
        if (shape.sinksGrad) {
          constexpr unsigned kSinkThreads = 64;
          attentionSinkGradKernel<T>
              <<<unsigned((shape.h + kSinkThreads - 1) / kSinkThreads),
                 kSinkThreads, 0, ctx.stream>>>(shape, stats);
          if ((error = lastLaunchError()) != cudaSuccess)
            return;
        }
      }
      if (keys > 0)
        attentionGradKeyKernel<T, kD>
            <<<keyBlocks, kAttentionThreads, 0, ctx.stream>>>(
                shape, static_cast<const T *>(q), static_cast<const T *>(k),
                static_cast<const T *>(v), mask, static_cast<const T *>(dy),
                static_cast<T *>(dk), static_cast<T *>(dv), stats);
    });
  });
  return error != cudaSuccess ? error : lastLaunchError();
}

} // namespace rp::runtime::cuda
