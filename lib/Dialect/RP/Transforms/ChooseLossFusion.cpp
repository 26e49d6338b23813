//===- ChooseLossFusion.cpp - rp-choose-loss-fusion -----------------------===//
//
// The fused LM-head loss (rp.linear_cross_entropy) never holds the
// [tokens, vocabulary] logits, but its backward recomputes them in the
// tail: three head GEMMs instead of two. Where the logits fit, that is
// throughput lost (Qwen3-1.7B at 2048 tokens on 8 x rtx4090: 11 % bubble
// fused, 1 % unfused). This pass plans the step both ways and keeps the
// fused op only where the unfused plan does not fit or is not faster.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/HostMemory.h"
#include "rp/Analysis/PartitionPolicy.h"
#include "rp/Analysis/PlanPrediction.h"
#include "rp/Analysis/SearchStats.h"
#include "rp/Analysis/UnitText.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Format.h"

namespace mlir::rp {
#define GEN_PASS_DEF_CHOOSELOSSFUSIONPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Step times this close are a tie, which the fused loss takes (it holds
/// less memory): a step bound by weight uploads or by the optimizer hides
/// the tail's extra GEMM, and the two plans then differ in the last digits.
constexpr double kTie = 1e-3;

/// Every rp.linear_cross_entropy of `module` back to the rp.matmul and
/// rp.cross_entropy it was fused from: a weight that the fusion transposed
/// (a `[K, classes]` head) is read as it was, without transpose_b.
void unfuse(ModuleOp module) {
  SmallVector<LinearCrossEntropyOp> fused;
  module.walk([&](LinearCrossEntropyOp op) { fused.push_back(op); });
  for (LinearCrossEntropyOp op : fused) {
    OpBuilder b(op);
    Value weight = op.getWeight();
    bool transposeB = true;
    auto t = weight.getDefiningOp<TransposeOp>();
    if (t && t.getPermutation() == ArrayRef<int64_t>{1, 0}) {
      weight = t.getInput();
      transposeB = false;
    }
    // rp-fuse-linear-cross-entropy fused the matmul's and the loss's
    // locations, in that order.
    Location mmLoc = op.getLoc(), ceLoc = op.getLoc();
    if (auto both = dyn_cast<FusedLoc>(op.getLoc());
        both && both.getLocations().size() == 2) {
      mmLoc = both.getLocations()[0];
      ceLoc = both.getLocations()[1];
    }
    Value logits = MatmulOp::create(b, mmLoc, op.getHidden(), weight,
                                    /*transposeA=*/false, transposeB);
    auto ce = CrossEntropyOp::create(b, ceLoc, op->getResultTypes(), logits,
                                     op.getLabels(), op.getIgnoreIndex());
    op->replaceAllUsesWith(ce->getResults());
    op->erase();
    if (t && t->use_empty())
      t->erase();
  }
}

/// The step of the fastest stages rp's partitioner found for the graph
/// partitioned as `p` (predicted `ms`): where the stages were held near
/// the fastest (--host-slack-pct), `ms` scaled by the hold's estimate of
/// the fastest stages against the held ones; else `ms` itself.
double fastestStepMs(PartitionAttr p, double ms) {
  std::vector<SlackHold> holds = slackHolds();
  for (auto it = holds.rbegin(); it != holds.rend(); ++it) {
    // #rp.partition's backward list starts with the tail.
    std::vector<int64_t> fwd(it->fwd.begin(), it->fwd.end());
    std::vector<int64_t> bwd{int64_t(it->tail)};
    bwd.insert(bwd.end(), it->bwd.begin(), it->bwd.end());
    if (ArrayRef<int64_t>(fwd) == p.getForward() &&
        ArrayRef<int64_t>(bwd) == p.getBackward() && it->ms > 0)
      return ms * it->fastestMs / it->ms;
  }
  return ms;
}

struct ChooseLossFusionPass
    : mlir::rp::impl::ChooseLossFusionPassBase<ChooseLossFusionPass> {
  using Base::Base;

  /// What predict and predictEnds plan `in` for: its schedule attribute's
  /// devices and microbatches, this pass's dispatch options.
  PlanTarget planTarget(const PipelineInputs &in, int64_t budget) const {
    return PlanTarget{in.hw,
                      in.attr.getSchedule(),
                      in.attr.getDevices(),
                      in.attr.getMicrobatches(),
                      dispatch,
                      passShift,
                      budget};
  }

  /// Lowers, times and plans the memory of `module`'s partition, as
  /// rp-lower-schedule, rp-insert-transfers and rp-plan-memory will.
  FailureOr<PlanPrediction> predict(ModuleOp module, CostModel &model,
                                    int64_t budget) {
    FailureOr<PipelineInputs> in = loadPipelineInputs(module, model);
    if (failed(in))
      return failure();
    PlanTarget target = planTarget(*in, budget);
    std::string error;
    FailureOr<PlanPrediction> p =
        predictPlan(in->partition, in->costs, target, error);
    if (failed(p))
      return in->func.emitError(error);
    return p;
  }

  /// `module`'s plan, as predict plans it, at the fast and slow ends of its
  /// profile's unknown inputs (none where the profile names none).
  FailureOr<std::optional<StepEnds>>
  predictEnds(ModuleOp module, CostModel &model, int64_t budget) {
    FailureOr<PipelineInputs> in = loadPipelineInputs(module, model);
    if (failed(in))
      return failure();
    std::string error;
    std::string profile = in->attr.getHw().getProfile().str();
    std::optional<std::vector<::rp::timing::UnknownInput>> unknown =
        ::rp::timing::loadUnknownInputs(profile, error);
    if (!unknown)
      return in->func.emitError(error);
    std::string measuredPath;
    if (auto recorded = getContext()
                            .getLoadedDialect<RPDialect>()
                            ->getMeasuredAttrHelper()
                            .getAttr(in->func))
      measuredPath = recorded.str();
    FailureOr<const CostInputs *> inputs =
        model.inputs(profile, measuredPath, &getContext());
    if (failed(inputs))
      return failure();
    PlanTarget target = planTarget(*in, budget);
    std::optional<std::vector<LayerCost>> costs[2];
    FailureOr<std::optional<StepEnds>> ends = predictPlanEnds(
        in->func, in->partition, target, *unknown,
        (*inputs)->measured ? &*(*inputs)->measured : nullptr, costs, error);
    if (failed(ends))
      return in->func.emitError(error);
    return ends;
  }

  /// The unfused graph of a copy of `module`, partitioned as rp-partition
  /// partitions it, and its prediction; the copy's partition in
  /// `partition`, and where `recompute = auto` chose the fused graph's
  /// grain, the unfused graph's own choice in `grainChoice`. Diagnostics
  /// go to `why`, not to the user: a graph that cannot be planned unfused
  /// keeps its fused loss.
  FailureOr<PlanPrediction>
  predictUnfused(ModuleOp module, int64_t budget, PartitionAttr &partition,
                 std::string &grainChoice, std::optional<StepEnds> &ends,
                 std::string &why, int64_t heldTo = 0) {
    ScopedDiagnosticHandler quiet(&getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && why.empty())
        why = d.str();
      return success();
    });
    OwningOpRef<ModuleOp> copy = module.clone();
    unfuse(*copy);
    // The profiles parsed once; the copy's own costs, forgotten with it.
    CostModel scratch = getAnalysis<CostModel>().forScratch();
    FailureOr<func::FuncOp> func = layeredFunction(*copy);
    if (failed(func))
      return failure();
    PartitionAttr fused = (*func)->getAttrOfType<PartitionAttr>("rp.partition");
    if (!fused)
      return failure();
    StringRef hw = fused.getHw().getProfile();
    std::string measured;
    if (auto recorded = getContext()
                            .getLoadedDialect<RPDialect>()
                            ->getMeasuredAttrHelper()
                            .getAttr(*func))
      measured = recorded.str();
    FailureOr<const CostInputs *> inputs =
        scratch.inputs(hw, measured, &getContext());
    if (failed(inputs))
      return failure();
    FailureOr<const std::vector<LayerCost> *> costs =
        scratch.layerCosts(*func, hw, measured);
    if (failed(costs))
      return failure();
    PartitionRequest request;
    request.schedule = fused.getSchedule();
    request.devices = fused.getDevices();
    request.microbatches = fused.getMicrobatches();
    request.partitioner = fused.getPartitioner();
    request.stages = stages;
    request.dispatch = dispatch;
    // The unfused graph is cut under the same request as the fused one:
    // with tail-jobs=0 its partitioner picks one or two tail jobs afresh.
    request.tailJobs = tailJobs >= 0 ? unsigned(tailJobs) : fused.getTailJobs();
    request.cap = stageByteCap(stageBytes, (*inputs)->hw, weightBudget);
    // Where `recompute = auto` chose the fused graph's grain for speed
    // (rp-partition), the unfused graph's is chosen the same way: its
    // tail differs, and so may the faster grain.
    request.chooseGrain = bool(getContext()
                                   .getLoadedDialect<RPDialect>()
                                   ->getRecomputeChoiceAttrHelper()
                                   .getAttr(*func)) &&
                          stages.empty();
    request.layerGrain =
        !request.chooseGrain && fused.getRecompute() == RecomputeGrain::layer;
    request.budgetBytes = int64_t(budgetGiB * double(1ull << 30));
    // Held to the host budget as rp-partition held the fused graph's:
    // without it the unfused graph's fastest stages would replace the
    // held ones (Qwen3-235B at 4 x 2048 tokens, 8 microbatches, 160
    // GiB: 163.06 GiB unheld, 159.56 held).
    // `heldTo` > 0: held to that many staged bytes, as under a host budget
    // (the slack's plan of the same staging, below).
    request.hostStagedBytes =
        heldTo > 0 ? heldTo : hostStagedBudget(*copy, hostBudgetGiB);
    request.hostSlack = heldTo > 0 ? 0 : hostSlackPct / 100;
    request.memo = &scratch.searchMemo();
    if (std::string error; !readGrainRanges(request, hw, **inputs, error))
      return (*func)->emitError(error);
    GrainSpeedChoice grain;
    FailureOr<Partition> p =
        choosePartition(*func, **costs, request, (*inputs)->hw, &grain);
    if (failed(p))
      return failure();
    SmallVector<int64_t> fwd, bwd;
    stageSizes(*p, fwd, bwd);
    RecomputeGrain recompute = fused.getRecompute();
    if (request.chooseGrain) {
      recompute =
          grain.layer ? RecomputeGrain::layer : RecomputeGrain::automatic;
      grainChoice = grain.reason;
    }
    partition = PartitionAttr::get(&getContext(), fused.getSchedule(),
                                   fused.getDevices(), fused.getMicrobatches(),
                                   fused.getHw(), fused.getPartitioner(),
                                   recompute, fwd, bwd, p->tailJobs);
    (*func)->setAttr("rp.partition", partition);
    FailureOr<PlanPrediction> planned = predict(*copy, scratch, budget);
    if (failed(planned))
      return failure();
    FailureOr<std::optional<StepEnds>> e = predictEnds(*copy, scratch, budget);
    if (failed(e))
      return failure();
    ends = *e;
    return planned;
  }

  /// Where rp-partition left its grain note's ranges to this pass
  /// (defer-grain-range) and the note is kept: times them on the fused
  /// graph and ends the note with them.
  LogicalResult finishGrainNote(CostModel &model) {
    std::function<FailureOr<std::string>()> range = std::move(model.grainRange);
    model.grainRange = nullptr;
    if (!range)
      return success();
    FailureOr<func::FuncOp> func = layeredFunction(getOperation());
    if (failed(func))
      return failure();
    auto note = getContext()
                    .getLoadedDialect<RPDialect>()
                    ->getRecomputeChoiceAttrHelper();
    StringAttr reason = note.getAttr(*func);
    if (!reason)
      return success();
    FailureOr<std::string> text = range();
    if (failed(text))
      return failure();
    note.setAttr(*func, StringAttr::get(&getContext(), reason.str() + *text));
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (budgetGiB < 0) {
      mlir::emitError(module.getLoc())
          << "rp-choose-loss-fusion: budget-gib must not be negative, got "
          << static_cast<double>(budgetGiB);
      return signalPassFailure();
    }
    if (tailJobs < -1 || tailJobs > 2) {
      mlir::emitError(module.getLoc())
          << "rp-choose-loss-fusion: tail-jobs " << static_cast<int>(tailJobs)
          << " is not a tail plans run; give 1, 2, 0 (the faster) or -1 (the "
             "partition's)";
      return signalPassFailure();
    }
    if (passShift < -1) {
      mlir::emitError(module.getLoc())
          << "rp-choose-loss-fusion: pass-shift " << static_cast<int>(passShift)
          << " is not a device shift; give 0 or more (-1: dispatch's)";
      return signalPassFailure();
    }
    if (!module
             .walk([](LinearCrossEntropyOp) { return WalkResult::interrupt(); })
             .wasInterrupted()) {
      // Nothing fused: nothing to choose.
      if (failed(finishGrainNote(getAnalysis<CostModel>())))
        return signalPassFailure();
      markAllAnalysesPreserved();
      return;
    }
    FailureOr<func::FuncOp> func = layeredFunction(module);
    if (failed(func))
      return signalPassFailure();
    CostModel &model = getAnalysis<CostModel>();
    FailureOr<PipelineInputs> in = loadPipelineInputs(module, model);
    if (failed(in))
      return signalPassFailure();
    int64_t budget = budgetGiB > 0
                         ? static_cast<int64_t>(budgetGiB * (1ull << 30))
                         : static_cast<int64_t>(in->hw.memoryBytes());
    FailureOr<PlanPrediction> fused = predict(module, model, budget);
    if (failed(fused))
      return signalPassFailure();
    auto lossFusion =
        getContext().getLoadedDialect<RPDialect>()->getLossFusionAttrHelper();
    // A fused plan that fits at the host optimizer's floor is kept whatever
    // the unfused one would predict (it could only tie; unfusing changes
    // no weight): the unfused graph's searches, half of the compile's, are
    // skipped. Round-robin only, where the floor holds for the steady state.
    double floorMs = optimizerFloorMs(in->costs, in->hw);
    if (in->attr.getSchedule() == ScheduleKind::roundRobin && fused->fits &&
        atOptimizerFloor(fused->stepMs, floorMs, kTie)) {
      lossFusion.setAttr(
          *func, StringAttr::get(&getContext(),
                                 "fused: predicted " + msText(fused->stepMs) +
                                     " a step fused, the host optimizer's "
                                     "floor (" +
                                     msText(floorMs) +
                                     " a step): the unfused plan cannot be "
                                     "faster"));
      if (failed(finishGrainNote(model)))
        return signalPassFailure();
      markAllAnalysesPreserved();
      return;
    }
    PartitionAttr partition;
    std::string grainChoice, why;
    std::optional<StepEnds> unfusedEnds;
    FailureOr<PlanPrediction> unfused = predictUnfused(
        module, budget, partition, grainChoice, unfusedEnds, why);
    auto keepFused = [&](const std::string &reason) {
      lossFusion.setAttr(*func,
                         StringAttr::get(&getContext(), "fused: " + reason));
      if (failed(finishGrainNote(model)))
        return signalPassFailure();
      // Only a discardable attribute changed.
      markAllAnalysesPreserved();
    };
    std::string fusedStep = msText(fused->stepMs) + " a step fused";
    if (failed(unfused))
      return keepFused("the unfused graph cannot be planned (" + why + ")");
    std::string unfusedStep = msText(unfused->stepMs) + " unfused";
    if (!unfused->fits && !fused->fits)
      return keepFused("neither plan fits " + gibText(budget) +
                       "; the fused one peaks at " + gibText(fused->peak) +
                       " (device " + std::to_string(fused->device) +
                       "), the unfused one at " + gibText(unfused->peak) +
                       " (device " + std::to_string(unfused->device) + ")");
    if (!unfused->fits)
      return keepFused("the unfused plan does not fit: device " +
                       std::to_string(unfused->device) + " would need " +
                       gibText(unfused->peak) + " of " + gibText(budget) +
                       " (its biggest buffer: " + unfused->biggest + ", " +
                       gibText(unfused->biggestBytes) + ")");
    // Under a host budget a plan whose pinned staging buffers are over
    // what it leaves after the weights and optimizer state does not fit
    // the box (rp-compile refuses it), however fast.
    // Where neither is within it, speed decides as without a budget.
    int64_t left = hostStagedBudget(module, hostBudgetGiB);
    bool fusedOnHost = left <= 0 || fused->stagedHostBytes <= left;
    bool unfusedOnHost = left <= 0 || unfused->stagedHostBytes <= left;
    std::string overHost =
        " in pinned host memory, over the " + gibText(left) +
        " host-budget-gib leaves after the weights and optimizer state";
    if (fusedOnHost && !unfusedOnHost)
      return keepFused("the unfused plan stages " +
                       gibText(unfused->stagedHostBytes) + overHost +
                       " (the fused one stages " +
                       gibText(fused->stagedHostBytes) + ")");
    bool fusedFits = fused->fits && (fusedOnHost || !unfusedOnHost);
    // Where speed decides, both plans at the ends of what the profile
    // cannot know, and whether the choice holds at both.
    bool keep = fused->stepMs <= unfused->stepMs * (1 + kTie);
    std::string range;
    if (fused->fits && unfusedEnds) {
      FailureOr<std::optional<StepEnds>> fusedEnds =
          predictEnds(module, model, budget);
      if (failed(fusedEnds))
        return signalPassFailure();
      if (*fusedEnds) {
        bool keepAt[2] = {
            (*fusedEnds)->fastMs <= unfusedEnds->fastMs * (1 + kTie),
            (*fusedEnds)->slowMs <= unfusedEnds->slowMs * (1 + kTie)};
        std::string flips;
        if (keepAt[0] != keep)
          flips = "the other choice at the fast end";
        if (keepAt[1] != keep)
          flips += (flips.empty() ? "" : " and ") +
                   std::string("the other choice at the slow end");
        range = " (over the profile's unknown inputs, fast - slow end: "
                "fused " +
                endsText(**fusedEnds) + ", unfused " + endsText(*unfusedEnds) +
                "; " +
                (flips.empty() ? "the same choice at both ends"
                               : flips + ": the choice rests on the "
                                         "profile's own values") +
                ")";
      }
    }
    if (fusedFits && keep)
      return keepFused("predicted " + fusedStep + ", no slower than " +
                       unfusedStep + range);
    // Without a host budget, the slack rp-partition held each graph's
    // stages by (--host-slack-pct) holds across the two graphs too: each
    // graph's stages are held near its own fastest, and a fused plan within
    // the slack of the fastest unfused stages that stages a GiB or more
    // less is the better plan for a box whose memory the compiler does not
    // know (Llama-3.1-8B NF4 LoRA on 8 x RTX 4090: fused 8 GiB staged, 3.6
    // % slower than the fastest unfused stages' 32 GiB, where the unfused
    // graph held by 5 % stages 18 GiB).
    // SearchTarget::hostSlackBytes's GiB, as rp-partition's hold.
    const int64_t slackBytes = int64_t(1) << 30;
    std::string slackReason;
    if (left <= 0 && hostSlackPct > 0 && fused->fits &&
        fused->stagedHostBytes + slackBytes <= unfused->stagedHostBytes) {
      double fastest = fastestStepMs(partition, unfused->stepMs);
      if (fused->stepMs <= fastest * (1 + double(hostSlackPct) / 100)) {
        std::string pct;
        llvm::raw_string_ostream(pct)
            << llvm::format("%g %%", double(hostSlackPct));
        // Of the plans that stage what the fused one stages, the faster:
        // the unfused graph held to the fused plan's staged bytes, as
        // under --host-budget-gib (Llama-3.1-8B NF4 LoRA: fused 8 GiB,
        // 14,214.5 ms; unfused held to 8 GiB, 13,833.8 ms, where its own
        // slack walk stopped at 18 GiB).
        PartitionAttr same;
        std::string sameGrain, sameWhy;
        std::optional<StepEnds> sameEnds;
        FailureOr<PlanPrediction> held =
            predictUnfused(module, budget, same, sameGrain, sameEnds, sameWhy,
                           fused->stagedHostBytes);
        if (succeeded(held) && held->fits &&
            held->stagedHostBytes <= fused->stagedHostBytes &&
            held->stepMs < fused->stepMs * (1 - kTie)) {
          slackReason = "predicted " + msText(held->stepMs) +
                        " unfused, staging " + gibText(held->stagedHostBytes) +
                        " in pinned host memory as the fused plan within "
                        "--host-slack-pct's " +
                        pct + " does (" + fusedStep + ")";
          unfused = held;
          partition = same;
          grainChoice = sameGrain;
        } else {
          return keepFused(
              "predicted " + fusedStep + ", within --host-slack-pct's " + pct +
              " of the fastest unfused stages' " + msText(fastest) +
              ", staging " + gibText(fused->stagedHostBytes) +
              " in pinned host memory against " +
              gibText(unfused->stagedHostBytes) + " (" + unfusedStep + ")" +
              range);
        }
      }
    }
    // The fused graph's note is replaced by the unfused graph's, where it
    // chose one; else kept, its ranges timed before the loss is unfused.
    if (grainChoice.empty() && failed(finishGrainNote(model)))
      return signalPassFailure();
    model.grainRange = nullptr;
    unfuse(module);
    (*func)->setAttr("rp.partition", partition);
    if (!grainChoice.empty())
      getContext()
          .getLoadedDialect<RPDialect>()
          ->getRecomputeChoiceAttrHelper()
          .setAttr(*func, StringAttr::get(&getContext(), grainChoice));
    std::string reason =
        !slackReason.empty() ? slackReason
        : fusedFits          ? "predicted " + unfusedStep + ", " + fusedStep +
                          " (its backward recomputes the logits)" + range
        : fused->fits ? "the fused plan stages " +
                            gibText(fused->stagedHostBytes) + overHost
                      : "the fused plan does not fit (device " +
                            std::to_string(fused->device) + " would need " +
                            gibText(fused->peak) + ")";
    lossFusion.setAttr(
        *func,
        StringAttr::get(&getContext(),
                        "unfused: " + reason + "; the logits fit: device " +
                            std::to_string(unfused->device) + " peaks at " +
                            gibText(unfused->peak) + " of " + gibText(budget)));
  }
};

} // namespace
