//===- CudaDispatchChecks.cpp - argument checks of the cuda dispatch ------===//
//
// The checks look at shapes and dtypes only, never at data, which lives on
// the GPU; what the host checks in the data the kernels check there.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatchChecks.h"

#include <algorithm>
#include <cstring>

using namespace rp::runtime;
using namespace rp::runtime::host::detail;

namespace rp::runtime::cuda::detail {

ElementMap toMap(const StridedPlan &plan) {
  ElementMap map;
  map.rank = plan.rank;
  map.numOperands = plan.numOperands;
  for (int d = 0; d < plan.rank; ++d) {
    map.shape[d] = plan.shape[d];
    for (int k = 0; k < plan.numOperands; ++k)
      map.strides[k][d] = plan.strides[k][d];
  }
  return map;
}

Status broadcastMap(const char *op,
                    const std::vector<const TensorRef *> &operands,
                    const TensorRef &out, ElementMap &map) {
  static const char *const kRoles[] = {"operand 0", "operand 1", "operand 2"};
  std::vector<const Shape *> shapes;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (Status s = checkTensor(*operands[i], kRoles[i], op); s.failed())
      return s;
    shapes.push_back(&operands[i]->shape);
  }
  if (Status s = checkTensor(out, "output", op); s.failed())
    return s;
  Shape expected;
  if (!broadcastShapes(shapes, expected)) {
    std::string message = std::string(op) + ": operand shapes";
    for (const TensorRef *operand : operands)
      message += " " + describeShape(operand->shape);
    return invalidArgument(message + " do not broadcast");
  }
  if (expected != out.shape)
    return invalidArgument(std::string(op) + ": output " + describe(out) +
                           " should have the broadcast shape " +
                           describeShape(expected));
  StridedPlan plan;
  if (Status s = makeBroadcastPlan(out.shape, operands, plan, op); s.failed())
    return s;
  map = toMap(plan);
  return {};
}

Status checkLike(const char *op, const char *role, const TensorRef &t,
                 const TensorRef &like) {
  if (Status s = checkTensorOf(t, like.dtype, role, op); s.failed())
    return s;
  if (t.shape != like.shape)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have shape " + describeShape(like.shape));
  return {};
}

Status reduceMap(const char *op, const TensorRef &x,
                 const std::vector<int64_t> &dims, bool keepDims,
                 ReduceMap &map, Shape &expected) {
  if (Status s = checkReduceDims(op, dims, x); s.failed())
    return s;
  const int rank = static_cast<int>(x.shape.size());
  if (rank > kMaxRank)
    return invalidArgument(std::string(op) + ": " + describe(x) +
                           " has more than " + std::to_string(kMaxRank) +
                           " dimensions");
  std::vector<int64_t> strides(rank);
  kernels::contiguousStrides(x.shape.data(), rank, strides.data());
  map = ReduceMap();
  for (int d = 0, i = 0; d < rank; ++d) {
    bool reduced = i < static_cast<int>(dims.size()) && dims[i] == d;
    if (reduced) {
      ++i;
      map.reducedSize[map.numReduced] = x.shape[d];
      map.reducedStride[map.numReduced++] = strides[d];
      map.reducedCount *= x.shape[d];
      if (keepDims)
        expected.push_back(1);
    } else {
      map.keptSize[map.numKept] = x.shape[d];
      map.keptStride[map.numKept++] = strides[d];
      expected.push_back(x.shape[d]);
    }
  }
  return {};
}

Status softmaxRows(const char *op, const TensorRef &x, int64_t dim,
                   int64_t &outer, int64_t &n, int64_t &inner) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (dim < 0 || dim >= rank)
    return invalidArgument(std::string(op) + ": dimension " +
                           std::to_string(dim) + " is out of range for " +
                           describe(x));
  outer = inner = 1;
  n = x.shape[dim];
  for (int64_t d = 0; d < dim; ++d)
    outer *= x.shape[d];
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= x.shape[d];
  return {};
}

Status checkLogits(const char *op, const TensorRef &logits,
                   const TensorRef &labels, int64_t &rows, int64_t &classes) {
  if (Status s = checkTensor(logits, "logits", op); s.failed())
    return s;
  if (!isFloat(logits.dtype))
    return unsupportedDType(op, logits.dtype, "logits");
  if (logits.shape.empty())
    return invalidArgument(std::string(op) + ": logits " + describe(logits) +
                           " need a class dimension");
  if (Status s = checkTensor(labels, "labels", op); s.failed())
    return s;
  if (!isInteger(labels.dtype))
    return invalidArgument(std::string(op) + ": labels " + describe(labels) +
                           " should be i32 or i64");
  Shape expected(logits.shape.begin(), logits.shape.end() - 1);
  if (labels.shape != expected)
    return invalidArgument(std::string(op) + ": labels " + describe(labels) +
                           " should have shape " + describeShape(expected) +
                           " (the logits " + describe(logits) +
                           " without the class dimension)");
  classes = logits.shape.back();
  rows = labels.size();
  return {};
}

Status gatherShape(const char *op, const TensorRef &x, const TensorRef &indices,
                   int64_t axis, const TensorRef &gathered, const char *role,
                   int64_t &outer, int64_t &inner) {
  if (Status s = checkTensor(indices, "indices", op); s.failed())
    return s;
  if (!isInteger(indices.dtype))
    return invalidArgument(std::string(op) + ": indices " + describe(indices) +
                           " should be i32 or i64");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (axis < 0 || axis >= rank)
    return invalidArgument(std::string(op) + ": axis " + std::to_string(axis) +
                           " is out of range for " + describe(x));
  Shape expected(x.shape.begin(), x.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (expected != gathered.shape)
    return invalidArgument(std::string(op) + ": " + role + " " +
                           describe(gathered) + " should have shape " +
                           describeShape(expected));
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  return {};
}

Status attentionShape(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const std::optional<TensorRef> &mask,
                      bool causal, double scale, const TensorRef &y,
                      const AttentionGradRefs *grads, AttentionShape &shape) {
  AttentionDims dims;
  if (Status s =
          checkAttentionArgs(q, k, v, mask, causal, scale, y, grads, dims);
      s.failed())
    return s;
  if (dims.d > kMaxHeadDim || dims.dv > kMaxHeadDim)
    return unsupported(
        std::string(grads ? "attention_grad" : "attention") + ": head width " +
        std::to_string(std::max(dims.d, dims.dv)) +
        " is above the cuda kernel's " + std::to_string(kMaxHeadDim) +
        "; run this model on --backend host");
  shape = AttentionShape{dims.b,  dims.h,   dims.s,
                         dims.d,  dims.hkv, dims.t,
                         dims.dv, {},       static_cast<int>(maskKind(mask)),
                         causal,  scale};
  std::memcpy(shape.maskStrides, dims.maskStrides, sizeof(shape.maskStrides));
  return {};
}

} // namespace rp::runtime::cuda::detail
