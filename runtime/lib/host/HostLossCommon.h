//===- HostLossCommon.h - what the cross-entropy kernels share --*- C++ -*-===//
//
// Private to lib/host: the labels, the ignore index, the loss outputs and
// the f64 sum of the per-row losses, shared by cross_entropy (HostLoss.cpp)
// and the fused linear_cross_entropy (HostLinearLoss.cpp), so that the
// fused kernel's loss is the unfused one's to the bit: same row loss
// (kernels/SoftmaxGrad.h), same sum in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LIB_HOST_HOSTLOSSCOMMON_H
#define RP_RUNTIME_LIB_HOST_HOSTLOSSCOMMON_H

#include "HostCommon.h"

#include "rp/runtime/kernels/Checks.h"
#include "rp/runtime/kernels/SoftmaxGrad.h"

namespace rp::runtime::host::detail {

/// Reads label `i` (i32 or i64) as i64.
inline int64_t labelAt(const TensorRef &labels, int64_t i) {
  return labels.dtype == DType::i32 ? labels.as<const int32_t>()[i]
                                    : labels.as<const int64_t>()[i];
}

/// How a bad label's place is named: its row ("at row 4"), or its index in
/// the labels tensor ("at position [1, 0] of i64[2, 3]").
enum class LabelPlace { row, index };

/// Every one of the `rows` labels is in [0, classes) or the ignore index.
Status checkLabelValues(const char *op, const TensorRef &labels, int64_t rows,
                        int64_t classes, int64_t ignoreIndex, LabelPlace place);

// Shared with the cuda device (kernels/Checks.h).
using kernels::checkLossOutputs;
using kernels::lossSumType;

/// Rows per chunk of the loss sum. Part of the numerics (the f64 sum).
constexpr int64_t kLossRowGrain = 64;

/// Writes the sum of rowLoss(row, label) (a double) over the rows whose
/// label is not `ignoreIndex`, and their count: in f64, rows in fixed
/// chunks of kLossRowGrain, each chunk summed in row order, the chunk sums
/// added in chunk order, whatever the thread count.
template <typename RowLoss>
void writeLossSum(ThreadPool &pool, const TensorRef &labels, int64_t rows,
                  int64_t ignoreIndex, RowLoss &&rowLoss,
                  const TensorRef &lossSum, const TensorRef &count) {
  struct Partial {
    double sum = 0;
    int64_t count = 0;
  };
  Partial total = deterministicReduce(
      pool, fixedChunks(rows, kLossRowGrain), Partial{},
      [&](int64_t begin, int64_t end) {
        Partial p;
        for (int64_t row = begin; row < end; ++row) {
          int64_t label = labelAt(labels, row);
          if (label == ignoreIndex)
            continue;
          p.sum += rowLoss(row, label);
          ++p.count;
        }
        return p;
      },
      [](Partial a, Partial b) {
        return Partial{a.sum + b.sum, a.count + b.count};
      });
  if (lossSum.dtype == DType::f64)
    *lossSum.as<double>() = total.sum;
  else
    *lossSum.as<float>() = static_cast<float>(total.sum);
  *count.as<int64_t>() = total.count;
}

/// One row of the loss gradient: zeros for an ignored row, else
/// scale * (softmax(x) - onehot(label)). `dx` may be `x`.
template <typename T>
void lossGradRow(const T *x, T *dx, int64_t classes, int64_t label,
                 int64_t ignoreIndex, kernels::Compute<T> scale) {
  using C = kernels::Compute<T>;
  if (label == ignoreIndex)
    std::fill(dx, dx + classes, kernels::store<T>(C(0)));
  else
    kernels::crossEntropyGradRow(x, dx, classes, label, scale);
}

} // namespace rp::runtime::host::detail

#endif // RP_RUNTIME_LIB_HOST_HOSTLOSSCOMMON_H
