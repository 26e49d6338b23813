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
// This file holds the forward; the backward's passes are in
// CudaAttentionGrad.cu, what both use in CudaAttentionTiles.cuh.
//
//===----------------------------------------------------------------------===//

#include "CudaAttentionTiles.cuh"

namespace rp::runtime::cuda {

namespace {

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
  const QueryTileThread<T, kRows, kGroup> at(sh, k, v);
  const int r = at.r, sub = at.sub;
  const int64_t bh = at.bh, i0 = at.i0, b = at.b, h = at.h, i = at.i;
  const T *kHead = at.kHead, *vHead = at.vHead;
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
  addSink<T>(sh, h, runningMax, runningSum, sawNan, [&](C correction) {
    for (int x = 0; x < L::kCols; ++x)
      acc[x] *= correction;
  });
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

} // namespace

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

} // namespace rp::runtime::cuda
