//===- StagedTrainer.cpp - training a staged plan pass by pass ------------===//
//
// Continuous execution (runtime/README.md): two passes in flight, each on
// its own buffer slot; the loop stages pass t+2 once pass t has been
// waited for and handled, and launches a step's update after its last pass.
//
//===----------------------------------------------------------------------===//

#include "StagedTrainer.h"
#include "Fences.h"
#include "GradientReducer.h"
#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/host/Kernels.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

using namespace rp::runtime;
using namespace rp::runtime::detail;

Status rp::runtime::detail::trainStaged(StagedContext c) {
  const Plan &plan = c.plan;
  HostForward &fwd = c.fwd;
  ThreadPool &pool = c.pool;
  const TrainOptions &options = c.options;
  std::vector<Param> &params = c.params;
  unsigned M = plan.microbatches, K = options.accumulate;
  uint32_t G = plan.devices;
  if (plan.buffers[c.lossOut].size() != int64_t(M))
    return invalidFormat("the staged plan's loss_sum output is " +
                         describeShape(plan.buffers[c.lossOut].shape) +
                         "; it holds one value per microbatch (" +
                         std::to_string(M) + ")");
  // Two passes in flight need two buffer slots. Loss scaling keeps them
  // full: a step's scale comes from the verdicts up to two steps before
  // (LossScale.h), which are in when its first pass is staged.
  unsigned S = options.continuous && fwd.getSlots() >= 2 ? 2 : 1;
  uint32_t shiftJobs = passShiftJobs(plan);
  bool rotate = S == 2 && fwd.rotates() && shiftJobs % G != 0;
  std::vector<uint32_t> buffers;
  buffers.reserve(params.size());
  for (const Param &p : params)
    buffers.push_back(p.buffer);
  std::optional<ParamFences> fences = planParamFences(plan, buffers);
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = fences ? fences->order[i] : i;
  auto stepGrad = [](Param &p, unsigned step) -> std::vector<float> & {
    return step % 2 ? p.optGrad : p.grad;
  };

  // With K > 1 passes a step, the gradients the epilogue sums across
  // stages (a parameter used by several stage jobs) are summed over the
  // step's passes per use, each use's downloads in pass order starting
  // from the first pass's (as a stage job's accumulator starts from its
  // first microbatch's), and the epilogue runs once, on the sums, after
  // the step's last pass: the adds of one pass of K microbatches, in the
  // same order. Several processes sum each use across the ranks too
  // before the epilogue (reducer items after the parameters), so a rank's
  // epilogue adds what one process of all the ranks' passes adds.
  EpilogueUses epUses;
  if (K > 1 || c.reducer)
    epUses = epilogueUses(plan, params, c.landsEarly);
  const std::vector<uint32_t> &uses = epUses.buffers;
  std::vector<std::vector<float>> useSums(uses.size());
  std::vector<bool> summedPerUse = epUses.summedPerUse;
  summedPerUse.resize(params.size(), false);

  // Per slot: the pass it runs (trainer index, from 0) and its step.
  struct PassInfo {
    uint64_t index = 0;
    unsigned step = 0;
  };
  std::vector<PassInfo> info(S);
  std::vector<std::vector<unsigned>> toLand(S, c.writers);
  std::vector<std::vector<char>> deferred(S,
                                          std::vector<char>(params.size(), 0));
  // Per parameter: the pass whose gradient is added next. A pass's
  // gradient lands while the pass before may still run; sums go in pass
  // order, so a gradient that lands early waits for its predecessor's.
  // Written by the landing thread, read by this one.
  std::vector<std::atomic<uint64_t>> nextAdd(params.size());
  for (std::atomic<uint64_t> &n : nextAdd)
    n = 0;
  Trace *trace = options.trace;
  // Several processes: a step's gradient of a parameter goes to the
  // reducer once its last pass is added.
  auto added = [&](size_t i, const PassInfo &pass) {
    // A gradient the epilogue makes from uses summed across the ranks is
    // whole already.
    if (c.reducer && pass.index % K == K - 1 && !summedPerUse[i]) {
      std::vector<float> &g = stepGrad(params[i], pass.step);
      c.reducer->ready(pass.step, i, g.data(), g.size());
    }
  };
  auto onLanded = [&](size_t job, uint64_t pass) -> Status {
    int64_t start = trace ? trace->now() : 0;
    unsigned slot = unsigned(pass % S);
    for (size_t i : c.landsWith[job]) {
      if (--toLand[slot][i] != 0)
        continue;
      if (nextAdd[i] != info[slot].index) {
        deferred[slot][i] = 1;
        continue;
      }
      Param &p = params[i];
      if (Status s = c.addGradient(fwd, p, stepGrad(p, info[slot].step), slot);
          s.failed())
        return s;
      added(i, info[slot]);
      ++nextAdd[i];
      unsigned other = (slot + 1) % S;
      if (other != slot && deferred[other][i] &&
          info[other].index == nextAdd[i]) {
        deferred[other][i] = 0;
        if (Status s =
                c.addGradient(fwd, p, stepGrad(p, info[other].step), other);
            s.failed())
          return s;
        added(i, info[other]);
        ++nextAdd[i];
      }
    }
    if (trace)
      trace->addHostSpan("gradients", info[slot].step, start, trace->now());
    return Status::ok();
  };
  PipelineOptions po;
  po.progressWindow = std::chrono::milliseconds(options.watchdogMs);
  po.trace = trace;
  po.slots = S;
  po.rotate = rotate;
  for (size_t j = 0; j < plan.jobs.size(); ++j)
    if (!c.landsWith[j].empty())
      po.landings.push_back(j);
  po.onLanded = onLanded;
  // Gates: one per parameter (its uploads wait for its weight version), or
  // one for every job when a prologue call reads several parameters.
  if (fences) {
    po.gates = uint32_t(params.size());
    po.gatesOf = fences->gatesOf;
  } else {
    po.gates = 1;
    po.gatesOf.assign(plan.jobs.size(), {0});
  }
  auto created = PipelineExecutor::create(plan, fwd, po);
  if (!created)
    return created.getStatus();
  PipelineExecutor &pipeline = **created;

  // Weight versions: pass of step k computes with W_k (sync) or
  // W_max(k-1,0) (async). They come from the master weights (`masterVersion`
  // once no update is in flight), from the weights the run started with
  // (`stash`), or from the update that makes them, which writes each
  // parameter into the waiting passes' slots and opens its gate.
  auto versionOf = [&](unsigned step) -> int64_t {
    return options.sync ? step : (step ? step - 1 : 0);
  };
  int64_t masterVersion = c.first, inflightVersion = -1;
  int64_t stashVersion = versionOf(c.first);
  std::vector<std::vector<float>> stash;
  for (Param &p : params) {
    TensorRef w = fwd.buffer(p.buffer);
    stash.emplace_back(w.as<float>(), w.as<float>() + w.size());
  }
  std::vector<int64_t> slotVersion(S, -1);
  // A sharded master in async mode: the whole W_k is nowhere until step k's
  // update gathers it from the ranks' chunks, before updating them, into
  // the passes waiting for it (docs/multi-box.md, ZeRO-1).
  bool gatherFirst = c.shardedMaster && !options.sync;
  // A sharded master in sync mode (no pass in flight needs an older
  // version): the slot whose parameter buffers hold `masterVersion`.
  unsigned homeSlot = 0;
  auto masterWhole = [&](size_t i) -> const float * {
    return c.shardedMaster ? static_cast<const float *>(
                                 fwd.buffer(params[i].buffer, homeSlot).data)
                           : params[i].master.data();
  };
  std::map<int64_t, std::vector<std::pair<unsigned, uint64_t>>> waitingFor;
  auto openAll = [&](uint64_t pass) {
    for (uint32_t g = 0; g < po.gates; ++g)
      pipeline.openGate(g, pass);
  };
  // Writes parameter i's weights `src` into `slot` for `pass`, makes its
  // compute-dtype copy and opens its gate (even after a failure, so the
  // pass cannot stall; the failure is returned).
  auto writeParam = [&](size_t i, const float *src, unsigned slot,
                        uint64_t pass) -> Status {
    Param &p = params[i];
    void *dst = fwd.buffer(p.buffer, slot).data;
    if (dst != src)
      std::memcpy(dst, src, p.size * sizeof(float));
    Status s;
    if (fences && !fences->prologueCalls[i].empty())
      s = fwd.runProgramCalls(pool, uint32_t(plan.prologue),
                              fences->prologueCalls[i], slot);
    if (fences)
      pipeline.openGate(uint32_t(i), pass);
    return s;
  };
  // After every parameter: without fences the whole prologue, then the gate.
  auto finishWrite = [&](unsigned slot, uint64_t pass) -> Status {
    if (fences)
      return Status::ok();
    Status s = plan.prologue >= 0
                   ? fwd.runProgram(pool, uint32_t(plan.prologue), slot)
                   : Status::ok();
    pipeline.openGate(0, pass);
    return s;
  };
  auto writeAll = [&](const std::function<const float *(size_t)> &src,
                      unsigned slot, uint64_t pass) -> Status {
    Status result;
    for (size_t i : order)
      if (Status s = writeParam(i, src(i), slot, pass); result.isOk())
        result = s;
    if (Status s = finishWrite(slot, pass); result.isOk())
      result = s;
    return result;
  };

  // With `gatherFirst`: parameter i's W_k (step k's, before its update)
  // gathered into the first target's slot and copied into the others' and
  // into `whole`. The targets' gates open even after a failure (`collect`
  // false: an earlier one; no collective then).
  const std::vector<std::pair<unsigned, uint64_t>> noTargets;
  auto gatherBefore =
      [&](unsigned step, size_t i,
          const std::vector<std::pair<unsigned, uint64_t>> &targets,
          std::vector<std::vector<float>> *whole, bool collect) -> Status {
    Param &p = params[i];
    float *dst =
        targets.empty()
            ? (*whole)[i].data()
            : static_cast<float *>(fwd.buffer(p.buffer, targets[0].first).data);
    Status result = collect ? c.gatherParam(step, i, dst) : Status::ok();
    for (auto [slot, pass] : targets)
      if (Status s = writeParam(i, dst, slot, pass); result.isOk())
        result = s;
    if (whole && !targets.empty())
      std::memcpy((*whole)[i].data(), dst, p.size * sizeof(float));
    return result;
  };
  // Step k's update: parameter by parameter in the order the next passes
  // read them, each followed by its copies into the slots of the passes
  // waiting for W_(k+1) (with `gatherFirst`, preceded by the gather of W_k
  // into those waiting for it and into `whole`, where given). It empties
  // step k's gradient sums for step k+2.
  auto update = [&](unsigned step, unsigned number, double unscale, bool apply,
                    const std::vector<std::pair<unsigned, uint64_t>> &targets,
                    std::vector<std::vector<float>> *whole) -> Status {
    int64_t start = trace ? trace->now() : 0;
    std::vector<ParamSlot> slots;
    slots.reserve(params.size());
    for (Param &p : params)
      slots.push_back({nullptr, stepGrad(p, step).data(), nullptr, nullptr,
                       int64_t(p.size)});
    double gradScale = unscale;
    double gradNorm = apply && (options.clipGradNorm > 0 || options.onUpdate)
                          ? globalGradNorm(pool, slots) * unscale
                          : 0.0;
    if (apply && options.clipGradNorm > 0)
      gradScale = unscale * clipScale(gradNorm, options.clipGradNorm);
    AdamWConfig adamw = options.adamw;
    SGDConfig sgd = options.sgdConfig;
    adamw.lr = sgd.lr = options.lrAt(step);
    Status result;
    for (size_t i : order) {
      Param &p = params[i];
      if (gatherFirst && (whole || !targets.empty()))
        if (Status s = gatherBefore(step, i, targets, whole, result.isOk());
            result.isOk())
          result = s;
      // Its shard (all of it unless the optimizer is sharded); the
      // clipping norm above is the whole gradient's.
      ParamSlot shard = shardSlot(p, stepGrad(p, step));
      if (apply && result.isOk())
        result = options.sgd
                     ? sgdStep(pool, sgd, number, {shard}, gradScale)
                     : adamwStep(pool, adamw, number, {shard}, gradScale);
      if (apply && c.gatherParam && !gatherFirst && result.isOk())
        result = c.gatherParam(
            step, i,
            c.shardedMaster
                ? static_cast<float *>(fwd.buffer(p.buffer, homeSlot).data)
                : p.master.data());
      std::vector<float> &g = stepGrad(p, step);
      std::fill(g.begin(), g.end(), 0.0f);
      for (auto [slot, pass] : gatherFirst ? noTargets : targets)
        if (Status s = writeParam(i, masterWhole(i), slot, pass); result.isOk())
          result = s;
    }
    for (auto [slot, pass] : targets)
      if (Status s = finishWrite(slot, pass); result.isOk())
        result = s;
    if (apply && options.onUpdate && result.isOk())
      options.onUpdate({step, adamw.lr, gradNorm});
    if (trace)
      trace->addHostSpan("optimizer", step, start, trace->now());
    return result;
  };
  ThreadPool optimizerThread(2);
  PendingOptimizer pending;
  auto finishUpdate = [&]() -> Status {
    if (inflightVersion < 0)
      return Status::ok();
    Status s = pending.finish();
    masterVersion = inflightVersion;
    inflightVersion = -1;
    return s;
  };

  // Per step parity: the data position before its batches, its loss scale,
  // label count, loss sum and where its host span starts.
  uint64_t positions[2] = {0, 0};
  double lossScales[2] = {1, 1}, lossSums[2] = {0, 0};
  int64_t counts[2] = {1, 1};
  NpyArray scaleArrays[2];
  int64_t stepStarts[2] = {0, 0};
  unsigned total = options.steps * K;
  std::vector<uint64_t> execOf(total, 0);
  unsigned submitted = 0;
  // Stages trainer pass t into its slot (inputs, weights) and submits it.
  auto stage = [&](unsigned t) -> Status {
    unsigned step = c.first + t / K, a = t % K;
    uint64_t pass = pipeline.nextStepNumber();
    unsigned slot = unsigned(pass % S);
    if (a == 0) {
      positions[step % 2] = c.dataPosition();
      if (Status s = c.readBatch(); s.failed())
        return s;
      if (c.fillDropoutKey)
        c.fillDropoutKey(step);
      if (Status s = c.stepScale(step, lossScales[step % 2],
                                 scaleArrays[step % 2], counts[step % 2]);
          s.failed())
        return s;
      lossSums[step % 2] = 0;
      stepStarts[step % 2] = trace ? trace->now() : 0;
    }
    info[slot] = {t, step};
    toLand[slot] = c.writers;
    for (auto &[name, array] : c.global)
      if (Status s =
              fwd.setInput(name, K == 1 ? array : slice(array, a, K), slot);
          s.failed())
        return s;
    if (Status s = fwd.setInput("loss_scale", scaleArrays[step % 2], slot);
        s.failed())
      return s;
    int64_t v = versionOf(step);
    Status written;
    if (slotVersion[slot] == v) {
      // The slot's weights and their compute copies are the ones wanted;
      // without fences the prologue may read the new inputs.
      written = finishWrite(slot, pass);
      openAll(pass);
    } else if (!stash.empty() && stashVersion == v) {
      written = writeAll([&](size_t i) { return stash[i].data(); }, slot, pass);
    } else {
      if (inflightVersion >= 0 && v <= inflightVersion)
        if (Status s = finishUpdate(); s.failed())
          return s;
      if (inflightVersion < 0 && masterVersion == v && !gatherFirst) {
        written = writeAll(masterWhole, slot, pass);
      } else if (v > std::max(masterVersion, inflightVersion) ||
                 (gatherFirst && v == masterVersion)) {
        // Made by step v-1's update, or with `gatherFirst` gathered by
        // step v's: the pass waits for it.
        waitingFor[v].emplace_back(slot, pass);
      } else if (S == 2 && slotVersion[1 - slot] == v) {
        written = writeAll(
            [&](size_t i) {
              return fwd.buffer(params[i].buffer, 1 - slot).as<float>();
            },
            slot, pass);
      } else {
        return internalError("no copy of weight version " + std::to_string(v) +
                             " for step " + std::to_string(step) +
                             "; report it");
      }
    }
    if (written.failed())
      return written;
    slotVersion[slot] = v;
    // The stash is needed only while a step may compute with its version.
    if (!stash.empty() && v > stashVersion)
      stash.clear();
    execOf[t] = pipeline.submitPass(
        rotate ? uint32_t((uint64_t(t) * shiftJobs) % G) : 0, step);
    return Status::ok();
  };
  auto submitUpTo = [&](unsigned limit) -> Status {
    for (; submitted < total && submitted < limit; ++submitted)
      if (Status s = stage(submitted); s.failed())
        return s;
    return Status::ok();
  };
  // After step `done - 1`'s update: the weights step `done` computes with
  // go to slot 0's parameter buffers (unless the pass in flight there has
  // them already), where a checkpoint and the caller find them.
  auto settle = [&](unsigned t, const std::vector<std::vector<float>> &before) {
    bool inUse = t + 1 < submitted && execOf[t + 1] % S == 0;
    if (inUse)
      return;
    for (size_t i = 0; i < params.size(); ++i) {
      const float *w = options.sync ? masterWhole(i) : before[i].data();
      void *dst = fwd.buffer(params[i].buffer).data;
      if (dst != w)
        std::memcpy(dst, w, params[i].size * sizeof(float));
    }
    slotVersion[0] = -1;
  };
  // Async: the weights before the update are the next step's; they stay
  // at hand as the stash (the master weights have moved on).
  auto keepBefore = [&](unsigned done, std::vector<std::vector<float>> before) {
    if (options.sync)
      return;
    stash = std::move(before);
    stashVersion = versionOf(done);
  };

  // No step to run: the checkpoint holds what the run started with.
  if (total == 0)
    return options.save.empty() ? Status::ok()
                                : c.saveCheckpoint(c.first, c.dataPosition());
  if (options.onStart)
    options.onStart();
  if (Status s = submitUpTo(S); s.failed())
    return s;
  for (unsigned t = 0; t < total; ++t) {
    uint64_t pass = execOf[t];
    if (Status s = pipeline.waitPass(pass); s.failed())
      return s;
    unsigned slot = unsigned(pass % S);
    unsigned step = c.first + t / K;
    bool stepEnds = t % K == K - 1;
    for (size_t u = 0; u < uses.size(); ++u) {
      TensorRef use = fwd.buffer(uses[u], slot);
      float *v = use.as<float>();
      // One pass a step: the use is its sum, summed across the ranks where
      // it lies.
      if (K == 1) {
        c.reducer->ready(step, params.size() + u, v, use.size());
        continue;
      }
      std::vector<float> &sum = useSums[u];
      if (t % K == 0)
        sum.assign(v, v + use.size());
      else
        for (size_t e = 0; e < sum.size(); ++e)
          sum[e] += v[e];
      if (stepEnds && c.reducer)
        c.reducer->ready(step, params.size() + u, sum.data(), sum.size());
    }
    // The epilogue waits for its uses' sums across the ranks.
    for (size_t u = 0; stepEnds && u < uses.size(); ++u) {
      if (c.reducer)
        if (Status s = c.reducer->waitSummed(step, params.size() + u);
            s.failed())
          return s;
      TensorRef use = fwd.buffer(uses[u], slot);
      if (K > 1)
        std::memcpy(use.data, useSums[u].data(), use.bytes());
    }
    if (plan.epilogue >= 0 && (uses.empty() || stepEnds)) {
      int64_t start = trace ? trace->now() : 0;
      Status s = fwd.runProgram(pool, uint32_t(plan.epilogue), slot);
      if (trace)
        trace->addHostSpan("epilogue", step, start, trace->now());
      if (s.failed())
        return Status(s.getCode(), "the epilogue: " + s.getMessage());
    }
    TensorRef loss = fwd.buffer(c.lossOut, slot);
    std::vector<double> l(M);
    TensorRef l64{l.data(), DType::f64, loss.shape};
    if (Status s = host::cast(pool, loss, l64); s.failed())
      return s;
    for (double v : l)
      lossSums[step % 2] += v;
    for (size_t i = 0; i < params.size(); ++i) {
      if (c.landsEarly[i]) {
        // The next pass may have landed too, not an earlier one.
        if (nextAdd[i] < uint64_t(t) + 1)
          return internalError("the gradient of '" + params[i].name +
                               "' did not land in pass order; report it");
        continue;
      }
      if (summedPerUse[i] && !stepEnds)
        continue;
      if (Status s =
              c.addGradient(fwd, params[i], stepGrad(params[i], step), slot);
          s.failed())
        return s;
      added(i, {t, step});
    }
    if (t % K != K - 1) {
      if (Status s = submitUpTo(t + 1 + S); s.failed())
        return s;
      continue;
    }
    // The step's last pass: its loss, then its update.
    if (c.reducer)
      if (Status s = c.reducer->finishStep(step, lossSums[step % 2]);
          s.failed())
        return s;
    if (options.onLabelCount)
      options.onLabelCount(step, counts[step % 2]);
    c.onStep(step, lossSums[step % 2] / double(counts[step % 2]));
    std::vector<std::vector<float> *> grads;
    grads.reserve(params.size());
    for (Param &p : params)
      grads.push_back(&stepGrad(p, step));
    if (step == c.first && !options.dumpGrads.empty())
      if (Status s = c.dumpGradients(grads); s.failed())
        return s;
    bool apply = c.decideApply(step, grads);
    unsigned number = c.updates + 1;
    c.updates += apply;
    double unscale = 1.0 / lossScales[step % 2];
    if (Status s = finishUpdate(); s.failed())
      return s;
    unsigned done = step + 1;
    bool last = done == c.first + options.steps;
    bool save = !options.save.empty() &&
                (last || (options.saveEvery &&
                          (done - c.first) % options.saveEvery == 0));
    // A checkpoint and the run's end settle the weights: no pass is staged
    // past them before the update is done.
    bool settling = save || last;
    std::vector<std::vector<float>> before;
    if (settling && !options.sync)
      for (Param &p : params)
        before.push_back(gatherFirst ? std::vector<float>(p.size) : p.master);
    // Passes of the next steps are staged before the update starts, so it
    // can write their weights as it goes.
    if (!settling)
      if (Status s = submitUpTo(t + 1 + S); s.failed())
        return s;
    std::vector<std::pair<unsigned, uint64_t>> targets;
    if (auto it = waitingFor.find(gatherFirst ? step : done);
        it != waitingFor.end()) {
      targets = std::move(it->second);
      waitingFor.erase(it);
    }
    // A sharded master's new weights (sync) are gathered into the first
    // waiting pass's slot, or with none waiting into slot 0, whose compute
    // copies are then stale. Set here, before an overlapped update starts.
    if (apply && c.shardedMaster && !gatherFirst) {
      homeSlot = targets.empty() ? 0 : targets[0].first;
      if (targets.empty())
        slotVersion[0] = -1;
    }
    // Overlapped with the next step's passes. A sharded optimizer's gathers
    // take the step's window of the reducer (the next step's sums wait for
    // it), so every rank issues them in one order; the window closes when
    // the update ends, failed or not.
    if (options.overlapOptimizer && !settling) {
      inflightVersion = done;
      pending.task = optimizerThread.submit([&pending, &update, &c, step,
                                             number, unscale, apply, targets] {
        pending.status = update(step, number, unscale, apply, targets, nullptr);
        if (c.releaseStep)
          c.releaseStep(step);
      });
    } else {
      Status s = update(step, number, unscale, apply, targets,
                        gatherFirst && settling ? &before : nullptr);
      masterVersion = done;
      if (s.failed())
        return s;
      if (c.releaseStep && !save)
        c.releaseStep(step);
    }
    if (trace)
      trace->addHostSpan("step", step, stepStarts[step % 2], trace->now());
    if (!settling)
      continue;
    settle(t, before);
    keepBefore(done, std::move(before));
    // The data position of step `done`: read already if its first pass is
    // staged.
    uint64_t position =
        t + 1 < submitted ? positions[done % 2] : c.dataPosition();
    if (save)
      if (Status s = c.saveCheckpoint(done, position); s.failed())
        return s;
    if (c.releaseStep && save)
      c.releaseStep(step);
    if (Status s = submitUpTo(t + 1 + S); s.failed())
      return s;
  }
  return finishUpdate();
}
