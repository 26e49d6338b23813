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
// the sliced plan adds (sliceKernelsMs).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "Retype.h"
#include "ScheduleIR.h"
#include "SliceTokens.h"
#include "rp/Analysis/HostMemory.h"
#include "rp/Analysis/TokenSlices.h"
#include "rp/timing/Assumptions.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace mlir::rp {
#define GEN_PASS_DEF_PREDICTTOKENSLICESPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

std::string gib(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream(s)
      << llvm::format("%.2f GiB", bytes / double(1ull << 30));
  return s;
}

template <typename... Ts> std::string fmt(const char *f, Ts... values) {
  char text[256];
  snprintf(text, sizeof(text), f, values...);
  return text;
}

/// Bytes in GiB, or in MiB or KiB below one GiB or MiB (a small model's
/// host memory).
std::string size(int64_t bytes) {
  if (bytes >= int64_t(1) << 30)
    return gib(bytes);
  bool mib = bytes >= (1 << 20);
  return fmt(mib ? "%.2f MiB" : "%.2f KiB",
             bytes / double(mib ? 1 << 20 : 1 << 10));
}

std::string joined(llvm::ArrayRef<int64_t> sizes) {
  std::string s;
  for (int64_t v : sizes)
    s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

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

  /// The costs of each slice of `sizes` and of the mean slice.
  FailureOr<SlicedPrediction> predict(llvm::ArrayRef<int64_t> sizes,
                                      const PlanTarget &target) {
    std::vector<std::vector<LayerCost>> slices;
    int64_t offset = 0;
    for (int64_t s : sizes) {
      FailureOr<const std::vector<LayerCost> *> self = costsAt(s);
      if (failed(self))
        return failure();
      slices.push_back(sliceLayerCosts(**self, pairs, offset, s));
      offset += s;
    }
    FailureOr<const std::vector<LayerCost> *> mean =
        costsAt(std::max<int64_t>(1, offset / int64_t(sizes.size())));
    if (failed(mean))
      return failure();
    std::string error;
    FailureOr<SlicedPrediction> p = predictSlicedPlan(
        in->partition, slices, sizes, **mean, pairs, target, error);
    if (failed(p))
      return in->func.emitError(error);
    return p;
  }

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
};

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

  std::vector<int64_t> sizes;
  std::string how;
  switch (spec->kind) {
  case TokenSlicesSpec::Kind::count:
    if (spec->count > unsigned(seq0)) {
      func.emitError() << "--token-slices " << spec->count << ": more slices "
                       << "than the sequence's " << seq0 << " tokens";
      return signalPassFailure();
    }
    sizes = equalSlices(seq0, spec->count);
    how = "even";
    break;
  case TokenSlicesSpec::Kind::sizes: {
    sizes = spec->sizes;
    int64_t sum = 0;
    for (int64_t s : sizes)
      sum += s;
    if (sum != seq0) {
      func.emitError() << "--token-slices " << slices.getValue()
                       << ": the sizes sum to " << sum
                       << " tokens, the sequence has " << seq0;
      return signalPassFailure();
    }
    how = "given";
    break;
  }
  case TokenSlicesSpec::Kind::automatic: {
    FailureOr<std::optional<SliceChoice>> choice = search(seq0, fits);
    if (failed(choice))
      return signalPassFailure();
    if (!*choice) {
      func.emitError() << "--token-slices auto: no slicing of " << seq0
                       << " tokens fits " << gib(budget)
                       << " in the compiler's memory model";
      return signalPassFailure();
    }
    sizes = (*choice)->sizes;
    how = "auto: TeraPipe's dynamic program over " +
          std::to_string(sliceGrain(seq0)) + "-token units";
    break;
  }
  }
  FailureOr<SlicedPrediction> sliced = predict(sizes, target);
  if (failed(sliced))
    return signalPassFailure();
  if (spec->kind == TokenSlicesSpec::Kind::automatic) {
    // The dynamic program prices TeraPipe's chain; the plan's timing can
    // prefer even slices (or none): auto keeps the faster that fits.
    for (unsigned k : {1u, 2u, 4u, 8u, 16u}) {
      if (k > unsigned(seq0) || k == sizes.size())
        continue;
      FailureOr<SlicedPrediction> even = predict(equalSlices(seq0, k), target);
      if (failed(even))
        return signalPassFailure();
      if ((even->plan.fits || !sliced->plan.fits) &&
          even->plan.stepMs < sliced->plan.stepMs) {
        sliced = std::move(even);
        how = "auto: " + std::to_string(k) +
              " even slices, faster in the "
              "plan's timing than the dynamic program's";
      }
    }
    sizes = sliced->sizes;
  }

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
          predictPlan(in->partition, **whole, at, error);
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

  int64_t tokens = rows * seq0 * int64_t(in->attr.getMicrobatches());
  auto rate = [&](double ms) { return ms > 0 ? tokens / (ms / 1e3) : 0.0; };
  // " (fast - slow end: A - B ms, C - D tokens/s)" where there are ends.
  auto range = [&](const double(&ends)[2]) -> std::string {
    if (unknown->empty())
      return "";
    return fmt(" (%.3f - %.3f ms, %.0f - %.0f tokens/s over the unknown "
               "inputs)",
               ends[0], ends[1], rate(ends[1]), rate(ends[0]));
  };
  InFlightDiagnostic report = emitRemark(func.getLoc());
  report << "token slices (a prediction of the compiler's model): "
         << sizes.size() << " slice" << (sizes.size() == 1 ? "" : "s") << " of "
         << joined(sizes) << " tokens (" << how << ") on "
         << in->attr.getDevices() << " devices, " << in->hw.name << "; "
         << fmt("predicted step %.3f ms, %.0f%% bubble, %.0f "
                "tokens/s",
                sliced->plan.stepMs, 100 * sliced->plan.bubble,
                rate(sliced->plan.stepMs))
         << range(slicedEnds) << "; unsliced "
         << fmt("%.3f ms, %.0f%% bubble, %.0f tokens/s", plain->stepMs,
                100 * plain->bubble, rate(plain->stepMs))
         << range(plainEnds)
         << fmt(" (sliced %.2fx",
                plain->stepMs / std::max(1e-12, sliced->plan.stepMs))
         << (unknown->empty()
                 ? std::string(")")
                 : fmt(", %.2fx at the fast end, %.2fx at the slow end)",
                       plainEnds[0] / std::max(1e-12, slicedEnds[0]),
                       plainEnds[1] / std::max(1e-12, slicedEnds[1])))
         << "; peak " << gib(sliced->plan.peak) << " on device "
         << sliced->plan.device << " of " << gib(budget) << " ("
         << (sliced->plan.fits ? "fits" : "does NOT fit") << "; unsliced "
         << gib(plain->peak) << "), keys and values kept "
         << "by one job up to " << gib(sliced->keptBytes)
         << " (their copies through host rows and the tail's forward "
            "sweep timed as rp-insert-transfers writes them); not modelled: "
            "the pinned host rows that hold every layer's keys and values "
            "between a forward job and its backward";
  // What every prediction says (rp/timing/Assumptions.h): its profile's
  // terms, what the model leaves out, and what its range is over.
  report << "; both predictions assume "
         << ::rp::timing::describeAssumed(in->hw) << "; they leave out "
         << ::rp::timing::kModelLeavesOut;
  if (!unknown->empty())
    report << "; their ranges are over what " << in->hw.name << " cannot know ("
           << ::rp::timing::describeUnknown(*unknown)
           << "), each end timed with its own layer costs";
  else
    report << "; no range: '" << in->hw.name << "' names no unknown inputs";
  report.report();

  // A peak that does not grow with the sequence (or keys and values that
  // cost nothing) leaves the linear model without a limit: say so rather
  // than report one.
  if (reportMaxSeq && (perToken <= 0 || kvPerToken <= 0)) {
    emitRemark(func.getLoc())
        << "token slices: no largest sequence reported: in the compiler's "
           "model the peak at "
        << small << " tokens is " << gib(atSmall->peak) << " and at " << seq0
        << " tokens " << gib(plain->peak)
        << ", which does not grow with the sequence, so the linear memory "
           "model has no limit";
  } else if (reportMaxSeq) {
    // The host's side (HostMemory.h), linear in the sequence from this
    // length's sliced plan.
    SlicedHostModel host = slicedHostModel(
        module,
        std::accumulate(keyValue.begin(), keyValue.end(), int64_t(0)) *
            int64_t(in->attr.getMicrobatches()),
        seq0, sliced->hostRowBytes);
    int64_t hostBudget =
        hostBudgetGiB > 0 ? int64_t(hostBudgetGiB * double(1ull << 30)) : 0;
    auto hostFits = [&](int64_t seq) {
      return hostBudget == 0 || host.at(seq) <= hostBudget;
    };
    // The longest sequence whose last slice of one grain still fits the
    // linear model (and the host its rows), then its plan checked at the
    // slices auto picks there.
    auto devicesAt = [&](int64_t seq, std::vector<int64_t> &picked) -> int {
      FailureOr<std::optional<SliceChoice>> c = search(seq, fits);
      if (failed(c))
        return -1;
      if (!*c)
        return 0;
      picked = (*c)->sizes;
      return 1;
    };
    auto at = [&](int64_t seq, std::vector<int64_t> &picked) -> int {
      return hostFits(seq) ? devicesAt(seq, picked) : 0;
    };
    int64_t lo = 0, hi = int64_t(1) << 24;
    std::vector<int64_t> picked, best;
    // Feasibility is monotone in the sequence: a bisection on the model.
    for (int64_t probe = std::max<int64_t>(seq0, 1); probe < hi;) {
      int ok = at(probe, picked);
      if (ok < 0)
        return signalPassFailure();
      if (ok) {
        lo = probe;
        best = picked;
        probe = std::min(hi - 1, probe * 2);
        if (probe == lo)
          break;
      } else {
        hi = probe;
        break;
      }
    }
    while (lo > 0 && hi - lo > std::max<int64_t>(1, lo / 256)) {
      int64_t mid = lo + (hi - lo) / 2;
      int ok = at(mid, picked);
      if (ok < 0)
        return signalPassFailure();
      if (ok) {
        lo = mid;
        best = picked;
      } else {
        hi = mid;
      }
    }
    // Which bound holds: the host's where the devices alone would take
    // the next length the bisection refused.
    std::vector<int64_t> unused;
    int hostBinds = 0;
    if (hostBudget > 0 && !hostFits(hi)) {
      hostBinds = devicesAt(hi, unused);
      if (hostBinds < 0)
        return signalPassFailure();
    }
    int64_t shown = std::max(lo, seq0);
    std::string hostText =
        "; the host holds about " + size(host.at(shown)) +
        " there (base, adapters and optimizer " + size(host.fixed) +
        ", every layer's kept keys and values " + size(host.kept(shown)) +
        ", activation rows " + size(host.rows(shown)) +
        ", linear in the sequence from the sliced plan at " +
        std::to_string(seq0) + " tokens)";
    if (hostBudget == 0)
      hostText += ", not bounded: the profile names no host memory, "
                  "--host-budget-gib N bounds it";
    else if (hostBinds)
      hostText += " of the --host-budget-gib " + size(hostBudget) +
                  ", the bound: at " + std::to_string(hi) +
                  " tokens the slices still fit the devices, the host would "
                  "need " +
                  size(host.at(hi));
    else
      hostText += " of the --host-budget-gib " + size(hostBudget) +
                  "; the devices are the bound";
    InFlightDiagnostic max = emitRemark(func.getLoc());
    if (lo == 0) {
      max << "token slices: no sequence of " << seq0 << " tokens or more fits ";
      if (hostFits(seq0))
        max << gib(budget) << " in slices";
      else
        max << "in slices: the host would need " << size(host.at(seq0))
            << " at " << seq0 << " tokens, over the --host-budget-gib "
            << size(hostBudget);
    } else {
      max << "with token slices (a prediction) the largest sequence that "
             "fits is "
          << lo << " tokens (microbatch " << rows << " x " << lo
          << ", the function's stages), in " << best.size() << " slices from "
          << best.front() << " down to " << best.back()
          << " tokens; a job keeps up to "
          << gib(kvPerToken * (lo - best.back()))
          << " of keys, values and their gradients there" << hostText;
    }
    max.report();
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
