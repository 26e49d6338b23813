//===- PlanExportMoE.cpp - kernel calls of the rp.moe ops -----------------===//
//
// The plan's kernel call of each mixture-of-experts op: its inputs in the
// order the kernels take them and its attributes as integers (the layout
// plan.fbs's KernelCall documents per op kind, stated again beside each
// case). The results are the call's outputs in result order.
//
//===----------------------------------------------------------------------===//

#include "PlanWriter.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::rp;

std::optional<KernelSpec> mlir::rp::moeKernelSpec(Operation *op) {
  using Spec = std::optional<KernelSpec>;
  return llvm::TypeSwitch<Operation *, Spec>(op)
      // inputs: logits; outputs: weights, experts;
      // ints: [top_k, softmax (0 before, 1 after), normalize]
      .Case([](MoERouteOp o) -> Spec {
        return KernelSpec{pf::OpKind::moe_route,
                          {o.getLogits()},
                          {static_cast<int64_t>(o.getTopK()),
                           static_cast<int64_t>(o.getSoftmax()),
                           o.getNormalize()}};
      })
      // inputs: logits, experts, dweights; ints: [softmax, normalize]
      .Case([](MoERouteGradOp o) -> Spec {
        return KernelSpec{
            pf::OpKind::moe_route_grad,
            {o.getLogits(), o.getExperts(), o.getGrad()},
            {static_cast<int64_t>(o.getSoftmax()), o.getNormalize()}};
      })
      // inputs: x, experts; outputs: rows, positions, counts
      .Case([](MoEDispatchOp o) -> Spec {
        return KernelSpec{pf::OpKind::moe_dispatch,
                          {o.getInput(), o.getExperts()}};
      })
      // inputs: x, weight, counts; ints: [transpose_b]
      .Case([](MoEGroupedMatmulOp o) -> Spec {
        return KernelSpec{pf::OpKind::moe_grouped_matmul,
                          {o.getInput(), o.getWeight(), o.getCounts()},
                          {o.getTransposeB()}};
      })
      // inputs: x, dy, counts; ints: [transpose_b]
      .Case([](MoEGroupedMatmulWGradOp o) -> Spec {
        return KernelSpec{pf::OpKind::moe_grouped_matmul_wgrad,
                          {o.getInput(), o.getGrad(), o.getCounts()},
                          {o.getTransposeB()}};
      })
      // inputs: rows, positions, [weights]; ints: [has_weights]
      .Case([](MoECombineOp o) -> Spec {
        KernelSpec s{pf::OpKind::moe_combine, {o.getRows(), o.getPositions()}};
        if (o.getWeights())
          s.inputs.push_back(o.getWeights());
        s.ints = {o.getWeights() != nullptr};
        return s;
      })
      // inputs: rows, positions, [weights], dy; outputs: drows, [dweights];
      // ints: [has_weights]
      .Case([](MoECombineGradOp o) -> Spec {
        KernelSpec s{pf::OpKind::moe_combine_grad,
                     {o.getRows(), o.getPositions()}};
        if (o.getWeights())
          s.inputs.push_back(o.getWeights());
        s.inputs.push_back(o.getGrad());
        s.ints = {o.getWeights() != nullptr};
        return s;
      })
      .Default([](Operation *) -> Spec { return std::nullopt; });
}
