//===- FuseMatmulEpilogue.cpp - rp-fuse-matmul-epilogue -------------------===//
//
// A linear layer's bias is an add after its matmul, and GPT-2's MLP puts a
// gelu after that: three passes over the [tokens, N] product where
// cuBLASLt's epilogues (BIAS, GELU_BIAS) make one. The backward's gelu
// gradient multiplies the next matmul's product elementwise (DGELU). This
// pass marks each matmul whose result feeds such an epilogue; the plan
// exporter writes the marked matmul, its add and its gelu (or the gelu's
// unary_grad) as one matmul call with the epilogue, and the runtime's
// devices compute it as the unfused calls would round it (host: bitwise).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/MatmulEpilogue.h"
#include "rp/Dialect/RP/RPPasses.h"

namespace mlir::rp {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

/// The single user of `v`, in `v`'s block and absorbable.
static Operation *soleUser(Value v,
                           llvm::function_ref<bool(Operation *)> within) {
  if (!v.hasOneUse())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  if (user->getBlock() != v.getParentBlock() || (within && !within(user)))
    return nullptr;
  return user;
}

static bool isEpilogueFloat(Type t) {
  auto type = dyn_cast<RankedTensorType>(t);
  return type && isa<Float16Type, BFloat16Type, Float32Type, Float64Type>(
                     type.getElementType());
}

std::optional<EpilogueMatch>
mlir::rp::matchMatmulEpilogue(MatmulOp mm,
                              llvm::function_ref<bool(Operation *)> within) {
  Value product = mm.getResult();
  auto type = cast<RankedTensorType>(product.getType());
  if (!isEpilogueFloat(type) || type.getRank() < 1)
    return std::nullopt;
  Operation *user = soleUser(product, within);
  if (!user)
    return std::nullopt;
  // The backward: dx = unary_grad(gelu, pre, dy) with the product as dy.
  if (auto grad = dyn_cast<UnaryGradOp>(user)) {
    if ((grad.getKind() != UnaryGradKind::gelu &&
         grad.getKind() != UnaryGradKind::gelu_tanh) ||
        grad.getGrad() != product || grad.getInput() == product)
      return std::nullopt;
    EpilogueMatch m{EpilogueMatch::Kind::dgelu, {}, {}, {}, grad};
    return m;
  }
  // The forward: add(product, bias) with bias a [N] vector of the product's
  // last dimension, the sum the product's shape (no other broadcast).
  auto add = dyn_cast<AddOp>(user);
  if (!add || add.getType() != type)
    return std::nullopt;
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto biasType = dyn_cast<RankedTensorType>(bias.getType());
  if (bias == product || !biasType || biasType.getRank() != 1 ||
      biasType.getElementType() != type.getElementType() ||
      biasType.getDimSize(0) != type.getShape().back())
    return std::nullopt;
  EpilogueMatch m{EpilogueMatch::Kind::bias, add, bias, {}, {}};
  // A gelu of the sum in the same block; the sum may have other readers
  // (the gelu's gradient in the backward), which get it as a second result.
  for (Operation *u : add->getUsers())
    if (auto gelu = dyn_cast<GeluOp>(u);
        gelu && gelu->getBlock() == add->getBlock() && (!within || within(u))) {
      m.kind = EpilogueMatch::Kind::biasGelu;
      m.gelu = gelu;
      break;
    }
  return m;
}

namespace {

struct FuseMatmulEpiloguePass
    : mlir::rp::impl::FuseMatmulEpiloguePassBase<FuseMatmulEpiloguePass> {
  void runOnOperation() override {
    getOperation()->walk([&](MatmulOp mm) {
      std::optional<EpilogueMatch> m = matchMatmulEpilogue(mm);
      if (!m) {
        mm->removeAttr(kEpilogueAttr);
        return;
      }
      const char *kind = m->kind == EpilogueMatch::Kind::bias ? "bias"
                         : m->kind == EpilogueMatch::Kind::biasGelu
                             ? "bias_gelu"
                             : "dgelu";
      mm->setAttr(kEpilogueAttr, StringAttr::get(mm.getContext(), kind));
    });
  }
};

} // namespace
