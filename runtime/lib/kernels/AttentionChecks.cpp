//===- AttentionChecks.cpp - checks of attention and its backward ---------===//
//
// One set of checks for attention and attention_grad: the backward must
// accept every problem the forward does, with the same messages but for
// the op name and the tensor in the output's place.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/kernels/Checks.h"

#include <cmath>
#include <utility>

namespace rp::runtime::kernels {

Status checkAttentionArgs(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v,
                          const std::optional<TensorRef> &mask, bool causal,
                          double scale, const TensorRef &y,
                          const AttentionGradRefs *grads, AttentionDims &dims,
                          const AttentionExtras &extras) {
  const char *op = grads ? "attention_grad" : "attention";
  const char *yRole = grads ? "output gradient" : "output";
  if (Status s = checkTensor(q, "query", op); s.failed())
    return s;
  if (!isFloat(q.dtype))
    return unsupportedDType(op, q.dtype);
  const std::pair<const TensorRef *, const char *> operands[] = {
      {&k, "key"},
      {&v, "value"},
      {&y, yRole},
      {grads ? &grads->dq : nullptr, "query gradient"},
      {grads ? &grads->dk : nullptr, "key gradient"},
      {grads ? &grads->dv : nullptr, "value gradient"}};
  for (auto [t, role] : operands)
    if (t)
      if (Status s = checkTensorOf(*t, q.dtype, role, op); s.failed())
        return s;
  std::string shapes = describe(q) + ", " + describe(k) + ", " + describe(v) +
                       (grads ? ", output gradient " : " -> ") + describe(y);
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4 ||
      y.shape.size() != 4)
    return invalidArgument(std::string(op) + ": query, key, value and " +
                           yRole + " must be [batch, heads, seq, dim], got " +
                           shapes);
  dims.b = q.shape[0];
  dims.h = q.shape[1];
  dims.s = q.shape[2];
  dims.d = q.shape[3];
  dims.hkv = k.shape[1];
  dims.t = k.shape[2];
  dims.dv = v.shape[3];
  bool consistent = k.shape[0] == dims.b && v.shape[0] == dims.b &&
                    k.shape[3] == dims.d && v.shape[1] == dims.hkv &&
                    v.shape[2] == dims.t && dims.hkv > 0 &&
                    dims.h % dims.hkv == 0 &&
                    y.shape == Shape{dims.b, dims.h, dims.s, dims.dv};
  if (!consistent)
    return invalidArgument(std::string(op) + ": inconsistent shapes " + shapes);
  if (grads) {
    const std::pair<const TensorRef *, const TensorRef *> gradOf[] = {
        {&grads->dq, &q}, {&grads->dk, &k}, {&grads->dv, &v}};
    for (auto [grad, primal] : gradOf)
      if (grad->shape != primal->shape)
        return invalidArgument(std::string(op) + ": gradient " +
                               describe(*grad) + " should have the shape of " +
                               describe(*primal));
  }
  // Causal queries are the last s of the t positions (bottom-right).
  if (causal && dims.s > dims.t)
    return invalidArgument(std::string(op) +
                           ": causal attention needs no more queries than "
                           "keys, got " +
                           shapes);
  if (!(scale > 0.0))
    return invalidArgument(std::string(op) + ": scale must be positive");
  if (extras.window < 0 || (extras.window > 0 && !causal))
    return invalidArgument(std::string(op) +
                           ": a sliding window must be positive and causal");
  if (!(extras.softcap >= 0.0) || std::isinf(extras.softcap))
    return invalidArgument(std::string(op) +
                           ": softcap must be positive and finite (0: none)");
  if (extras.sinksGrad && !(grads && extras.sinks))
    return invalidArgument(std::string(op) +
                           ": a sinks gradient needs attention_grad's sinks");
  const std::pair<const TensorRef *, const char *> sinkRefs[] = {
      {extras.sinks, "sinks"}, {extras.sinksGrad, "sinks gradient"}};
  for (auto [t, role] : sinkRefs) {
    if (!t)
      continue;
    if (Status s = checkTensorOf(*t, q.dtype, role, op); s.failed())
      return s;
    if (t->shape != Shape{dims.h})
      return invalidArgument(
          std::string(op) + ": " + role + " " + describe(*t) +
          " must be [query heads] = " + describeShape(Shape{dims.h}));
  }
  if (mask) {
    if (Status s = checkTensor(*mask, "mask", op); s.failed())
      return s;
    if (mask->dtype == DType::i64) {
      // Segments: a document id per key position, read by row and key.
      if (mask->shape != Shape{dims.b, dims.t})
        return invalidArgument(
            std::string(op) + ": segments " + describe(*mask) +
            " must be [batch, keys] = " + describeShape(Shape{dims.b, dims.t}));
      dims.maskStrides[0] = dims.t;
      dims.maskStrides[3] = 1;
      return {};
    }
    if (mask->dtype != DType::i1 && mask->dtype != q.dtype)
      return invalidArgument(std::string(op) + ": mask " + describe(*mask) +
                             " must be i1, i64 segments or the query's "
                             "element type " +
                             dtypeName(q.dtype));
    Shape scores{dims.b, dims.h, dims.s, dims.t};
    if (!kernels::broadcastStrides(mask->shape.data(),
                                   static_cast<int>(mask->shape.size()),
                                   scores.data(), 4, dims.maskStrides))
      return invalidArgument(std::string(op) + ": mask " + describe(*mask) +
                             " does not broadcast to the scores shape " +
                             describeShape(scores));
  }
  return {};
}

} // namespace rp::runtime::kernels
