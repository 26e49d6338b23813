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
// What counts as an epilogue is matchMatmulEpilogue's
// (lib/Analysis/MatmulEpilogue.cpp), which the exporter asks again.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/MatmulEpilogueMatch.h"
#include "rp/Dialect/RP/RPPasses.h"

namespace mlir::rp {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

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
