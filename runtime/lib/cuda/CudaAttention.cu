//===- CudaAttention.cu - fused attention forward and backward ------------===//
//
// Flash-style: the S x T scores are never stored. Forward: one thread per
// query row runs kernels::attentionRow, the online softmax over key blocks
// the host kernel runs (host/HostAttention.cpp); its memory is one
// accumulator of the value width. Backward, in two kernels as the host's:
//
// 1. one thread per query row runs attentionGradQueryRowStreaming (the
//    same values as the host's attentionGradQueryRow, each score recomputed
//    instead of kept in two arrays of the key count), writes dq and keeps
//    (max, sum, delta), three values per row;
// 2. one thread per key (of a key/value head) adds, in a fixed order
//    (query heads of its group, then query rows), every row's contribution
//    with attentionGradKeyRows, and writes its own dk and dv rows. No two
//    threads write the same element: no atomics, the same bits every run.
//
// Scratch: the three statistics per query row, linear in the sequence
// length. Head widths are bounded by kMaxHeadDim (the per-thread
// accumulators); the dispatch refuses wider heads with a message.
//
// This is the plain form of the algorithm, one thread per row with no
// shared-memory tiling or tensor cores: exact and simple first, fast later.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

#include "rp/runtime/kernels/Attention.h"
#include "rp/runtime/kernels/AttentionGrad.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

/// The mask bias of key j for a query row (host/HostAttentionCommon.h's
/// MaskReader): i1 keeps true positions, a float mask is added.
template <typename T> struct DeviceMask {
  const void *mask;
  int kind;
  int64_t base, stride;

  __device__ Compute<T> operator()(int64_t j) const {
    using C = Compute<T>;
    if (kind == 1)
      return static_cast<const Bool8 *>(mask)[base + j * stride]
                 ? C(0)
                 : -kInfinity<C>();
    if (kind == 2)
      return load(static_cast<const T *>(mask)[base + j * stride]);
    return C(0);
  }
};

template <typename T>
__device__ DeviceMask<T> maskFor(const AttentionShape &sh, const void *mask,
                                 int64_t b, int64_t h, int64_t i,
                                 int64_t firstKey) {
  const int64_t *ms = sh.maskStrides;
  return DeviceMask<T>{mask, sh.maskKind,
                       b * ms[0] + h * ms[1] + i * ms[2] + firstKey * ms[3],
                       ms[3]};
}

template <typename T>
__global__ void attentionKernel(AttentionShape sh, const T *q, const T *k,
                                const T *v, const void *mask, T *out) {
  using C = Compute<T>;
  const int64_t rows = sh.b * sh.h * sh.s;
  const int64_t group = sh.h / sh.hkv;
  C acc[kMaxHeadDim];
  RP_GRID_LOOP(row, rows) {
    int64_t bh = row / sh.s, i = row % sh.s;
    int64_t b = bh / sh.h, h = bh % sh.h, hk = h / group;
    const T *kHead = k + (b * sh.hkv + hk) * sh.t * sh.d;
    const T *vHead = v + (b * sh.hkv + hk) * sh.t * sh.dv;
    int64_t numKeys = sh.causal ? (i + 1 < sh.t ? i + 1 : sh.t) : sh.t;
    attentionRow<T>(q + row * sh.d, kHead, vHead, out + row * sh.dv, numKeys,
                    sh.d, sh.dv, static_cast<C>(sh.scale),
                    maskFor<T>(sh, mask, b, h, i, 0), acc);
  }
}

template <typename T>
__global__ void attentionGradQueryKernel(AttentionShape sh, const T *q,
                                         const T *k, const T *v,
                                         const void *mask, const T *dy, T *dq,
                                         AttentionRowStats<Compute<T>> *stats) {
  using C = Compute<T>;
  const int64_t rows = sh.b * sh.h * sh.s;
  const int64_t group = sh.h / sh.hkv;
  C acc[kMaxHeadDim];
  RP_GRID_LOOP(row, rows) {
    int64_t bh = row / sh.s, i = row % sh.s;
    int64_t b = bh / sh.h, h = bh % sh.h, hk = h / group;
    const T *kHead = k + (b * sh.hkv + hk) * sh.t * sh.d;
    const T *vHead = v + (b * sh.hkv + hk) * sh.t * sh.dv;
    int64_t numKeys = sh.causal ? (i + 1 < sh.t ? i + 1 : sh.t) : sh.t;
    stats[row] = attentionGradQueryRowStreaming<T>(
        q + row * sh.d, kHead, vHead, dy + row * sh.dv, dq + row * sh.d,
        numKeys, sh.d, sh.dv, static_cast<C>(sh.scale),
        maskFor<T>(sh, mask, b, h, i, 0), acc);
  }
}

template <typename T>
__global__ void
attentionGradKeyKernel(AttentionShape sh, const T *q, const T *k, const T *v,
                       const void *mask, const T *dy, T *dk, T *dv,
                       const AttentionRowStats<Compute<T>> *stats) {
  using C = Compute<T>;
  const int64_t keys = sh.b * sh.hkv * sh.t;
  const int64_t group = sh.h / sh.hkv;
  C dkAcc[kMaxHeadDim], dvAcc[kMaxHeadDim];
  RP_GRID_LOOP(key, keys) {
    int64_t bhk = key / sh.t, j = key % sh.t;
    int64_t b = bhk / sh.hkv, hk = bhk % sh.hkv;
    for (int64_t c = 0; c < sh.d; ++c)
      dkAcc[c] = C(0);
    for (int64_t c = 0; c < sh.dv; ++c)
      dvAcc[c] = C(0);
    const T *kRow = k + key * sh.d;
    const T *vRow = v + key * sh.dv;
    for (int64_t g = 0; g < group; ++g) {
      int64_t h = hk * group + g, bh = b * sh.h + h;
      // Causal: only rows i >= j see key j.
      for (int64_t i = sh.causal ? j : 0; i < sh.s; ++i) {
        int64_t row = bh * sh.s + i;
        attentionGradKeyRows<T>(q + row * sh.d, dy + row * sh.dv, kRow, vRow, 1,
                                sh.d, sh.dv, static_cast<C>(sh.scale),
                                maskFor<T>(sh, mask, b, h, i, j), stats[row],
                                dkAcc, dvAcc);
      }
    }
    for (int64_t c = 0; c < sh.d; ++c)
      dk[key * sh.d + c] = store<T>(dkAcc[c]);
    for (int64_t c = 0; c < sh.dv; ++c)
      dv[key * sh.dv + c] = store<T>(dvAcc[c]);
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
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attentionKernel<<<blocksFor(rows), kThreadsPerBlock, 0, ctx.stream>>>(
        shape, static_cast<const T *>(q), static_cast<const T *>(k),
        static_cast<const T *>(v), mask, static_cast<T *>(out));
  });
  return lastLaunchError();
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
    if (rows > 0) {
      attentionGradQueryKernel<<<blocksFor(rows), kThreadsPerBlock, 0,
                                 ctx.stream>>>(
          shape, static_cast<const T *>(q), static_cast<const T *>(k),
          static_cast<const T *>(v), mask, static_cast<const T *>(dy),
          static_cast<T *>(dq), stats);
      if ((error = lastLaunchError()) != cudaSuccess)
        return;
    }
    if (keys > 0)
      attentionGradKeyKernel<<<blocksFor(keys), kThreadsPerBlock, 0,
                               ctx.stream>>>(
          shape, static_cast<const T *>(q), static_cast<const T *>(k),
          static_cast<const T *>(v), mask, static_cast<const T *>(dy),
          static_cast<T *>(dk), static_cast<T *>(dv), stats);
  });
  return error != cudaSuccess ? error : lastLaunchError();
}

} // namespace rp::runtime::cuda
