//===- HostLoss.cpp - cross-entropy loss and its gradient on the host -----===//
//
// DESIGN.md, Conventions, Loss: logits [..., C] against integer labels
// [...], labels equal to the ignore index (-100 by default) left out. The
// kernel gives the *sum* of the per-position losses and the count of
// positions that entered it, so that the executor can form the
// token-weighted mean over the global batch (every microbatch, every
// stage) before it divides.
//
// Each position's loss is computed in the compute type (the arithmetic of
// log_softmax, kernels/SoftmaxGrad.h), then summed in f64 whatever the
// storage type: rows in fixed chunks of kLossRowGrain, each chunk summed in
// row order, the chunk sums added in chunk order. Labels are checked
// before anything is written, so a bad label leaves the outputs untouched.
//
//===----------------------------------------------------------------------===//

#include "HostLossCommon.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/kernels/Cast.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// "[1, 3]": the multi-index of row-major position `linear` in `shape`.
std::string indexString(const Shape &shape, int64_t linear) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? linear % shape[d] : 0;
    linear = shape[d] ? linear / shape[d] : 0;
  }
  return describeShape(index);
}

/// Checks logits and labels, then every label. Gives the number of rows
/// and of classes.
Status checkLogitsAndLabels(const char *op, const TensorRef &logits,
                            const TensorRef &labels, int64_t ignoreIndex,
                            int64_t &rows, int64_t &classes) {
  if (Status s = checkLogitsShape(op, logits, labels, rows, classes);
      s.failed())
    return s;
  return checkLabelValues(op, labels, rows, classes, ignoreIndex,
                          LabelPlace::index);
}

} // namespace

Status detail::checkLabelValues(const char *op, const TensorRef &labels,
                                int64_t rows, int64_t classes,
                                int64_t ignoreIndex, LabelPlace place) {
  for (int64_t i = 0; i < rows; ++i) {
    int64_t label = labelAt(labels, i);
    if (label == ignoreIndex || (label >= 0 && label < classes))
      continue;
    std::string where = place == LabelPlace::row
                            ? "row " + std::to_string(i)
                            : "position " + indexString(labels.shape, i) +
                                  " of " + describe(labels);
    return invalidArgument(
        std::string(op) + ": label " + std::to_string(label) + " at " + where +
        " is out of range [0, " + std::to_string(classes) +
        ") and is not the ignore index " + std::to_string(ignoreIndex));
  }
  return {};
}

Status crossEntropy(ThreadPool &pool, const TensorRef &logits,
                    const TensorRef &labels, int64_t ignoreIndex,
                    const TensorRef &lossSum, const TensorRef &count) {
  const char *op = "cross_entropy";
  int64_t rows = 0, classes = 0;
  if (Status s =
          checkLogitsAndLabels(op, logits, labels, ignoreIndex, rows, classes);
      s.failed())
    return s;
  if (Status s = checkLossOutputs(op, logits.dtype, lossSum, count); s.failed())
    return s;
  visitFloat(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = logits.as<const T>();
    writeLossSum(
        pool, labels, rows, ignoreIndex,
        [&](int64_t row, int64_t label) {
          return static_cast<double>(
              crossEntropyRow(x + row * classes, classes, label));
        },
        lossSum, count);
  });
  return {};
}

Status crossEntropyGrad(ThreadPool &pool, const TensorRef &logits,
                        const TensorRef &labels, int64_t ignoreIndex,
                        double scale, const TensorRef &dlogits) {
  const char *op = "cross_entropy_grad";
  int64_t rows = 0, classes = 0;
  if (Status s =
          checkLogitsAndLabels(op, logits, labels, ignoreIndex, rows, classes);
      s.failed())
    return s;
  if (Status s = checkTensorOf(dlogits, logits.dtype, "logits gradient", op);
      s.failed())
    return s;
  if (dlogits.shape != logits.shape)
    return invalidArgument(std::string(op) + ": logits gradient " +
                           describe(dlogits) + " should have the shape of " +
                           describe(logits));
  visitFloat(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *x = logits.as<const T>();
    T *dx = dlogits.as<T>();
    const C scaleC = static_cast<C>(scale);
    parallelRanges(
        pool, rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row)
            lossGradRow(x + row * classes, dx + row * classes, classes,
                        labelAt(labels, row), ignoreIndex, scaleC);
        });
  });
  return {};
}

} // namespace rp::runtime::host
