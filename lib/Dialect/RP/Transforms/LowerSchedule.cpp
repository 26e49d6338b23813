//===- LowerSchedule.cpp - rp-lower-schedule ------------------------------===//
//
// Binds the stage jobs of the function's partition to devices and writes
// their compute, in order, as an rp.schedule.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/TokenSlices.h"

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
    PartitionAttr attr = in->attr;
    // Token slices (rp-slice-tokens) run as microbatches, K per sequence,
    // the tail and backward jobs last slice first.
    unsigned slices = 0;
    for (auto f : module.getOps<func::FuncOp>())
      slices += f->hasAttr(kTokenSliceAttr);
    // The layers that keep keys and values across slices: those with an
    // attention (rp-slice-tokens' rule).
    SmallVector<bool> keepsKeys;
    for (LayerOp l : in->func.getOps<LayerOp>())
      keepsKeys.push_back(l.walk([](AttentionOp) {
                             return WalkResult::interrupt();
                           }).wasInterrupted());
    FailureOr<Pipeline> pl =
        slices
            ? lowerSlicedSchedule(in->partition, in->costs, attr.getSchedule(),
                                  attr.getDevices(), attr.getMicrobatches(),
                                  slices, /*tailSweep=*/true, error, {},
                                  keepsKeys)
            : lowerSchedule(in->partition, in->costs, attr.getSchedule(),
                            attr.getDevices(), attr.getMicrobatches(), error);
    if (failed(pl)) {
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
