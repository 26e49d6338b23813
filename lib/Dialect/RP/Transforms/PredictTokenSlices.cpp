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
// the sliced plan adds (sliceKernelsMs). With search-stages the stages are
// searched again with the slices (SlicedStages.h). The longest-sequence
// report is PredictTokenSlicesRemarks.cpp's.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "PredictTokenSlices.h"
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
    : mlir::rp::impl::PredictTokenSlicesPassBase<PredictTokenSlicesPass> {
  using Base::Base;

  /// The layers' costs at `seq` tokens, once per length.
  FailureOr<const std::vector<LayerCost> *> costsAt(int64_t seq) {
    if (end >= 0) {
      // At an end of the profile's unknown inputs (endHw): its own costs.
      auto key = std::make_pair(end, seq);
      if (auto it = endMemo.find(key); it != endMemo.end())
        return &it->second;
      OwningOpRef<ModuleOp> copy = retypedCopy(getOperation(), seq0, seq, rows);
      FailureOr<func::FuncOp> f = layeredFunction(*copy);
      if (failed(f))
        return failure();
      FailureOr<std::vector<LayerCost>> c =
          analyzeLayerCosts(*f, endHw, measuredAtEnds);
      if (failed(c))
        return failure();
      return &(endMemo[key] = std::move(*c));
    }
    if (auto it = memo.find(seq); it != memo.end())
      return &it->second;
    OwningOpRef<ModuleOp> copy = retypedCopy(getOperation(), seq0, seq, rows);
    CostModel scratch = getAnalysis<CostModel>().forScratch();
    FailureOr<PipelineInputs> in = loadPipelineInputs(*copy, scratch);
    if (failed(in))
      return failure();
    return &(memo[seq] = std::move(in->costs));
  }

  /// The layer costs of each slice of `sizes` and of the mean slice: what
  /// the sliced plan of any partition is timed with.
  struct SliceCosts {
    std::vector<std::vector<LayerCost>> slices;
    const std::vector<LayerCost> *mean = nullptr;
  };
  FailureOr<SliceCosts> costsOf(llvm::ArrayRef<int64_t> sizes) {
    SliceCosts out;
    int64_t offset = 0;
    for (int64_t s : sizes) {
      FailureOr<const std::vector<LayerCost> *> self = costsAt(s);
      if (failed(self))
        return failure();
      out.slices.push_back(sliceLayerCosts(**self, pairs, offset, s));
      offset += s;
    }
    FailureOr<const std::vector<LayerCost> *> mean =
        costsAt(std::max<int64_t>(1, offset / int64_t(sizes.size())));
    if (failed(mean))
      return failure();
    out.mean = *mean;
    return out;
  }

  /// The sliced plan of the function's stages (in->partition).
  FailureOr<SlicedPrediction> predict(llvm::ArrayRef<int64_t> sizes,
                                      const PlanTarget &target) {
    FailureOr<SliceCosts> c = costsOf(sizes);
    if (failed(c))
      return failure();
    std::string error;
    FailureOr<SlicedPrediction> p = predictSlicedPlan(
        in->partition, c->slices, sizes, *c->mean, pairs, target, error);
    if (failed(p))
      return in->func.emitError(error);
    return p;
  }

  /// The sizes `spec` asks for (auto: TeraPipe's program, or even slices
  /// where the plan's timing prefers them) on the function's stages, their
  /// plan, and how they were chosen.
  struct Chosen {
    std::vector<int64_t> sizes;
    SlicedPrediction sliced;
    std::string how;
  };
  /// `maxEven` bounds auto's even counts (0: doubling past 16 while
  /// faster).
  FailureOr<Chosen> choose(const TokenSlicesSpec &spec,
                           const PlanTarget &target,
                           llvm::function_ref<bool(int64_t, int64_t)> fits,
                           unsigned maxEven = 0);

  /// With search-stages: the stages searched again with `chosen`'s slices
  /// (and, for auto, the slices chosen again on the stages found); the
  /// function's #rp.partition and in->partition rewritten where they are
  /// faster. The remark's text in `said`.
  LogicalResult chooseStages(const TokenSlicesSpec &spec,
                             const PlanTarget &target,
                             llvm::function_ref<bool(int64_t, int64_t)> fits,
                             Chosen &chosen, std::string &said);

  /// One pass's compute for a slice of `size` tokens at no offset, summed
  /// over the jobs; the same sum of the per-pair times.
  FailureOr<double> passMs(int64_t size) {
    FailureOr<const std::vector<LayerCost> *> c = costsAt(size);
    if (failed(c))
      return failure();
    return sumOverJobs(**c);
  }
  double sumOverJobs(llvm::ArrayRef<LayerCost> layers) {
    double ms = 0;
    for (const StageRange &r : in->partition.forward)
      ms += sliceComputeMs({CommandKind::forward, r}, layers);
    ms += sliceComputeMs({CommandKind::tail, in->partition.tail}, layers);
    for (const StageRange &r : in->partition.backward)
      ms += sliceComputeMs({CommandKind::backward, r}, layers);
    return ms;
  }

  /// TeraPipe's search at `tokens`, its times per job from a grid of
  /// lengths (the linear part interpolated, the pairs exact) and its
  /// memory from the model `fits`.
  FailureOr<std::optional<SliceChoice>>
  search(int64_t tokens, llvm::function_ref<bool(int64_t, int64_t)> fits) {
    int64_t grain = sliceGrain(tokens);
    std::vector<LayerCost> perPair(in->costs.size());
    for (auto [l, c] : llvm::enumerate(perPair)) {
      c.forwardMs = pairs.forwardMs[l];
      c.recomputeMs = pairs.recomputeMs[l];
      c.backwardMs = pairs.backwardMs[l];
    }
    double pairMs = sumOverJobs(perPair);
    std::vector<std::pair<int64_t, double>> grid;
    for (int64_t s = grain;; s *= 2) {
      int64_t at = std::min(s, tokens);
      FailureOr<double> ms = passMs(at);
      if (failed(ms))
        return failure();
      grid.emplace_back(at, *ms - pairMs * at * (at + 1) / 2.0);
      if (at == tokens)
        break;
    }
    unsigned jobs =
        in->partition.forward.size() + 1 + in->partition.backward.size();
    auto linear = [&](int64_t s) {
      auto hi = std::lower_bound(grid.begin(), grid.end(), s,
                                 [](const std::pair<int64_t, double> &g,
                                    int64_t v) { return g.first < v; });
      if (hi == grid.begin())
        return hi->second * double(s) / double(hi->first);
      if (hi == grid.end())
        return grid.back().second;
      auto lo = hi - 1;
      return lo->second + (hi->second - lo->second) * double(s - lo->first) /
                              double(hi->first - lo->first);
    };
    auto ms = [&](int64_t o, int64_t s) {
      return (linear(s) + pairMs * (s * (s + 1) / 2.0 + double(o) * s)) / jobs;
    };
    SliceSearch problem;
    problem.tokens = tokens;
    problem.grain = grain;
    problem.jobs = jobs;
    problem.ms = ms;
    problem.fits = fits;
    return chooseSlices(problem);
  }

  /// #rp.partition rewritten from in->partition: its stages and tail jobs
  /// (per-stage grains kept where the stages are).
  void writePartition() {
    PartitionAttr a = in->attr;
    SmallVector<int64_t> fwd, bwd;
    stageSizes(in->partition, fwd, bwd);
    bool same =
        llvm::equal(fwd, a.getForward()) && llvm::equal(bwd, a.getBackward());
    in->attr =
        PartitionAttr::get(&getContext(), a.getSchedule(), a.getDevices(),
                           a.getMicrobatches(), a.getHw(), a.getPartitioner(),
                           a.getRecompute(), fwd, bwd, in->partition.tailJobs,
                           same ? a.getGrains() : ArrayRef<RecomputeGrain>{});
    in->func->setAttr("rp.partition", in->attr);
  }

  void runOnOperation() override;

  FailureOr<PipelineInputs> in;
  std::map<int64_t, std::vector<LayerCost>> memo;
  SlicePairCosts pairs;
  /// Timing at an end of the profile's unknown inputs: -1 none (the
  /// profile's own values), 0 the fast end, 1 the slow one; its profile,
  /// its costs per (end, length), and the measured times they use.
  int end = -1;
  HardwareProfile endHw;
  std::map<std::pair<int, int64_t>, std::vector<LayerCost>> endMemo;
  const MeasuredProfile *measuredAtEnds = nullptr;
  int64_t seq0 = 0, rows = 1;
  /// The stages whose heaviest bounds the search's (rp-partition's), and
  /// what the search's start is called in its remark.
  std::optional<Partition> capStages;
  std::string startWhat = "the unsliced plan's stages";
};

FailureOr<PredictTokenSlicesPass::Chosen> PredictTokenSlicesPass::choose(
    const TokenSlicesSpec &spec, const PlanTarget &target,
    llvm::function_ref<bool(int64_t, int64_t)> fits, unsigned maxEven) {
  func::FuncOp func = in->func;
  Chosen out;
  switch (spec.kind) {
  case TokenSlicesSpec::Kind::count:
    if (spec.count > unsigned(seq0))
      return func.emitError()
             << "--token-slices " << spec.count
             << ": more slices than the sequence's " << seq0 << " tokens";
    out.sizes = equalSlices(seq0, spec.count);
    out.how = "even";
    break;
  case TokenSlicesSpec::Kind::sizes: {
    out.sizes = spec.sizes;
    int64_t sum =
        std::accumulate(out.sizes.begin(), out.sizes.end(), int64_t(0));
    if (sum != seq0)
      return func.emitError()
             << "--token-slices " << slices.getValue() << ": the sizes sum to "
             << sum << " tokens, the sequence has " << seq0;
    out.how = "given";
    break;
  }
  case TokenSlicesSpec::Kind::automatic: {
    FailureOr<std::optional<SliceChoice>> choice = search(seq0, fits);
    if (failed(choice))
      return failure();
    if (!*choice)
      return func.emitError()
             << "--token-slices auto: no slicing of " << seq0 << " tokens fits "
             << gib(target.budget) << " in the compiler's memory model";
    out.sizes = (*choice)->sizes;
    out.how = "auto: TeraPipe's dynamic program over " +
              std::to_string(sliceGrain(seq0)) + "-token units";
    break;
  }
  }
  FailureOr<SlicedPrediction> sliced = predict(out.sizes, target);
  if (failed(sliced))
    return failure();
  if (spec.kind == TokenSlicesSpec::Kind::automatic) {
    // The dynamic program prices TeraPipe's chain; the plan's timing can
    // prefer even slices (or none): auto keeps the faster that fits. 1 to
    // 16 always; past 16 the count doubles while the doubling was faster
    // in the plan's timing (at 64k 32 slices can win once the stages are
    // searched for them), down to slices of kMinEvenSlice tokens.
    constexpr int64_t kMinEvenSlice = 512;
    double lastMs = std::numeric_limits<double>::infinity();
    for (unsigned k = 1; k <= unsigned(seq0); k *= 2) {
      if (k > 16 && (seq0 / k < kMinEvenSlice || (maxEven && k > maxEven)))
        break;
      std::optional<SlicedPrediction> evenOwn;
      const SlicedPrediction *even = sliced.operator->();
      if (k != out.sizes.size()) {
        FailureOr<SlicedPrediction> p = predict(equalSlices(seq0, k), target);
        if (failed(p))
          return failure();
        evenOwn = std::move(*p);
        even = &*evenOwn;
      }
      double ms = even->plan.fits ? even->plan.stepMs
                                  : std::numeric_limits<double>::infinity();
      if (evenOwn && (even->plan.fits || !sliced->plan.fits) &&
          even->plan.stepMs < sliced->plan.stepMs) {
        sliced = std::move(*evenOwn);
        out.how = "auto: " + std::to_string(k) +
                  " even slices, faster in the plan's timing than the "
                  "dynamic program's";
      }
      if (k >= 16 && !(ms < lastMs))
        break;
      lastMs = ms;
    }
    out.sizes = sliced->sizes;
  }
  out.sliced = std::move(*sliced);
  return out;
}

LogicalResult PredictTokenSlicesPass::chooseStages(
    const TokenSlicesSpec &spec, const PlanTarget &target,
    llvm::function_ref<bool(int64_t, int64_t)> fits, Chosen &chosen,
    std::string &said) {
  // No stage heavier in weights than the heaviest rp-partition cut: its
  // byte cap held them there.
  const Partition &cut = capStages ? *capStages : in->partition;
  int64_t cap = 0;
  for (const StageRange &r : cut.forward)
    cap = std::max(cap, stageBytes(r, in->costs, false));
  cap = std::max(cap, stageBytes(cut.tail, in->costs, true));
  for (const StageRange &r : cut.backward)
    cap = std::max(cap, stageBytes(r, in->costs, true));
  std::string before = formatStages(in->partition);
  // The stages are searched for the slices, and with auto the slices are
  // chosen again on the stages found; where that changes the slice count
  // (16 chosen on the unsliced stages, 32 faster on the stages found for
  // 16) the stages are searched again for the new count from where they
  // are, at most kRounds searches in all. On in->partition; `chosen`
  // becomes the slices kept.
  constexpr unsigned kRounds = 3;
  struct Searched {
    double unslicedStagesMs = 0;
    size_t firstCount = 0;
    bool moved = false;
  };
  unsigned timed = 0;
  auto climb = [&](Chosen &chosen, unsigned maxEven) -> FailureOr<Searched> {
    Searched out;
    out.firstCount = chosen.sizes.size();
    for (unsigned round = 0; round < kRounds; ++round) {
      FailureOr<SliceCosts> costs = costsOf(chosen.sizes);
      if (failed(costs))
        return failure();
      std::vector<int64_t> sizes = chosen.sizes;
      auto time = [&](const Partition &p) -> std::optional<double> {
        std::string error;
        FailureOr<SlicedPrediction> r = predictSlicedPlan(
            p, costs->slices, sizes, *costs->mean, pairs, target, error);
        if (failed(r) || !r->plan.fits)
          return std::nullopt;
        return r->plan.stepMs;
      };
      SlicedStagesSearch problem;
      problem.stepMs = time;
      problem.stageBytesCap = cap;
      SlicedStages found =
          searchSlicedStages(in->partition, in->costs, problem);
      timed += found.timed;
      if (round == 0)
        out.unslicedStagesMs = found.startMs;
      if (!(found.stepMs < found.startMs))
        break;
      out.moved = true;
      in->partition = found.partition;
      FailureOr<SlicedPrediction> again = predict(chosen.sizes, target);
      if (failed(again))
        return failure();
      chosen.sliced = std::move(*again);
      if (spec.kind != TokenSlicesSpec::Kind::automatic)
        break;
      // The slices chosen again on the stages found; kept where faster.
      FailureOr<Chosen> redo = choose(spec, target, fits, maxEven);
      if (failed(redo))
        return failure();
      if (!((redo->sliced.plan.fits || !chosen.sliced.plan.fits) &&
            redo->sliced.plan.stepMs < chosen.sliced.plan.stepMs))
        break;
      bool recount = redo->sizes.size() != chosen.sizes.size();
      chosen = std::move(*redo);
      if (!recount)
        break;
    }
    return out;
  };
  Partition unsliced = in->partition;
  FailureOr<Searched> searched = climb(chosen, 0);
  if (failed(searched))
    return failure();
  if (spec.kind == TokenSlicesSpec::Kind::automatic &&
      searched->firstCount > 16) {
    // More than 16 slices won on the unsliced plan's stages, which need
    // not be the faster count once the stages are searched (Llama-3.1-8B
    // at 64k: 64 slices on the unsliced stages, 16 with stages searched
    // for them): the best of at most 16 is searched too, the faster kept.
    Partition foundMany = in->partition;
    in->partition = unsliced;
    FailureOr<Chosen> few = choose(spec, target, fits, 16);
    if (failed(few))
      return failure();
    FailureOr<Searched> fewSearched = climb(*few, 16);
    if (failed(fewSearched))
      return failure();
    if ((few->sliced.plan.fits || !chosen.sliced.plan.fits) &&
        few->sliced.plan.stepMs < chosen.sliced.plan.stepMs) {
      chosen = std::move(*few);
      searched = std::move(fewSearched);
    } else {
      in->partition = foundMany;
    }
  }
  double unslicedStagesMs = searched->unslicedStagesMs;
  size_t firstCount = searched->firstCount;
  bool moved = searched->moved;
  if (!moved) {
    said = "token slices: " + startWhat + " " + before +
           " kept: none faster with the slices among the " +
           std::to_string(timed) + " partitions timed";
    return success();
  }
  writePartition();
  said = "token slices: stages chosen with the slices: " +
         formatStages(in->partition) +
         fmt(", predicted step %.3f ms; ", chosen.sliced.plan.stepMs) +
         startWhat + " " + before +
         (unslicedStagesMs < 1e300
              ? fmt(" would take %.3f ms with ", unslicedStagesMs)
              : std::string(" do not fit with ")) +
         std::to_string(firstCount) + " slices (" + std::to_string(timed) +
         " partitions timed)";
  return success();
}

void PredictTokenSlicesPass::runOnOperation() {
  ModuleOp module = getOperation();
  markAllAnalysesPreserved();
  in = loadPipelineInputs(module, getAnalysis<CostModel>());
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
  if (triedTwo) {
    // A tail that keeps no keys (the head alone) may take alternate
    // slices as two jobs, so that it paces the backward chain at half its
    // rate; the slices and stages are chosen again for it (the stages
    // differ: docs/token-slices.md), and the faster kept, one job on a tie.
    Partition oneStages = in->partition;
    PartitionAttr oneAttr = in->attr;
    in->partition = unslicedStages;
    in->partition.tailJobs = 2;
    FailureOr<Chosen> two = choose(*spec, target, fits);
    if (failed(two))
      return signalPassFailure();
    std::string twoSaid;
    if (searchStages && two->sizes.size() > 1 &&
        failed(chooseStages(*spec, target, fits, *two, twoSaid)))
      return signalPassFailure();
    if (searchStages) {
      // From the unsliced stages the search can stop at fewer slices
      // than one job's (Qwen3-1.7B at 64k: 16, where one job's 32 slices
      // and stages, given two tail jobs, climb to a faster plan): the
      // search from there too, the faster kept.
      Partition fromUnsliced = in->partition;
      PartitionAttr fromUnslicedAttr = in->attr;
      in->partition = oneStages;
      in->partition.tailJobs = 2;
      capStages = unslicedStages;
      startWhat = "the one-tail-job stages";
      FailureOr<SlicedPrediction> again = predict(chosen->sizes, target);
      if (failed(again))
        return signalPassFailure();
      Chosen fromOne{chosen->sizes, std::move(*again), chosen->how};
      std::string fromOneSaid;
      if (failed(chooseStages(*spec, target, fits, fromOne, fromOneSaid)))
        return signalPassFailure();
      capStages.reset();
      startWhat = "the unsliced plan's stages";
      if ((fromOne.sliced.plan.fits || !two->sliced.plan.fits) &&
          fromOne.sliced.plan.stepMs < two->sliced.plan.stepMs) {
        *two = std::move(fromOne);
        twoSaid = fromOneSaid;
      } else {
        in->partition = fromUnsliced;
        in->attr = fromUnslicedAttr;
        in->func->setAttr("rp.partition", in->attr);
      }
    }
    double oneMs = chosen->sliced.plan.stepMs;
    double twoMs = two->sliced.plan.stepMs;
    if (two->sizes.size() > 1 &&
        (two->sliced.plan.fits || !chosen->sliced.plan.fits) && twoMs < oneMs) {
      two->how += fmt("; the tail as 2 jobs on alternate slices, faster "
                      "than one job's %.3f ms with its own slices and stages",
                      oneMs);
      chosen = std::move(*two);
      stagesSaid = twoSaid;
    } else {
      chosen->how += fmt("; the tail as one job, 2 on alternate slices "
                         "would take %.3f ms",
                         twoMs);
      in->partition = oneStages;
      in->attr = oneAttr;
      in->func->setAttr("rp.partition", in->attr);
    }
  } else if (in->partition.tailJobs == 2) {
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
