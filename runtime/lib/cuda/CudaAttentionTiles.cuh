//===- CudaAttentionTiles.cuh - the attention kernels' parts -*- CUDA -*-===//
//
// What the forward (CudaAttention.cu, which describes the algorithm) and
// the backward (CudaAttentionGrad.cu) share: the tiling of a head-width
// bucket, the mask reader, shared-memory tiles, dot products, a (query,
// key) pair's score, the key tiles a query tile visits, the online
// softmax's row max and sink, a query-tile block's coordinates, and the
// launch helpers. Private to lib/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDAATTENTIONTILES_CUH
#define RP_LIB_CUDA_CUDAATTENTIONTILES_CUH

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

/// A query-tile block's thread: its tile row r and lane sub, the block's
/// (batch, head) bh (from blockIdx.x as above) and the rows of that head's
/// key/value head, the tile's first row i0 and the thread's query row i.
/// The forward and the dq pass run such blocks.
template <typename T, int kRows, int kGroup> struct QueryTileThread {
  int r, sub;
  int64_t bh, i0, b, h, i;
  const T *kHead, *vHead;

  __device__ QueryTileThread(const AttentionShape &sh, const T *k, const T *v)
      : r(threadIdx.x / kGroup), sub(threadIdx.x % kGroup) {
    const int64_t tiles = (sh.s + kRows - 1) / kRows;
    bh = blockIdx.x % (sh.b * sh.h);
    i0 = (tiles - 1 - blockIdx.x / (sh.b * sh.h)) * kRows;
    b = bh / sh.h;
    h = bh % sh.h;
    const int64_t hk = h / (sh.h / sh.hkv);
    i = i0 + r;
    kHead = k + (b * sh.hkv + hk) * sh.t * sh.d;
    vHead = v + (b * sh.hkv + hk) * sh.t * sh.dv;
  }
};

/// GPT-OSS's sink of head h, when the call has sinks: one more logit in a
/// row's online softmax, with no value, after the keys (as
/// kernels::attentionRow). It enters the running max (the running sum and,
/// through `rescale(correction)`, what else the row accumulates are
/// rescaled when it grows) and the sum; a NaN sink makes the row NaN.
template <typename T, typename C, typename Rescale>
__device__ void addSink(const AttentionShape &sh, int64_t h, C &runningMax,
                        C &runningSum, bool &sawNan, Rescale &&rescale) {
  if (!sh.sinks)
    return;
  const C sink = load(static_cast<const T *>(sh.sinks)[h]);
  sawNan = sawNan || kIsNan(sink);
  if (sink > runningMax) {
    C correction = kExp(runningMax - sink);
    runningSum *= correction;
    rescale(correction);
    runningMax = sink;
  }
  runningSum += kExp(sink - runningMax);
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

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAATTENTIONTILES_CUH
