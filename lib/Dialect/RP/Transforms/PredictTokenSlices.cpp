//===- PredictTokenSlices.cpp - rp-predict-token-slices -------------------===//
//
// Predicts the step of a causal model with each sequence cut into token
// slices (include/rp/Analysis/TokenSlices.h); with cut=1 (rp-compile's
// pipeline) it records the slices chosen for rp-slice-tokens, and the
// passes after it compile them into a sliced plan; alone it refuses to go
// on, since a plan run unsliced under a sliced prediction would be a
// silent wrong answer. A slice's
// layer costs are the graph's own at the slice's length (a retyped copy,
// as rp-report-max-seq's trials) plus the pairs its causal attention
// forms with the earlier slices' keys; each command also pays the kernels
// the sliced plan adds (sliceKernelsMs). The slices, the stages searched
// again with them (search-stages) and the tail's jobs are chosen by the
// planner (PredictTokenSlicesSearch.cpp); this pass derives its inputs
// and memory model and reports. The longest-sequence report is
// PredictTokenSlicesRemarks.cpp's.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "PredictTokenSlices.h"
#include "PredictTokenSlicesSearch.h"
#include "Retype.h"
#include "ScheduleIR.h"
#include "SliceTokens.h"
#include "rp/Analysis/PartitionPolicy.h"
#include "rp/Analysis/SlicedStages.h"
#include "rp/timing/Assumptions.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

namespace mlir::rp {
#define GEN_PASS_DEF_PREDICTTOKENSLICESPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

using namespace mlir::rp::token_slices;

namespace {

struct PredictTokenSlicesPass
    : mlir::rp::impl::PredictTokenSlicesPassBase<PredictTokenSlicesPass>,
      SlicePlanner {
  using Base::Base;

  void runOnOperation() override;
};

void PredictTokenSlicesPass::runOnOperation() {
  module = getOperation();
  costModel = &getAnalysis<CostModel>();
  slicesText = slices.getValue();
  markAllAnalysesPreserved();
  in = loadPipelineInputs(module, *costModel);
  if (failed(in))
    return signalPassFailure();
  func::FuncOp func = in->func;
  std::string error;
  FailureOr<TokenSlicesSpec> spec = parseTokenSlices(slices, error);
  if (failed(spec)) {
    func.emitError(error);
    return signalPassFailure();
  }
  if (failed(slicedSequence(func, rows, seq0)))
    return signalPassFailure();
  unsigned causal = 0;
  if (failed(checkSliceable(func, seq0, causal)))
    return signalPassFailure();
  if (in->attr.getSchedule() != ScheduleKind::roundRobin) {
    func.emitError("token slices are modelled for the round-robin schedule "
                   "only");
    return signalPassFailure();
  }
  // Keys and values per token of each layer, what a job keeps for the
  // slices after the one it runs.
  std::vector<int64_t> keyValue;
  for (LayerOp layer : func.getOps<LayerOp>()) {
    int64_t bytes = 0;
    layer.walk([&](AttentionOp a) {
      bytes += tensorBytes(a.getKey().getType()) +
               tensorBytes(a.getValue().getType());
    });
    keyValue.push_back(bytes / seq0);
  }
  std::vector<std::vector<SlicePairCosts::Kept>> kept = keptTensors(func);
  // The per-pair times from two lengths long enough that launches are
  // noise beside the compute.
  int64_t h = std::max<int64_t>(seq0 / 2, 4096);
  FailureOr<const std::vector<LayerCost> *> big = costsAt(2 * h);
  FailureOr<const std::vector<LayerCost> *> half = costsAt(h);
  if (failed(big) || failed(half))
    return signalPassFailure();
  pairs = fitPairCosts(**big, **half, h, keyValue);
  pairs.kept = kept;

  int64_t budget =
      budgetGiB > 0 ? int64_t(budgetGiB * (1ull << 30)) : in->hw.memoryBytes();
  PlanTarget target{in->hw, ScheduleKind::roundRobin, in->attr.getDevices(),
                    in->attr.getMicrobatches()};
  target.dispatch = dispatch;
  target.passShift = passShift;
  target.budget = budget;
  FailureOr<PlanPrediction> plain =
      predictPlan(in->partition, in->costs, target, error);
  if (failed(plain)) {
    func.emitError(error);
    return signalPassFailure();
  }
  // The DP's memory model: the unsliced plan's peak, linear in its
  // sequence (weights plus activations), plus the most keys and values
  // (and their gradients) one job keeps at the slice's offset.
  int64_t kvPerToken = 0;
  for (const StageRange &r : in->partition.forward)
    kvPerToken = std::max(kvPerToken,
                          keptKeyValueBytes(CommandKind::forward, r, pairs, 1));
  kvPerToken =
      std::max(kvPerToken, keptKeyValueBytes(CommandKind::tail,
                                             in->partition.tail, pairs, 1));
  for (const StageRange &r : in->partition.backward)
    kvPerToken = std::max(
        kvPerToken, keptKeyValueBytes(CommandKind::backward, r, pairs, 1));
  int64_t small = std::max<int64_t>(1, seq0 / 8);
  FailureOr<const std::vector<LayerCost> *> smallCosts = costsAt(small);
  if (failed(smallCosts))
    return signalPassFailure();
  FailureOr<PlanPrediction> atSmall =
      predictPlan(in->partition, **smallCosts, target, error);
  if (failed(atSmall)) {
    func.emitError(error);
    return signalPassFailure();
  }
  double perToken =
      seq0 > small ? double(plain->peak - atSmall->peak) / double(seq0 - small)
                   : 0;
  double base = double(atSmall->peak) - perToken * double(small);
  auto fits = [&](int64_t o, int64_t s) {
    return base + perToken * double(s) + double(kvPerToken) * double(o) <=
           double(budget);
  };

  // The stages the unsliced plan has: its prediction's, and the longest
  // sequence's report's (the graph's stages, as documented).
  Partition unslicedStages = in->partition;
  // The tail's jobs: as asked, or (0) the partition's, and with auto
  // slices of one sequence a step the faster of one and two below.
  SmallVector<bool> keepsKeys;
  for (int64_t bytes : pairs.keyValueBytes)
    keepsKeys.push_back(bytes > 0);
  unsigned sequences = in->attr.getMicrobatches();
  Partition asTwo = in->partition;
  asTwo.tailJobs = 2;
  std::optional<std::string> twoRefused =
      tailJobsRefusal(asTwo, sequences, 2, keepsKeys);
  if (tailJobs > 2 || (tailJobs == 2 && twoRefused)) {
    func.emitError() << "rp-predict-token-slices tail-jobs="
                     << unsigned(tailJobs) << ": "
                     << (tailJobs > 2 ? std::string("give 1, 2 or 0 (the "
                                                    "prediction's choice)")
                                      : *twoRefused);
    return signalPassFailure();
  }
  if (tailJobs != 0)
    in->partition.tailJobs = tailJobs;
  FailureOr<Chosen> chosen = choose(*spec, target, fits);
  if (failed(chosen))
    return signalPassFailure();
  std::string stagesSaid;
  if (searchStages && chosen->sizes.size() > 1 &&
      failed(chooseStages(*spec, target, fits, *chosen, stagesSaid)))
    return signalPassFailure();
  bool triedTwo = tailJobs == 0 &&
                  spec->kind == TokenSlicesSpec::Kind::automatic &&
                  sequences == 1 && in->partition.tailJobs == 1 &&
                  chosen->sizes.size() > 1 && !twoRefused;
  if (triedTwo && failed(tryTwoTailJobs(*spec, target, fits, unslicedStages,
                                        searchStages, *chosen, stagesSaid)))
    return signalPassFailure();
  if (!triedTwo && in->partition.tailJobs == 2) {
    chosen->how += "; the tail as 2 jobs on alternate slices";
  }
  // One slice is the unsliced plan, whose one microbatch one tail job
  // runs.
  if (chosen->sizes.size() == 1)
    in->partition.tailJobs = 1;
  // The attribute is in->partition's (the trial above may have left
  // another search's stages in it).
  if (triedTwo || in->partition.tailJobs != in->attr.getTailJobs())
    writePartition();
  std::vector<int64_t> sizes = chosen->sizes;
  std::string how = chosen->how;
  std::optional<SlicedPrediction> sliced = std::move(chosen->sliced);

  // Both predictions again at the ends of what the profile cannot know,
  // each end with its own layer costs and per-pair times.
  std::string profileError;
  std::optional<std::vector<::rp::timing::UnknownInput>> unknown =
      ::rp::timing::loadUnknownInputs(in->attr.getHw().getProfile().str(),
                                      profileError);
  if (!unknown) {
    func.emitError(profileError);
    return signalPassFailure();
  }
  double slicedEnds[2] = {0, 0}, plainEnds[2] = {0, 0};
  if (!unknown->empty()) {
    std::string measuredPath;
    if (auto recorded = getContext()
                            .getLoadedDialect<RPDialect>()
                            ->getMeasuredAttrHelper()
                            .getAttr(func))
      measuredPath = recorded.str();
    FailureOr<const CostInputs *> inputs = getAnalysis<CostModel>().inputs(
        in->attr.getHw().getProfile(), measuredPath, &getContext());
    if (failed(inputs))
      return signalPassFailure();
    measuredAtEnds = (*inputs)->measured ? &*(*inputs)->measured : nullptr;
    SlicePairCosts midPairs = pairs;
    for (int e : {0, 1}) {
      end = e;
      static_cast<::rp::timing::HardwareModel &>(endHw) =
          ::rp::timing::atEnd(in->hw, *unknown, e == 1);
      FailureOr<const std::vector<LayerCost> *> bigEnd = costsAt(2 * h);
      FailureOr<const std::vector<LayerCost> *> halfEnd = costsAt(h);
      FailureOr<const std::vector<LayerCost> *> whole = costsAt(seq0);
      if (failed(bigEnd) || failed(halfEnd) || failed(whole))
        return signalPassFailure();
      pairs = fitPairCosts(**bigEnd, **halfEnd, h, keyValue);
      pairs.kept = kept;
      PlanTarget at{endHw,
                    ScheduleKind::roundRobin,
                    in->attr.getDevices(),
                    in->attr.getMicrobatches(),
                    dispatch,
                    passShift,
                    budget};
      FailureOr<PlanPrediction> p =
          predictPlan(unslicedStages, **whole, at, error);
      if (failed(p)) {
        func.emitError(error);
        return signalPassFailure();
      }
      FailureOr<SlicedPrediction> sl = predict(sizes, at);
      if (failed(sl))
        return signalPassFailure();
      plainEnds[e] = p->stepMs;
      slicedEnds[e] = sl->plan.stepMs;
    }
    end = -1;
    pairs = midPairs;
  }

  StepRemark step{sizes,
                  how,
                  in->attr.getDevices(),
                  in->hw,
                  *sliced,
                  *plain,
                  *unknown,
                  {slicedEnds[0], slicedEnds[1]},
                  {plainEnds[0], plainEnds[1]},
                  rows * seq0 * int64_t(in->attr.getMicrobatches()),
                  budget};
  reportSlicedStep(func, step);

  if (!stagesSaid.empty())
    emitRemark(func.getLoc()) << stagesSaid;
  if (reportMaxSeq) {
    // On the graph's stages: the memory model above is theirs.
    Partition chosenStages = in->partition;
    in->partition = unslicedStages;
    MaxSeqInputs max;
    max.seq0 = seq0;
    max.rows = rows;
    max.small = small;
    max.smallPeak = atSmall->peak;
    max.seqPeak = plain->peak;
    max.perToken = perToken;
    max.kvPerToken = kvPerToken;
    max.budget = budget;
    max.hostBudget =
        hostBudgetGiB > 0 ? int64_t(hostBudgetGiB * double(1ull << 30)) : 0;
    // The host's side (HostMemory.h), linear in the sequence from this
    // length's sliced plan.
    max.host = slicedHostModel(
        module,
        std::accumulate(keyValue.begin(), keyValue.end(), int64_t(0)) *
            int64_t(in->attr.getMicrobatches()),
        seq0, sliced->hostRowBytes);
    auto searchAt = [&](int64_t seq) { return search(seq, fits); };
    max.searchAt = searchAt;
    LogicalResult reported = reportSlicedMaxSeq(func, max);
    in->partition = chosenStages;
    if (failed(reported))
      return signalPassFailure();
  }
  // rp-compile goes on with the slices chosen: rp-slice-tokens cuts them,
  // the passes after it schedule and plan them, and the exporter writes
  // them.
  if (cut) {
    getOperation()->setAttr(kTokenSliceSizesAttr,
                            DenseI64ArrayAttr::get(&getContext(), sizes));
    return;
  }
  func.emitError("--token-slices: rp-predict-token-slices alone predicts "
                 "and cuts nothing (cut=1 records the slices for "
                 "rp-slice-tokens, as rp-compile does: docs/token-slices.md); "
                 "the remarks above are the compiler's prediction");
  signalPassFailure();
}

} // namespace
