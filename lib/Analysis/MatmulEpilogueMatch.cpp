//===- MatmulEpilogueMatch.cpp - which matmuls take an epilogue -----------===//
//
// The match rp-fuse-matmul-epilogue marks by and the plan exporter checks
// again in each program (include/rp/Analysis/MatmulEpilogueMatch.h): it reads
// the matmul's uses and changes nothing.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/MatmulEpilogueMatch.h"

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
