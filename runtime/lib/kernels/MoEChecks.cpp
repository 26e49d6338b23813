//===- MoEChecks.cpp - shape checks of the mixture-of-experts kernels -----===//
//
// One check per rp.moe.* kernel (kernels/Checks.h), called by the host
// kernels (host/HostMoE.cpp) and the cuda dispatch (cuda/CudaMoEDispatch.cpp)
// before either touches a tensor, so that a bad call fails with the same
// message on both devices. Shapes and dtypes only: the checks that read
// indices and counts stay with each device, where the data is.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/kernels/Checks.h"

#include <cstdint>

namespace rp::runtime::kernels {
namespace {

/// The floating-point matrix every forward kernel and its gradient read
/// first (logits, input, rows).
Status expectFloatMatrix(const char *op, const char *role, const TensorRef &t) {
  if (Status s = expectRank2(op, role, t); s.failed())
    return s;
  return isFloat(t.dtype) ? Status{} : unsupportedDType(op, t.dtype);
}

/// A stack of expert matrices (weight or its gradient) of `dtype`.
Status expectStack(const char *op, const char *role, const TensorRef &t,
                   DType dtype, const char *why) {
  if (Status s = checkTensorOf(t, dtype, role, op); s.failed())
    return s;
  if (t.shape.size() != 3)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have rank 3" + why);
  return {};
}

/// What moe_combine and its gradient both read: rows [R, H] float,
/// positions [T, K] i32 into them, optional weights [T, K] and the [T, H]
/// output (or its gradient).
Status checkCombine(const char *op, const TensorRef &rows,
                    const TensorRef &positions,
                    const std::optional<TensorRef> &weights,
                    const char *outRole, const TensorRef &out) {
  if (Status s = expectFloatMatrix(op, "rows", rows); s.failed())
    return s;
  if (Status s = expectRank2(op, "positions", positions); s.failed())
    return s;
  if (positions.dtype != DType::i32)
    return unsupportedDType(op, positions.dtype, "positions");
  const int64_t tokens = positions.shape[0], k = positions.shape[1];
  if (weights)
    if (Status s =
            expectShape(op, "weights", *weights, rows.dtype, {tokens, k});
        s.failed())
      return s;
  return expectShape(op, outRole, out, rows.dtype, {tokens, rows.shape[1]});
}

} // namespace

Status checkMoERoute(const TensorRef &logits, const TensorRef &weights,
                     const TensorRef &experts) {
  const char *op = "moe_route";
  if (Status s = expectFloatMatrix(op, "logits", logits); s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = weights.shape.size() == 2 ? weights.shape[1] : 0;
  if (k < 1 || k > n)
    return invalidArgument(std::string(op) + ": weights " + describe(weights) +
                           " should be [" + std::to_string(tokens) +
                           ", k] with 1 <= k <= " + std::to_string(n));
  if (Status s = expectShape(op, "weights", weights, logits.dtype, {tokens, k});
      s.failed())
    return s;
  return expectShape(op, "experts", experts, DType::i64, {tokens, k});
}

Status checkMoERouteGrad(const TensorRef &logits, const TensorRef &experts,
                         const TensorRef &dweights, const TensorRef &dlogits) {
  const char *op = "moe_route_grad";
  if (Status s = expectFloatMatrix(op, "logits", logits); s.failed())
    return s;
  if (Status s = expectRank2(op, "experts", experts); s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = experts.shape[1];
  if (Status s = expectShape(op, "experts", experts, DType::i64, {tokens, k});
      s.failed())
    return s;
  if (Status s = expectShape(op, "weights gradient", dweights, logits.dtype,
                             {tokens, k});
      s.failed())
    return s;
  return expectShape(op, "logits gradient", dlogits, logits.dtype, {tokens, n});
}

Status checkMoEDispatch(const TensorRef &x, const TensorRef &experts,
                        const TensorRef &rows, const TensorRef &positions,
                        const TensorRef &counts) {
  const char *op = "moe_dispatch";
  if (Status s = expectRank2(op, "input", x); s.failed())
    return s;
  if (Status s = expectRank2(op, "experts", experts); s.failed())
    return s;
  const int64_t tokens = x.shape[0], hidden = x.shape[1];
  const int64_t k = experts.shape[1];
  if (Status s = expectShape(op, "experts", experts, DType::i64, {tokens, k});
      s.failed())
    return s;
  if (Status s = expectShape(op, "rows", rows, x.dtype, {tokens * k, hidden});
      s.failed())
    return s;
  if (Status s =
          expectShape(op, "positions", positions, DType::i32, {tokens, k});
      s.failed())
    return s;
  if (counts.shape.size() != 1 || counts.dtype != DType::i32)
    return invalidArgument(std::string(op) + ": counts " + describe(counts) +
                           " should be i32[experts]");
  // Positions and counts are i32: every choice's row must have an i32 index.
  if (tokens * k > INT32_MAX)
    return invalidArgument(std::string(op) + ": " + std::to_string(tokens * k) +
                           " choices do not fit the i32 positions");
  return {};
}

Status checkMoEGroupedMatmul(const TensorRef &x, const TensorRef &weight,
                             const TensorRef &counts, bool transposeB,
                             const TensorRef &out) {
  const char *op = "moe_grouped_matmul";
  if (Status s = expectFloatMatrix(op, "input", x); s.failed())
    return s;
  if (Status s = expectStack(op, "weight", weight, x.dtype,
                             " (a stack of expert weights)");
      s.failed())
    return s;
  const int64_t numRows = x.shape[0], experts = weight.shape[0];
  const int64_t kIn = weight.shape[transposeB ? 2 : 1];
  const int64_t nOut = weight.shape[transposeB ? 1 : 2];
  if (x.shape[1] != kIn)
    return invalidArgument(std::string(op) + ": input " + describe(x) +
                           " does not match the weight " + describe(weight));
  if (Status s = expectShape(op, "output", out, x.dtype, {numRows, nOut});
      s.failed())
    return s;
  return expectShape(op, "counts", counts, DType::i32, {experts});
}

Status checkMoEGroupedMatmulWGrad(const TensorRef &x, const TensorRef &dy,
                                  const TensorRef &counts, bool transposeB,
                                  const TensorRef &dweight) {
  const char *op = "moe_grouped_matmul_wgrad";
  if (Status s = expectFloatMatrix(op, "input", x); s.failed())
    return s;
  if (Status s = expectRank2(op, "output gradient", dy); s.failed())
    return s;
  const int64_t numRows = x.shape[0];
  if (Status s = expectStack(op, "weight gradient", dweight, x.dtype, "");
      s.failed())
    return s;
  const int64_t experts = dweight.shape[0];
  Shape expected = transposeB ? Shape{experts, dy.shape[1], x.shape[1]}
                              : Shape{experts, x.shape[1], dy.shape[1]};
  if (Status s = expectShape(op, "weight gradient", dweight, x.dtype, expected);
      s.failed())
    return s;
  if (Status s = expectShape(op, "output gradient", dy, x.dtype,
                             {numRows, dy.shape[1]});
      s.failed())
    return s;
  return expectShape(op, "counts", counts, DType::i32, {experts});
}

Status checkMoECombine(const TensorRef &rows, const TensorRef &positions,
                       const std::optional<TensorRef> &weights,
                       const TensorRef &out) {
  return checkCombine("moe_combine", rows, positions, weights, "output", out);
}

Status checkMoECombineGrad(const TensorRef &rows, const TensorRef &positions,
                           const std::optional<TensorRef> &weights,
                           const TensorRef &dy, const TensorRef &drows,
                           const std::optional<TensorRef> &dweights) {
  const char *op = "moe_combine_grad";
  if (weights.has_value() != dweights.has_value())
    return invalidArgument(std::string(op) +
                           ": weights and their gradient go together");
  if (Status s =
          checkCombine(op, rows, positions, weights, "output gradient", dy);
      s.failed())
    return s;
  if (dweights)
    if (Status s = expectShape(op, "weights gradient", *dweights, rows.dtype,
                               {positions.shape[0], positions.shape[1]});
        s.failed())
      return s;
  return expectShape(op, "rows gradient", drows, rows.dtype, rows.shape);
}

} // namespace rp::runtime::kernels
