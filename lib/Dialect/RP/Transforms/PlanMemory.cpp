//===- PlanMemory.cpp - rp-plan-memory ------------------------------------===//
//
// Places the buffers of an rp.schedule and refuses plans over budget.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/MemoryPlan.h"

#include "llvm/Support/Format.h"

namespace mlir::rp {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

std::string gib(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.3g GiB", bytes / double(1ull << 30));
  return s;
}

struct PlanMemoryPass : mlir::rp::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  /// The error for device `d`: its peak, the budget, its biggest buffers
  /// and what to change.
  void reportOverBudget(ScheduleOp op, const MemoryPlan &mp, unsigned d,
                        int64_t budget) {
    std::vector<const PlannedBuffer *> mine;
    for (const PlannedBuffer &b : mp.buffers)
      if (b.device == d)
        mine.push_back(&b);
    std::stable_sort(mine.begin(), mine.end(),
                     [](const PlannedBuffer *x, const PlannedBuffer *y) {
                       return x->bytes > y->bytes;
                     });
    InFlightDiagnostic diag =
        op.emitError() << "device " << d << " needs " << gib(mp.peakBytes[d])
                       << " (" << mp.peakBytes[d] << " bytes) at its peak, over "
                       << "its budget of " << gib(budget) << " (" << budget
                       << " bytes)";
    for (size_t i = 0; i < std::min<size_t>(3, mine.size()); ++i)
      diag.attachNote() << "the biggest buffers: " << mine[i]->what << ", "
                        << gib(mine[i]->bytes);
    bool weights = !mine.empty() && mine.front()->role == BufferRole::weights;
    diag.attachNote()
        << (weights ? "to fit, cut smaller stages (a lower weight-budget or "
                      "stage-bytes, or --stages) or use more devices"
                    : "to fit, recompute at layer grain (--recompute layer) "
                      "or use a smaller microbatch with more microbatches");
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<LoadedSchedule> loaded =
        loadSchedule(module, getAnalysis<CostModel>());
    if (failed(loaded))
      return signalPassFailure();
    // Only the schedule changes: the layer costs stay valid.
    markAnalysesPreserved<CostModel>();
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
        SmallVector<int64_t> offsets;
        for (int buffer : mp.commandBuffers[i])
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
        reportOverBudget(*op, mp, d, budget);
        over = true;
      }
    if (over)
      signalPassFailure();
  }
};

} // namespace
