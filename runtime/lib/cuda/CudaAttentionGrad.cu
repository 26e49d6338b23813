//===- CudaAttentionGrad.cu - fused attention backward -------------------===//
//
// The backward of CudaAttention.cu's attention (whose comment describes
// both): pass 1, a block per (batch, head, query tile), writes dq and each
// query row's (max, sum, delta); the sinks' gradient sums those rows per
// head; pass 2, a block per (batch, key/value head, key tile), writes dk
// and dv from the rows' statistics. The tiles and helpers are
// CudaAttentionTiles.cuh's.
//
//===----------------------------------------------------------------------===//

#include "CudaAttentionTiles.cuh"

namespace rp::runtime::cuda {

namespace {

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
  const QueryTileThread<T, kRows, kGroup> at(sh, k, v);
  const int r = at.r, sub = at.sub;
  const int64_t bh = at.bh, i0 = at.i0, b = at.b, h = at.h, i = at.i;
  const T *kHead = at.kHead, *vHead = at.vHead;
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
  // The sink's dP is 0: `weighted` is only rescaled.
  addSink<T>(sh, h, m, sum, sawNan,
             [&](C correction) { weighted *= correction; });
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
