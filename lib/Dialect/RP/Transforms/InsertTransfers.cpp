//===- InsertTransfers.cpp - rp-insert-transfers --------------------------===//
//
// Adds to an rp.schedule the copies its compute needs and the optimizer
// step (include/rp/Analysis/Pipeline.h, insertTransfers); on a token-sliced
// schedule also the copies of its kept keys and values (TokenSlices.h,
// insertKeptKeyTransfers), sized from rp-slice-tokens' functions.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/LayerCost.h"
#include "rp/Analysis/SteadyState.h"
#include "rp/Analysis/TokenSlices.h"

#include <numeric>

namespace mlir::rp {
#define GEN_PASS_DEF_INSERTTRANSFERSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct InsertTransfersPass
    : SchedulePass<
          mlir::rp::impl::InsertTransfersPassBase<InsertTransfersPass>> {
  using Base::Base;

  /// Static schedules keep weights on the devices when every device's
  /// stages fit the weight budget.
  bool fitsResident(const Pipeline &pl, const PipelineInputs &in) {
    if (pl.kind == ScheduleKind::roundRobin)
      return false;
    std::vector<int64_t> bytes(pl.devices, 0);
    for (const StageJob &job : pl.jobs)
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        bytes[job.device] +=
            job.kind == CommandKind::backward
                ? in.costs[l].gradBytes
                : in.costs[l].paramBytes + (job.kind == CommandKind::tail
                                                ? in.costs[l].gradBytes
                                                : 0);
    double budget = in.hw.memoryBytes() * weightBudget;
    return llvm::all_of(bytes, [&](int64_t b) { return b <= budget; });
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Only the schedule changes: the layer costs stay valid.
    FailureOr<LoadedSchedule> loaded = loadOrFail(/*keepCosts=*/true);
    if (failed(loaded))
      return;
    PipelineInputs *in = &loaded->in;
    ScheduleOp *op = &loaded->op;
    Pipeline *pl = &loaded->pipeline;
    if (!(*op).getBody().front().getOps<CopyOp>().empty() ||
        !(*op).getBody().front().getOps<OptimizerStepOp>().empty()) {
      op->emitOpError("has transfers already");
      return signalPassFailure();
    }
    if (passShift < -1) {
      mlir::emitError(module.getLoc())
          << "rp-insert-transfers: pass-shift "
          << std::to_string(int(passShift))
          << " is not a device shift; give 0 or more (-1: dispatch's)";
      return signalPassFailure();
    }
    pl->residentWeights = fitsResident(*pl, *in);
    // A token-sliced schedule carries its kept keys' copies in the
    // pipeline, so that every insertTransfers of it adds them: the one
    // below, and the steady state's, whose step then times them.
    if (auto slices = (*op)->getAttrOfType<IntegerAttr>(kTokenSlicesAttr)) {
      std::vector<int64_t> sizes, keyValueBytes;
      if (failed(readTokenSlices(module, in->func, unsigned(slices.getInt()),
                                 sizes, keyValueBytes)))
        return signalPassFailure();
      // Checked once, on a copy: every layer's keys have a forward that
      // makes them.
      std::string error;
      Pipeline check = *pl;
      insertTransfers(check, in->costs, in->hw);
      if (!insertKeptKeyTransfers(check, sizes, keyValueBytes, in->hw, error)) {
        op->emitOpError() << error;
        return signalPassFailure();
      }
      pl->sliceCostTokens =
          std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
      pl->keptKeySlices = std::move(sizes);
      pl->keptKeyBytes = std::move(keyValueBytes);
    }
    // Round-robin: the pass shift first, so the schedule carries it and
    // its steady step is the one timed with it.
    Pipeline computeOnly = *pl;
    std::optional<SteadyState> steady;
    if (pl->kind == ScheduleKind::roundRobin) {
      if (passShift >= 0) {
        computeOnly.passShift = passShift % int(pl->devices);
        steady = steadyState(computeOnly, in->costs, in->hw);
      } else {
        steady = dispatchPasses(computeOnly, in->costs, in->hw, dispatch);
      }
      pl->passShift = computeOnly.passShift;
    }
    insertTransfers(*pl, in->costs, in->hw);
    // Listed by estimated start, so the IR reads as the step runs.
    std::string stuck;
    std::optional<Schedule> issued = inIssueOrder(pl->schedule, &stuck);
    if (!issued) {
      op->emitOpError("deadlocks at '")
          << stuck
          << "' once transfers are inserted; this is a bug in rp, "
             "please report it";
      return signalPassFailure();
    }
    pl->schedule = std::move(*issued);
    writeSchedule(*op, *pl);
    // Round-robin runs its steps back to back (the job counter carries
    // on), so its step is the steady state of a continuous run; the static
    // schedules' is one step, fill and drain included.
    Builder b(&getContext());
    if (pl->kind == ScheduleKind::roundRobin) {
      if (steady) {
        op->setStepMsAttr(b.getF64FloatAttr(steady->stepMs));
        op->setBubbleAttr(b.getF64FloatAttr(steady->bubble()));
      }
    } else if (std::optional<Timing> t = estimateTiming(
                   recomputeSplit(pl->schedule, *pl, in->costs))) {
      op->setStepMsAttr(b.getF64FloatAttr(t->iterationMs));
      op->setBubbleAttr(b.getF64FloatAttr(t->bubbleFraction()));
    }
  }
};

} // namespace
