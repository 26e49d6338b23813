//===- ReportMaxSeq.cpp - rp-report-max-seq -------------------------------===//
//
// Bisects the sequence length: each trial retypes a copy of the module with
// the sequence dimension scaled and plans its memory from scratch, so the
// answer comes from the same cost, schedule and memory models as the plan.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/MemoryPlan.h"

#include "llvm/Support/Format.h"

namespace mlir::rp {
#define GEN_PASS_DEF_REPORTMAXSEQPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// `type` with every dimension equal to `from` replaced by `to`.
Type rescaled(Type type, int64_t from, int64_t to) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return type;
  SmallVector<int64_t> dims(t.getShape());
  for (int64_t &d : dims)
    if (d == from)
      d = to;
  return t.clone(dims);
}

struct Trial {
  bool fits = false;
  int64_t peak = 0;
  unsigned device = 0;
};

struct ReportMaxSeqPass
    : mlir::rp::impl::ReportMaxSeqPassBase<ReportMaxSeqPass> {
  using Base::Base;

  /// Plans the step at sequence length `seq` on a retyped copy.
  FailureOr<Trial> trial(ModuleOp module, int64_t seq0, int64_t seq,
                         int64_t budget) {
    // The profiles parsed once; the copy's own costs, forgotten with it.
    CostModel scratch = getAnalysis<CostModel>().forScratch();
    OwningOpRef<ModuleOp> copy = module.clone();
    copy->walk([&](Operation *op) {
      for (Value r : op->getResults())
        r.setType(rescaled(r.getType(), seq0, seq));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument a : block.getArguments())
            a.setType(rescaled(a.getType(), seq0, seq));
    });
    FailureOr<PipelineInputs> in = loadPipelineInputs(*copy, scratch);
    if (failed(in))
      return failure();
    std::string error;
    FailureOr<Pipeline> pl =
        lowerSchedule(in->partition, in->costs, in->attr.getSchedule(),
                      in->attr.getDevices(), in->attr.getMicrobatches(), error);
    if (failed(pl))
      return module.emitError(error);
    insertTransfers(*pl, in->costs, in->hw);
    // The order rp-insert-transfers lists commands in, which buffer reuse
    // follows.
    if (std::optional<Schedule> issued = inIssueOrder(pl->schedule))
      pl->schedule = std::move(*issued);
    MemoryPlan mp = planMemory(*pl, in->costs);
    Trial t;
    t.fits = true;
    for (auto [d, peak] : llvm::enumerate(mp.peakBytes)) {
      if (peak > t.peak) {
        t.peak = peak;
        t.device = d;
      }
      t.fits &= peak <= budget;
    }
    return t;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PipelineInputs> in =
        loadPipelineInputs(module, getAnalysis<CostModel>());
    if (failed(in))
      return signalPassFailure();
    // It reports and changes nothing.
    markAllAnalysesPreserved();
    int64_t seq0 = 0, rows = 0;
    for (BlockArgument a : in->func.getArguments())
      if (auto t = dyn_cast<RankedTensorType>(a.getType());
          t && t.getRank() >= 2 && t.hasStaticShape()) {
        rows = t.getDimSize(0);
        seq0 = t.getDimSize(1);
        break;
      }
    if (seq0 <= 1 || limit < 1) {
      in->func.emitError("has no input of rank 2 or more whose dimension 1 "
                         "is a sequence length (and limit must be positive)");
      return signalPassFailure();
    }
    int64_t budget = budgetGiB > 0 ? int64_t(budgetGiB * (1ull << 30))
                                   : in->hw.memoryBytes();
    FailureOr<Trial> base = trial(module, seq0, seq0, budget);
    FailureOr<Trial> small = trial(module, seq0, 1, budget);
    if (failed(base) || failed(small))
      return signalPassFailure();
    auto gib = [](int64_t b) {
      std::string s;
      llvm::raw_string_ostream(s)
          << llvm::format("%.3f GiB", b / double(1ull << 30)) << " (" << b
          << " bytes)";
      return s;
    };
    InFlightDiagnostic report = emitRemark(in->func.getLoc());
    if (!small->fits) {
      report << "no sequence length fits: with one token per sequence "
             << "device " << small->device << " already needs "
             << gib(small->peak) << " of " << gib(budget);
      return;
    }
    // Bisection on [fits, does not fit).
    int64_t lo = 1, hi = limit + 1;
    Trial best = *small;
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      FailureOr<Trial> t = trial(module, seq0, mid, budget);
      if (failed(t))
        return signalPassFailure();
      if (t->fits) {
        lo = mid;
        best = *t;
      } else {
        hi = mid;
      }
    }
    report << "the largest sequence that fits is " << lo
           << " tokens (microbatch " << rows << " x " << lo << ")";
    if (lo == limit)
      report << ", the limit tried";
    report << ": device " << best.device << " peaks at " << gib(best.peak)
           << " of " << gib(budget) << "; at " << seq0 << " tokens the peak is "
           << gib(base->peak);
  }
};

} // namespace
