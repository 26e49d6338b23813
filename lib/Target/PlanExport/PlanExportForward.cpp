//===- PlanExportForward.cpp - kernel calls of the forward ops ------------===//
//
// The plan's kernel call of each forward rp op: element-wise ops, the ops
// that move or pick elements, and the contractions (matmuls, reductions,
// softmaxes, norms, attention). Its inputs in the order the kernels take
// them and its attributes as `ints` and `floats` (the layout stated beside
// each case, read in the same order by runtime/lib/Executor). The loss and
// the gradients are in PlanExportGrad.cpp, the MoE ops in
// PlanExportMoE.cpp; PlanExport.cpp asks each family in turn.
//
//===----------------------------------------------------------------------===//

#include "PlanWriter.h"

#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace mlir::rp;

/// Element-wise kernels: arithmetic, comparisons, selects, activations
/// and casts.
static std::optional<KernelSpec> elementwiseSpec(Operation *op) {
  auto binary = [](pf::OpKind kind, Operation *o) {
    return KernelSpec{kind, {o->getOperand(0), o->getOperand(1)}, {}, {}};
  };
  auto unary = [](pf::OpKind kind, Operation *o) {
    return KernelSpec{kind, {o->getOperand(0)}, {}, {}};
  };
  return llvm::TypeSwitch<Operation *, std::optional<KernelSpec>>(op)
      .Case([&](AddOp o) { return binary(pf::OpKind::add, o); })
      .Case([&](SubOp o) { return binary(pf::OpKind::sub, o); })
      .Case([&](MulOp o) { return binary(pf::OpKind::mul, o); })
      .Case([&](DivOp o) { return binary(pf::OpKind::div, o); })
      .Case([&](PowOp o) { return binary(pf::OpKind::pow, o); })
      .Case([&](MaxOp o) { return binary(pf::OpKind::max, o); })
      .Case([&](MinOp o) { return binary(pf::OpKind::min, o); })
      // ints: [predicate (eq, ne, lt, le, gt, ge)]
      .Case([&](CmpOp o) {
        KernelSpec s = binary(pf::OpKind::cmp, o);
        s.ints = {static_cast<int64_t>(o.getPredicate())};
        return s;
      })
      .Case([&](WhereOp o) {
        return KernelSpec{pf::OpKind::where,
                          {o.getCondition(), o.getOnTrue(), o.getOnFalse()}};
      })
      .Case([&](NegOp o) { return unary(pf::OpKind::neg, o); })
      .Case([&](ExpOp o) { return unary(pf::OpKind::exp, o); })
      .Case([&](LogOp o) { return unary(pf::OpKind::log, o); })
      .Case([&](SqrtOp o) { return unary(pf::OpKind::sqrt, o); })
      .Case([&](RsqrtOp o) { return unary(pf::OpKind::rsqrt, o); })
      .Case([&](TanhOp o) { return unary(pf::OpKind::tanh, o); })
      .Case([&](ErfOp o) { return unary(pf::OpKind::erf, o); })
      .Case([&](SigmoidOp o) { return unary(pf::OpKind::sigmoid, o); })
      .Case([&](SiluOp o) { return unary(pf::OpKind::silu, o); })
      .Case([&](ReluOp o) { return unary(pf::OpKind::relu, o); })
      // ints: [approximate (0 none, 1 tanh)]
      .Case([&](GeluOp o) {
        KernelSpec s = unary(pf::OpKind::gelu, o);
        s.ints = {static_cast<int64_t>(o.getApproximate())};
        return s;
      })
      .Case([&](CastOp o) { return unary(pf::OpKind::cast, o); })
      // inputs [x, key], ints [tensor], floats [probability]
      .Case([&](DropoutOp o) {
        return KernelSpec{pf::OpKind::dropout,
                          {o.getInput(), o.getKey()},
                          {static_cast<int64_t>(o.getTensor())},
                          {o.getProbability().convertToDouble()}};
      })
      // ints: [kind (0 nf4, 1 int8)]: contract/include/rp/contract/Quantize.h
      .Case([&](DequantizeOp o) {
        KernelSpec s = unary(pf::OpKind::dequantize, o);
        s.ints = {static_cast<int64_t>(o.getKind())};
        return s;
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Kernels that move or pick elements: reshapes, transposes, slices,
/// concatenations, broadcasts and gathers.
static std::optional<KernelSpec> layoutSpec(Operation *op) {
  auto unary = [](pf::OpKind kind, Operation *o) {
    return KernelSpec{kind, {o->getOperand(0)}, {}, {}};
  };
  return llvm::TypeSwitch<Operation *, std::optional<KernelSpec>>(op)
      .Case([&](ReshapeOp o) { return unary(pf::OpKind::reshape, o); })
      // The value of x unchanged: a same-shape reshape.
      .Case([&](StopGradientOp o) { return unary(pf::OpKind::reshape, o); })
      // ints: permutation
      .Case([&](TransposeOp o) {
        KernelSpec s = unary(pf::OpKind::transpose, o);
        s.ints.assign(o.getPermutation().begin(), o.getPermutation().end());
        return s;
      })
      // ints: offsets then strides
      .Case([&](SliceOp o) {
        KernelSpec s = unary(pf::OpKind::slice, o);
        s.ints.assign(o.getOffsets().begin(), o.getOffsets().end());
        s.ints.append(o.getStrides().begin(), o.getStrides().end());
        return s;
      })
      // ints: [dim]
      .Case([&](ConcatOp o) {
        return KernelSpec{pf::OpKind::concat,
                          SmallVector<Value>(o.getInputs()),
                          {static_cast<int64_t>(o.getDim())}};
      })
      .Case([&](BroadcastOp o) { return unary(pf::OpKind::broadcast, o); })
      // ints: [axis]
      .Case([&](GatherOp o) {
        return KernelSpec{pf::OpKind::gather,
                          {o.getInput(), o.getIndices()},
                          {static_cast<int64_t>(o.getAxis())}};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Matmuls, reductions, softmaxes, norms and attention.
static std::optional<KernelSpec> contractionSpec(Operation *op) {
  auto binary = [](pf::OpKind kind, Operation *o) {
    return KernelSpec{kind, {o->getOperand(0), o->getOperand(1)}, {}, {}};
  };
  auto unary = [](pf::OpKind kind, Operation *o) {
    return KernelSpec{kind, {o->getOperand(0)}, {}, {}};
  };
  return llvm::TypeSwitch<Operation *, std::optional<KernelSpec>>(op)
      // ints: [transpose_a, transpose_b]
      .Case([&](MatmulOp o) {
        KernelSpec s = binary(pf::OpKind::matmul, o);
        s.ints = {o.getTransposeA(), o.getTransposeB()};
        return s;
      })
      // ints: [kind (sum, mean, max, min), keep_dims, dims...]
      .Case([&](ReduceOp o) {
        KernelSpec s = unary(pf::OpKind::reduce, o);
        s.ints = {static_cast<int64_t>(o.getKind()), o.getKeepDims()};
        s.ints.append(o.getDims().begin(), o.getDims().end());
        return s;
      })
      // ints: [dim]
      .Case([&](SoftmaxOp o) {
        KernelSpec s = unary(pf::OpKind::softmax, o);
        s.ints = {static_cast<int64_t>(o.getDim())};
        return s;
      })
      .Case([&](LogSoftmaxOp o) {
        KernelSpec s = unary(pf::OpKind::log_softmax, o);
        s.ints = {static_cast<int64_t>(o.getDim())};
        return s;
      })
      // inputs: x, [scale], [bias]; ints: [axis, has_scale, has_bias];
      // floats: [epsilon]
      .Case([&](LayerNormOp o) {
        KernelSpec s = unary(pf::OpKind::layer_norm, o);
        if (o.getScale())
          s.inputs.push_back(o.getScale());
        if (o.getBias())
          s.inputs.push_back(o.getBias());
        s.ints = {static_cast<int64_t>(o.getAxis()), o.getScale() != nullptr,
                  o.getBias() != nullptr};
        s.floats = {o.getEpsilon().convertToDouble()};
        return s;
      })
      // inputs: x, [scale]; ints: [axis, has_scale]; floats: [epsilon]
      .Case([&](RmsNormOp o) {
        KernelSpec s = unary(pf::OpKind::rms_norm, o);
        if (o.getScale())
          s.inputs.push_back(o.getScale());
        s.ints = {static_cast<int64_t>(o.getAxis()), o.getScale() != nullptr};
        s.floats = {o.getEpsilon().convertToDouble()};
        return s;
      })
      // inputs: q, k, v, [mask], [sinks]; ints: [causal, has_mask,
      // (window), (has_sinks)]; floats: [scale, (softcap)]. The window,
      // the sinks and the soft-cap are written only when set (the window
      // as 0 before has_sinks), so plans without them read as before.
      .Case([&](AttentionOp o) {
        return attentionCall(pf::OpKind::attention, o, o.getEffectiveScale());
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<KernelSpec> mlir::rp::forwardKernelSpec(Operation *op) {
  for (auto family : {elementwiseSpec, layoutSpec, contractionSpec})
    if (std::optional<KernelSpec> spec = family(op))
      return spec;
  return std::nullopt;
}
