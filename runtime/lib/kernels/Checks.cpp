//===- Checks.cpp - the kernels' argument checks, host and cuda -----------===//
//
// Argument checks and the strided loop planner (kernels/Checks.h). Messages
// name the op and the offending tensor as describe() prints it, because they
// reach users through rp-run when a plan and its inputs disagree.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/kernels/Checks.h"

#include <climits>
#include <cstring>

namespace rp::runtime::kernels {

Status checkTensor(const TensorRef &t, const char *role, const char *op) {
  for (int64_t d : t.shape)
    if (d < 0)
      return invalidArgument(std::string(op) + ": " + role +
                             " has a negative dimension: " + describe(t));
  if (!t.data && t.size() > 0)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " has no data");
  return {};
}

Status checkTensorOf(const TensorRef &t, DType dtype, const char *role,
                     const char *op) {
  if (t.dtype != dtype)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have element type " + dtypeName(dtype));
  return checkTensor(t, role, op);
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

Status expectRank2(const char *op, const char *role, const TensorRef &t) {
  if (Status s = checkTensor(t, role, op); s.failed())
    return s;
  if (t.shape.size() != 2)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have rank 2");
  return {};
}

Status expectShape(const char *op, const char *role, const TensorRef &t,
                   DType dtype, const Shape &shape) {
  if (Status s = checkTensorOf(t, dtype, role, op); s.failed())
    return s;
  if (t.shape != shape)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have shape " + describeShape(shape));
  return {};
}

Status checkSameShape(const TensorRef &a, const TensorRef &b, const char *op) {
  if (a.shape != b.shape)
    return invalidArgument(std::string(op) + ": output " + describe(b) +
                           " should have the input's shape " +
                           describeShape(a.shape));
  return {};
}

Status checkNormAxis(const char *op, const TensorRef &x, int64_t axis,
                     double epsilon) {
  if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
    return invalidArgument(std::string(op) + ": axis " + std::to_string(axis) +
                           " is out of range for " + describe(x));
  if (!(epsilon >= 0.0))
    return invalidArgument(std::string(op) + ": epsilon must be >= 0");
  return {};
}

Status checkReduceDims(const char *op, const std::vector<int64_t> &dims,
                       const TensorRef &x) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  bool valid = !dims.empty();
  for (size_t i = 0; valid && i < dims.size(); ++i)
    valid = dims[i] >= 0 && dims[i] < rank && (i == 0 || dims[i] > dims[i - 1]);
  if (!valid)
    return invalidArgument(
        std::string(op) + ": dimensions " + describeShape(dims) +
        " must be strictly increasing and within " + describe(x));
  return {};
}

Status checkNormalized(const char *op, const char *role,
                       const std::optional<TensorRef> &t, const TensorRef &x,
                       int64_t axis) {
  if (!t)
    return {};
  if (Status s = checkTensorOf(*t, x.dtype, role, op); s.failed())
    return s;
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  if (t->shape != normalized)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(*t) +
                           " should have the normalized shape " +
                           describeShape(normalized));
  return {};
}

Status unsupportedDType(const char *op, DType dtype, const char *what) {
  std::string message = std::string(op) + ": ";
  if (*what)
    message += std::string(what) + " ";
  return invalidArgument(message + "is not supported for element type " +
                         dtypeName(dtype));
}

Status sliceWindow(const char *op, const TensorRef &full,
                   const TensorRef &window, const char *role,
                   const std::vector<int64_t> &offsets,
                   const std::vector<int64_t> &strides, int64_t &base,
                   std::vector<int64_t> &fullStrides) {
  const size_t rank = full.shape.size();
  if (offsets.size() != rank || strides.size() != rank ||
      window.shape.size() != rank)
    return invalidArgument(
        std::string(op) + ": offsets " + describeShape(offsets) + ", strides " +
        describeShape(strides) + " and " + role + " " + describe(window) +
        " must match the rank of " + describe(full));
  std::vector<int64_t> contiguous(rank);
  kernels::contiguousStrides(full.shape.data(), static_cast<int>(rank),
                             contiguous.data());
  fullStrides.assign(rank, 0);
  base = 0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t size = window.shape[d];
    bool inside =
        strides[d] >= 1 && offsets[d] >= 0 &&
        (size == 0 ||
         (offsets[d] < full.shape[d] &&
          (size - 1) <= (full.shape[d] - 1 - offsets[d]) / strides[d]));
    if (!inside)
      return invalidArgument(
          std::string(op) + ": the window of " + role + " " + describe(window) +
          " at offsets " + describeShape(offsets) + " with strides " +
          describeShape(strides) + " does not fit in " + describe(full));
    base += offsets[d] * contiguous[d];
    fullStrides[d] = strides[d] * contiguous[d];
  }
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

Status gatherIndices(const char *op, const TensorRef &x,
                     const TensorRef &indices, int64_t axis,
                     const TensorRef &gathered, const char *role,
                     std::vector<int64_t> &normalized) {
  int64_t outer = 0, inner = 0;
  if (Status s =
          gatherShape(op, x, indices, axis, gathered, role, outer, inner);
      s.failed())
    return s;
  // Every index is checked before the op writes anything, so that a bad one
  // fails it with its output untouched.
  const int64_t axisSize = x.shape[axis], numIndices = indices.size();
  normalized.assign(numIndices, 0);
  for (int64_t i = 0; i < numIndices; ++i) {
    int64_t index = indices.dtype == DType::i32
                        ? indices.as<const int32_t>()[i]
                        : indices.as<const int64_t>()[i];
    int64_t resolved = index < 0 ? index + axisSize : index;
    if (resolved < 0 || resolved >= axisSize)
      return invalidArgument(std::string(op) + ": index " +
                             std::to_string(index) + " at position " +
                             std::to_string(i) + " of " + describe(indices) +
                             " is out of range for dimension " +
                             std::to_string(axis) + " of " + describe(x));
    normalized[i] = resolved;
  }
  return {};
}

bool broadcastShapes(const std::vector<const Shape *> &shapes, Shape &result) {
  size_t rank = 0;
  for (const Shape *shape : shapes)
    rank = std::max(rank, shape->size());
  result.assign(rank, 1);
  for (const Shape *shape : shapes) {
    size_t lead = rank - shape->size();
    for (size_t d = 0; d < shape->size(); ++d) {
      int64_t size = (*shape)[d], &merged = result[lead + d];
      if (size == merged || size == 1)
        continue;
      if (merged != 1)
        return false;
      merged = size;
    }
  }
  return true;
}

Status makeStridedPlan(const Shape &shape,
                       const std::vector<std::vector<int64_t>> &strides,
                       StridedPlan &plan, const char *op) {
  plan = StridedPlan();
  plan.numOperands = static_cast<int>(strides.size());
  std::vector<int64_t> mergedShape;
  std::vector<std::vector<int64_t>> mergedStrides(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue; // Its stride never matters.
    bool mergeable = !mergedShape.empty();
    for (size_t k = 0; k < strides.size() && mergeable; ++k)
      mergeable = mergedStrides[k].back() == strides[k][d] * shape[d];
    if (mergeable) {
      mergedShape.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k)
        mergedStrides[k].back() = strides[k][d];
      continue;
    }
    mergedShape.push_back(shape[d]);
    for (size_t k = 0; k < strides.size(); ++k)
      mergedStrides[k].push_back(strides[k][d]);
  }
  if (mergedShape.empty()) {
    mergedShape.push_back(1);
    for (auto &s : mergedStrides)
      s.push_back(0);
  }
  if (mergedShape.size() > static_cast<size_t>(kMaxRank))
    return invalidArgument(std::string(op) + ": shape " + describeShape(shape) +
                           " has more than " + std::to_string(kMaxRank) +
                           " dimensions that cannot be merged");
  plan.rank = static_cast<int>(mergedShape.size());
  for (int d = 0; d < plan.rank; ++d) {
    plan.shape[d] = mergedShape[d];
    for (int k = 0; k < plan.numOperands; ++k)
      plan.strides[k][d] = mergedStrides[k][d];
  }
  return {};
}

Status makeBroadcastPlan(const Shape &shape,
                         const std::vector<const TensorRef *> &operands,
                         StridedPlan &plan, const char *op) {
  std::vector<std::vector<int64_t>> strides;
  for (const TensorRef *operand : operands) {
    std::vector<int64_t> s(shape.size());
    if (!kernels::broadcastStrides(
            operand->shape.data(), static_cast<int>(operand->shape.size()),
            shape.data(), static_cast<int>(shape.size()), s.data()))
      return invalidArgument(std::string(op) + ": " + describe(*operand) +
                             " does not broadcast to the output shape " +
                             describeShape(shape));
    strides.push_back(std::move(s));
  }
  return makeStridedPlan(shape, strides, plan, op);
}

Status planMatmul(const TensorRef &a, const TensorRef &b, bool ta, bool tb,
                  const TensorRef &out, MatmulProblem &p) {
  const char *op = "matmul";
  if (Status s = checkTensor(a, "lhs", op); s.failed())
    return s;
  if (Status s = checkTensorOf(b, a.dtype, "rhs", op); s.failed())
    return s;
  if (Status s = checkTensorOf(out, a.dtype, "output", op); s.failed())
    return s;
  if (!isFloat(a.dtype))
    return unsupportedDType(op, a.dtype);
  const size_t ar = a.shape.size(), br = b.shape.size();
  if (ar < 2 || br < 2)
    return invalidArgument(std::string(op) + ": operands " + describe(a) +
                           " and " + describe(b) + " must have rank >= 2");
  p.ta = ta;
  p.tb = tb;
  p.m = a.shape[ta ? ar - 1 : ar - 2];
  p.k = a.shape[ta ? ar - 2 : ar - 1];
  int64_t kb = b.shape[tb ? br - 1 : br - 2];
  p.n = b.shape[tb ? br - 2 : br - 1];
  Shape aBatch(a.shape.begin(), a.shape.end() - 2);
  Shape bBatch(b.shape.begin(), b.shape.end() - 2);
  Shape batchShape;
  if (kb != p.k || !broadcastShapes({&aBatch, &bBatch}, batchShape))
    return invalidArgument(std::string(op) + ": " + describe(a) +
                           (ta ? " (transposed)" : "") + " and " + describe(b) +
                           (tb ? " (transposed)" : "") + " do not multiply");
  Shape expected = batchShape;
  expected.push_back(p.m);
  expected.push_back(p.n);
  if (expected != out.shape)
    return invalidArgument(std::string(op) + ": output " + describe(out) +
                           " should have shape " + describeShape(expected));
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    return invalidArgument(std::string(op) + ": matrix dimensions of " +
                           describe(a) + " x " + describe(b) +
                           " exceed what BLAS can index (32-bit)");

  const int rank = static_cast<int>(batchShape.size());
  std::vector<int64_t> aStrides(rank), bStrides(rank);
  kernels::broadcastStrides(aBatch.data(), static_cast<int>(aBatch.size()),
                            batchShape.data(), rank, aStrides.data());
  kernels::broadcastStrides(bBatch.data(), static_cast<int>(bBatch.size()),
                            batchShape.data(), rank, bStrides.data());
  p.batch = numElements(batchShape);
  bool bShared = true;
  for (int64_t s : bStrides)
    bShared = bShared && s == 0;
  // x[B, S, K] times a shared W: B*S rows of one product, which gives GEMM
  // longer row blocks than S alone.
  if (bShared && !ta && numElements(aBatch) == p.batch && p.batch > 1 &&
      p.m * p.batch <= INT_MAX) {
    p.m *= p.batch;
    p.batch = 1;
  }
  const int64_t aMatrix = p.m * p.k, bMatrix = p.k * p.n;
  for (int64_t i = 0; i < p.batch; ++i) {
    p.aOffset.push_back(
        rank ? kernels::offsetAt(i, batchShape.data(), aStrides.data(), rank) *
                   aMatrix
             : 0);
    p.bOffset.push_back(
        rank ? kernels::offsetAt(i, batchShape.data(), bStrides.data(), rank) *
                   bMatrix
             : 0);
  }
  return {};
}

Status planBroadcastOp(const char *op,
                       const std::vector<const TensorRef *> &operands,
                       const TensorRef &out, StridedPlan &plan) {
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
  return makeBroadcastPlan(out.shape, operands, plan, op);
}

/// Checks logits [..., C] and integer labels [...] (their shapes, not the
/// label values); gives the number of rows and of classes.
Status checkLogitsShape(const char *op, const TensorRef &logits,
                        const TensorRef &labels, int64_t &rows,
                        int64_t &classes) {
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

/// `dim` within x's rank; the rows over it.
static Status softmaxRows(const char *op, const TensorRef &x, int64_t dim,
                          SoftmaxRows &rows) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (dim < 0 || dim >= rank)
    return invalidArgument(std::string(op) + ": dimension " +
                           std::to_string(dim) + " is out of range for " +
                           describe(x));
  rows = {1, x.shape[dim], 1};
  for (int64_t d = 0; d < dim; ++d)
    rows.outer *= x.shape[d];
  for (int64_t d = dim + 1; d < rank; ++d)
    rows.inner *= x.shape[d];
  return {};
}

Status checkUnaryOutput(const char *op, const TensorRef &x,
                        const TensorRef &out) {
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (Status s = checkTensorOf(out, x.dtype, "output", op); s.failed())
    return s;
  return checkSameShape(x, out, op);
}

Status checkRowOp(const char *op, const TensorRef &x, const TensorRef &out) {
  if (Status s = checkUnaryOutput(op, x, out); s.failed())
    return s;
  if (!isFloat(x.dtype))
    return unsupportedDType(op, x.dtype);
  return {};
}

Status checkSoftmax(bool log, const TensorRef &x, int64_t dim,
                    const TensorRef &out, SoftmaxRows &rows) {
  const char *op = log ? "log_softmax" : "softmax";
  if (Status s = checkRowOp(op, x, out); s.failed())
    return s;
  return softmaxRows(op, x, dim, rows);
}

Status checkSoftmaxGrad(bool log, const TensorRef &y, const TensorRef &dy,
                        int64_t dim, const TensorRef &dx, SoftmaxRows &rows) {
  const char *op = log ? "log_softmax_grad" : "softmax_grad";
  if (Status s = checkTensor(y, "output", op); s.failed())
    return s;
  if (!isFloat(y.dtype))
    return unsupportedDType(op, y.dtype);
  if (Status s = checkLike(op, "output gradient", dy, y); s.failed())
    return s;
  if (Status s = checkLike(op, "input gradient", dx, y); s.failed())
    return s;
  return softmaxRows(op, y, dim, rows);
}

Status checkConcat(const std::vector<TensorRef> &inputs, int64_t dim,
                   const TensorRef &out, int64_t &outer, int64_t &inner) {
  const char *op = "concat";
  if (Status s = checkTensor(out, "output", op); s.failed())
    return s;
  const int64_t rank = static_cast<int64_t>(out.shape.size());
  if (inputs.empty() || dim < 0 || dim >= rank)
    return invalidArgument(std::string(op) +
                           ": needs at least one input and "
                           "a dimension within the rank of " +
                           describe(out) + ", got dim " + std::to_string(dim));
  int64_t total = 0;
  for (const TensorRef &in : inputs) {
    if (Status s = checkTensorOf(in, out.dtype, "input", op); s.failed())
      return s;
    bool agrees = static_cast<int64_t>(in.shape.size()) == rank;
    for (int64_t d = 0; agrees && d < rank; ++d)
      agrees = d == dim || in.shape[d] == out.shape[d];
    if (!agrees)
      return invalidArgument(std::string(op) + ": input " + describe(in) +
                             " does not match output " + describe(out) +
                             " outside dimension " + std::to_string(dim));
    total += in.shape[dim];
  }
  if (total != out.shape[dim])
    return invalidArgument(
        std::string(op) + ": inputs add up to " + std::to_string(total) +
        " along dimension " + std::to_string(dim) + " but the output " +
        describe(out) + " has " + std::to_string(out.shape[dim]));
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= out.shape[d];
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= out.shape[d];
  return {};
}

} // namespace rp::runtime::kernels
