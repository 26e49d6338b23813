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
    // Per slice, its function's layer costs (the profile and measured
    // times @main's).
    std::vector<std::vector<LayerCost>> sliceCosts(slices);
    StringRef measured;
    if (auto recorded = module.getContext()
                            ->getLoadedDialect<RPDialect>()
                            ->getMeasuredAttrHelper()
                            .getAttr(in->func))
      measured = recorded.getValue();
    for (auto f : module.getOps<func::FuncOp>()) {
      auto slice = f->getAttrOfType<DictionaryAttr>(kTokenSliceAttr);
      auto index = slice ? slice.getAs<IntegerAttr>("index") : IntegerAttr();
      if (!index || index.getInt() < 0 || index.getInt() >= int64_t(slices))
        continue;
      FailureOr<const std::vector<LayerCost> *> costs =
          getAnalysis<CostModel>().layerCosts(f, in->attr.getHw().getProfile(),
                                              measured);
      if (failed(costs))
        return signalPassFailure();
      if ((*costs)->size() != in->costs.size()) {
        f.emitError("has ") << (*costs)->size() << " layers, @"
                            << in->func.getSymName() << " " << in->costs.size();
        return signalPassFailure();
      }
      sliceCosts[index.getInt()] = **costs;
    }
    auto timeSlices = [&](Pipeline &pl) {
      for (Command &c : pl.schedule.commands) {
        if (!isCompute(c.kind) || c.microbatch < 0)
          continue;
        const std::vector<LayerCost> &layers =
            sliceCosts[unsigned(c.microbatch) % slices];
        const StageJob &job = pl.jobs[c.job];
        c.ms = sliceComputeMs(job, layers);
        c.bytes = jobWorkBytes(job.kind, job.range, layers, job.layerGrain,
                               /*savedAsInputs=*/true);
      }
    };
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
                                  slices, /*tailSweep=*/true, error, timeSlices,
                                  keepsKeys)
            : lowerSchedule(in->partition, in->costs, attr.getSchedule(),
                            attr.getDevices(), attr.getMicrobatches(), error);
    if (failed(pl)) {
      in->func.emitError() << error;
      return signalPassFailure();
    }
    // The tail's forward sweep (added after the timing) runs its slice's
    // forward.
    for (Command &c : pl->schedule.commands)
      if (slices && c.kind == CommandKind::forward &&
          pl->jobs[c.job].kind == CommandKind::tail) {
        const StageJob &job = pl->jobs[c.job];
        c.ms = 0;
        for (unsigned l = job.range.begin; l < job.range.end; ++l)
          c.ms += sliceCosts[unsigned(c.microbatch) % slices][l].forwardMs;
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
