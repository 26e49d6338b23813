//===- MatmulEpilogueMatch.h - the matmul epilogue marker -------*- C++ -*-===//
//
// rp-fuse-matmul-epilogue marks an rp.matmul whose bias add (and gelu), or
// whose gelu gradient, the plan exporter writes into the matmul's kernel
// call (the plan's matmul epilogue, kernels::MatmulEpilogue in the
// runtime). The graph keeps the unfused ops, so every analysis sees them as
// before; the exporter checks the pattern again in each program and writes
// the unfused calls where it no longer holds.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_MATMULEPILOGUEMATCH_H
#define RP_ANALYSIS_MATMULEPILOGUEMATCH_H

#include "rp/Dialect/RP/RPOps.h"

#include <optional>

namespace mlir::rp {

/// The marker attribute (a string: "bias", "bias_gelu" or "dgelu").
inline constexpr llvm::StringLiteral kEpilogueAttr = "rp.epilogue";

/// What the matmul's result feeds, when that is an epilogue: the add of a
/// bias vector (then maybe a gelu), or the gradient input of a gelu's
/// unary_grad. `pre` is the value the gradient needs (the add's result,
/// read by ops other than the gelu), null when nothing else reads it.
struct EpilogueMatch {
  enum class Kind { bias, biasGelu, dgelu } kind;
  AddOp add;        ///< bias, biasGelu
  Value bias;       ///< bias, biasGelu
  GeluOp gelu;      ///< biasGelu
  UnaryGradOp grad; ///< dgelu
};

/// The epilogue `mm` can take, from its uses alone; `within` (when given)
/// says which ops the fused call may absorb (those of one program).
std::optional<EpilogueMatch>
matchMatmulEpilogue(MatmulOp mm,
                    llvm::function_ref<bool(Operation *)> within = nullptr);

} // namespace mlir::rp

#endif // RP_ANALYSIS_MATMULEPILOGUEMATCH_H
