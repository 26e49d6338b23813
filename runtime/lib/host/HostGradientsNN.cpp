//===- HostGradientsNN.cpp - softmax and normalization backward -----------===//
//
// Row kernels (kernels/SoftmaxGrad.h, kernels/NormsGrad.h): each row of dx
// is computed whole by one chunk, so its bits never depend on the pool.
//
// The scale and bias gradients of the norms sum over every row. They are
// formed in tiles of kParamRowBlock rows by kParamColumnBlock columns: a
// tile sums its rows in row order into its own partials (compute type),
// then each column adds the partials of its row blocks in block order.
// Tile boundaries depend on the shape alone, so the sums have the same
// bits for any thread count; partials take 1 / kParamRowBlock of x's size.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/kernels/NormsGrad.h"
#include "rp/runtime/kernels/SoftmaxGrad.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Rows summed sequentially into one partial of the parameter gradients.
/// Part of the numerics.
constexpr int64_t kParamRowBlock = 128;
/// Columns per tile of the parameter gradients (not part of the numerics).
constexpr int64_t kParamColumnBlock = 256;

/// `t` is a float tensor of x's dtype and shape.
Status checkLike(const char *op, const char *role, const TensorRef &t,
                 const TensorRef &x) {
  if (Status s = checkTensorOf(t, x.dtype, role, op); s.failed())
    return s;
  if (t.shape != x.shape)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have the shape of " + describe(x));
  return {};
}

Status checkNormGrad(const char *op, const TensorRef &x,
                     const std::optional<TensorRef> &scale, int64_t axis,
                     double epsilon, const TensorRef &dy, const TensorRef &dx) {
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (!isFloat(x.dtype))
    return unsupportedDType(op, x.dtype);
  if (Status s = checkNormAxis(op, x, axis, epsilon); s.failed())
    return s;
  if (Status s = checkLike(op, "output gradient", dy, x); s.failed())
    return s;
  if (Status s = checkLike(op, "input gradient", dx, x); s.failed())
    return s;
  return checkNormalized(op, "scale", scale, x, axis);
}

/// The norms' backward: dx row by row, then dscale = sum(dy * xhat) and
/// dbias = sum(dy) over the rows (either may be null).
template <typename T>
void runNormGrad(ThreadPool &pool, bool centered, const T *x, const T *scale,
                 double epsilon, const T *dy, T *dx, T *dscale, T *dbias,
                 int64_t rows, int64_t n) {
  using C = Compute<T>;
  const C eps = static_cast<C>(epsilon);
  const bool params = dscale || dbias;
  std::vector<NormStats<C>> stats(params ? rows : 0);
  parallelRanges(pool, rows, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T *xRow = x + row * n;
      NormStats<C> st =
          centered ? layerNormStats(xRow, n, eps) : rmsNormStats(xRow, n, eps);
      normGradRow(xRow, scale, dy + row * n, dx + row * n, n, st, centered);
      if (params)
        stats[row] = st;
    }
  });
  if (!params)
    return;

  const int64_t rowBlocks = (rows + kParamRowBlock - 1) / kParamRowBlock;
  const int64_t columnBlocks = (n + kParamColumnBlock - 1) / kParamColumnBlock;
  std::vector<C> scalePartials(dscale ? rowBlocks * n : 0),
      biasPartials(dbias ? rowBlocks * n : 0);
  parallelRanges(pool, rowBlocks * columnBlocks, 1, [&](int64_t tile, int64_t) {
    int64_t rb = tile / columnBlocks;
    int64_t c0 = (tile % columnBlocks) * kParamColumnBlock;
    int64_t c1 = std::min(n, c0 + kParamColumnBlock);
    int64_t r0 = rb * kParamRowBlock;
    int64_t r1 = std::min(rows, r0 + kParamRowBlock);
    C *sp = dscale ? scalePartials.data() + rb * n : nullptr;
    C *bp = dbias ? biasPartials.data() + rb * n : nullptr;
    for (int64_t c = c0; c < c1; ++c) {
      if (sp)
        sp[c] = C(0);
      if (bp)
        bp[c] = C(0);
    }
    for (int64_t r = r0; r < r1; ++r) {
      const T *xRow = x + r * n, *dyRow = dy + r * n;
      const NormStats<C> st = stats[r];
      for (int64_t c = c0; c < c1; ++c) {
        if (sp)
          sp[c] += normScaleGradTerm(xRow[c], dyRow[c], st);
        if (bp)
          bp[c] += load(dyRow[c]);
      }
    }
  });
  parallelRanges(pool, n, kParamColumnBlock, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      kernels::normParamGradColumn(scalePartials.data(), biasPartials.data(),
                                   rowBlocks, n, c, dscale, dbias);
  });
}

/// layer_norm_grad (`centered`) and rms_norm_grad, which has no bias and so
/// never a `dbias`: the checks, then runNormGrad.
Status normGrad(ThreadPool &pool, bool centered, const TensorRef &x,
                const std::optional<TensorRef> &scale, int64_t axis,
                double epsilon, const TensorRef &dy, const TensorRef &dx,
                const std::optional<TensorRef> &dscale,
                const std::optional<TensorRef> &dbias) {
  const char *op = centered ? "layer_norm_grad" : "rms_norm_grad";
  if (Status s = checkNormGrad(op, x, scale, axis, epsilon, dy, dx); s.failed())
    return s;
  if (Status s = checkNormalized(op, "scale gradient", dscale, x, axis);
      s.failed())
    return s;
  if (Status s = checkNormalized(op, "bias gradient", dbias, x, axis);
      s.failed())
    return s;
  int64_t n = numElements(Shape(x.shape.begin() + axis, x.shape.end()));
  int64_t rows = n ? x.size() / n : 0;
  visitFloat(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    runNormGrad<T>(pool, centered, x.as<const T>(),
                   scale ? scale->as<const T>() : nullptr, epsilon,
                   dy.as<const T>(), dx.as<T>(),
                   dscale ? dscale->as<T>() : nullptr,
                   dbias ? dbias->as<T>() : nullptr, rows, n);
  });
  return {};
}

} // namespace

Status softmaxGrad(ThreadPool &pool, const TensorRef &y, const TensorRef &dy,
                   int64_t dim, bool log, const TensorRef &dx) {
  SoftmaxRows rows;
  if (Status s = checkSoftmaxGrad(log, y, dy, dim, dx, rows); s.failed())
    return s;
  const int64_t outer = rows.outer, n = rows.n, inner = rows.inner;
  visitFloat(y.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *yd = y.as<const T>(), *dyd = dy.as<const T>();
    T *dxd = dx.as<T>();
    parallelRanges(
        pool, outer * inner, rowGrain(n), [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            int64_t base = (row / inner) * n * inner + row % inner;
            if (log)
              logSoftmaxGradRow(yd + base, dyd + base, dxd + base, n, inner);
            else
              softmaxGradRow(yd + base, dyd + base, dxd + base, n, inner);
          }
        });
  });
  return {};
}

Status layerNormGrad(ThreadPool &pool, const TensorRef &x,
                     const std::optional<TensorRef> &scale, int64_t axis,
                     double epsilon, const TensorRef &dy, const TensorRef &dx,
                     const std::optional<TensorRef> &dscale,
                     const std::optional<TensorRef> &dbias) {
  return normGrad(pool, true, x, scale, axis, epsilon, dy, dx, dscale, dbias);
}

Status rmsNormGrad(ThreadPool &pool, const TensorRef &x,
                   const std::optional<TensorRef> &scale, int64_t axis,
                   double epsilon, const TensorRef &dy, const TensorRef &dx,
                   const std::optional<TensorRef> &dscale) {
  return normGrad(pool, false, x, scale, axis, epsilon, dy, dx, dscale,
                  std::nullopt);
}

} // namespace rp::runtime::host
