//===- HostLinearLoss.cpp - LM head + cross-entropy, chunked, on host -----===//
//
// rp.linear_cross_entropy and its gradient without the [tokens, classes]
// logits: rows (tokens) are taken a chunk at a time, the chunk's logits
// computed into a [chunk, classes] buffer by the host matmul, the loss or
// its gradient taken from that buffer, and the buffer reused.
//
// The numerics are the unfused ones wherever that can be had for any chunk:
//  - a chunk is a whole number of kGroupRows (the host matmul's row block),
//    so the chunk's GEMM tiles are the tiles the unfused matmul would run
//    and the logits, the per-row losses and hidden_grad have its bits;
//  - the loss sum is the unfused kernel's: the same labels check, row loss
//    and f64 sum in fixed row chunks (HostLossCommon.h);
//  - weight_grad sums over tokens, which the unfused GEMM does in one call.
//    Here every group of kGroupRows tokens (fixed from row 0, whatever the
//    chunk) is one GEMM in f32 (f64 for f64), and the group products are
//    added in group order into an accumulator rounded once at the end.
//    With at most kGroupRows tokens that is the unfused GEMM call itself;
//    beyond it the token sum is split at group boundaries (a few ulps).
// So the bits depend on neither the chunk size nor the thread count.
//
//===----------------------------------------------------------------------===//

#include "HostLossCommon.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/host/Kernels.h"

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Rows per GEMM group; equal to HostMatmul.cpp's row block (part of the
/// numerics, see above).
constexpr int64_t kGroupRows = 128;

/// Shapes and dtypes (kernels::checkLinearLoss, shared with the cuda
/// device) and every label; gives rows (tokens), K and classes.
Status checkLinearLoss(const char *op, const TensorRef &hidden,
                       const TensorRef &weight, const TensorRef &labels,
                       int64_t ignoreIndex, int64_t chunk, int64_t &rows,
                       int64_t &k, int64_t &classes) {
  kernels::LinearLossShape shape;
  if (Status s =
          kernels::checkLinearLoss(op, hidden, weight, labels, chunk, shape);
      s.failed())
    return s;
  rows = shape.rows;
  k = shape.k;
  classes = shape.classes;
  return checkLabelValues(op, labels, rows, classes, ignoreIndex,
                          LabelPlace::row);
}

/// Rows per chunk: `chunk` rounded up to whole GEMM groups.
int64_t chunkRows(int64_t chunk) {
  return (chunk + kGroupRows - 1) / kGroupRows * kGroupRows;
}

TensorRef rowsOf(const TensorRef &t, int64_t begin, int64_t n, int64_t width) {
  return TensorRef{static_cast<char *>(t.data) +
                       begin * width * int64_t(dtypeSize(t.dtype)),
                   t.dtype, Shape{n, width}};
}

/// logits[rows, classes] = hidden[begin, begin + rows) * weight^T.
Status chunkLogits(ThreadPool &pool, const TensorRef &hidden,
                   const TensorRef &weight, int64_t begin, int64_t n, int64_t k,
                   const TensorRef &logits) {
  return matmul(pool, rowsOf(hidden, begin, n, k), weight, false, true, logits);
}

} // namespace

Status linearCrossEntropy(ThreadPool &pool, const TensorRef &hidden,
                          const TensorRef &weight, const TensorRef &labels,
                          int64_t ignoreIndex, int64_t chunk,
                          const TensorRef &lossSum, const TensorRef &count) {
  const char *op = "linear_cross_entropy";
  int64_t rows = 0, k = 0, classes = 0;
  if (Status s = checkLinearLoss(op, hidden, weight, labels, ignoreIndex, chunk,
                                 rows, k, classes);
      s.failed())
    return s;
  if (Status s = checkLossOutputs(op, hidden.dtype, lossSum, count); s.failed())
    return s;
  // Per-row losses (tokens x 8 bytes), so that the sum below is the
  // unfused kernel's whatever the chunk.
  std::vector<double> rowLoss(rows, 0.0);
  const int64_t step = chunkRows(chunk);
  Status failed;
  visitFloat(hidden.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> buffer(std::min(step, rows) * classes);
    for (int64_t begin = 0; begin < rows && !failed.failed(); begin += step) {
      int64_t n = std::min(step, rows - begin);
      TensorRef logits{buffer.data(), hidden.dtype, Shape{n, classes}};
      failed = chunkLogits(pool, hidden, weight, begin, n, k, logits);
      if (failed.failed())
        return;
      parallelRanges(pool, n, rowGrain(classes), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          int64_t label = labelAt(labels, begin + r);
          if (label != ignoreIndex)
            rowLoss[begin + r] = static_cast<double>(
                crossEntropyRow(buffer.data() + r * classes, classes, label));
        }
      });
    }
  });
  if (failed.failed())
    return failed;
  writeLossSum(
      pool, labels, rows, ignoreIndex,
      [&](int64_t row, int64_t) { return rowLoss[row]; }, lossSum, count);
  return {};
}

Status linearCrossEntropyGrad(ThreadPool &pool, const TensorRef &hidden,
                              const TensorRef &weight, const TensorRef &labels,
                              int64_t ignoreIndex, int64_t chunk, double scale,
                              const TensorRef &dhidden,
                              const TensorRef &dweight) {
  const char *op = "linear_cross_entropy_grad";
  int64_t rows = 0, k = 0, classes = 0;
  if (Status s = checkLinearLoss(op, hidden, weight, labels, ignoreIndex, chunk,
                                 rows, k, classes);
      s.failed())
    return s;
  if (Status s = kernels::checkLinearLossGradients(op, hidden, weight, dhidden,
                                                   dweight);
      s.failed())
    return s;
  const int64_t step = chunkRows(chunk);
  Status failed;
  visitFloat(hidden.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>; // f32, f64 for f64: the GEMM and accumulator type
    constexpr DType accType =
        std::is_same_v<C, double> ? DType::f64 : DType::f32;
    const C scaleC = static_cast<C>(scale);
    std::vector<T> dl(std::min(step, rows) * classes);
    std::vector<C> acc(classes * k, C(0)), part(classes * k);
    std::vector<C> groupDl, groupH; // 16-bit types widened for the GEMM
    const T *h = hidden.as<const T>();
    for (int64_t begin = 0; begin < rows; begin += step) {
      int64_t n = std::min(step, rows - begin);
      TensorRef dlChunk{dl.data(), hidden.dtype, Shape{n, classes}};
      if ((failed = chunkLogits(pool, hidden, weight, begin, n, k, dlChunk))
              .failed())
        return;
      // In place: each row's statistics are taken before it is rewritten.
      parallelRanges(pool, n, rowGrain(classes), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          T *row = dl.data() + r * classes;
          lossGradRow(row, row, classes, labelAt(labels, begin + r),
                      ignoreIndex, scaleC);
        }
      });
      if ((failed = matmul(pool, dlChunk, weight, false, false,
                           rowsOf(dhidden, begin, n, k)))
              .failed())
        return;
      for (int64_t g = 0; g < n; g += kGroupRows) {
        int64_t m = std::min(kGroupRows, n - g);
        const C *gDl, *gH;
        if constexpr (std::is_same_v<T, C>) {
          gDl = dl.data() + g * classes;
          gH = h + (begin + g) * k;
        } else {
          groupDl.assign(dl.begin() + g * classes,
                         dl.begin() + (g + m) * classes);
          groupH.assign(h + (begin + g) * k, h + (begin + g + m) * k);
          gDl = groupDl.data();
          gH = groupH.data();
        }
        TensorRef a{const_cast<C *>(gDl), accType, Shape{m, classes}};
        TensorRef b{const_cast<C *>(gH), accType, Shape{m, k}};
        TensorRef out{part.data(), accType, Shape{classes, k}};
        if ((failed = matmul(pool, a, b, true, false, out)).failed())
          return;
        // The first group is copied, not added to 0, so that with one
        // group the result is the unfused GEMM's to the sign of zero.
        const bool first = begin == 0 && g == 0;
        parallelRanges(pool, classes * k, kElementGrain,
                       [&](int64_t b0, int64_t e0) {
                         for (int64_t i = b0; i < e0; ++i)
                           acc[i] = first ? part[i] : acc[i] + part[i];
                       });
      }
    }
    T *dw = dweight.as<T>();
    parallelRanges(pool, classes * k, kElementGrain,
                   [&](int64_t b0, int64_t e0) {
                     for (int64_t i = b0; i < e0; ++i)
                       dw[i] = store<T>(acc[i]);
                   });
  });
  return failed;
}

} // namespace rp::runtime::host
