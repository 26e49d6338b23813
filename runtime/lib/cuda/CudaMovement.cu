//===- CudaMovement.cu - data movement kernels of the cuda device ---------===//
//
// transpose, slice and broadcast (one strided copy), slice_grad's strided
// write, gather and gather_grad. reshape and concat need no kernel: the
// dispatch turns them into cudaMemcpyAsync / cudaMemcpy2DAsync.
//
// gather_grad sums repeated indices in index order, as the host kernel
// (host/HostGradients.cpp): one thread lists, per position along the axis,
// the index positions pointing at it (a counting sort, which also checks
// every index); then each dx element adds its dy elements in that order in
// the compute type. No atomics on floats, the same bits on every run.
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

/// One thread: start[a] .. start[a + 1] delimit, in `bucket`, the index
/// positions that read axis position a, in increasing order.
template <typename I>
__global__ void bucketIndicesKernel(LaunchContext ctx, const I *indices,
                                    int64_t axisSize, int64_t numIndices,
                                    int64_t *start, int64_t *fill,
                                    int64_t *bucket) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  for (int64_t a = 0; a <= axisSize; ++a)
    start[a] = 0;
  for (int64_t i = 0; i < numIndices; ++i) {
    int64_t a = readIndex(ctx, indices, i, axisSize);
    if (a >= 0)
      ++start[a + 1];
  }
  for (int64_t a = 0; a < axisSize; ++a) {
    start[a + 1] += start[a];
    fill[a] = start[a];
  }
  for (int64_t i = 0; i < numIndices; ++i) {
    int64_t a = readIndex(ctx, indices, i, axisSize);
    if (a >= 0)
      bucket[fill[a]++] = i;
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
  return sizeof(int64_t) * size_t(2 * axisSize + 1 + numIndices);
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
  int64_t *bucket = fill + axisSize;
  if (indices64)
    bucketIndicesKernel<<<1, 1, 0, ctx.stream>>>(
        ctx, static_cast<const int64_t *>(indices), axisSize, numIndices, start,
        fill, bucket);
  else
    bucketIndicesKernel<<<1, 1, 0, ctx.stream>>>(
        ctx, static_cast<const int32_t *>(indices), axisSize, numIndices, start,
        fill, bucket);
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
