//===- LossChecks.cpp - shape checks of the fused LM-head loss ------------===//
//
// rp.linear_cross_entropy's and its gradient's operand checks, and the
// loss outputs of both loss kernels
// (kernels/Checks.h), called by the host kernels (host/HostLinearLoss.cpp)
// and the cuda chunk loop (cuda/CudaLinearLossLoop.cpp) before either touches
// a tensor, so that a bad call fails with the same message on both devices.
// Shapes and dtypes only: the label values are checked where the labels are
// (on the host before the loop, on the GPU by the row kernel).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/kernels/Checks.h"

#include <string>

namespace rp::runtime::kernels {

Status checkLinearLoss(const char *op, const TensorRef &hidden,
                       const TensorRef &weight, const TensorRef &labels,
                       int64_t chunk, LinearLossShape &shape) {
  if (Status s = checkTensor(hidden, "hidden", op); s.failed())
    return s;
  if (!isFloat(hidden.dtype))
    return unsupportedDType(op, hidden.dtype);
  if (Status s = checkTensorOf(weight, hidden.dtype, "weight", op); s.failed())
    return s;
  if (Status s = checkTensor(labels, "labels", op); s.failed())
    return s;
  if (labels.dtype != DType::i32 && labels.dtype != DType::i64)
    return invalidArgument(std::string(op) + ": labels " + describe(labels) +
                           " must be i32 or i64");
  if (hidden.shape.empty() || weight.shape.size() != 2 ||
      weight.shape[1] != hidden.shape.back())
    return invalidArgument(std::string(op) + ": weight " + describe(weight) +
                           " should be [classes, K] for hidden " +
                           describe(hidden));
  Shape expected(hidden.shape.begin(), hidden.shape.end() - 1);
  if (labels.shape != expected)
    return invalidArgument(std::string(op) + ": labels " + describe(labels) +
                           " should have shape " + describeShape(expected));
  if (chunk <= 0)
    return invalidArgument(std::string(op) + ": chunk " +
                           std::to_string(chunk) + " must be positive");
  shape.k = hidden.shape.back();
  shape.classes = weight.shape[0];
  shape.rows = labels.size();
  return {};
}

Status checkLinearLossGradients(const char *op, const TensorRef &hidden,
                                const TensorRef &weight,
                                const TensorRef &dhidden,
                                const TensorRef &dweight) {
  if (Status s = checkTensorOf(dhidden, hidden.dtype, "hidden gradient", op);
      s.failed())
    return s;
  if (Status s = checkTensorOf(dweight, hidden.dtype, "weight gradient", op);
      s.failed())
    return s;
  if (dhidden.shape != hidden.shape || dweight.shape != weight.shape)
    return invalidArgument(std::string(op) + ": gradients " +
                           describe(dhidden) + " and " + describe(dweight) +
                           " should have the shapes of " + describe(hidden) +
                           " and " + describe(weight));
  return {};
}

Status checkLossOutputs(const char *op, DType dtype, const TensorRef &lossSum,
                        const TensorRef &count) {
  if (Status s = checkTensorOf(lossSum, lossSumType(dtype), "loss sum", op);
      s.failed())
    return s;
  if (Status s = checkTensorOf(count, DType::i64, "count", op); s.failed())
    return s;
  if (lossSum.size() != 1 || count.size() != 1)
    return invalidArgument(std::string(op) + ": loss sum " + describe(lossSum) +
                           " and count " + describe(count) +
                           " must be scalars");
  return {};
}

} // namespace rp::runtime::kernels
