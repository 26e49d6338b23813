//===- PlanExportGrad.cpp - kernel calls of the loss and gradient ops -----===//
//
// The plan's kernel call of the loss and of each gradient op autodiff
// emits: its inputs in the order the kernels take them and its attributes
// as `ints` and `floats` (the layout stated beside each case, read in the
// same order by runtime/lib/Executor). Split out of PlanExport.cpp to keep
// each file to one op family.
//
//===----------------------------------------------------------------------===//

#include "PlanWriter.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// The float attribute of an optional scale, or the natural 1/sqrt(D).
static double attentionScale(std::optional<APFloat> scale, Value query) {
  if (scale)
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(
                   cast<RankedTensorType>(query.getType()).getDimSize(3)));
}

} // namespace

/// The loss and the gradient kernels autodiff emits.
std::optional<KernelSpec> mlir::rp::gradientKernelSpec(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<KernelSpec>>(op)
      // outputs: loss_sum, count; ints: [ignore_index]
      .Case([&](CrossEntropyOp o) {
        return KernelSpec{pf::OpKind::cross_entropy,
                          {o.getLogits(), o.getLabels()},
                          {static_cast<int64_t>(o.getIgnoreIndex())}};
      })
      // inputs: logits, labels, scale; ints: [ignore_index]
      .Case([&](CrossEntropyGradOp o) {
        return KernelSpec{pf::OpKind::cross_entropy_grad,
                          {o.getLogits(), o.getLabels(), o.getScale()},
                          {static_cast<int64_t>(o.getIgnoreIndex())}};
      })
      // inputs: hidden, weight, labels; outputs: loss_sum, count;
      // ints: [ignore_index, chunk]
      .Case([&](LinearCrossEntropyOp o) {
        return KernelSpec{pf::OpKind::linear_cross_entropy,
                          {o.getHidden(), o.getWeight(), o.getLabels()},
                          {static_cast<int64_t>(o.getIgnoreIndex()),
                           static_cast<int64_t>(o.getChunk())}};
      })
      // inputs: hidden, weight, labels, scale; outputs: dhidden, dweight;
      // ints: [ignore_index, chunk]
      .Case([&](LinearCrossEntropyGradOp o) {
        return KernelSpec{
            pf::OpKind::linear_cross_entropy_grad,
            {o.getHidden(), o.getWeight(), o.getLabels(), o.getScale()},
            {static_cast<int64_t>(o.getIgnoreIndex()),
             static_cast<int64_t>(o.getChunk())}};
      })
      // inputs: x, dy; ints: [kind (UnaryGradKind)]
      .Case([&](UnaryGradOp o) {
        return KernelSpec{pf::OpKind::unary_grad,
                          {o.getInput(), o.getGrad()},
                          {static_cast<int64_t>(o.getKind())}};
      })
      // inputs: y, dy; ints: [dim, log]
      .Case([&](SoftmaxGradOp o) {
        return KernelSpec{pf::OpKind::softmax_grad,
                          {o.getOutput(), o.getGrad()},
                          {static_cast<int64_t>(o.getDim()), o.getLog()}};
      })
      // inputs: x, [scale], dy; outputs: dx, [dscale], [dbias];
      // ints: [axis, has_scale, with_bias, rms]; floats: [epsilon]
      .Case([&](NormGradOp o) {
        KernelSpec s{pf::OpKind::norm_grad, {o.getInput()}};
        if (o.getScale())
          s.inputs.push_back(o.getScale());
        s.inputs.push_back(o.getGrad());
        s.ints = {static_cast<int64_t>(o.getAxis()), o.getScale() != nullptr,
                  o.getWithBias(), o.getRms()};
        s.floats = {o.getEpsilon().convertToDouble()};
        return s;
      })
      // inputs: q, k, v, [mask], [sinks], dy; outputs: dq, dk, dv,
      // [dsinks]; ints: [causal, has_mask, (window), (has_sinks)] as the
      // forward's; floats: [scale, (softcap)]
      .Case([&](AttentionGradOp o) {
        return attentionCall(pf::OpKind::attention_grad, o,
                             attentionScale(o.getScale(), o.getQuery()),
                             o.getGrad());
      })
      // inputs: indices, dy; ints: [axis]
      .Case([&](GatherGradOp o) {
        return KernelSpec{pf::OpKind::gather_grad,
                          {o.getIndices(), o.getGrad()},
                          {static_cast<int64_t>(o.getAxis())}};
      })
      // ints: offsets then strides (of the result's rank)
      .Case([&](SliceGradOp o) {
        KernelSpec s{pf::OpKind::slice_grad, {o.getGrad()}};
        s.ints.assign(o.getOffsets().begin(), o.getOffsets().end());
        s.ints.append(o.getStrides().begin(), o.getStrides().end());
        return s;
      })
      // inputs: x, dy; ints: [kind, keep_dims, dims...]
      .Case([&](ExtremumGradOp o) {
        KernelSpec s{pf::OpKind::extremum_grad, {o.getInput(), o.getGrad()}};
        s.ints = {static_cast<int64_t>(o.getKind()), o.getKeepDims()};
        s.ints.append(o.getDims().begin(), o.getDims().end());
        return s;
      })
      .Default([](Operation *) { return std::nullopt; });
}
