//===- TokenSlices.cpp - one sequence cut into token slices ---------------===//

#include "rp/Analysis/TokenSlices.h"

#include "PlanPredictionSteps.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PassesInFlight.h"
#include "rp/timing/KernelCost.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

using namespace mlir;
using namespace mlir::rp;

FailureOr<TokenSlicesSpec> mlir::rp::parseTokenSlices(llvm::StringRef text,
                                                      std::string &error) {
  TokenSlicesSpec spec;
  text = text.trim();
  if (text == "auto")
    return spec;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  std::vector<int64_t> values;
  for (llvm::StringRef p : parts) {
    int64_t v = 0;
    if (p.trim().getAsInteger(10, v) || v <= 0) {
      error = "--token-slices " + text.str() +
              ": give auto, a slice count (K >= 1) or the slice sizes "
              "(s1,s2,... tokens, each >= 1)";
      return failure();
    }
    values.push_back(v);
  }
  if (values.size() == 1) {
    spec.kind = TokenSlicesSpec::Kind::count;
    spec.count = unsigned(values[0]);
    return spec;
  }
  spec.kind = TokenSlicesSpec::Kind::sizes;
  spec.sizes = std::move(values);
  return spec;
}

std::vector<int64_t> mlir::rp::equalSlices(int64_t tokens, unsigned count) {
  std::vector<int64_t> sizes(count, tokens / count);
  for (int64_t i = 0; i < tokens % count; ++i)
    ++sizes[i];
  return sizes;
}

double mlir::rp::chainLatency(llvm::ArrayRef<double> ms, unsigned jobs) {
  if (ms.empty())
    return 0;
  return std::accumulate(ms.begin(), ms.end(), 0.0) +
         (jobs - 1) * *std::max_element(ms.begin(), ms.end());
}

int64_t mlir::rp::sliceGrain(int64_t tokens, int64_t units) {
  int64_t grain = 1;
  while (grain * units < tokens)
    grain *= 2;
  return grain;
}

namespace {

/// The slice times on the grain's units: t[i][j] for units [i, j), NaN
/// where the slice does not fit.
struct UnitTimes {
  unsigned units = 0;
  std::vector<int64_t> bounds; // token offset of each unit boundary
  std::vector<double> t;       // (units + 1)^2, row i, column j

  explicit UnitTimes(const SliceSearch &s) {
    int64_t grain = std::max<int64_t>(1, s.grain);
    for (int64_t o = 0; o < s.tokens; o += grain)
      bounds.push_back(o);
    bounds.push_back(s.tokens);
    units = bounds.size() - 1;
    t.assign((units + 1) * (units + 1),
             std::numeric_limits<double>::quiet_NaN());
    for (unsigned i = 0; i < units; ++i)
      for (unsigned j = i + 1; j <= units; ++j) {
        int64_t o = bounds[i], size = bounds[j] - bounds[i];
        if (!s.fits || s.fits(o, size))
          t[i * (units + 1) + j] = s.ms(o, size);
      }
  }
  double at(unsigned i, unsigned j) const { return t[i * (units + 1) + j]; }
};

SliceChoice choiceOf(const UnitTimes &u, llvm::ArrayRef<unsigned> cuts,
                     unsigned jobs) {
  SliceChoice c;
  std::vector<double> ms;
  for (unsigned k = 0; k + 1 < cuts.size(); ++k) {
    c.sizes.push_back(u.bounds[cuts[k + 1]] - u.bounds[cuts[k]]);
    ms.push_back(u.at(cuts[k], cuts[k + 1]));
  }
  c.latencyMs = chainLatency(ms, jobs);
  return c;
}

/// The least sum of slice times over [0, units) with every slice no
/// slower than `cap` (infinity: no cap); the cuts through `cuts`.
double leastSum(const UnitTimes &u, double cap, std::vector<unsigned> &cuts) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> f(u.units + 1, inf);
  std::vector<unsigned> from(u.units + 1, 0);
  f[0] = 0;
  for (unsigned j = 1; j <= u.units; ++j)
    for (unsigned i = 0; i < j; ++i) {
      double t = u.at(i, j);
      // NaN (does not fit) fails both tests.
      if (!(t <= cap) || f[i] == inf)
        continue;
      if (f[i] + t < f[j]) {
        f[j] = f[i] + t;
        from[j] = i;
      }
    }
  cuts.clear();
  if (f[u.units] == inf)
    return inf;
  for (unsigned j = u.units; j > 0; j = from[j])
    cuts.push_back(j);
  cuts.push_back(0);
  std::reverse(cuts.begin(), cuts.end());
  return f[u.units];
}

} // namespace

std::optional<SliceChoice> mlir::rp::chooseSlices(const SliceSearch &s) {
  if (s.tokens <= 0)
    return std::nullopt;
  UnitTimes u(s);
  std::vector<unsigned> cuts;
  double floor = leastSum(u, std::numeric_limits<double>::infinity(), cuts);
  if (floor == std::numeric_limits<double>::infinity())
    return std::nullopt;
  std::vector<double> caps;
  for (double t : u.t)
    if (t == t)
      caps.push_back(t);
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  std::optional<SliceChoice> best;
  for (double cap : caps) {
    // Every later cap costs at least the least sum plus its own term.
    if (best && floor + (s.jobs - 1) * cap >= best->latencyMs)
      break;
    if (leastSum(u, cap, cuts) == std::numeric_limits<double>::infinity())
      continue;
    SliceChoice c = choiceOf(u, cuts, s.jobs);
    if (!best || c.latencyMs < best->latencyMs)
      best = std::move(c);
  }
  return best;
}

std::optional<SliceChoice> mlir::rp::bruteForceSlices(const SliceSearch &s) {
  UnitTimes u(s);
  std::optional<SliceChoice> best;
  unsigned inner = u.units - 1;
  for (uint64_t mask = 0; mask < (uint64_t(1) << inner); ++mask) {
    std::vector<unsigned> cuts{0};
    for (unsigned b = 0; b < inner; ++b)
      if (mask >> b & 1)
        cuts.push_back(b + 1);
    cuts.push_back(u.units);
    bool fits = true;
    for (unsigned k = 0; k + 1 < cuts.size(); ++k)
      fits &= u.at(cuts[k], cuts[k + 1]) == u.at(cuts[k], cuts[k + 1]);
    if (!fits)
      continue;
    SliceChoice c = choiceOf(u, cuts, s.jobs);
    if (!best || c.latencyMs < best->latencyMs)
      best = std::move(c);
  }
  return best;
}

SlicePairCosts mlir::rp::fitPairCosts(llvm::ArrayRef<LayerCost> at2h,
                                      llvm::ArrayRef<LayerCost> atH, int64_t h,
                                      std::vector<int64_t> keyValueBytes) {
  SlicePairCosts p;
  double pairs = double(h) * double(h);
  auto fit = [&](double big, double small) {
    return h > 0 ? std::max(0.0, (big - 2 * small) / pairs) : 0.0;
  };
  // The attention kernels' times alone: the layer's whole time also moves
  // with its matmuls' efficiency, which rises with their size, and read as
  // pairs that priced a slice's rectangle 23 % under what its attention
  // costs (8-layer shapes-only model at 8k, rtx4090). The recompute runs
  // the forward's attention again (its gradient reads the output).
  for (auto [big, small] : llvm::zip(at2h, atH)) {
    double forward = fit(big.attentionForwardMs, small.attentionForwardMs);
    p.forwardMs.push_back(forward);
    p.recomputeMs.push_back(forward);
    p.backwardMs.push_back(
        fit(big.attentionBackwardMs, small.attentionBackwardMs));
  }
  p.keyValueBytes = std::move(keyValueBytes);
  p.keyValueBytes.resize(p.forwardMs.size(), 0);
  return p;
}

std::vector<LayerCost> mlir::rp::sliceLayerCosts(llvm::ArrayRef<LayerCost> self,
                                                 const SlicePairCosts &pairs,
                                                 int64_t offset, int64_t size) {
  std::vector<LayerCost> out(self.begin(), self.end());
  // The slice's own pairs are in `self` (a causal sequence of `size`
  // tokens); the rectangle against the earlier slices adds offset x size.
  double extra = double(offset) * double(size);
  for (size_t l = 0; l < out.size() && l < pairs.forwardMs.size(); ++l) {
    out[l].forwardMs += pairs.forwardMs[l] * extra;
    out[l].recomputeMs += pairs.recomputeMs[l] * extra;
    out[l].backwardMs += pairs.backwardMs[l] * extra;
  }
  return out;
}

int64_t mlir::rp::keptKeyValueBytes(CommandKind kind, StageRange range,
                                    const SlicePairCosts &pairs,
                                    int64_t offset) {
  int64_t perToken = 0;
  for (unsigned l = range.begin;
       l < range.end && l < pairs.keyValueBytes.size(); ++l)
    perToken += pairs.keyValueBytes[l];
  return (kind == CommandKind::forward ? 1 : 2) * perToken * offset;
}

double mlir::rp::sliceComputeMs(const StageJob &job,
                                llvm::ArrayRef<LayerCost> layers) {
  double ms = 0;
  for (unsigned l = job.range.begin; l < job.range.end; ++l) {
    const LayerCost &c = layers[l];
    // No accumulators' adds: the schedule charges them per microbatch
    // after a job's first (one slice is then the unsliced plan).
    ms += job.keepsForward                   ? c.backwardMs
          : job.kind == CommandKind::forward ? c.recomputeMs
          : job.kind == CommandKind::tail
              ? c.forwardMs + c.backwardMs
              : c.backwardRecomputeMs() + c.backwardMs;
    // A stage-grain backward's shallower layers recompute their whole
    // forward, which feeds the next (Pipeline.cpp, computeMs).
    if (!job.keepsForward && job.kind == CommandKind::backward &&
        !job.layerGrain && l + 1 < job.range.end)
      ms += c.recomputeSkippedMs;
  }
  return ms;
}

double mlir::rp::sliceKernelsMs(const StageJob &job, bool forwardOnly,
                                const SlicePairCosts &pairs,
                                llvm::ArrayRef<int64_t> sizes, unsigned k,
                                const HardwareProfile &hw,
                                bool layersHoldPrefix) {
  using ::rp::timing::Operand;
  unsigned count = sizes.size();
  if (count < 2 || k >= count)
    return 0;
  int64_t o = 0, last = 0;
  for (unsigned j = 0; j + 1 < count; ++j) {
    if (j < k)
      o += sizes[j];
    last += sizes[j];
  }
  int64_t s = sizes[k];
  // The forward runs in every compute but a backward's that keeps its
  // forward's intermediates (no recompute).
  bool backward = !forwardOnly && job.kind != CommandKind::forward;
  bool forward =
      !(backward && job.kind == CommandKind::backward && job.keepsForward);
  double ms = 0;
  for (unsigned l = job.range.begin; l < job.range.end && l < pairs.kept.size();
       ++l)
    for (const SlicePairCosts::Kept &t : pairs.kept[l]) {
      auto rows = [&](int64_t n) {
        return Operand{{t.batch, t.heads, n, t.dim}, t.elementBytes};
      };
      auto call = [&](const char *op, std::vector<Operand> in,
                      std::vector<Operand> out,
                      const std::vector<int64_t> &ints) {
        return ::rp::timing::callMs(
            hw, uint16_t(::rp::timing::kernelOpIndex(op)),
            {std::move(in), std::move(out), t.dtype}, ints);
      };
      std::vector<int64_t> at = {0, 0, o, 0, 1, 1, 1, 1},
                           at0 = {0, 0, 0, 0, 1, 1, 1, 1};
      // The prefix before the slice's own keys (rp-slice-tokens).
      if (forward && o > 0 && !layersHoldPrefix)
        ms += call("concat", {rows(o), rows(s)}, {rows(o + s)}, {2});
      if (!backward)
        continue;
      // The later slices' gradient of the slice's own rows: read from the
      // accumulator and added to its own (none in the last slice).
      if (k + 1 < count)
        ms += call("slice", {rows(last)}, {rows(s)}, at) +
              call("add", {rows(s), rows(s)}, {rows(s)}, {});
      if (o == 0)
        continue;
      // The concat's gradient split into the prefix's and the slice's, the
      // prefix's padded into the accumulator, which the sweep's first slice
      // starts and the others add to.
      if (!layersHoldPrefix)
        ms += call("slice", {rows(o + s)}, {rows(o)}, at0) +
              call("slice", {rows(o + s)}, {rows(s)}, at);
      ms += call("slice_grad", {rows(o)}, {rows(last)}, at0);
      if (k + 1 < count)
        ms += call("add", {rows(last), rows(last)}, {rows(last)}, {});
    }
  return ms;
}

namespace {

/// The tail and the backward jobs run each sequence's slices last first:
/// a slice's key and value gradients are summed from the slices after it.
/// Their compute commands (one per job and microbatch, in microbatch
/// order) trade places within each sequence, so that each queue runs them
/// last slice first: a job's slices of a sequence are mirrored among
/// themselves (all K of them, or a tail job's alternate ones where the
/// tail runs as two jobs: 30, 28, ... and 31, 29, ...). The waits follow,
/// and the commands are reissued in an order where every one comes after
/// those it waits for (what the transfers are inserted in). False when
/// that deadlocks.
bool reverseSliceOrder(Pipeline &pl, unsigned slices) {
  Schedule &s = pl.schedule;
  std::vector<unsigned> moved(s.commands.size());
  std::iota(moved.begin(), moved.end(), 0u);
  // Per job and sequence, its compute commands in microbatch order.
  std::map<std::pair<int, int>, std::vector<unsigned>> runs;
  for (auto [i, c] : llvm::enumerate(s.commands))
    if (c.kind != CommandKind::forward && c.microbatch >= 0)
      runs[{c.job, c.microbatch / int(slices)}].push_back(unsigned(i));
  for (auto &[key, list] : runs) {
    llvm::sort(list, [&](unsigned a, unsigned b) {
      return s.commands[a].microbatch < s.commands[b].microbatch;
    });
    for (size_t n = 0; n < list.size(); ++n)
      moved[list[n]] = list[list.size() - 1 - n];
  }
  std::vector<Command> out(s.commands.size());
  for (auto [i, c] : llvm::enumerate(s.commands)) {
    Command n = c;
    for (unsigned &w : n.waits)
      w = moved[w];
    out[moved[i]] = std::move(n);
  }
  s.commands = std::move(out);
  std::optional<Schedule> issued = inIssueOrder(s);
  if (!issued)
    return false;
  s = std::move(*issued);
  return true;
}

/// Adds the tail's forward sweep: the fused tail runs a sequence's slices
/// last first, and slice K - 1's attention reads the keys and values of the
/// tail's own layers of every earlier slice, which nothing has computed
/// yet. So before it, the tail job runs a forward command per earlier slice
/// as the slice arrives (waiting for what the slice's fused command waits
/// for from the forward jobs); the fused command of slice K - 1 waits for
/// them all. False when the result deadlocks.
bool addTailSweep(Pipeline &pl, unsigned slices,
                  llvm::ArrayRef<LayerCost> layers,
                  llvm::ArrayRef<bool> keepsKeys) {
  const std::vector<Command> &old = pl.schedule.commands;
  std::map<int, unsigned> tailAt;
  for (auto [i, c] : llvm::enumerate(old))
    if (c.kind == CommandKind::tail && c.microbatch >= 0)
      tailAt[c.microbatch] = unsigned(i);
  // The queue's order is the vector's: the sweep goes just before the
  // fused command of the sequence's last slice. Positions first, then the
  // waits renumbered.
  std::vector<std::vector<Command>> before(old.size());
  for (auto [mb, i] : tailAt) {
    if (unsigned(mb) % slices != slices - 1)
      continue;
    // A tail without attention keeps nothing: no sweep.
    const StageJob &tail = pl.jobs[old[i].job];
    if (!keepsKeys.empty() && std::none_of(keepsKeys.begin() + tail.range.begin,
                                           keepsKeys.begin() + tail.range.end,
                                           [](bool keeps) { return keeps; }))
      continue;
    for (int j = mb - int(slices) + 1; j < mb; ++j) {
      const Command &fused = old[tailAt.at(j)];
      Command sweep = fused;
      sweep.kind = CommandKind::forward;
      sweep.waits.clear();
      for (unsigned w : fused.waits)
        if (old[w].kind == CommandKind::forward)
          sweep.waits.push_back(w);
      const StageJob &job = pl.jobs[fused.job];
      sweep.ms = 0;
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        sweep.ms += layers[l].forwardMs;
      sweep.label =
          "T" + std::to_string(fused.job) + " fwd mb" + std::to_string(j);
      before[i].push_back(std::move(sweep));
    }
  }
  std::vector<unsigned> at(old.size());
  unsigned n = 0;
  for (unsigned i = 0; i < old.size(); ++i) {
    n += before[i].size();
    at[i] = n++;
  }
  std::vector<Command> out;
  for (unsigned i = 0; i < old.size(); ++i) {
    std::vector<unsigned> swept;
    for (Command &c : before[i]) {
      for (unsigned &w : c.waits)
        w = at[w];
      swept.push_back(unsigned(out.size()));
      out.push_back(std::move(c));
    }
    Command c = old[i];
    for (unsigned &w : c.waits)
      w = at[w];
    llvm::append_range(c.waits, swept);
    out.push_back(std::move(c));
  }
  Schedule swept = pl.schedule;
  swept.commands = std::move(out);
  std::optional<Schedule> issued = inIssueOrder(swept);
  if (!issued)
    return false;
  pl.schedule = std::move(*issued);
  return true;
}

} // namespace

std::optional<std::string>
mlir::rp::tailJobsRefusal(const Partition &partition, unsigned sequences,
                          unsigned slices, llvm::ArrayRef<bool> keepsKeys) {
  if (partition.tailJobs == 1)
    return std::nullopt;
  if (partition.tailJobs != 2)
    return "token slices run the fused tail as 1 or 2 jobs, not " +
           std::to_string(partition.tailJobs);
  for (unsigned l = partition.tail.begin;
       l < std::min<size_t>(partition.tail.end, keepsKeys.size()); ++l)
    if (keepsKeys[l])
      return "the fused tail as 2 jobs takes alternate token slices, so it "
             "must keep no keys, but its layer " +
             std::to_string(l) +
             " has an attention that reads the earlier slices' keys, half "
             "of which the other tail job makes: cut the tail to the layers "
             "after the last attention (the head) or run it as one job "
             "(--tail-jobs 1)";
  if (sequences > 1 && slices % 2 != 0)
    return "the fused tail as 2 jobs with " + std::to_string(sequences) +
           " sequences a step needs an even slice count, not " +
           std::to_string(slices) +
           " (each tail job's slices alternate its buffers across the "
           "sequences)";
  return std::nullopt;
}

FailureOr<Pipeline> mlir::rp::lowerSlicedSchedule(
    const Partition &partition, llvm::ArrayRef<LayerCost> layers,
    ScheduleKind kind, unsigned devices, unsigned microbatches, unsigned slices,
    bool tailSweep, std::string &error,
    llvm::function_ref<void(Pipeline &)> timeCommands,
    llvm::ArrayRef<bool> keepsKeys) {
  if (kind != ScheduleKind::roundRobin) {
    error = "token slices are modelled for the round-robin schedule only";
    return failure();
  }
  if (std::optional<std::string> why =
          tailJobsRefusal(partition, microbatches, slices, keepsKeys)) {
    error = *why;
    return failure();
  }
  FailureOr<Pipeline> pl = lowerSchedule(partition, layers, kind, devices,
                                         microbatches * slices, error);
  if (failed(pl))
    return failure();
  for (const StageJob &j : pl->jobs)
    if (j.keepsForward) {
      error = "token slices are not modelled for a tail split into a pair "
              "of jobs";
      return failure();
    }
  // The issue order follows the commands' times.
  if (timeCommands)
    timeCommands(*pl);
  if (!reverseSliceOrder(*pl, slices) ||
      (tailSweep && slices > 1 &&
       !addTailSweep(*pl, slices, layers, keepsKeys))) {
    error = "the sliced schedule deadlocks; this is a bug in rp, please "
            "report it";
    return failure();
  }
  return pl;
}

FailureOr<SlicedPrediction> mlir::rp::predictSlicedPlan(
    const Partition &partition, llvm::ArrayRef<std::vector<LayerCost>> slices,
    llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<LayerCost> mean,
    const SlicePairCosts &pairs, const PlanTarget &target, std::string &error) {
  unsigned k = slices.size();
  SlicedPrediction out;
  auto time = [&](Pipeline &pl) {
    out.sizes.assign(sizes.begin(), sizes.end());
    std::vector<int64_t> offsets(k, 0);
    for (unsigned j = 1; j < k; ++j)
      offsets[j] = offsets[j - 1] + sizes[j - 1];
    for (Command &c : pl.schedule.commands) {
      if (!isCompute(c.kind) || c.microbatch < 0)
        continue;
      unsigned j = unsigned(c.microbatch) % k;
      const StageJob &job = pl.jobs[c.job];
      c.ms = sliceComputeMs(job, slices[j]) +
             sliceKernelsMs(job, /*forwardOnly=*/false, pairs, sizes, j,
                            target.hw);
      // The kept keys are not the compute's work: they come up into its
      // input and their gradients sum in the job's accumulator (the
      // memory plan's, from the copies below), as in rp-plan-memory.
      out.keptBytes =
          std::max(out.keptBytes,
                   keptKeyValueBytes(job.kind, job.range, pairs, offsets[j]));
      c.bytes = jobWorkBytes(job.kind, job.range, slices[j], job.layerGrain,
                             /*savedAsInputs=*/true);
    }
  };
  // The schedule rp-lower-schedule writes: the tail's forward sweep where
  // its layers keep keys, and the kept keys' copies (insertTransfers adds
  // them to every copy of the pipeline the timing and the memory plan
  // make).
  SmallVector<bool> keepsKeys;
  for (int64_t bytes : pairs.keyValueBytes)
    keepsKeys.push_back(bytes > 0);
  FailureOr<Pipeline> pl = lowerSlicedSchedule(
      partition, mean, target.kind, target.devices, target.microbatches, k,
      /*tailSweep=*/true, error, time, keepsKeys);
  if (failed(pl))
    return failure();
  // The sweep (added after the timing) runs its slice's forward.
  for (Command &c : pl->schedule.commands)
    if (c.kind == CommandKind::forward && c.microbatch >= 0 &&
        pl->jobs[c.job].kind == CommandKind::tail) {
      const StageJob &job = pl->jobs[c.job];
      unsigned j = unsigned(c.microbatch) % k;
      c.ms =
          sliceKernelsMs(job, /*forwardOnly=*/true, pairs, sizes, j, target.hw);
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        c.ms += slices[j][l].forwardMs;
    }
  pl->residentWeights = false;
  if (k > 1) {
    pl->keptKeySlices.assign(sizes.begin(), sizes.end());
    pl->keptKeyBytes = pairs.keyValueBytes;
    // Every layer's keys have a forward that makes them (the sweep's for
    // the tail's): checked once here, on a copy.
    Pipeline check = *pl;
    check.keptKeySlices.clear();
    insertTransfers(check, mean, target.hw);
    if (!insertKeptKeyTransfers(check, sizes, pairs.keyValueBytes, target.hw,
                                error))
      return failure();
  }
  PlanPrediction &p = out.plan;
  Pipeline computeOnly = *pl;
  std::optional<SteadyState> steady =
      predictSteadyState(*pl, computeOnly, mean, target);
  if (!steady) {
    error = "the sliced schedule deadlocks; this is a bug in rp, please "
            "report it";
    return failure();
  }
  p.stepMs = steady->stepMs;
  p.bubble = steady->bubble();
  insertTransfers(*pl, mean, target.hw);
  std::optional<Schedule> issued = inIssueOrder(pl->schedule);
  if (!issued) {
    error = "the sliced schedule deadlocks once transfers are inserted; "
            "this is a bug in rp, please report it";
    return failure();
  }
  pl->schedule = std::move(*issued);
  // The transfers were sized by the mean slice; a slice's activations are
  // its own size's.
  double meanSize = 0;
  for (int64_t s : sizes)
    meanSize += double(s) / k;
  for (Command &c : pl->schedule.commands)
    if ((c.kind == CommandKind::h2dActivation ||
         c.kind == CommandKind::h2dGradient ||
         c.kind == CommandKind::d2hActivation ||
         c.kind == CommandKind::d2hGradient) &&
        c.microbatch >= 0)
      c.bytes = int64_t(double(c.bytes) *
                        double(sizes[unsigned(c.microbatch) % k]) / meanSize);
  for (const Command &c : pl->schedule.commands)
    if ((c.kind == CommandKind::d2hActivation ||
         c.kind == CommandKind::d2hGradient) &&
        c.microbatch >= 0)
      out.hostRowBytes += c.bytes;
  MemoryPlan mp = planMemory(*pl, mean);
  predictArenaCopies(p, mp, *pl, computeOnly, mean, target);
  predictFullestDevice(p, mp, target.budget);
  p.stagedHostBytes = mp.stagedHostBytes;
  return out;
}
