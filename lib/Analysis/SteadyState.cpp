//===- SteadyState.cpp - the steady state of steps run back to back -------===//

#include "rp/Analysis/SteadyState.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_map>

#include "rp/timing/Continuous.h"

using namespace mlir;
using namespace mlir::rp;

double SteadyState::bubble() const {
  if (stepMs <= 0 || deviceBusyMs.empty())
    return 0;
  return std::max(0.0, 1 - busyMs / (deviceBusyMs.size() * stepMs));
}

double SteadyState::busyRatio() const {
  if (deviceBusyMs.empty())
    return 1;
  auto [lo, hi] = std::minmax_element(deviceBusyMs.begin(), deviceBusyMs.end());
  return *lo > 0 ? *hi / *lo : 0;
}

namespace {

/// One step with its transfers, as the timing core's continuous layout
/// takes it: the pass's graph (the optimizer apart) and the host's work.
struct OneStep {
  Schedule pass;
  ::rp::timing::Graph graph;
  ::rp::timing::RunLayout layout;
};

OneStep oneStep(const Pipeline &pipeline, llvm::ArrayRef<LayerCost> layers,
                const HardwareProfile &hw, bool syncOptimizer) {
  OneStep step;
  ::rp::timing::RunLayout &layout = step.layout;
  Schedule &pass = step.pass;
  Pipeline one = pipeline;
  one.steps = 1;
  one.syncOptimizer = syncOptimizer;
  insertTransfers(one, layers, hw);
  one.schedule = recomputeSplit(one.schedule, one, layers);
  const std::vector<Command> &cmds = one.schedule.commands;
  // The optimizer is the layout's host work, not a task of the pass.
  std::vector<unsigned> index(cmds.size(), ~0u);
  pass.devices = one.schedule.devices;
  pass.gpusPerLink = one.schedule.gpusPerLink;
  pass.host = one.schedule.host;
  pass.jobMs = one.schedule.jobMs;
  layout.hostGBps = hw.optimizerGBps;
  for (auto [i, c] : llvm::enumerate(cmds)) {
    if (c.kind == CommandKind::optimizer) {
      layout.optimizerMs += c.ms;
      continue;
    }
    index[i] = pass.add(c);
  }
  for (Command &c : pass.commands)
    for (unsigned &w : c.waits)
      w = index[w];
  // Per layer with trainable weights a gate, updated in the order the
  // step reads them first (the trainer's), each its share of the update;
  // a command waits for the gates of its job's layers.
  std::vector<int> gateOf(layers.size(), -1);
  int64_t trainable = 0;
  for (const StageJob &j : pipeline.jobs)
    for (unsigned l = j.range.begin; l < j.range.end && l < layers.size(); ++l)
      if (layers[l].trainableElements > 0 && gateOf[l] < 0) {
        gateOf[l] = int(layout.order.size());
        layout.order.push_back(layout.order.size());
        layout.share.push_back(double(layers[l].trainableElements));
        trainable += layers[l].trainableElements;
      }
  for (double &share : layout.share)
    share /= double(trainable);
  layout.gatesOfTask.resize(pass.commands.size());
  for (auto [i, c] : llvm::enumerate(pass.commands)) {
    if (c.job < 0 || size_t(c.job) >= pipeline.jobs.size())
      continue;
    const StageJob &j = pipeline.jobs[c.job];
    for (unsigned l = j.range.begin; l < j.range.end && l < layers.size(); ++l)
      if (gateOf[l] >= 0)
        layout.gatesOfTask[i].push_back(1 + unsigned(gateOf[l]));
  }
  if (layout.order.empty())
    layout.gatesOfTask.clear();
  layout.sync = syncOptimizer;
  step.graph = timingGraphOf(pass);
  return step;
}

/// Runs timed (the predictions' whole runs, and the searches' candidates,
/// untilSteady), by every input timeSteps reads: one compile times the same
/// plan again and again (rp-partition's grain choice, rp-choose-loss-fusion
/// predicting the plan rp-partition chose, rp-insert-transfers and
/// rp-plan-memory timing it once more, each at the profile's fast and
/// slow ends), each a whole layout of up to ~100,000 tasks (Qwen3-235B-A22B
/// LoRA: most of its compile). The key is the bytes of the step's graph,
/// its layout and what the result is read from, so a hit returns what the
/// timing would: the same bits.
struct SteadyMemo {
  std::mutex mutex;
  std::unordered_map<std::string, SteadyState> kept;
  size_t keyBytes = 0;
  /// The keys of the searches' runs (untilSteady), under their own cap so
  /// that a long search never crowds out the predictions' runs.
  size_t searchKeyBytes = 0;
  unsigned reused = 0;
  /// Whole runs asked for: one pass in flight, two sharing one copy of
  /// the arenas, two on a copy each.
  unsigned askedOnePass = 0, askedSharing = 0, askedTwoCopies = 0;
  /// The self-check (setSteadyMemoCheck): hits timed again, and how many
  /// of those differed from what was kept.
  bool check = false;
  unsigned checked = 0, differ = 0;
};

SteadyMemo &steadyMemo() {
  static SteadyMemo memo;
  static bool fromEnv = [] {
    const char *env = std::getenv("RP_STEADY_MEMO_CHECK");
    memo.check = env && *env && std::string(env) != "0";
    return true;
  }();
  (void)fromEnv;
  return memo;
}

bool sameBits(const SteadyState &a, const SteadyState &b) {
  return a.stepMs == b.stepMs && a.firstStepMs == b.firstStepMs &&
         a.busyMs == b.busyMs && a.deviceBusyMs == b.deviceBusyMs &&
         a.shift == b.shift;
}

/// Keys past this many bytes in all are not kept (a 235B plan's key is
/// about a MiB; a compile times a few dozen whole runs).
constexpr size_t kSteadyMemoBytes = size_t(256) << 20;
/// The searches' runs' keys, apart (a 256-layer search times thousands).
constexpr size_t kSearchMemoBytes = size_t(64) << 20;

std::string steadyKey(const Pipeline &pipeline, const OneStep &step,
                      const ::rp::timing::RunLayout &layout, unsigned shift) {
  std::string key;
  auto put = [&](const auto &v) {
    key.append(reinterpret_cast<const char *>(&v), sizeof(v));
  };
  auto putAll = [&](const auto &vec) {
    put(vec.size());
    key.append(reinterpret_cast<const char *>(vec.data()),
               vec.size() * sizeof(vec[0]));
  };
  const ::rp::timing::Graph &g = step.graph;
  const ::rp::timing::HostModel &h = g.host;
  put(g.devices);
  put(g.gpusPerLink);
  put(g.handoffMs);
  for (double v :
       {h.h2dGBps, h.d2hGBps, h.uplinkGBps, h.dramGBps, h.copyDramFactor})
    put(v);
  put(h.interpreters);
  put(g.tasks.size());
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const ::rp::timing::Task &t = g.tasks[i];
    put(t.device);
    put(t.lane);
    for (double v : {t.ms, t.hostGBps, t.dispatchMs, t.issueMs})
      put(v);
    ::rp::timing::Graph::Waits w = g.waitsOf(i);
    put(w.size());
    key.append(reinterpret_cast<const char *>(w.begin()),
               w.size() * sizeof(unsigned));
  }
  for (unsigned v : {layout.steps, layout.accumulate, layout.slots,
                     layout.arenaCopies, layout.shift})
    put(v);
  put(layout.sync);
  put(layout.untilSteady);
  for (double v : {layout.prologueMs, layout.epilogueMs, layout.optimizerMs,
                   layout.hostGBps})
    put(v);
  putAll(layout.order);
  putAll(layout.share);
  put(layout.gatesOfTask.size());
  for (const std::vector<unsigned> &gates : layout.gatesOfTask)
    putAll(gates);
  // What the result is read from besides the run: the pass's compute
  // commands and the devices of the pipeline's jobs.
  put(shift);
  put(pipeline.devices);
  put(step.pass.commands.size());
  for (const Command &c : step.pass.commands) {
    put(c.kind);
    put(c.job);
    put(c.ms);
  }
  put(pipeline.jobs.size());
  for (const StageJob &j : pipeline.jobs)
    put(j.device);
  return key;
}

std::optional<SteadyState> layOutSteps(const Pipeline &pipeline,
                                       const OneStep &step,
                                       const ::rp::timing::RunLayout &layout,
                                       unsigned shift, std::string *stuck);

/// The steady state of `step` (of `pipeline`) run with `shift` devices
/// from one pass to the next.
std::optional<SteadyState> timeSteps(const Pipeline &pipeline,
                                     const OneStep &step, unsigned shift,
                                     unsigned steps, std::string *stuck,
                                     bool untilSteady = false) {
  ::rp::timing::RunLayout layout = step.layout;
  layout.steps = steps;
  // Every run stops once its period is read: what a whole run adds after
  // it (the last steps and the drain) is read by nothing here, and the
  // period is the same (a later step changes no earlier end), so the
  // predictions cost less and the memo keeps the same answers. How many
  // steps were laid out is not kept: it depends on the layout length a
  // thread's earlier runs chose (Continuous.cpp's hint), so a result that
  // held it would not be a function of the memo's key.
  layout.untilSteady = true;
  // One pass in flight: the trainer stages a pass after the one before has
  // finished (its epilogue run) and does not rename the devices. One copy
  // of the arenas for two: a device waits for its own part of the pass
  // before.
  layout.slots = std::max(1u, pipeline.passesInFlight);
  layout.shift = layout.slots >= 2 ? shift : 0;
  layout.arenaCopies = pipeline.arenaCopies;
  // A run timed before is read back (steadyMemo): a whole run (a
  // prediction), and a search's candidate (untilSteady) too. A search
  // times each of its candidates once, but the searches of one compile
  // lower the same graph more than once: a partition whose backward
  // stages hold one layer each is the same run at stage and at layer
  // grain (Qwen3-235B-A22B LoRA: the all-one-layer partitions, in both
  // grains' searches of the fused and of the unfused graph). The key is
  // the run's bytes, so a hit is the same bits whatever lowered it.
  std::string key = steadyKey(pipeline, step, layout, shift);
  SteadyMemo &memo = steadyMemo();
  std::optional<SteadyState> kept;
  {
    std::lock_guard<std::mutex> lock(memo.mutex);
    if (!untilSteady)
      ++(layout.slots < 2          ? memo.askedOnePass
         : layout.arenaCopies == 1 ? memo.askedSharing
                                   : memo.askedTwoCopies);
    if (auto it = memo.kept.find(key); it != memo.kept.end()) {
      ++memo.reused;
      if (!memo.check)
        return it->second;
      kept = it->second;
    }
  }
  std::optional<SteadyState> s =
      layOutSteps(pipeline, step, layout, shift, stuck);
  std::lock_guard<std::mutex> lock(memo.mutex);
  if (kept) {
    // The self-check: a key that leaves out a field the timing reads
    // returns another run's result, silently but for this.
    ++memo.checked;
    if (!s || !sameBits(*kept, *s)) {
      ++memo.differ;
      llvm::errs() << "rp: internal error: a whole-run timing read back from "
                      "the memo differs from timing it again (kept step "
                   << kept->stepMs << " ms, timed " << (s ? s->stepMs : -1.0)
                   << " ms): steadyKey (lib/Analysis/SteadyState.cpp) leaves "
                      "out a field the timing reads\n";
    }
    return s;
  }
  size_t &bytes = untilSteady ? memo.searchKeyBytes : memo.keyBytes;
  if (s &&
      bytes + key.size() <=
          (untilSteady ? kSearchMemoBytes : kSteadyMemoBytes) &&
      memo.kept.try_emplace(std::move(key), *s).second)
    bytes += key.size();
  return s;
}

/// `step` laid out as a run by the timing core and read as a steady state:
/// what timeSteps keeps.
std::optional<SteadyState> layOutSteps(const Pipeline &pipeline,
                                       const OneStep &step,
                                       const ::rp::timing::RunLayout &layout,
                                       unsigned shift, std::string *stuck) {
  const Schedule &pass = step.pass;
  unsigned g = pipeline.devices;
  size_t stuckAt = 0;
  std::optional<::rp::timing::ContinuousRun> run =
      ::rp::timing::layOutRun(step.graph, layout, &stuckAt);
  if (!run) {
    // Each pass alone orders (insertTransfers' schedule does), so a cycle
    // is in how the layout chains them: a bug.
    if (stuck)
      *stuck = "task " + std::to_string(stuckAt) + " of the continuous run";
    return std::nullopt;
  }

  SteadyState s;
  s.shift = shift;
  s.deviceBusyMs.assign(g, 0);
  // The end of step 0's last compute, and one step's compute.
  for (auto [i, c] : llvm::enumerate(pass.commands)) {
    if (!isCompute(c.kind) || c.job < 0)
      continue;
    s.firstStepMs = std::max(s.firstStepMs, run->times.end[i]);
    s.busyMs += c.ms;
  }
  // Per device, its compute per step over a whole rotation.
  std::vector<double> jobMs(pipeline.jobs.size(), 0);
  for (const Command &c : pass.commands)
    if (isCompute(c.kind) && c.job >= 0)
      jobMs[c.job] += c.ms;
  for (unsigned k = 0; k < run->rotation; ++k)
    for (unsigned n = 0; n < jobMs.size(); ++n)
      s.deviceBusyMs[(pipeline.jobs[n].device + k * layout.shift) % g] +=
          jobMs[n] / run->rotation;
  s.stepMs = run->stepMs;
  ::rp::timing::recycle(std::move(*run));
  return s;
}

} // namespace

unsigned mlir::rp::steadyStatesReused() { return wholeRunStats().reused; }

WholeRunStats mlir::rp::wholeRunStats() {
  SteadyMemo &memo = steadyMemo();
  std::lock_guard<std::mutex> lock(memo.mutex);
  WholeRunStats w;
  w.reused = memo.reused;
  w.askedOnePass = memo.askedOnePass;
  w.askedSharing = memo.askedSharing;
  w.askedTwoCopies = memo.askedTwoCopies;
  w.checking = memo.check;
  w.checked = memo.checked;
  w.differ = memo.differ;
  return w;
}

void mlir::rp::setSteadyMemoCheck(bool on) {
  SteadyMemo &memo = steadyMemo();
  std::lock_guard<std::mutex> lock(memo.mutex);
  memo.check = on;
}

void mlir::rp::staleSteadyMemoForTest() {
  SteadyMemo &memo = steadyMemo();
  std::lock_guard<std::mutex> lock(memo.mutex);
  for (auto &entry : memo.kept)
    entry.second.stepMs += 1;
}

std::optional<SteadyState>
mlir::rp::steadyState(const Pipeline &pipeline,
                      llvm::ArrayRef<LayerCost> layers,
                      const HardwareProfile &hw, bool syncOptimizer,
                      unsigned steps, std::string *stuck) {
  // One step with its transfers, laid out as a run by the timing core
  // (rp/timing/Continuous.h), the layout the sim device times too: its
  // passes on rotated devices, two in flight, the optimizer on the host
  // and per parameter a version gate.
  return timeSteps(pipeline, oneStep(pipeline, layers, hw, syncOptimizer),
                   pipeline.shiftPerPass(), steps, stuck);
}

std::optional<SteadyState>
mlir::rp::steadyStateInMemory(Pipeline pipeline, unsigned passes,
                              unsigned copies, llvm::ArrayRef<LayerCost> layers,
                              const HardwareProfile &hw, std::string *stuck) {
  pipeline.passesInFlight = passes;
  pipeline.arenaCopies = copies;
  return steadyState(pipeline, layers, hw, false, kSteadySteps, stuck);
}

std::optional<SteadyState>
mlir::rp::dispatchPasses(Pipeline &pipeline, llvm::ArrayRef<LayerCost> layers,
                         const HardwareProfile &hw, Dispatch dispatch,
                         bool syncOptimizer, std::string *stuck,
                         bool untilSteady) {
  unsigned g = pipeline.devices;
  if (pipeline.kind != ScheduleKind::roundRobin)
    return steadyState(pipeline, layers, hw, syncOptimizer, kSteadySteps,
                       stuck);
  unsigned modulo = pipeline.devicesPerStep() % g;
  pipeline.passShift = int(modulo);
  // The step's graph does not depend on the shift: built once, laid out
  // per shift.
  OneStep step = oneStep(pipeline, layers, hw, syncOptimizer);
  std::optional<SteadyState> best =
      timeSteps(pipeline, step, modulo, kSteadySteps, stuck, untilSteady);
  // A shift coprime to G walks every job over every device; the modulo one
  // that is not leaves the same jobs on the same devices pass after pass.
  if (!best || dispatch == Dispatch::modulo || std::gcd(modulo, g) == 1)
    return best;
  for (unsigned shift : {1u, g - 1}) {
    std::optional<SteadyState> s =
        timeSteps(pipeline, step, shift, kSteadySteps, stuck, untilSteady);
    if (s && s->stepMs < best->stepMs) {
      best = s;
      pipeline.passShift = int(shift);
    }
  }
  return best;
}
