//===- Continuous.cpp - one pass's graph laid out as a run ----------------===//

#include "rp/timing/Continuous.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

using namespace rp::timing;

double ContinuousRun::stepEnd(unsigned k) const {
  return times.end[epilogue[size_t(k) * accumulate + accumulate - 1]];
}

unsigned ContinuousRun::shiftOf(unsigned pass) const {
  return unsigned((uint64_t(pass) * shift) % std::max(graph.devices, 1u));
}

std::optional<ContinuousRun>
rp::timing::layOutRun(const Graph &pass, const RunLayout &o, size_t *stuck) {
  unsigned G = std::max(pass.devices, 1u);
  unsigned K = std::max(o.accumulate, 1u), L = std::max(o.slots, 1u);
  // A step moves the devices by K * shift; after `rotation` steps every
  // pass is back on the devices it started on, so the steady step is the
  // mean over a window of whole rotations after a warm-up of at least
  // rotation + 3 steps (async steps 0 and 1 wait for no update), followed
  // by `rotation` more (the next step's first jobs fill the window's end,
  // as they would in a longer run). In async mode step k waits for step
  // k-2's update, so where one pass is longer than its devices' share of
  // a step (one microbatch: its jobs are a chain) the steps pair up, a
  // short period and a long one (1,258 and 8,105 ms for Qwen3-1.7B at 32k
  // on 8 GPUs): the window is two rotations there, or the period read
  // would depend on the parity of the step count.
  unsigned perStep = unsigned((uint64_t(o.shift) * K) % G);
  unsigned rotation = perStep ? G / std::gcd(perStep, G) : 1;
  unsigned window = o.sync ? rotation : 2 * rotation;
  unsigned N = std::max(o.steps, o.sync ? 3 * rotation + 4 : 4 * rotation + 3);
  unsigned P = N * K;
  size_t C = pass.tasks.size();
  size_t commandTasks = size_t(P) * C;

  ContinuousRun run;
  run.steps = N;
  run.passes = P;
  run.accumulate = K;
  run.rotation = rotation;
  run.shift = o.shift % G;
  run.passTasks = C;

  // The last task of every (device, lane) in a pass: once they are done,
  // so is the pass.
  std::map<std::pair<unsigned, unsigned>, unsigned> lastOf;
  for (size_t i = 0; i < C; ++i)
    lastOf[{pass.tasks[i].device, unsigned(pass.tasks[i].lane)}] = unsigned(i);
  std::vector<unsigned> lasts;
  lasts.reserve(lastOf.size());
  for (auto &[lane, i] : lastOf)
    lasts.push_back(i);
  // One copy of the arenas shared by the passes: the first task of each
  // (device, lane) of pass p+1 waits for every last task of pass p that
  // ran on the same physical device.
  bool shared = o.arenaCopies == 1 && L >= 2;
  std::vector<std::vector<unsigned>> lastsOfDevice(G);
  std::map<std::pair<unsigned, unsigned>, unsigned> firstOf;
  for (auto &[lane, i] : lastOf)
    lastsOfDevice[lane.first % G].push_back(i);
  for (size_t i = C; i-- > 0;)
    firstOf[{pass.tasks[i].device, unsigned(pass.tasks[i].lane)}] = unsigned(i);
  std::vector<bool> isFirst(C, false);
  for (auto &[lane, i] : firstOf)
    isFirst[i] = true;

  // Host work, in the trainer's order: lane G is the thread running the
  // steps, G + 1 the optimizer's thread, G + 2 the gates.
  std::vector<Task> host;
  auto add = [&](unsigned lane, double ms, std::vector<unsigned> waits) {
    host.push_back({lane, Lane::host, ms, std::move(waits), o.hostGBps});
    return unsigned(commandTasks + host.size() - 1);
  };
  std::vector<unsigned> &pro = run.prologue, &epi = run.epilogue,
                        &opt = run.optimizer, &optFirst = run.optimizerFirst;
  pro.assign(P, 0);
  epi.assign(P, 0);
  opt.assign(N, 0);
  optFirst.assign(N, 0);
  // Step k's update runs parameter by parameter in the trainer's order,
  // each its share of the optimizer's time; written[k][g] is the task
  // after which gate g's parameter is new (one gate, the whole update,
  // without per-parameter gates).
  bool perParam = !o.order.empty();
  size_t gateCount = perParam ? o.order.size() : 1;
  std::vector<std::vector<unsigned>> written(N);
  auto update = [&](unsigned k, unsigned lane, unsigned after) {
    written[k].assign(gateCount, 0);
    if (!perParam) {
      opt[k] = optFirst[k] = written[k][0] = add(lane, o.optimizerMs, {after});
      return;
    }
    for (size_t n = 0; n < o.order.size(); ++n) {
      size_t i = o.order[n];
      double share = i < o.share.size() ? o.share[i] : 0;
      after = add(lane, o.optimizerMs * share, {after});
      if (n == 0)
        optFirst[k] = after;
      if (i < gateCount)
        written[k][i] = after;
    }
    opt[k] = after;
  };
  auto stage = [&](unsigned t) {
    if (t < P)
      pro[t] = add(G, o.prologueMs, {});
  };
  for (unsigned t = 0; t < std::min(L, P); ++t)
    stage(t);
  for (unsigned t = 0; t < P; ++t) {
    std::vector<unsigned> ends;
    ends.reserve(lasts.size());
    for (unsigned i : lasts)
      ends.push_back(unsigned(size_t(t) * C + i));
    epi[t] = add(G, o.epilogueMs, std::move(ends));
    unsigned k = t / K;
    if (t % K != K - 1) {
      stage(t + L);
      continue;
    }
    bool last = k + 1 == N;
    // The update in flight finishes before the next one starts.
    unsigned finished = epi[t];
    if (!o.sync && k >= 1)
      finished = add(G, 0, {opt[k - 1]});
    if (last) {
      // The run's end settles the weights: the update runs inline.
      update(k, G, finished);
    } else if (o.sync) {
      stage(t + L);
      update(k, G, finished);
    } else {
      // Passes of the next steps are staged before the update starts.
      stage(t + L);
      update(k, G + 1, finished);
    }
  }
  // A pass of step k computes with W_k (sync) or W_max(k-1,0) (async): a
  // task that reads parameters waits for their gates, which open once the
  // pass is staged and the update making that version has written them;
  // other tasks wait for the staging only (gate 0). Each gate has a lane
  // of its own, so gates of one pass never wait for each other, and a
  // parameter's gates open pass after pass.
  size_t perPass = gateCount + 1;
  unsigned gates = unsigned(commandTasks + host.size());
  for (unsigned t = 0; t < P; ++t) {
    unsigned k = t / K;
    unsigned version = o.sync ? k : (k ? k - 1 : 0);
    for (size_t g = 0; g < perPass; ++g) {
      std::vector<unsigned> waits{pro[t]};
      if (g > 0 && version >= 1)
        waits.push_back(written[version - 1][g - 1]);
      host.push_back({unsigned(G + 2 + g), Lane::host, 0, std::move(waits)});
    }
  }

  Graph &g = run.graph;
  g.devices = G;
  g.gpusPerLink = pass.gpusPerLink;
  g.host = pass.host;
  g.tasks.reserve(commandTasks + host.size());
  static const std::vector<unsigned> wholeUpdate{1}, stagingOnly{0};
  for (unsigned t = 0; t < P; ++t) {
    unsigned shift = run.shiftOf(t);
    for (size_t i = 0; i < C; ++i) {
      const Task &of = pass.tasks[i];
      Task task{(of.device + shift) % G, of.lane, of.ms, {}, of.hostGBps};
      const std::vector<unsigned> &gatesOf =
          o.gatesOfTask.empty() ? wholeUpdate
          : i < o.gatesOfTask.size() && !o.gatesOfTask[i].empty()
              ? o.gatesOfTask[i]
              : stagingOnly;
      task.waits.reserve(of.waits.size() + gatesOf.size());
      for (unsigned w : of.waits)
        task.waits.push_back(w + unsigned(size_t(t) * C));
      if (shared && t > 0 && isFirst[i]) {
        // The plan device pass t-1 ran on this physical device.
        unsigned before = (task.device + G - run.shiftOf(t - 1)) % G;
        for (unsigned w : lastsOfDevice[before])
          task.waits.push_back(w + unsigned(size_t(t - 1) * C));
      }
      for (unsigned gate : gatesOf)
        if (gate < perPass)
          task.waits.push_back(unsigned(gates + t * perPass + gate));
      g.tasks.push_back(std::move(task));
    }
  }
  for (Task &task : host)
    g.tasks.push_back(std::move(task));
  std::optional<Times> times = resolve(g, stuck);
  if (!times)
    return std::nullopt;
  run.times = std::move(*times);

  // Steady state: the mean period between step ends over the window of
  // `window` steps that ends `rotation` steps before the run's last.
  unsigned windowEnd = N - 1 - rotation;
  run.window = window;
  run.windowTo = run.stepEnd(windowEnd);
  run.windowFrom = run.stepEnd(windowEnd - window);
  run.stepMs = (run.windowTo - run.windowFrom) / window;
  return run;
}
