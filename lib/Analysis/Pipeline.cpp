//===- Pipeline.cpp - stage jobs on devices, and their compute order ------===//

#include "rp/Analysis/Pipeline.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::rp;

// The names are the enum's (RPAttrs.td); these keep the analysis' spelling.
std::optional<ScheduleKind> mlir::rp::parseScheduleKind(StringRef name) {
  return symbolizeScheduleKind(name);
}

StringRef mlir::rp::scheduleKindName(ScheduleKind kind) {
  return stringifyScheduleKind(kind);
}

unsigned mlir::rp::staticStageCount(ScheduleKind kind, unsigned devices,
                                    unsigned layers) {
  // Interleaving needs the same number of stages on every device.
  if (kind == ScheduleKind::interleaved && layers >= 2 * devices)
    return 2 * devices;
  // Looped-BFS loops over as many stages per device as the layers allow
  // (RoundPipe's simulator runs one layer per stage).
  if (kind == ScheduleKind::loopedBfs && layers >= 2 * devices)
    return layers / devices * devices;
  return std::max(1u, std::min(devices, layers));
}

namespace {

double computeMs(CommandKind kind, StageRange r,
                 llvm::ArrayRef<LayerCost> layers, bool layerGrain) {
  double ms = 0;
  for (unsigned l = r.begin; l < r.end; ++l) {
    const LayerCost &c = layers[l];
    ms += kind == CommandKind::forward ? c.recomputeMs
          : kind == CommandKind::tail
              ? c.forwardMs + c.backwardMs + c.accumulateMs
              : c.backwardJobMs();
    // A stage-grain backward recomputes its layers in order, each but the
    // deepest feeding the next its result: those run their whole forward,
    // not only what their own sweep reads, as the plan's recompute program
    // does (Llama-3.1-8B's 3-layer stages: 2 x 14.2 ms a microbatch more,
    // which the estimate left out and the sim did not: issue 32).
    if (kind == CommandKind::backward && !layerGrain && l + 1 < r.end)
      ms += c.recomputeSkippedMs;
  }
  return ms;
}

} // namespace

/// The peak of a backward's (or the tail's) body from each layer's
/// measured liveness (BackwardLiveness.h), the stage's first input and
/// last result gradient being the job's own buffers. Stage grain (and the
/// tail) runs every layer's forward, then their sweeps deepest first: while
/// layer k runs, every shallower layer holds what its sweep will read (and
/// an inner layer the input its sweep reads), layer k its own forward or
/// sweep values, its input while its forward runs and its result gradient
/// while its sweep does. Layer grain holds the inner layers' saved inputs
/// and one layer's body at a time.
static int64_t backwardBodyBytes(CommandKind kind, StageRange r,
                                 llvm::ArrayRef<LayerCost> layers,
                                 bool layerGrain, bool savedAsInputs) {
  int64_t peak = 0, kept = 0, saved = 0;
  for (unsigned l = r.begin; l < r.end; ++l) {
    const LayerCost &c = layers[l];
    bool inner = l > r.begin, deepest = l + 1 == r.end;
    int64_t grad = deepest ? 0 : c.resultGradBytes;
    if (inner)
      saved += c.actInBytes;
    if (kind == CommandKind::backward && layerGrain) {
      peak = std::max(
          peak, grad + std::max(c.recomputePeakBytes, c.backwardPeakBytes));
      continue;
    }
    int64_t input = inner ? c.actInBytes : 0;
    int64_t keptInput = inner ? c.keptInputBytes : 0;
    peak = std::max({peak, kept + input + c.recomputePeakBytes,
                     kept + keptInput + c.backwardPeakBytes + grad});
    kept += c.keptBytes + keptInput;
  }
  return kind == CommandKind::backward && layerGrain && !savedAsInputs
             ? saved + peak
             : peak;
}

int64_t mlir::rp::jobWorkBytes(CommandKind kind, StageRange r,
                               llvm::ArrayRef<LayerCost> layers,
                               bool layerGrain, bool savedAsInputs) {
  int64_t sum = 0, peak = 0, saved = 0, grads = 0, layerGrads = 0;
  for (unsigned l = r.begin; l < r.end; ++l) {
    sum += layers[l].workBytes;
    grads += layers[l].gradBytes;
    layerGrads = std::max(layerGrads, layers[l].gradBytes);
    peak = std::max(peak, layers[l].workBytes);
    // The stage's own input is the job's input buffer; the inner layers'
    // inputs are what a layer-grain backward keeps instead of their
    // intermediates.
    if (l > r.begin)
      saved += layers[l].actInBytes;
  }
  if (kind == CommandKind::forward)
    return peak;
  bool measured = true;
  for (unsigned l = r.begin; l < r.end; ++l)
    measured = measured && layers[l].backwardMeasured;
  // A layer-grain backward adds each layer's gradients into the set's
  // accumulators right after that layer's backward program, so one layer's
  // are live at a time; a stage-grain backward and the tail are one
  // program and hold the stage's.
  const int64_t liveGrads =
      kind == CommandKind::backward && layerGrain ? layerGrads : grads;
  if (measured)
    return liveGrads +
           backwardBodyBytes(kind, r, layers, layerGrain, savedAsInputs);
  // A backward (and the tail) computes its microbatch's weight gradients
  // apart from the set's accumulators and adds each program's into them
  // as soon as it has run, so one program's gradients are live beside the
  // intermediates: one layer's at layer grain, the stage's otherwise (one
  // program).
  if (kind == CommandKind::backward && layerGrain)
    return liveGrads +
           (savedAsInputs ? 2 * peak : std::min(saved + 2 * peak, sum + peak));
  return grads + sum + peak;
}

namespace {

/// One unit of a static schedule's per-device order.
struct Unit {
  unsigned stage, microbatch;
  bool forward;
};

/// The compute order of device `d` in a static schedule with `stages`
/// stages (stage s on device s mod G): GPipe runs every forward, then every
/// backward; Looped-BFS runs its stages one after another, each over every
/// microbatch, forwards then backwards; 1F1B and interleaved 1F1B warm up
/// with forwards, then
/// alternate one forward and one backward (Megatron's order; a device holds
/// `stages / G` model chunks).
std::vector<Unit> staticOrder(ScheduleKind kind, unsigned d, unsigned devices,
                              unsigned stages, unsigned microbatches) {
  std::vector<Unit> order;
  if (d >= stages)
    return order;
  unsigned chunks = (stages + devices - 1) / devices;
  unsigned total = microbatches * chunks;
  if (kind == ScheduleKind::loopedBfs) {
    // Breadth first: every microbatch of one stage before the next stage.
    for (unsigned c = 0; c < chunks; ++c)
      if (c * devices + d < stages)
        for (unsigned m = 0; m < microbatches; ++m)
          order.push_back({c * devices + d, m, true});
    for (unsigned c = chunks; c-- > 0;)
      if (c * devices + d < stages)
        for (unsigned m = 0; m < microbatches; ++m)
          order.push_back({c * devices + d, m, false});
    return order;
  }
  auto unit = [&](unsigned k, bool forward) {
    unsigned chunk = (k / devices) % chunks;
    if (!forward)
      chunk = chunks - 1 - chunk;
    unsigned mb =
        chunks == 1 ? k : (k / (devices * chunks)) * devices + k % devices;
    return Unit{chunk * devices + d, mb, forward};
  };
  unsigned warmup =
      kind == ScheduleKind::gpipe ? total
      : chunks == 1
          ? std::min(total, stages - d - 1)
          : std::min(total, (devices - d - 1) * 2 + (chunks - 1) * devices);
  unsigned f = 0, b = 0;
  for (; f < warmup; ++f)
    order.push_back(unit(f, true));
  while (f < total) {
    order.push_back(unit(f++, true));
    order.push_back(unit(b++, false));
  }
  while (b < total)
    order.push_back(unit(b++, false));
  return order;
}

} // namespace

FailureOr<Pipeline> mlir::rp::lowerSchedule(const Partition &partition,
                                            llvm::ArrayRef<LayerCost> layers,
                                            ScheduleKind kind, unsigned devices,
                                            unsigned microbatches,
                                            std::string &error) {
  Pipeline pl;
  pl.kind = kind;
  pl.devices = devices;
  pl.microbatches = microbatches;
  unsigned nf = partition.forward.size();
  // Round-robin may run the tail as two jobs taking alternate microbatches.
  unsigned tailJobs = kind == ScheduleKind::roundRobin && microbatches >= 2
                          ? std::max(1u, std::min(partition.tailJobs, 2u))
                          : 1;
  for (const StageRange &s : partition.forward)
    pl.jobs.push_back({CommandKind::forward, s, 0, 0});
  // Or as a pair split by layers: the shallow half's forward job, the
  // fused deep half, the shallow half's backward (same device and set).
  bool pair = kind == ScheduleKind::roundRobin && tailJobs == 1 &&
              partition.tailPairAt > 0 &&
              partition.tailPairAt < partition.tail.size();
  if (pair) {
    unsigned at = partition.tail.begin + partition.tailPairAt;
    pl.jobs.push_back({CommandKind::forward, {partition.tail.begin, at}, 0, 0});
    pl.jobs.push_back({CommandKind::tail, {at, partition.tail.end}, 0, 0});
    StageJob back{CommandKind::backward, {partition.tail.begin, at}, 0, 0};
    back.keepsForward = true;
    pl.jobs.push_back(back);
  } else {
    for (unsigned t = 0; t < tailJobs; ++t)
      pl.jobs.push_back({CommandKind::tail, partition.tail, 0, 0});
  }
  for (auto [b, s] : llvm::enumerate(partition.backward))
    pl.jobs.push_back(
        {CommandKind::backward, s, 0, 0, partition.layerGrainAt(unsigned(b))});
  unsigned numJobs = pl.jobs.size();
  // Whether job n runs microbatch m: a split tail's jobs take alternate
  // ones; `producerOf(n, m)` is the job of the stage before n's that runs
  // m.
  auto runs = [&](unsigned n, unsigned m) {
    return n < nf || n >= nf + tailJobs || m % tailJobs == n - nf;
  };
  auto stageOf = [&](unsigned n) {
    return n < nf ? n : n < nf + tailJobs ? nf : n - tailJobs + 1;
  };
  auto jobOf = [&](unsigned stage, unsigned m) {
    return stage < nf    ? stage
           : stage == nf ? nf + m % tailJobs
                         : stage + tailJobs - 1;
  };
  // computeOf[job][mb]: the index of the compute command.
  std::vector<std::vector<unsigned>> computeOf(
      numJobs, std::vector<unsigned>(microbatches, ~0u));
  Schedule &sched = pl.schedule;
  sched.devices = devices;
  auto add = [&](unsigned job, unsigned mb) {
    const StageJob &j = pl.jobs[job];
    Command c;
    c.device = j.device;
    c.queue = Queue::compute;
    c.kind = j.kind;
    c.job = job;
    c.microbatch = mb;
    c.ms = computeMs(j.kind, j.range, layers, j.layerGrain);
    if (j.keepsForward) {
      c.ms = 0;
      for (unsigned l = j.range.begin; l < j.range.end; ++l)
        c.ms += layers[l].backwardMs + layers[l].accumulateMs;
    }
    // The first microbatch's gradients start the accumulators, a copy the
    // plan makes a view of (no kernel); the others add to them.
    bool first = j.kind == CommandKind::tail ? mb < tailJobs : mb == 0;
    if (first && j.kind != CommandKind::forward)
      for (unsigned l = j.range.begin; l < j.range.end; ++l)
        c.ms -= layers[l].accumulateMs;
    // Round-robin uploads a layer-grain backward's saved inputs (its
    // input buffers hold them, insertTransfers); a static schedule's
    // backward keeps them in its work.
    c.bytes = jobWorkBytes(j.kind, j.range, layers, j.layerGrain,
                           kind == ScheduleKind::roundRobin);
    c.label = std::string(j.kind == CommandKind::forward ? "F"
                          : j.kind == CommandKind::tail  ? "T"
                                                         : "B") +
              std::to_string(job) + " mb" + std::to_string(mb);
    computeOf[job][mb] = sched.add(std::move(c));
  };

  if (kind == ScheduleKind::roundRobin) {
    // A pair's backward half takes its forward half's device and set; the
    // jobs after it move up one device.
    for (unsigned n = 0, d = 0; n < numJobs; ++n) {
      bool back = pair && n == nf + 2;
      pl.jobs[n].device = back ? pl.jobs[nf].device : d++ % devices;
      pl.jobs[n].weightSet = back ? nf : n;
    }
    for (unsigned n = 0; n < numJobs; ++n) {
      if (pair && n == nf + 2)
        continue;
      if (pair && n == nf) {
        // One forward ahead: F0, F1, B0, F2, B1, ..., B(M-1).
        for (unsigned m = 0; m < microbatches; ++m) {
          add(nf, m);
          if (m > 0)
            add(nf + 2, m - 1);
        }
        add(nf + 2, microbatches - 1);
        continue;
      }
      for (unsigned m = 0; m < microbatches; ++m)
        if (runs(n, m))
          add(n, m);
    }
  } else {
    unsigned stages = nf + 1;
    if (partition.backward.size() != nf) {
      error = "static schedules run the forward and backward of a stage on "
              "one device, so the backward stages must mirror the forward "
              "ones";
      return failure();
    }
    for (unsigned k = 0; k < nf; ++k)
      if (!(partition.backward[k] == partition.forward[nf - 1 - k])) {
        error = "static schedules run the forward and backward of a stage "
                "on one device, so the backward stages must mirror the "
                "forward ones";
        return failure();
      }
    if (kind != ScheduleKind::interleaved && kind != ScheduleKind::loopedBfs &&
        stages > devices) {
      error = std::string(scheduleKindName(kind)) +
              " runs one stage per "
              "device: " +
              std::to_string(stages) + " stages do not fit " +
              std::to_string(devices) + " devices";
      return failure();
    }
    if (kind == ScheduleKind::interleaved &&
        (stages % devices != 0 ||
         (stages > devices && microbatches % devices != 0))) {
      error = "interleaved-1f1b needs the same number of stages on every "
              "device and, with several stages per device, microbatches a "
              "multiple of the device count (got " +
              std::to_string(stages) + " stages, " + std::to_string(devices) +
              " devices, " + std::to_string(microbatches) + " microbatches)";
      return failure();
    }
    // Stage s: forward job s (the tail for the last one) and backward job
    // numJobs - 1 - s, both on device s mod G, sharing weight set s.
    for (unsigned s = 0; s < stages; ++s) {
      pl.jobs[s].device = s % devices;
      pl.jobs[s].weightSet = s;
      if (s + 1 < stages) {
        pl.jobs[numJobs - 1 - s].device = s % devices;
        pl.jobs[numJobs - 1 - s].weightSet = s;
      }
    }
    for (unsigned d = 0; d < devices; ++d)
      for (Unit u : staticOrder(kind, d, devices, stages, microbatches)) {
        if (u.stage + 1 == stages && !u.forward)
          continue; // the fused tail's backward ran with its forward
        add(u.forward ? u.stage : numJobs - 1 - u.stage, u.microbatch);
      }
  }
  // Data dependencies between compute commands; insertTransfers turns the
  // ones that cross devices into copies.
  for (unsigned n = 0; n < numJobs; ++n)
    for (unsigned m = 0; m < microbatches; ++m) {
      if (!runs(n, m))
        continue;
      std::vector<unsigned> &waits = sched.commands[computeOf[n][m]].waits;
      if (stageOf(n) > 0)
        waits.push_back(computeOf[jobOf(stageOf(n) - 1, m)][m]);
      const StageJob &j = pl.jobs[n];
      if (j.kind != CommandKind::backward)
        continue;
      // The pair's backward half reads what its forward half kept.
      if (j.keepsForward) {
        waits.push_back(computeOf[nf][m]);
        continue;
      }
      // A static stage's backward reads the input its forward kept.
      if (kind != ScheduleKind::roundRobin) {
        waits.push_back(computeOf[numJobs - 1 - n][m]);
        continue;
      }
      // Round-robin: the saved input comes from the forward job that
      // computed it, or from the host for the model's input.
      if (j.range.begin == 0)
        continue;
      for (unsigned f = 0; f < nf; ++f)
        if (pl.jobs[f].range.begin < j.range.begin &&
            j.range.begin <= pl.jobs[f].range.end)
          waits.push_back(computeOf[f][m]);
    }
  std::string stuck;
  std::optional<Schedule> issued = inIssueOrder(sched, &stuck);
  if (!issued) {
    error = "the " + std::string(scheduleKindName(kind)) +
            " order of this partition deadlocks at '" + stuck +
            "'; this is a bug in rp, please report it";
    return failure();
  }
  sched = std::move(*issued);
  return pl;
}

Schedule mlir::rp::roundRobinSchedule(const Partition &partition,
                                      llvm::ArrayRef<LayerCost> layers,
                                      const HardwareProfile &hw,
                                      unsigned devices, unsigned microbatches) {
  std::string error;
  FailureOr<Pipeline> pl =
      lowerSchedule(partition, layers, ScheduleKind::roundRobin, devices,
                    microbatches, error);
  assert(succeeded(pl) && "round-robin lowering cannot fail");
  insertTransfers(*pl, layers, hw);
  return std::move(pl->schedule);
}
