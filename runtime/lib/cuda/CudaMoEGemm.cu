//===- CudaMoEGemm.cu - the MoE grouped matmuls' kernels on cuda ----------===//
//
// The device half of moe_grouped_matmul and its weight gradient
// (CudaMoEDispatch.cpp holds the cuBLAS call): group offsets from the
// per-expert counts, checked on the device; the one-thread plan that fills
// cublasGemmBatchedEx's pointer arrays with fixed-size tiles; the copy of
// the groups' partial tiles; and the weight gradient, a tiled kernel whose
// blocks each own one output tile and sum their group's rows in row order
// (no float atomics). Semantics: host/HostMoE.cpp.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaMoE.h"

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {
/// Offsets of the groups from their counts, checked as the host checks
/// them; on a bad count every group is empty after it is reported.
__global__ void groupOffsetsKernel(LaunchContext ctx, const int32_t *counts,
                                   int64_t experts, int64_t numRows,
                                   int64_t *offsets) {
  offsets[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    if (counts[e] < 0 || offsets[e] + counts[e] > numRows) {
      reportError(ctx, kGroupsOverflow, e, counts[e], numRows);
      for (int64_t f = 0; f <= experts; ++f)
        offsets[f] = 0;
      return;
    }
    offsets[e + 1] = offsets[e] + counts[e];
  }
}

/// One thread: the batch's pointer arrays. Full tiles of a group write
/// their rows of `out`; its last, partial tile ends at the group's end
/// (starting earlier, so it never reads past the input) and writes its
/// expert's partial slot; the tiles left over compute into the idle slot.
__global__ void gemmPlanKernel(MoEGemmTiles t, const int64_t *offsets,
                               int64_t experts, const char *x, int64_t kIn,
                               const char *weight, int64_t weightMatrix,
                               char *out, int64_t nOut, size_t es,
                               char *scratch) {
  const void **a = reinterpret_cast<const void **>(scratch + t.pointersAt);
  const void **b = a + t.numTiles;
  void **c = const_cast<void **>(b + t.numTiles);
  char *partial = scratch + t.partialAt;
  const int64_t R = t.tileRows, slot = R * nOut * int64_t(es);
  int64_t tile = 0;
  auto add = [&](int64_t e, int64_t row, char *dst) {
    a[tile] = weight + e * weightMatrix * int64_t(es);
    b[tile] = x + row * kIn * int64_t(es);
    c[tile] = dst;
    ++tile;
  };
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t begin = offsets[e], end = offsets[e + 1];
    const int64_t full = (end - begin) / R;
    for (int64_t f = 0; f < full; ++f)
      add(e, begin + f * R, out + (begin + f * R) * nOut * int64_t(es));
    if ((end - begin) % R)
      add(e, end - R < 0 ? 0 : end - R, partial + e * slot);
  }
  while (tile < t.numTiles)
    add(0, 0, partial + experts * slot);
}

template <typename U>
__global__ void gemmFinishKernel(MoEGemmTiles t, const int64_t *offsets,
                                 int64_t experts, int64_t nOut,
                                 const U *partial, U *out, int64_t n) {
  RP_GRID_LOOP(item, n) {
    const int64_t row = item / nOut, col = item % nOut;
    if (row >= offsets[experts]) {
      out[item] = U(0); // Past the groups: a capacity's unused rows.
      continue;
    }
    int64_t lo = 0, hi = experts; // The group holding `row`.
    while (hi - lo > 1) {
      int64_t mid = (lo + hi) / 2;
      (offsets[mid] <= row ? lo : hi) = mid;
    }
    while (offsets[lo + 1] <= row) // Skip empty groups at `lo`.
      ++lo;
    const int64_t begin = offsets[lo], end = offsets[lo + 1];
    const int64_t R = t.tileRows;
    if (row - begin < (end - begin) / R * R)
      continue; // A full tile wrote it.
    const int64_t start = end - R < 0 ? 0 : end - R;
    out[item] = partial[(lo * R + row - start) * nOut + col];
  }
}

constexpr int kWTile = 16;

/// Block (i, j, e): tile (i, j) of dW[e], summing the group's rows in row
/// order kWTile at a time.
template <typename T>
__global__ void wgradKernel(const int64_t *offsets, const T *p, int64_t pCols,
                            const T *q, int64_t qCols, T *dw) {
  using C = Compute<T>;
  __shared__ C ps[kWTile][kWTile + 1], qs[kWTile][kWTile + 1];
  const int64_t e = blockIdx.z;
  const int64_t i = int64_t(blockIdx.y) * kWTile + threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kWTile + threadIdx.x;
  const int64_t begin = offsets[e], end = offsets[e + 1];
  C acc = 0;
  for (int64_t base = begin; base < end; base += kWTile) {
    // Thread (y, x) loads row base + y of p's column tile and of q's.
    int64_t r = base + threadIdx.y;
    int64_t pc = int64_t(blockIdx.y) * kWTile + threadIdx.x;
    int64_t qc = int64_t(blockIdx.x) * kWTile + threadIdx.x;
    ps[threadIdx.y][threadIdx.x] =
        r < end && pc < pCols ? load(p[r * pCols + pc]) : C(0);
    qs[threadIdx.y][threadIdx.x] =
        r < end && qc < qCols ? load(q[r * qCols + qc]) : C(0);
    __syncthreads();
    const int64_t rows = end - base < kWTile ? end - base : kWTile;
    for (int64_t s = 0; s < rows; ++s)
      acc += ps[s][threadIdx.y] * qs[s][threadIdx.x];
    __syncthreads();
  }
  if (i < pCols && j < qCols)
    dw[(e * pCols + i) * qCols + j] = store<T>(acc);
}

size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Thread e: expert e's problem of the weight gradient's grouped GEMM.
__global__ void groupedProblemsKernel(MoEGroupedProblems l, int64_t experts,
                                      const char *p, int64_t pCols,
                                      const char *q, int64_t qCols,
                                      char *dweight, size_t es, char *base) {
  const int64_t *offsets =
      reinterpret_cast<const int64_t *>(base + l.offsetsAt);
  int32_t *sizes = reinterpret_cast<int32_t *>(base + l.sizesAt);
  const void **ptrs = reinterpret_cast<const void **>(base + l.pointersAt);
  int64_t *lds = reinterpret_cast<int64_t *>(base + l.ldsAt);
  RP_GRID_LOOP(e, experts) {
    const int64_t begin = offsets[e], rows = offsets[e + 1] - begin;
    sizes[3 * e] = rows ? int32_t(pCols) : 0;
    sizes[3 * e + 1] = rows ? int32_t(qCols) : 0;
    sizes[3 * e + 2] = int32_t(rows);
    ptrs[e] = p + begin * pCols * int64_t(es);
    ptrs[experts + e] = q + begin * qCols * int64_t(es);
    ptrs[2 * experts + e] = dweight + e * pCols * qCols * int64_t(es);
    lds[e] = pCols;
    lds[experts + e] = qCols;
    lds[2 * experts + e] = qCols;
  }
}

} // namespace

MoEGemmTiles rp::runtime::cuda::moeGemmTiles(int64_t numRows, int64_t experts,
                                             int64_t nOut, size_t es) {
  // 128 rows a tile: the padding work (one partial tile per expert) stays
  // small beside the rows, and a GEMM of 128 rows fills a tensor-core tile.
  MoEGemmTiles t;
  t.tileRows = numRows < 128 ? numRows : 128;
  if (t.tileRows == 0)
    return t;
  t.numTiles = numRows / t.tileRows + experts;
  t.offsetsAt = 0;
  t.pointersAt = align(size_t(experts + 1) * sizeof(int64_t));
  t.partialAt = t.pointersAt + align(3 * size_t(t.numTiles) * sizeof(void *));
  t.bytes = t.partialAt + size_t(experts + 1) * t.tileRows * nOut * es;
  return t;
}

cudaError_t rp::runtime::cuda::launchMoEGemmPlan(
    const LaunchContext &ctx, const MoEGemmTiles &t, const int32_t *counts,
    int64_t experts, int64_t numRows, const void *x, int64_t kIn,
    const void *weight, int64_t weightMatrix, void *out, int64_t nOut,
    size_t es, void *scratch) {
  char *base = static_cast<char *>(scratch);
  int64_t *offsets = reinterpret_cast<int64_t *>(base + t.offsetsAt);
  groupOffsetsKernel<<<1, 1, 0, ctx.stream>>>(ctx, counts, experts, numRows,
                                              offsets);
  if (t.numTiles > 0)
    gemmPlanKernel<<<1, 1, 0, ctx.stream>>>(
        t, offsets, experts, static_cast<const char *>(x), kIn,
        static_cast<const char *>(weight), weightMatrix,
        static_cast<char *>(out), nOut, es, base);
  return lastLaunchError();
}

cudaError_t rp::runtime::cuda::launchMoEGemmFinish(
    const LaunchContext &ctx, const MoEGemmTiles &t, int64_t experts,
    int64_t numRows, int64_t nOut, size_t es, void *out, const void *scratch) {
  const char *base = static_cast<const char *>(scratch);
  const int64_t *offsets =
      reinterpret_cast<const int64_t *>(base + t.offsetsAt);
  const int64_t n = numRows * nOut;
  if (n > 0)
    visitElementSize(es, [&](auto tag) {
      using U = typename decltype(tag)::type;
      gemmFinishKernel<U><<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          t, offsets, experts, nOut,
          reinterpret_cast<const U *>(base + t.partialAt),
          static_cast<U *>(out), n);
    });
  return lastLaunchError();
}

size_t rp::runtime::cuda::moeOffsetsScratchBytes(int64_t experts) {
  return size_t(experts + 1) * sizeof(int64_t);
}

cudaError_t rp::runtime::cuda::launchMoEWGrad(
    const LaunchContext &ctx, DType dtype, const int32_t *counts,
    int64_t experts, int64_t numRows, const void *p, int64_t pCols,
    const void *q, int64_t qCols, void *dweight, void *scratch) {
  int64_t *offsets = static_cast<int64_t *>(scratch);
  groupOffsetsKernel<<<1, 1, 0, ctx.stream>>>(ctx, counts, experts, numRows,
                                              offsets);
  if (experts == 0 || pCols == 0 || qCols == 0)
    return lastLaunchError();
  dim3 grid(unsigned((qCols + kWTile - 1) / kWTile),
            unsigned((pCols + kWTile - 1) / kWTile), unsigned(experts));
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    wgradKernel<T><<<grid, dim3(kWTile, kWTile), 0, ctx.stream>>>(
        offsets, static_cast<const T *>(p), pCols, static_cast<const T *>(q),
        qCols, static_cast<T *>(dweight));
  });
  return lastLaunchError();
}

MoEGroupedProblems rp::runtime::cuda::moeGroupedProblems(int64_t experts) {
  MoEGroupedProblems l;
  const size_t e = size_t(experts);
  l.offsetsAt = 0;
  l.sizesAt = align((e + 1) * sizeof(int64_t));
  l.pointersAt = l.sizesAt + align(3 * e * sizeof(int32_t));
  l.ldsAt = l.pointersAt + align(3 * e * sizeof(void *));
  l.bytes = l.ldsAt + align(3 * e * sizeof(int64_t));
  return l;
}

cudaError_t rp::runtime::cuda::launchMoEGroupedProblems(
    const LaunchContext &ctx, const MoEGroupedProblems &layout,
    const int32_t *counts, int64_t experts, int64_t numRows, const void *p,
    int64_t pCols, const void *q, int64_t qCols, void *dweight, size_t es,
    void *scratch) {
  char *base = static_cast<char *>(scratch);
  groupOffsetsKernel<<<1, 1, 0, ctx.stream>>>(
      ctx, counts, experts, numRows,
      reinterpret_cast<int64_t *>(base + layout.offsetsAt));
  if (experts > 0)
    groupedProblemsKernel<<<blocksFor(experts), kThreadsPerBlock, 0,
                            ctx.stream>>>(
        layout, experts, static_cast<const char *>(p), pCols,
        static_cast<const char *>(q), qCols, static_cast<char *>(dweight), es,
        base);
  return lastLaunchError();
}
