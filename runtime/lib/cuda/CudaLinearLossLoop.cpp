//===- CudaLinearLossLoop.cpp - the fused LM-head loss's chunk loops ------===//
//
// The host side of CudaLinearLoss.h: the call's checks, the scratch layout,
// the weight gradient's cuBLAS arguments, and the loops that enqueue, chunk
// after chunk, the logits GEMM, the row kernel and (for the gradient) the
// two GEMMs that consume the chunk's dl. Everything goes on one stream in a
// fixed order, so dweight's sum over chunks is the same run after run. No
// CUDA API call but the launches and the GEMMs, so rp-cuda-emu-tests
// compiles this file as it is.
//
//===----------------------------------------------------------------------===//

#include "CudaLinearLoss.h"
#include "CudaStatus.h"

#include "rp/runtime/kernels/Checks.h"

#include <algorithm>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using namespace rp::runtime::kernels;

namespace {

/// Each part of the scratch starts on a 256-byte boundary (cuBLAS's and
/// the allocator's alignment).
size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

Status launched(cudaError_t error, const char *what) {
  return fromCuda(error, std::string("launching the ") + what + " kernel");
}

/// Rows [begin, begin + n) of a row-major [rows, width] tensor.
TensorRef rowsOf(const TensorRef &t, int64_t begin, int64_t n, int64_t width) {
  return TensorRef{static_cast<char *>(t.data) +
                       begin * width * int64_t(dtypeSize(t.dtype)),
                   t.dtype, Shape{n, width}};
}

} // namespace

Status rp::runtime::cuda::checkLinearLoss(const char *op,
                                          const std::vector<TensorRef> &in,
                                          const std::vector<TensorRef> &outs,
                                          bool grad, LinearLossArgs &args) {
  const TensorRef &hidden = in[0], &weight = in[1], &labels = in[2];
  LinearLossShape shape;
  if (Status s = kernels::checkLinearLoss(op, hidden, weight, labels,
                                          args.chunk, shape);
      s.failed())
    return s;
  args.hidden = hidden;
  args.weight = weight;
  args.labels = labels;
  args.k = shape.k;
  args.classes = shape.classes;
  args.rows = shape.rows;
  if (grad) {
    const TensorRef &dhidden = outs[0], &dweight = outs[1];
    if (!isFloat(in[3].dtype) || in[3].size() != 1)
      return invalidArgument(std::string(op) + ": loss scale " +
                             describe(in[3]) +
                             " should be a one-element float tensor");
    return kernels::checkLinearLossGradients(op, hidden, weight, dhidden,
                                             dweight);
  }
  return kernels::checkLossOutputs(op, hidden.dtype, outs[0], outs[1]);
}

ColumnMajorGemm rp::runtime::cuda::weightGradGemm(const TensorRef &dl,
                                                  const TensorRef &h,
                                                  bool accumulate,
                                                  const TensorRef &acc) {
  // A row-major [r, c] matrix is the column-major [c, r] one, so row-major
  // acc = dl^T h is column-major acc' [K, classes] = h' [K, n] * (dl'
  // [classes, n])^T.
  ColumnMajorGemm g;
  g.transposeA = false;
  g.transposeB = true;
  g.m = h.shape[1];
  g.n = dl.shape[1];
  g.k = dl.shape[0];
  g.a = h.data;
  g.lda = h.shape[1];
  g.b = dl.data;
  g.ldb = dl.shape[1];
  g.c = acc.data;
  g.ldc = h.shape[1];
  g.abType = dl.dtype;
  g.cType = acc.dtype;
  g.accumulate = accumulate;
  return g;
}

LinearLossScratch rp::runtime::cuda::linearLossScratch(const LinearLossArgs &a,
                                                       bool grad) {
  LinearLossScratch s;
  s.step = std::max<int64_t>(1, std::min(a.chunk, a.rows));
  size_t at = 0;
  s.logitsAt = at;
  at += alignUp(size_t(s.step * a.classes) * dtypeSize(a.hidden.dtype));
  if (!grad) {
    s.rowLossAt = at;
    at += alignUp(size_t(a.rows) * sizeof(double));
    s.partialsAt = at;
    at += alignUp(linearLossPartialsBytes(a.rows));
  } else {
    // f32 and f64 sum into dweight itself; a 16-bit dweight over one chunk
    // is the chunk's GEMM, rounded once as the unfused one.
    const bool wide =
        a.hidden.dtype == DType::f32 || a.hidden.dtype == DType::f64;
    s.accumulator = !wide && s.step < a.rows;
    if (s.accumulator) {
      s.accumulatorAt = at;
      at += alignUp(size_t(a.classes * a.k) * sizeof(float));
    }
  }
  s.bytes = at;
  return s;
}

Status rp::runtime::cuda::linearCrossEntropyChunks(
    const LaunchContext &ctx, LinearLossGemms &gemms, const LinearLossArgs &a,
    const LinearLossScratch &layout, void *scratch, void *lossSum,
    int64_t *count) {
  char *base = static_cast<char *>(scratch);
  auto *rowLoss = reinterpret_cast<double *>(base + layout.rowLossAt);
  const bool labels64 = a.labels.dtype == DType::i64;
  for (int64_t begin = 0; begin < a.rows; begin += layout.step) {
    const int64_t n = std::min(layout.step, a.rows - begin);
    TensorRef logits{base + layout.logitsAt, a.hidden.dtype,
                     Shape{n, a.classes}};
    if (Status s = gemms.matmul(rowsOf(a.hidden, begin, n, a.k), a.weight,
                                /*transposeB=*/true, logits);
        s.failed())
      return s;
    if (Status s = launched(launchLinearLossRows(ctx, a.hidden.dtype,
                                                 logits.data, a.labels.data,
                                                 labels64, a.ignoreIndex, begin,
                                                 n, a.classes, rowLoss),
                            "linear_cross_entropy row");
        s.failed())
      return s;
  }
  return launched(launchLinearLossTotal(ctx, a.hidden.dtype, rowLoss,
                                        a.labels.data, labels64, a.ignoreIndex,
                                        a.rows, base + layout.partialsAt,
                                        lossSum, count),
                  "linear_cross_entropy sum");
}

Status rp::runtime::cuda::linearCrossEntropyGradChunks(
    const LaunchContext &ctx, LinearLossGemms &gemms, const LinearLossArgs &a,
    const LinearLossScratch &layout, void *scratch, DType scaleType,
    const void *scale, const TensorRef &dhidden, const TensorRef &dweight) {
  char *base = static_cast<char *>(scratch);
  const bool labels64 = a.labels.dtype == DType::i64;
  if (a.rows == 0) // No token: no logits, and a zero weight gradient.
    return launched(launchZero(ctx, dweight.data, dweight.bytes()),
                    "linear_cross_entropy_grad zero");
  const TensorRef acc =
      layout.accumulator
          ? TensorRef{base + layout.accumulatorAt, DType::f32, dweight.shape}
          : dweight;
  for (int64_t begin = 0; begin < a.rows; begin += layout.step) {
    const int64_t n = std::min(layout.step, a.rows - begin);
    TensorRef dl{base + layout.logitsAt, a.hidden.dtype, Shape{n, a.classes}};
    const TensorRef h = rowsOf(a.hidden, begin, n, a.k);
    if (Status s = gemms.matmul(h, a.weight, /*transposeB=*/true, dl);
        s.failed())
      return s;
    if (Status s =
            launched(launchLinearLossGradRows(
                         ctx, a.hidden.dtype, dl.data, a.labels.data, labels64,
                         a.ignoreIndex, begin, n, a.classes, scaleType, scale),
                     "linear_cross_entropy_grad row");
        s.failed())
      return s;
    if (Status s = gemms.matmul(dl, a.weight, /*transposeB=*/false,
                                rowsOf(dhidden, begin, n, a.k));
        s.failed())
      return s;
    // The first chunk writes, the others add: dweight's sum over chunks
    // in chunk order.
    if (Status s = gemms.gemm(weightGradGemm(dl, h, begin > 0, acc));
        s.failed())
      return s;
  }
  if (!layout.accumulator)
    return {};
  return launched(launchStoreAccumulator(ctx, dweight.dtype,
                                         static_cast<const float *>(acc.data),
                                         dweight.data, dweight.size()),
                  "linear_cross_entropy_grad store");
}
