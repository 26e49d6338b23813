//===- ReportMaxSeq.cpp - rp-report-max-seq -------------------------------===//
//
// Bisects the sequence length: each trial retypes a copy of the module with
// the sequence dimension scaled and plans its memory from scratch, so the
// answer comes from the same cost, schedule and memory models as the plan.
// With rp's partitioner, each trial also partitions for its length as
// rp-partition would: the step-time search's partitions are cut for speed
// and at a long sequence the memory objective's lean ones are what fit, so
// a trial asks only whether the memory objective finds one (the leanest
// first, a few memory plans), and the partitioner runs once, at the
// answer, for the stages it prints (at the memory limit there, it takes the
// memory objective's partition without timing the step-time search's:
// partitionAtMemoryLimit).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "Retype.h"
#include "ScheduleIR.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PartitionMemory.h"
#include "rp/Analysis/PartitionPolicy.h"
#include "rp/Analysis/RecomputeChoice.h"
#include "rp/timing/Assumptions.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <functional>

namespace mlir::rp {
#define GEN_PASS_DEF_REPORTMAXSEQPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct Trial {
  bool fits = false;
  int64_t peak = 0;
  unsigned device = 0;
  /// The peak device's biggest buffer: what limits the sequence.
  std::string biggest;
  int64_t biggestBytes = 0;
  /// The stages planned (--stages form).
  std::string stages;
  /// What two copies of the arenas would take on the fullest device
  /// (runPeakBytes), and whether they fit (else the passes share one).
  int64_t twoPassPeak = 0;
  bool twoFit = false;
  /// The backward stages at layer grain (of how many).
  unsigned layerStages = 0, backwardStages = 0;
};

/// How a trial picks its stages.
enum class Stages {
  /// lean when the function's stages are rp's partitioner's, else the
  /// function's.
  automatic,
  /// The function's #rp.partition.
  function,
  /// The leanest partition rp's memory objective finds that fits (or the
  /// least peak when none does).
  lean,
  /// rp's partitioner in full, as rp-partition runs it.
  partitioner,
};

struct ReportMaxSeqPass
    : mlir::rp::impl::ReportMaxSeqPassBase<ReportMaxSeqPass> {
  using Base::Base;

  /// Plans the step at sequence length `seq` on a retyped copy.
  FailureOr<Trial> trial(ModuleOp module, int64_t seq0, int64_t seq,
                         int64_t budget, bool layerGrain,
                         Stages how = Stages::automatic) {
    ++trials;
    if (how == Stages::automatic)
      how = ownStages ? Stages::lean : Stages::function;
    // The profiles parsed once; the copy's own costs, forgotten with it.
    CostModel scratch = getAnalysis<CostModel>().forScratch();
    OwningOpRef<ModuleOp> copy = retypedCopy(module, seq0, seq, rows);
    FailureOr<PipelineInputs> in = loadPipelineInputs(*copy, scratch);
    if (failed(in))
      return failure();
    std::optional<std::pair<Pipeline, MemoryPlan>> leanPlan;
    if (how != Stages::function) {
      // rp-partition's defaults: its cap (weight-budget 0.6, no
      // stage-bytes; rp-compile sets neither) and tail jobs (1).
      SearchTarget target{in->hw,
                          in->attr.getDevices(),
                          in->attr.getMicrobatches(),
                          stageByteCap(0, in->hw, 0.6),
                          dispatch,
                          1};
      target.layerGrain = layerGrain;
      target.budgetBytes = budget;
      // A trial that repeats a search of this compile (the compiled
      // length) reads its result.
      target.memo = &scratch.searchMemo();
      // Its floor ties as rp-partition breaks them (SearchTarget::fastEnd).
      std::string error;
      std::optional<std::vector<::rp::timing::UnknownInput>> unknown =
          ::rp::timing::loadUnknownInputs(in->attr.getHw().getProfile().str(),
                                          error);
      if (!unknown)
        return mlir::emitError(copy->getLoc()) << error;
      HardwareProfile fast;
      if (!unknown->empty()) {
        static_cast<::rp::timing::HardwareModel &>(fast) =
            ::rp::timing::atEnd(in->hw, *unknown, /*slow=*/false);
        target.fastEnd = &fast;
      }
      if (how == Stages::partitioner) {
        in->partition = partitionForStepTime(in->costs, target);
      } else {
        MemorySearchResult lean =
            partitionForMemory(in->costs, target, /*feasibilityOnly=*/true);
        in->partition = lean.fastest ? *lean.fastest : lean.leastPeak;
        // Its memory plan at stage grain, placed by the search: the
        // grains' choice below starts from it.
        if (!layerGrain && in->attr.getSchedule() == ScheduleKind::roundRobin)
          leanPlan = std::move(lean.plan);
      }
    }
    // The function's own partition at the layer grain `auto` chose for it.
    layerGrain |= how == Stages::function && autoChoseLayer;
    in->partition.layerGrain = layerGrain;
    std::string error;
    // The grains' choice plans the memory of the grains it chooses, as
    // below (planGrains): that plan is the trial's.
    std::optional<std::pair<Pipeline, MemoryPlan>> planned;
    // Layer grain for all, the grains `auto` chooses at this length, or
    // the partition's own.
    if (layerGrain) {
      in->partition.layerGrain = true;
      in->partition.stageLayerGrain.clear();
    } else if (chooseGrains) {
      GrainTarget target{in->attr.getSchedule(), in->attr.getDevices(),
                         in->attr.getMicrobatches(), in->hw, budget};
      planned.emplace();
      FailureOr<GrainChoice> choice =
          chooseRecomputeGrains(in->partition, in->costs, target, error,
                                &*planned, leanPlan ? &*leanPlan : nullptr);
      if (failed(choice))
        return module.emitError(error);
      in->partition.stageLayerGrain = choice->layerGrain;
    }
    if (!planned) {
      FailureOr<Pipeline> lowered = lowerSchedule(
          in->partition, in->costs, in->attr.getSchedule(),
          in->attr.getDevices(), in->attr.getMicrobatches(), error);
      if (failed(lowered))
        return module.emitError(error);
      insertTransfers(*lowered, in->costs, in->hw);
      // The order rp-insert-transfers lists commands in, which buffer
      // reuse follows.
      if (std::optional<Schedule> issued = inIssueOrder(lowered->schedule))
        lowered->schedule = std::move(*issued);
      MemoryPlan plan = planMemory(*lowered, in->costs);
      planned.emplace(std::move(*lowered), std::move(plan));
    }
    Pipeline *pl = &planned->first;
    MemoryPlan &mp = planned->second;
    Trial t;
    t.fits = true;
    t.stages = formatStages(in->partition);
    t.backwardStages = in->partition.backward.size();
    for (unsigned b = 0; b < t.backwardStages; ++b)
      t.layerStages += in->partition.layerGrainAt(b);
    FullestDevice full = fullestDevice(mp);
    t.peak = full.peak;
    t.device = full.device;
    t.fits = full.peak <= budget;
    t.biggest = full.biggest;
    t.biggestBytes = full.biggestBytes;
    bool renamed = renamesDevices(pl->shiftPerPass(), 2);
    for (int64_t two : runPeakBytes(mp.peakBytes, 2, renamed))
      t.twoPassPeak = std::max(t.twoPassPeak, two);
    t.twoFit = chooseArenaCopies(mp.peakBytes, budget, renamed) == 2;
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
    int64_t seq0 = 0;
    rows = 0;
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
    auto gib = [](int64_t b) {
      std::string s;
      llvm::raw_string_ostream(s)
          << llvm::format("%.3f GiB", b / double(1ull << 30)) << " (" << b
          << " bytes)";
      return s;
    };
    // A layer grain that `recompute = auto` chose for speed at this length
    // (rp.recompute_choice) is still auto's: the longest sequence is the
    // longest at which auto's grains fit, chosen at each length.
    bool autoChose = bool(getContext()
                              .getLoadedDialect<RPDialect>()
                              ->getRecomputeChoiceAttrHelper()
                              .getAttr(in->func));
    autoChoseLayer = autoChose && in->partition.layerGrain;
    bool layerGrain = in->partition.layerGrain && !autoChose;
    // rp's partitioner cuts other stages at other lengths; a user's stages
    // and the other partitioners' do not depend on the length as much, and
    // are tried as they are.
    ownStages = repartition &&
                in->attr.getSchedule() == ScheduleKind::roundRobin &&
                in->attr.getPartitioner() == Partitioner::rp;
    chooseGrains =
        autoChose || (in->attr.getRecompute() == RecomputeGrain::automatic &&
                      !in->attr.isMixed());
    FailureOr<Trial> base = trial(module, seq0, seq0, budget, layerGrain);
    FailureOr<Trial> small = trial(module, seq0, 1, budget, layerGrain);
    if (failed(base) || failed(small))
      return signalPassFailure();
    InFlightDiagnostic report = emitRemark(in->func.getLoc());
    // Last on every way out (destroyed before the report is emitted): the
    // lengths planned, what the report's time grows with.
    llvm::scope_exit sayTrials(
        [&] { report << "; " << trials << " lengths planned"; });
    if (!small->fits) {
      report << "no sequence length fits: with one token per sequence "
             << "device " << small->device << " already needs "
             << gib(small->peak) << " of " << gib(budget)
             << (ownStages ? " with the leanest stages rp's partitioner tries"
                           : "");
      return;
    }
    FailureOr<std::pair<int64_t, Trial>> found =
        largest(module, seq0, budget, layerGrain, *small, {{seq0, *base}});
    if (failed(found))
      return signalPassFailure();
    auto [lo, best] = *found;
    if (ownStages) {
      // The stages rp-compile cuts at the answer: the partitioner in full.
      FailureOr<Trial> cut =
          trial(module, seq0, lo, budget, layerGrain, Stages::partitioner);
      if (failed(cut))
        return signalPassFailure();
      best = *cut;
    }
    report << "the largest sequence that fits is " << lo
           << " tokens (microbatch " << rows << " x " << lo << ", ";
    if (chooseGrains)
      report << "recompute grain chosen per stage: layer grain in "
             << best.layerStages << " of " << best.backwardStages
             << " backward stages";
    else if (in->attr.isMixed())
      report << "mixed-grain recompute";
    else
      report << (layerGrain ? "layer" : "stage") << "-grain recompute";
    report << (ownStages ? ", rp's stages at each length" : "") << ")";
    if (lo == limit)
      report << ", the limit tried";
    report << ": device " << best.device << " peaks at " << gib(best.peak)
           << " of " << gib(budget) << " (its biggest buffer: " << best.biggest
           << ", " << gib(best.biggestBytes) << ")";
    if (ownStages)
      report << "; rp's partitioner cuts " << best.stages << " there"
             << (best.fits ? ""
                           : ", which does NOT fit (a bug in rp, "
                             "please report it)");
    FailureOr<Trial> at0 = ownStages ? trial(module, seq0, seq0, budget,
                                             layerGrain, Stages::function)
                                     : base;
    if (failed(at0))
      return signalPassFailure();
    report << "; at " << seq0 << " tokens the peak is " << gib(at0->peak);
    // The peaks are one pass's; a continuous run keeps its two passes in
    // flight on a copy of the arenas each where two fit, else on one
    // (rp-plan-memory).
    report << "; at " << lo << " tokens 2 passes in flight "
           << (best.twoFit ? "on a copy of the arenas each ("
                           : "sharing one copy of the arenas: two would "
                             "need ")
           << gib(best.twoPassPeak) << (best.twoFit ? ")" : "");
    // Stage grain keeps every recomputed layer's intermediates of a
    // backward stage; say what layer grain (one layer's at a time) reaches.
    // rp's own lean stages hold one layer per backward stage, where layer
    // grain holds no less than stage grain: not asked then.
    if (!layerGrain && !ownStages && !chooseGrains && !in->attr.isMixed()) {
      FailureOr<Trial> one = trial(module, seq0, 1, budget, true);
      if (failed(one))
        return signalPassFailure();
      if (!one->fits)
        return;
      // Layer grain holds less than stage grain: its first probe, at the
      // stage grain's answer, is likely to fit and close.
      FailureOr<Trial> seed = trial(module, seq0, lo, budget, true);
      if (failed(seed))
        return signalPassFailure();
      FailureOr<std::pair<int64_t, Trial>> layer =
          largest(module, seq0, budget, true, *one, {{lo, *seed}});
      if (failed(layer))
        return signalPassFailure();
      if (layer->first > lo)
        report << "; with layer-grain recompute (--recompute layer) "
               << layer->first << " tokens (device " << layer->second.device
               << "'s biggest buffer: " << layer->second.biggest << ", "
               << gib(layer->second.biggestBytes) << ")";
    }
  }

  /// Lengths planned (trial calls), said in the report: what its cost
  /// grows with.
  unsigned trials = 0;

  /// Whether each length is tried with rp's partitioner's stages for it.
  bool ownStages = false;

  /// Sequences per microbatch: the input's dimension 0.
  int64_t rows = 1;
  /// `recompute = "auto"`: each trial chooses the grains at its length.
  bool chooseGrains = false;
  /// `auto` chose layer grain for the function's own partition.
  bool autoChoseLayer = false;

  /// The largest sequence in [1, limit] that fits, from the trial at one
  /// token (which fits) and others that already ran. The bracket [lo fits, hi
  /// does not) closes as a bisection's would, but each probe is where the
  /// peak, close to linear in the sequence, crosses the budget: the secant
  /// through the bracket's ends (or the two longest fitting trials while
  /// no trial is over), pushed a margin past that crossing towards the end
  /// that has not moved, so that the next probe moves it. The margin grows
  /// while one end keeps moving; a probe that leaves the bracket over half
  /// its width is followed by a bisection (the peak jumps where stages'
  /// buffers change size), so it takes at most about twice a bisection's
  /// trials. Feasibility being monotone, the answer is the bisection's.
  FailureOr<std::pair<int64_t, Trial>>
  largest(ModuleOp module, int64_t seq0, int64_t budget, bool layerGrain,
          const Trial &small, ArrayRef<std::pair<int64_t, Trial>> known) {
    int64_t lo = 1, hi = limit + 1, below = 0;
    Trial best = small, over, prev;
    bool overKnown = false;
    int lastMoved = 0; // +1: lo, -1: hi
    auto record = [&](int64_t seq, const Trial &t) {
      if (seq <= lo || seq >= hi)
        return;
      if (t.fits) {
        below = lo;
        prev = best;
        lo = seq;
        best = t;
        lastMoved = 1;
      } else {
        hi = seq;
        over = t;
        overKnown = true;
        lastMoved = -1;
      }
    };
    for (const auto &[seq, t] : known)
      record(seq, t);
    int64_t margin = 1, mark = hi - lo;
    int sinceHalved = 0, side = lastMoved;
    while (hi - lo > 1) {
      double cross = -1;
      if (overKnown && over.peak > best.peak)
        cross = lo + double(budget - best.peak) * double(hi - lo) /
                         double(over.peak - best.peak);
      else if (below > 0 && best.peak > prev.peak)
        cross = lo + double(budget - best.peak) * double(lo - below) /
                         double(best.peak - prev.peak);
      int64_t probe;
      if (!overKnown) {
        // No length over the budget yet: hi is only the limit, and
        // halving [lo, limit] probed lengths up to 30x the answer, the
        // longest to plan (Qwen3-32B: 5 of 13 trials). Gallop instead:
        // past the crossing by a margin that grows while lo keeps moving,
        // doubling lo where no crossing is known.
        probe =
            cross < 0 ? 2 * lo : int64_t(std::min(cross, double(hi))) + margin;
        probe = std::clamp(probe, lo + 1, hi - 1);
      } else if (cross < 0 || sinceHalved > 0) {
        probe = lo + (hi - lo) / 2;
      } else {
        probe = int64_t(std::min(cross, double(hi))) + lastMoved * margin;
        probe = std::clamp(probe, lo + 1, hi - 1);
      }
      FailureOr<Trial> t = trial(module, seq0, probe, budget, layerGrain);
      if (failed(t))
        return failure();
      bool hadOver = overKnown;
      record(probe, *t);
      margin = lastMoved == side ? std::min<int64_t>(margin * 4, limit) : 1;
      side = lastMoved;
      if (overKnown && !hadOver) {
        // The bracket's first real end: halving counts from here.
        mark = hi - lo;
        sinceHalved = 0;
      } else if (2 * (hi - lo) <= mark) {
        mark = hi - lo;
        sinceHalved = 0;
      } else {
        ++sinceHalved;
      }
    }
    return std::make_pair(lo, best);
  }
};

} // namespace
