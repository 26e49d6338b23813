//===- LowerSchedule.cpp - rp-lower-schedule ------------------------------===//
//
// Binds the stage jobs of the function's partition to devices and writes
// their compute, in order, as an rp.schedule. With token slices, each
// compute command is timed and sized by its slice: the layer costs of the
// slice's own function (rp-slice-tokens'), whose attention reads the kept
// prefix.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"

namespace mlir::rp {
#define GEN_PASS_DEF_LOWERSCHEDULEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct LowerSchedulePass
    : mlir::rp::impl::LowerSchedulePassBase<LowerSchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.getOps<ScheduleOp>().empty()) {
      module.emitError("already has an rp.schedule");
      return signalPassFailure();
    }
    FailureOr<PipelineInputs> in =
        loadPipelineInputs(module, getAnalysis<CostModel>());
    if (failed(in))
      return signalPassFailure();
    // Only an rp.schedule is added: the layer costs stay valid.
    markAnalysesPreserved<CostModel>();
    std::string error;
    unsigned slices = 0;
    FailureOr<Pipeline> pl = lowerModuleSchedule(
        module, *in, getAnalysis<CostModel>(), slices, error);
    if (failed(pl)) {
      if (!error.empty())
        in->func.emitError() << error;
      return signalPassFailure();
    }
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    // The schedule names the function; its partition stays the one record
    // of kind, devices, microbatches and hardware.
    auto op = ScheduleOp::create(b, in->func.getLoc(), in->func.getSymName());
    writeSchedule(op, *pl);
    if (slices)
      op->setAttr(kTokenSlicesAttr, b.getI64IntegerAttr(slices));
  }
};

} // namespace
