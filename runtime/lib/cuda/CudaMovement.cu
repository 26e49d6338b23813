//===- CudaMovement.cu - data movement kernels of the cuda device ---------===//
//
// transpose, slice and broadcast (one strided copy), slice_grad's strided
// write, gather and gather_grad. reshape and concat need no kernel: the
// dispatch turns them into cudaMemcpyAsync / cudaMemcpy2DAsync.
//
// gather_grad sums repeated indices in index order, as the host kernel
// (host/HostGradients.cpp): a parallel counting sort lists, per position
// along the axis, the index positions pointing at it in increasing order
// (and checks every index); then each dx element adds its dy elements in
// that order in the compute type. Only integers are combined with atomics,
// so every run gives the same bits.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

namespace rp::runtime::cuda {

namespace {

template <typename U>
__global__ void stridedCopyKernel(ElementMap map, const U *in, U *out,
                                  int64_t n) {
  RP_GRID_LOOP(i, n) { out[i] = in[mapOffset(map, 0, i)]; }
}

template <typename U>
__global__ void stridedScatterKernel(ElementMap map, const U *in, U *out,
                                     int64_t n) {
  RP_GRID_LOOP(i, n) { out[mapOffset(map, 0, i)] = in[i]; }
}

template <typename I>
__device__ int64_t readIndex(LaunchContext ctx, const I *indices, int64_t i,
                             int64_t axisSize) {
  int64_t index = static_cast<int64_t>(indices[i]);
  int64_t resolved = index < 0 ? index + axisSize : index;
  if (resolved < 0 || resolved >= axisSize) {
    reportError(ctx, kIndexOutOfRange, i, index, axisSize);
    return -1;
  }
  return resolved;
}

template <typename U, typename I>
__global__ void gatherKernel(LaunchContext ctx, const U *x, const I *indices,
                             int64_t axisSize, int64_t numIndices,
                             int64_t inner, U *out, int64_t n) {
  RP_GRID_LOOP(e, n) {
    int64_t item = e / inner, c = e % inner;
    int64_t o = item / numIndices, i = item % numIndices;
    int64_t a = readIndex(ctx, indices, i, axisSize);
    out[e] = a < 0 ? U(0) : x[(o * axisSize + a) * inner + c];
  }
}

// gather_grad's buckets: start[a] .. start[a + 1] delimit, in `bucket`, the
// index positions that read axis position a, in increasing order (a
// stable counting sort, what the host's loop gives). Four parallel steps:
// count each position's indices (integer atomics: the counts, hence the
// offsets, are exact); scan the counts into offsets in one block; drop
// each index into its bucket in any order; then give each its rank among
// its bucket's positions (those below it), which is its place. The last
// step reads a bucket once per member: a bucket of k indices costs k^2
// reads, over k threads.

/// Where an index out of range goes, and what firstBad holds without one.
constexpr unsigned long long kNoBadIndex = ~0ull;

/// The axis position index i reads, or -1 if out of range (not reported:
/// the scan reports the first bad one, so the report names the same index
/// on every run, the one the host names).
template <typename I>
__device__ int64_t resolveIndex(const I *indices, int64_t i, int64_t axisSize) {
  int64_t index = static_cast<int64_t>(indices[i]);
  int64_t resolved = index < 0 ? index + axisSize : index;
  return resolved < 0 || resolved >= axisSize ? -1 : resolved;
}

/// counts[a] (start[a + 1], zeroed before) += 1 per index reading a;
/// firstBad becomes the lowest position of a bad index.
template <typename I>
__global__ void countIndicesKernel(const I *indices, int64_t axisSize,
                                   int64_t numIndices, int64_t *start,
                                   unsigned long long *firstBad) {
  RP_GRID_LOOP(i, numIndices) {
    int64_t a = resolveIndex(indices, i, axisSize);
    if (a < 0)
      atomicMin(firstBad, static_cast<unsigned long long>(i));
    else
      atomicAdd(reinterpret_cast<unsigned long long *>(start + a + 1), 1ull);
  }
}

constexpr int kBucketScanThreads = 512;

/// One block: start[a + 1] (a count) becomes the counts' sum through a, and
/// fill[a] = start[a]; each thread takes a contiguous run of positions,
/// the runs' sums are scanned in shared memory. Reports the first bad
/// index.
template <typename I>
__global__ void scanBucketsKernel(LaunchContext ctx, const I *indices,
                                  int64_t axisSize, int64_t *start,
                                  int64_t *fill,
                                  const unsigned long long *firstBad) {
  __shared__ int64_t sums[kBucketScanThreads];
  const int t = int(threadIdx.x);
  const int64_t run = (axisSize + kBucketScanThreads - 1) / kBucketScanThreads;
  const int64_t lo = t * run < axisSize ? t * run : axisSize;
  const int64_t hi = lo + run < axisSize ? lo + run : axisSize;
  int64_t mine = 0;
  for (int64_t a = lo; a < hi; ++a)
    mine += start[a + 1];
  sums[t] = mine;
  __syncthreads();
  for (int step = 1; step < kBucketScanThreads; step <<= 1) {
    int64_t add = t >= step ? sums[t - step] : 0;
    __syncthreads();
    sums[t] += add;
    __syncthreads();
  }
  int64_t running = sums[t] - mine;
  for (int64_t a = lo; a < hi; ++a) {
    fill[a] = running;
    running += start[a + 1];
    start[a + 1] = running;
  }
  if (t == 0 && *firstBad != kNoBadIndex) {
    int64_t i = static_cast<int64_t>(*firstBad);
    reportError(ctx, kIndexOutOfRange, i, static_cast<int64_t>(indices[i]),
                axisSize);
  }
}

/// Each valid index into its bucket, in whatever order the atomics give.
template <typename I>
__global__ void fillBucketsKernel(const I *indices, int64_t axisSize,
                                  int64_t numIndices, int64_t *fill,
                                  int64_t *unordered) {
  RP_GRID_LOOP(i, numIndices) {
    int64_t a = resolveIndex(indices, i, axisSize);
    if (a >= 0)
      unordered[atomicAdd(reinterpret_cast<unsigned long long *>(fill + a),
                          1ull)] = i;
  }
}

/// Entry p of `unordered` to its place in `bucket`: its bucket's start plus
/// the count of its bucket's positions below it.
template <typename I>
__global__ void orderBucketsKernel(const I *indices, int64_t axisSize,
                                   int64_t numIndices, const int64_t *start,
                                   const int64_t *unordered, int64_t *bucket) {
  const int64_t placed = start[axisSize];
  RP_GRID_LOOP(p, numIndices) {
    if (p >= placed)
      continue;
    const int64_t i = unordered[p];
    const int64_t a = resolveIndex(indices, i, axisSize);
    int64_t at = start[a];
    for (int64_t q = start[a]; q < start[a + 1]; ++q)
      at += unordered[q] < i;
    bucket[at] = i;
  }
}

template <typename T>
__global__ void gatherGradKernel(const int64_t *start, const int64_t *bucket,
                                 int64_t axisSize, int64_t numIndices,
                                 int64_t inner, const T *dy, T *dx, int64_t n) {
  RP_GRID_LOOP(e, n) {
    int64_t item = e / inner, c = e % inner;
    int64_t o = item / axisSize, a = item % axisSize;
    Compute<T> acc = Compute<T>(0);
    for (int64_t b = start[a]; b < start[a + 1]; ++b)
      acc += load(dy[(o * numIndices + bucket[b]) * inner + c]);
    dx[e] = store<T>(acc);
  }
}

} // namespace

cudaError_t launchStridedCopy(const LaunchContext &ctx, size_t elementSize,
                              const ElementMap &map, const void *in, void *out,
                              int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitElementSize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    stridedCopyKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        map, static_cast<const U *>(in), static_cast<U *>(out), n);
  });
  return lastLaunchError();
}

cudaError_t launchStridedScatter(const LaunchContext &ctx, size_t elementSize,
                                 const ElementMap &map, const void *in,
                                 void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitElementSize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    stridedScatterKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        map, static_cast<const U *>(in), static_cast<U *>(out), n);
  });
  return lastLaunchError();
}

cudaError_t launchGather(const LaunchContext &ctx, size_t elementSize,
                         const void *x, const void *indices, bool indices64,
                         int64_t outer, int64_t axisSize, int64_t numIndices,
                         int64_t inner, void *out) {
  const int64_t n = outer * numIndices * inner;
  if (n == 0)
    return cudaSuccess;
  visitElementSize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (indices64)
      gatherKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          ctx, static_cast<const U *>(x), static_cast<const int64_t *>(indices),
          axisSize, numIndices, inner, static_cast<U *>(out), n);
    else
      gatherKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          ctx, static_cast<const U *>(x), static_cast<const int32_t *>(indices),
          axisSize, numIndices, inner, static_cast<U *>(out), n);
  });
  return lastLaunchError();
}

size_t gatherGradScratchBytes(int64_t axisSize, int64_t numIndices) {
  // start, fill, the unordered and the ordered buckets, firstBad.
  return sizeof(int64_t) * size_t(2 * axisSize + 2 + 2 * numIndices);
}

cudaError_t launchGatherGrad(const LaunchContext &ctx, DType dtype,
                             const void *indices, bool indices64, int64_t outer,
                             int64_t axisSize, int64_t numIndices,
                             int64_t inner, const void *dy, void *dx,
                             void *scratch) {
  const int64_t n = outer * axisSize * inner;
  if (n == 0)
    return cudaSuccess;
  int64_t *start = static_cast<int64_t *>(scratch);
  int64_t *fill = start + axisSize + 1;
  int64_t *unordered = fill + axisSize;
  int64_t *bucket = unordered + numIndices;
  auto *firstBad = reinterpret_cast<unsigned long long *>(bucket + numIndices);
  if (cudaError_t e = cudaMemsetAsync(
          start, 0, sizeof(int64_t) * size_t(axisSize + 1), ctx.stream);
      e != cudaSuccess)
    return e;
  if (cudaError_t e =
          cudaMemsetAsync(firstBad, 0xff, sizeof(*firstBad), ctx.stream);
      e != cudaSuccess)
    return e;
  auto buckets = [&](auto *ix) {
    if (numIndices > 0)
      countIndicesKernel<<<blocksFor(numIndices), kThreadsPerBlock, 0,
                           ctx.stream>>>(ix, axisSize, numIndices, start,
                                         firstBad);
    scanBucketsKernel<<<1, kBucketScanThreads, 0, ctx.stream>>>(
        ctx, ix, axisSize, start, fill, firstBad);
    if (numIndices == 0)
      return;
    fillBucketsKernel<<<blocksFor(numIndices), kThreadsPerBlock, 0,
                        ctx.stream>>>(ix, axisSize, numIndices, fill,
                                      unordered);
    orderBucketsKernel<<<blocksFor(numIndices), kThreadsPerBlock, 0,
                         ctx.stream>>>(ix, axisSize, numIndices, start,
                                       unordered, bucket);
  };
  if (indices64)
    buckets(static_cast<const int64_t *>(indices));
  else
    buckets(static_cast<const int32_t *>(indices));
  if (cudaError_t e = lastLaunchError(); e != cudaSuccess)
    return e;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gatherGradKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        start, bucket, axisSize, numIndices, inner, static_cast<const T *>(dy),
        static_cast<T *>(dx), n);
  });
  return lastLaunchError();
}

} // namespace rp::runtime::cuda
