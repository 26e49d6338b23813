//===- PredictTokenSlicesSearch.cpp - slices, stages, tail jobs -----------===//
//
// rp-predict-token-slices' choices on the compiler's timing
// (PredictTokenSlicesSearch.h): TeraPipe's program and the even counts,
// the stages searched again with the slices, and the tail as one job or
// two on alternate slices.
//
//===----------------------------------------------------------------------===//

#include "PredictTokenSlicesSearch.h"
#include "PredictTokenSlices.h"
#include "Retype.h"
#include "rp/Analysis/PartitionPolicy.h"
#include "rp/Analysis/SlicedStages.h"

#include <algorithm>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::token_slices;

/// The layers' costs at `seq` tokens, once per length.

FailureOr<const std::vector<LayerCost> *> SlicePlanner::costsAt(int64_t seq) {
  if (end >= 0) {
    // At an end of the profile's unknown inputs (endHw): its own costs.
    auto key = std::make_pair(end, seq);
    if (auto it = endMemo.find(key); it != endMemo.end())
      return &it->second;
    OwningOpRef<ModuleOp> copy = retypedCopy(module, seq0, seq, rows);
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
  OwningOpRef<ModuleOp> copy = retypedCopy(module, seq0, seq, rows);
  CostModel scratch = costModel->forScratch();
  FailureOr<PipelineInputs> in = loadPipelineInputs(*copy, scratch);
  if (failed(in))
    return failure();
  return &(memo[seq] = std::move(in->costs));
}

FailureOr<SlicePlanner::SliceCosts>
SlicePlanner::costsOf(llvm::ArrayRef<int64_t> sizes) {
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

FailureOr<SlicedPrediction> SlicePlanner::predict(llvm::ArrayRef<int64_t> sizes,
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

FailureOr<double> SlicePlanner::passMs(int64_t size) {
  FailureOr<const std::vector<LayerCost> *> c = costsAt(size);
  if (failed(c))
    return failure();
  return sumOverJobs(**c);
}

double SlicePlanner::sumOverJobs(llvm::ArrayRef<LayerCost> layers) {
  double ms = 0;
  for (const StageRange &r : in->partition.forward)
    ms += sliceComputeMs({CommandKind::forward, r}, layers);
  ms += sliceComputeMs({CommandKind::tail, in->partition.tail}, layers);
  for (const StageRange &r : in->partition.backward)
    ms += sliceComputeMs({CommandKind::backward, r}, layers);
  return ms;
}

FailureOr<std::optional<SliceChoice>> SlicePlanner::search(int64_t tokens,
                                                           SliceFits fits) {
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

void SlicePlanner::writePartition() {
  PartitionAttr a = in->attr;
  SmallVector<int64_t> fwd, bwd;
  stageSizes(in->partition, fwd, bwd);
  bool same =
      llvm::equal(fwd, a.getForward()) && llvm::equal(bwd, a.getBackward());
  in->attr =
      PartitionAttr::get(module.getContext(), a.getSchedule(), a.getDevices(),
                         a.getMicrobatches(), a.getHw(), a.getPartitioner(),
                         a.getRecompute(), fwd, bwd, in->partition.tailJobs,
                         same ? a.getGrains() : ArrayRef<RecomputeGrain>{});
  in->func->setAttr("rp.partition", in->attr);
}

FailureOr<SlicePlanner::Chosen>
SlicePlanner::choose(const TokenSlicesSpec &spec, const PlanTarget &target,
                     SliceFits fits, unsigned maxEven) {
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
             << "--token-slices " << slicesText << ": the sizes sum to " << sum
             << " tokens, the sequence has " << seq0;
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

LogicalResult SlicePlanner::chooseStages(const TokenSlicesSpec &spec,
                                         const PlanTarget &target,
                                         SliceFits fits, Chosen &chosen,
                                         std::string &said, bool fewer) {
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
  if (fewer && spec.kind == TokenSlicesSpec::Kind::automatic &&
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
      searched = fewSearched;
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

LogicalResult SlicePlanner::tryTwoTailJobs(const TokenSlicesSpec &spec,
                                           const PlanTarget &target,
                                           SliceFits fits,
                                           const Partition &unslicedStages,
                                           bool searchStages, Chosen &chosen,
                                           std::string &stagesSaid) {
  // A tail that keeps no keys (the head alone) may take alternate
  // slices as two jobs, so that it paces the backward chain at half its
  // rate; the slices and stages are chosen again for it (the stages
  // differ: docs/token-slices.md), and the faster kept, one job on a tie.
  Partition oneStages = in->partition;
  PartitionAttr oneAttr = in->attr;
  in->partition = unslicedStages;
  in->partition.tailJobs = 2;
  FailureOr<Chosen> two = choose(spec, target, fits);
  if (failed(two))
    return failure();
  std::string twoSaid;
  if (searchStages && two->sizes.size() > 1 &&
      failed(chooseStages(spec, target, fits, *two, twoSaid)))
    return failure();
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
    FailureOr<SlicedPrediction> again = predict(chosen.sizes, target);
    if (failed(again))
      return failure();
    Chosen fromOne{chosen.sizes, std::move(*again), chosen.how};
    // Not the best of at most 16 slices again: the search from the
    // unsliced stages above has searched that count for two tail jobs
    // (its first count, or its own search of at most 16), and one job's
    // chose between many slices and few (at 64k that search from one
    // job's stages found the same plan as the one above, 240 more
    // timings: a third of the two-job trial's cost).
    std::string fromOneSaid;
    if (failed(chooseStages(spec, target, fits, fromOne, fromOneSaid,
                            /*fewer=*/false)))
      return failure();
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
  double oneMs = chosen.sliced.plan.stepMs;
  double twoMs = two->sliced.plan.stepMs;
  if (two->sizes.size() > 1 &&
      (two->sliced.plan.fits || !chosen.sliced.plan.fits) && twoMs < oneMs) {
    two->how += fmt("; the tail as 2 jobs on alternate slices, faster "
                    "than one job's %.3f ms with its own slices and stages",
                    oneMs);
    chosen = std::move(*two);
    stagesSaid = twoSaid;
  } else {
    chosen.how += fmt("; the tail as one job, 2 on alternate slices "
                      "would take %.3f ms",
                      twoMs);
    in->partition = oneStages;
    in->attr = oneAttr;
    in->func->setAttr("rp.partition", in->attr);
  }
  return success();
}
