//===- PlanMemory.cpp - rp-plan-memory ------------------------------------===//
//
// Places the buffers of an rp.schedule and refuses plans over budget.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/SteadyState.h"
#include "rp/Analysis/UnitText.h"
#include "rp/timing/Assumptions.h"

namespace mlir::rp {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct PlanMemoryPass
    : SchedulePass<mlir::rp::impl::PlanMemoryPassBase<PlanMemoryPass>> {
  using Base::Base;

  /// The error for device `d`: its peak, the budget, its biggest buffers
  /// and what to change, by what the biggest buffer holds: weights want
  /// smaller stages, a stage-grain backward's recomputed intermediates
  /// want layer grain, any other activation fewer tokens per microbatch.
  void reportOverBudget(ScheduleOp op, const Pipeline &pl, const MemoryPlan &mp,
                        unsigned d, int64_t budget) {
    std::vector<const PlannedBuffer *> mine;
    for (const PlannedBuffer &b : mp.buffers)
      if (b.device == d)
        mine.push_back(&b);
    std::stable_sort(mine.begin(), mine.end(),
                     [](const PlannedBuffer *x, const PlannedBuffer *y) {
                       return x->bytes > y->bytes;
                     });
    InFlightDiagnostic diag = op.emitError()
                              << "device " << d << " needs "
                              << gibText(mp.peakBytes[d]) << " ("
                              << mp.peakBytes[d] << " bytes) at its peak, over "
                              << "its budget of " << gibText(budget) << " ("
                              << budget << " bytes)";
    for (size_t i = 0; i < std::min<size_t>(3, mine.size()); ++i)
      diag.attachNote() << "the biggest buffers: " << mine[i]->what << ", "
                        << gibText(mine[i]->bytes);
    if (mine.empty())
      return;
    const PlannedBuffer &top = *mine.front();
    const StageJob *job = nullptr;
    if (!top.users.empty()) {
      const Command &c = pl.schedule.commands[top.users.front()];
      if (c.job >= 0 && size_t(c.job) < pl.jobs.size())
        job = &pl.jobs[c.job];
    }
    if (top.role == BufferRole::weights)
      diag.attachNote() << "to fit, cut smaller stages (a lower weight-budget "
                           "or stage-bytes, or --stages) or use more devices";
    else if (top.role == BufferRole::work && job &&
             job->kind == CommandKind::backward && !job->layerGrain &&
             job->range.size() > 1)
      diag.attachNote()
          << "to fit, recompute at layer grain (--recompute layer: a backward "
             "stage keeps one layer's intermediates at a time), use fewer "
             "tokens per microbatch (--report-max-seq gives the largest "
             "sequence that fits) or more devices";
    else
      diag.attachNote()
          << "to fit, use fewer tokens per microbatch (--report-max-seq gives "
             "the largest sequence that fits)"
          << (top.role == BufferRole::work && job &&
                      job->kind == CommandKind::tail
                  ? " or a smaller fused tail (--stages)"
                  : "");
  }

  void runOnOperation() override {
    // Only the schedule changes: the layer costs stay valid. A token-sliced
    // schedule's kept prefixes land in their computes' inputs, and its
    // key gradients in an accumulator per job (planMemory).
    FailureOr<LoadedSchedule> loaded = loadOrFail(/*keepCosts=*/true);
    if (failed(loaded))
      return;
    PipelineInputs *in = &loaded->in;
    ScheduleOp *op = &loaded->op;
    Pipeline *pl = &loaded->pipeline;
    if (budgetGiB < 0) {
      op->emitError("budget-gib must not be negative");
      return signalPassFailure();
    }
    MemoryPlan mp = planMemory(*pl, in->costs);
    int64_t budget = budgetGiB > 0
                         ? static_cast<int64_t>(budgetGiB * (1ull << 30))
                         : static_cast<int64_t>(in->hw.memoryBytes());
    OpBuilder b(&getContext());
    for (auto [i, inner] : llvm::enumerate(op->getBody().front()))
      if (auto compute = dyn_cast<ComputeOp>(inner)) {
        // Weights, input, output and work; a fifth, the key and value
        // gradient accumulator, only where a token-sliced job has one, so
        // that an unsliced schedule reads as it did.
        SmallVector<int64_t> offsets;
        for (auto [slot, buffer] : llvm::enumerate(mp.commandBuffers[i]))
          if (slot < 4 || buffer >= 0)
            offsets.push_back(buffer < 0 ? -1 : mp.buffers[buffer].offset);
        compute.setOffsetsAttr(b.getDenseI64ArrayAttr(offsets));
      }
    op->setPeakBytesAttr(b.getDenseI64ArrayAttr(mp.peakBytes));
    op->setBudgetBytesAttr(b.getI64IntegerAttr(budget));
    op->setPinnedBytesAttr(
        b.getI64IntegerAttr(mp.pinnedHostBytes + mp.stagedHostBytes));
    bool over = false;
    for (unsigned d = 0; d < mp.peakBytes.size(); ++d)
      if (mp.peakBytes[d] > budget) {
        reportOverBudget(*op, *pl, mp, d, budget);
        over = true;
      }
    if (over)
      return signalPassFailure();
    if (failed(decidePassesInFlight(*op, *pl, *in, mp, budget)) ||
        failed(recordStepRange(*op, *pl, *in)))
      signalPassFailure();
  }

  /// The step of the schedule's partition timed again as this pipeline
  /// timed it (rp-insert-transfers, then the passes in flight decided
  /// here), on `hw` with its own layer costs.
  static std::optional<double> stepOn(ScheduleOp op, const Pipeline &pl,
                                      const PipelineInputs &in,
                                      ArrayRef<LayerCost> costs,
                                      const HardwareProfile &hw) {
    std::string error;
    FailureOr<Pipeline> computeOnly =
        lowerSchedule(in.partition, costs, in.attr.getSchedule(),
                      in.attr.getDevices(), in.attr.getMicrobatches(), error);
    if (failed(computeOnly))
      return std::nullopt;
    if (pl.kind == ScheduleKind::roundRobin) {
      computeOnly->passShift = pl.passShift;
      unsigned passes = unsigned(op.getPassesInFlight().value_or(2));
      unsigned copies = unsigned(op.getArenaCopies().value_or(passes));
      std::optional<SteadyState> s =
          copies == 2
              ? steadyState(*computeOnly, costs, hw)
              : steadyStateInMemory(*computeOnly, passes, copies, costs, hw);
      return s ? std::optional<double>(s->stepMs) : std::nullopt;
    }
    Pipeline full = std::move(*computeOnly);
    full.residentWeights = pl.residentWeights;
    insertTransfers(full, costs, hw);
    std::optional<Schedule> issued = inIssueOrder(full.schedule);
    if (!issued)
      return std::nullopt;
    full.schedule = std::move(*issued);
    std::optional<Timing> t =
        estimateTiming(recomputeSplit(full.schedule, full, costs));
    return t ? std::optional<double>(t->iterationMs) : std::nullopt;
  }

  /// Where the profile names inputs it cannot know (its "unknown" ranges:
  /// host DRAM, the PCIe tree, the optimizer's rate, launch and hand-off
  /// costs), the step at their fast and slow ends as `rp.step_range_ms`
  /// on the schedule, which rp-compile's summary prints beside the step.
  LogicalResult recordStepRange(ScheduleOp op, const Pipeline &pl,
                                const PipelineInputs &in) {
    std::string error;
    std::string profile = in.attr.getHw().getProfile().str();
    std::optional<std::vector<::rp::timing::UnknownInput>> unknown =
        ::rp::timing::loadUnknownInputs(profile, error);
    if (!unknown)
      return op.emitError() << error;
    FloatAttr nominal = op.getStepMsAttr();
    // A sliced schedule's ends would need each slice function's costs at
    // both ends; none is given yet (docs/token-slices.md).
    if (unknown->empty() || !nominal || op->hasAttr(kTokenSlicesAttr))
      return success();
    StringAttr measuredPath = op->getContext()
                                  ->getLoadedDialect<RPDialect>()
                                  ->getMeasuredAttrHelper()
                                  .getAttr(in.func);
    FailureOr<const CostInputs *> inputs = getAnalysis<CostModel>().inputs(
        profile, measuredPath ? measuredPath.getValue() : "", op->getContext());
    if (failed(inputs))
      return failure();
    const MeasuredProfile *measured =
        (*inputs)->measured ? &*(*inputs)->measured : nullptr;
    double ends[2];
    for (bool slow : {false, true}) {
      HardwareProfile hw;
      static_cast<::rp::timing::HardwareModel &>(hw) =
          ::rp::timing::atEnd(in.hw, *unknown, slow);
      FailureOr<std::vector<LayerCost>> costs =
          analyzeLayerCosts(in.func, hw, measured);
      if (failed(costs))
        return failure();
      std::optional<double> ms = stepOn(op, pl, in, *costs, hw);
      if (!ms)
        return success();
      ends[slow] = *ms;
    }
    // Every term only slows the run as it gets worse, so the ends hold the
    // step; kept around it where a layout's rounding says otherwise.
    double step = nominal.getValueAsDouble();
    op->setAttr(
        ::rp::timing::kStepRangeAttr,
        DenseF64ArrayAttr::get(op->getContext(), {std::min(ends[0], step),
                                                  std::max(ends[1], step)}));
    return success();
  }

  /// Records how a continuous run holds its passes: two in flight (or the
  /// option's one) on the option's copies of the arenas, or 2 when two
  /// copies fit every device's budget (runPeakBytes), else 1 shared; a
  /// round-robin schedule's steady step is then timed again that way.
  LogicalResult decidePassesInFlight(ScheduleOp op, const Pipeline &pl,
                                     const PipelineInputs &in,
                                     const MemoryPlan &mp, int64_t budget) {
    if (passesInFlight > 2)
      return op->emitError("passes-in-flight ")
             << unsigned(passesInFlight)
             << " is not a count of passes in flight; give 1 or 2";
    if (arenaCopies > 2)
      return op->emitError("arena-copies ")
             << unsigned(arenaCopies)
             << " is not a count of arena copies; give 1, 2 or 0 (2 when "
                "two copies fit, else 1)";
    unsigned passes = passesInFlight ? unsigned(passesInFlight) : 2;
    if (arenaCopies > passes)
      return op->emitError("arena-copies ")
             << unsigned(arenaCopies) << " for " << passes
             << " pass in flight: a pass needs one copy of the arenas; "
                "leave arena-copies out";
    unsigned shift = pl.shiftPerPass();
    bool renamed = renamesDevices(shift, passes);
    unsigned copies = passes == 1 ? 1
                      : arenaCopies
                          ? unsigned(arenaCopies)
                          : chooseArenaCopies(mp.peakBytes, budget, renamed);
    if (copies == 2) {
      std::vector<int64_t> run = runPeakBytes(mp.peakBytes, 2, renamed);
      for (auto [d, bytes] : llvm::enumerate(run))
        if (bytes > budget)
          return op.emitError()
                 << "two copies of the arenas need " << gibText(bytes) << " ("
                 << bytes << " bytes) on device " << d << " (one per pass in "
                 << "flight"
                 << (renamed ? ", each the largest device's since the "
                               "devices are renamed pass by pass"
                             : "")
                 << "), over its budget of " << gibText(budget) << " ("
                 << budget
                 << " bytes); leave arena-copies out (the two passes then "
                    "share one copy) or use fewer tokens per microbatch";
    }
    Builder b(op.getContext());
    op.setPassesInFlightAttr(b.getI64IntegerAttr(passes));
    op.setArenaCopiesAttr(b.getI64IntegerAttr(copies));
    if (copies == 2 || pl.kind != ScheduleKind::roundRobin)
      return success();
    // The compute-only pipeline the transfers were inserted into (sliced
    // or not), timed as rp-insert-transfers did but as the run holds its
    // passes.
    std::string error;
    unsigned slices = 0;
    FailureOr<Pipeline> computeOnly = lowerModuleSchedule(
        getOperation(), in, getAnalysis<CostModel>(), slices, error);
    if (failed(computeOnly)) {
      if (!error.empty())
        op.emitError() << error;
      return failure();
    }
    computeOnly->passShift = pl.passShift;
    std::string stuck;
    std::optional<SteadyState> steady = steadyStateInMemory(
        *computeOnly, passes, copies, in.costs, in.hw, &stuck);
    if (!steady)
      return op.emitError("deadlocks with ")
             << passes << " pass(es) in flight on one copy of the arenas at '"
             << stuck << "'; this is a bug in rp, please report it";
    op.setStepMsAttr(b.getF64FloatAttr(steady->stepMs));
    op.setBubbleAttr(b.getF64FloatAttr(steady->bubble()));
    return success();
  }
};

} // namespace
