//===- VerifyWeights.cpp - rp-verify-weights ------------------------------===//
//
// Refuses an IR whose weight files are not the ones it was written with
// (rp.weight_fingerprints, include/rp/Support/WeightsWriter.h).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Support/WeightsWriter.h"

namespace mlir::rp {
#define GEN_PASS_DEF_VERIFYWEIGHTSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct VerifyWeightsPass : rp::impl::VerifyWeightsPassBase<VerifyWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(verifyWeightFingerprints(getOperation(), irDir)))
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
