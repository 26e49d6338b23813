//===- CudaNorms.cu - layer norm and RMS norm on the GPU ------------------===//
//
// layer_norm, rms_norm and their gradients. Each row gets 8 threads, one
// per lane of orderedSum (kernels/Numeric.h): a lane's thread folds its
// elements in the host lane's order and the lanes meet in shared memory in
// orderedSum's tree, so the norms are bitwise the host's (Norms.h,
// NormsGrad.h, host/HostNN.cpp and HostGradientsNN.cpp), with 8 threads a
// row, neighbouring threads reading neighbouring elements. The scale and
// bias gradients sum the host's blocks of 128 rows in row order, then the
// blocks in order (two levels), with no float atomics.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "CudaRowLanes.cuh"

#include "rp/runtime/kernels/Norms.h"
#include "rp/runtime/kernels/NormsGrad.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

/// host/HostGradientsNN.cpp's kParamRowBlock: rows summed into one partial
/// of the scale and bias gradients. Part of the numerics.
constexpr int64_t kParamRowBlock = 128;

/// A norm block: kNormRows rows of kRowLanes threads each. 128 threads keep
/// more blocks than SMs from a few thousand rows (2048 rows: 128 blocks).
constexpr int kNormThreads = 128;
constexpr int kNormRows = kNormThreads / kRowLanes;

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

} // namespace

cudaError_t launchNorm(const LaunchContext &ctx, DType dtype, bool centered,
                       const void *x, const void *scale, const void *bias,
                       void *out, int64_t rows, int64_t n, double epsilon) {
  if (rows == 0 || n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    normKernel<<<rowLaneBlocks(rows, kNormRows), kNormThreads, 0, ctx.stream>>>(
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
    normGradRowsKernel<<<rowLaneBlocks(rows, kNormRows), kNormThreads, 0,
                         ctx.stream>>>(
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

} // namespace rp::runtime::cuda
