//===- Trainer.cpp - training steps on one host device --------------------===//
//
// train(): the parameters, the steps' shared arithmetic (loss scale,
// skipped steps, the optimizer call) and the step loop of unstaged plans;
// staged plans run in StagedTrainer.cpp, the inputs come from TrainData.cpp
// and checkpoints go through TrainCheckpoint.cpp.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Trainer.h"
#include "GradientReducer.h"
#include "StagedTrainer.h"
#include "TrainerParts.h"
#include "rp/runtime/Checkpoint.h"
#include "rp/runtime/Safetensors.h"
#include "rp/runtime/host/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

using namespace rp::runtime;

/// Labels equal to this are ignored (DESIGN.md, Loss).
static constexpr int64_t kIgnoreIndex = -100;

uint64_t rp::runtime::trainerHostBytes(const Plan &plan,
                                       bool overlapOptimizer) {
  // Per trained f32 parameter: the master weights, the gradient sum, the
  // second sum an overlapped optimizer or a staged plan reads while the
  // next step sums into the first, AdamW's two moments, and a staged
  // plan's stash of the weights its passes in flight compute with.
  std::set<std::string> trained;
  for (const BindingDesc &o : plan.outputs)
    if (o.name.rfind("grad:", 0) == 0)
      trained.insert(o.name.substr(5));
  unsigned floats = 4 + (overlapOptimizer || plan.staged) + plan.staged;
  uint64_t bytes = 0;
  for (const BufferDesc &b : plan.buffers)
    if (b.weight && b.dtype == DType::f32 && trained.erase(b.weight->param))
      bytes += uint64_t(numElements(b.shape)) * floats * sizeof(float);
  return bytes;
}

bool rp::runtime::isTrainingPlan(const Plan &plan) {
  for (const BindingDesc &in : plan.inputs)
    if (in.name == "loss_scale")
      return true;
  return false;
}

double rp::runtime::LrSchedule::factor(unsigned step) const {
  // transformers' get_{constant,linear,cosine}_schedule_with_warmup.
  if (step < warmup)
    return double(step) / double(std::max(1u, warmup));
  if (kind == constant)
    return 1.0;
  double span = double(std::max(1u, total > warmup ? total - warmup : 0u));
  double progress = double(step - warmup) / span;
  if (kind == linear)
    return std::max(0.0, 1.0 - progress);
  return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
}

using namespace rp::runtime::detail;

Status rp::runtime::train(const Plan &plan, HostForward &fwd, ThreadPool &pool,
                          const TrainOptions &options,
                          const std::function<void(unsigned, double)> &onStep) {
  unsigned M = plan.microbatches;
  unsigned K = options.accumulate;
  if (K < 1)
    return invalidArgument("--accumulate must be at least 1 (passes of " +
                           std::to_string(M) +
                           " microbatches per optimizer step)");
  // Before any work: a save must not replace what is not a checkpoint.
  // Several processes: rank 0 alone writes checkpoints.
  bool saving =
      !options.save.empty() && (!options.comm || !options.comm->rank());
  unsigned world = options.comm ? unsigned(options.comm->size()) : 1;
  bool sharded = options.shardOptimizer && world > 1;
  // ZeRO-1 shards the master weights too (in a staged plan's async run,
  // each step gathers the version its next step needs before its update).
  bool shardMaster = sharded;
  if (saving)
    if (Status s = checkSaveTarget(options.save); s.failed())
      return s;
  TrainInputs inputs;
  if (Status s = loadTrainInputs(plan, options, inputs); s.failed())
    return s;
  std::map<std::string, NpyArray> &global = inputs.global;
  const BindingDesc *labels = inputs.labels;
  std::optional<TokenStream> &stream = inputs.stream;
  std::string &tokenInput = inputs.tokenInput;
  int64_t tokenLimit = inputs.tokenLimit;
  if (stream && !inputs.segmentInput.empty())
    stream->segmentsOut = &global[inputs.segmentInput];
  // Token-weighted mean over the global batch: one count for all
  // microbatches. An output loss counts 1 per microbatch (the step loss is
  // the mean of the microbatches' losses).
  auto countLabels = [&]() -> int64_t {
    if (!labels)
      return int64_t(M) * K;
    // Several processes: the count is the global batch's, over every
    // rank's labels. Labels from --data are tokens, never the ignore
    // index: each rank's count is its rows', the same on every rank.
    if (stream && stream->isDataset)
      return stream->lastCount;
    if (world > 1 && stream)
      return numElements(global["labels"].shape) * int64_t(world);
    const NpyArray &l = world > 1 ? inputs.allLabels : global["labels"];
    int64_t n = 0;
    for (int64_t i = 0; i < numElements(l.shape); ++i) {
      int64_t v = l.dtype == DType::i64
                      ? reinterpret_cast<const int64_t *>(l.data.data())[i]
                      : reinterpret_cast<const int32_t *>(l.data.data())[i];
      n += v != kIgnoreIndex;
    }
    return n;
  };

  // Parameters, their gradient outputs, master copies and optimizer state.
  std::vector<Param> params;
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    const std::string &n = plan.outputs[o].name;
    if (n.rfind("grad:", 0) != 0)
      continue;
    std::string pname = n.substr(5);
    for (uint32_t b = 0; b < plan.buffers.size(); ++b) {
      const BufferDesc &d = plan.buffers[b];
      if (!d.weight || d.weight->param != pname)
        continue;
      if (d.dtype != DType::f32)
        return unsupported("parameter '" + pname + "' is " +
                           dtypeName(d.dtype) +
                           "; master weights are f32 parameters");
      Param p;
      p.name = pname;
      p.buffer = b;
      p.gradOutput = plan.outputs[o].buffer;
      TensorRef w = fwd.buffer(b);
      p.size = size_t(w.size());
      setShard(p, p.size, sharded ? options.comm->rank() : 0,
               sharded ? world : 1);
      p.masterBegin = shardMaster ? p.shardBegin : 0;
      p.master.assign(w.as<float>() + p.masterBegin,
                      w.as<float>() + (shardMaster ? p.shardEnd : p.size));
      p.grad.assign(p.size, 0.0f);
      p.state0.assign(p.shardEnd - p.shardBegin, 0.0f);
      p.state1.assign(p.shardEnd - p.shardBegin, 0.0f);
      if (options.overlapOptimizer || plan.staged)
        p.optGrad.assign(w.size(), 0.0f);
      params.push_back(std::move(p));
      break;
    }
  }
  // What the trainer holds beside the plan's buffers, as allocated (the
  // staged trainer's stash of the weights a pass in flight computes with
  // is allocated as it starts): trainerHostBytes is this count before the
  // run, which rp-run holds to the machine's memory.
  if (options.onHostBytes) {
    uint64_t floats = 0;
    for (const Param &p : params)
      floats += p.master.size() + p.grad.size() + p.optGrad.size() +
                p.state0.size() + p.state1.size() + (plan.staged ? p.size : 0);
    options.onHostBytes(floats * sizeof(float));
  }
  std::optional<uint32_t> lossOut;
  for (const BindingDesc &o : plan.outputs)
    if (o.name == "loss_sum")
      lossOut = o.buffer;
  if (!lossOut)
    return invalidFormat("the training plan has no loss_sum output");
  // Staged plans: a parameter's gradient is added into its sum as soon as
  // the downloads that write its gradient output have all landed, while
  // the pass goes on; only gradients the epilogue sums wait for the pass.
  std::vector<std::vector<size_t>> landsWith(plan.jobs.size());
  std::vector<unsigned> writers(params.size(), 0);
  std::vector<bool> landsEarly(params.size(), false);
  if (plan.staged) {
    std::vector<bool> summedAfter(plan.buffers.size(), false);
    if (plan.epilogue >= 0)
      for (const KernelCallDesc &c : plan.programs[plan.epilogue].calls)
        for (uint32_t b : c.outputs)
          summedAfter[b] = true;
    for (size_t i = 0; i < params.size(); ++i) {
      if (summedAfter[params[i].gradOutput])
        continue;
      for (size_t j = 0; j < plan.jobs.size(); ++j)
        for (const CopyDesc &c : plan.jobs[j].copies)
          if (c.dst == params[i].gradOutput &&
              (landsWith[j].empty() || landsWith[j].back() != i)) {
            landsWith[j].push_back(i);
            ++writers[i];
          }
      landsEarly[i] = writers[i] > 0;
    }
  }
  // Adds parameter `p`'s gradient output (of buffer slot `slot`) onto the
  // sum `into`, in f32.
  auto addGradient = [&pool](const HostForward &fwd, Param &p,
                             std::vector<float> &into,
                             unsigned slot = 0) -> Status {
    TensorRef g = fwd.buffer(p.gradOutput, slot);
    std::vector<float> g32(g.size());
    TensorRef dst{g32.data(), DType::f32, g.shape};
    if (Status s = host::cast(pool, g, dst); s.failed())
      return s;
    for (size_t i = 0; i < g32.size(); ++i)
      into[i] += g32[i];
    return Status::ok();
  };

  // Plans that compute in f16: dynamic loss scaling.
  bool scaling = false;
  for (const BufferDesc &b : plan.buffers)
    scaling |= options.lossScaling && b.dtype == DType::f16;
  LossScaler scaler(options.lossScale);
  // A failed collective of the skip decision (decideApply), reported by
  // the next step.
  Status applyFailure;
  unsigned updates = 0;
  unsigned first = 0;
  if (!options.resume.empty()) {
    auto state =
        loadCheckpoint(options.resume, params, fwd, options.allowNonfinite);
    if (!state)
      return state.getStatus();
    if (state->sync != options.sync || state->sgd != options.sgd)
      return invalidArgument(
          "checkpoint '" + options.resume +
          "' was made "
          "with --" +
          (state->sync ? "sync" : "async") + " and --optimizer " +
          (state->sgd ? "sgd" : "adamw") + "; resume with the same");
    // Another seed would draw other dropout masks (and synthetic
    // inputs) from here on than the uninterrupted run.
    if (state->seed && *state->seed != options.seed)
      return invalidArgument(
          "checkpoint '" + options.resume + "' was made with --seed " +
          std::to_string(*state->seed) + " (LoRA dropout's masks), not " +
          std::to_string(options.seed) + "; resume with --seed " +
          std::to_string(*state->seed) +
          ", or leave --seed out to take the checkpoint's");
    // Another order of the rows than the uninterrupted run's.
    if (state->shuffleSeed &&
        (!options.shuffle || *state->shuffleSeed != options.shuffleSeed))
      return invalidArgument(
          "checkpoint '" + options.resume + "' was made with --shuffle-seed " +
          std::to_string(*state->shuffleSeed) +
          (options.shuffle ? ", not " + std::to_string(options.shuffleSeed)
                           : ", not in file order") +
          "; resume with the same, or leave --shuffle-seed out to take the "
          "checkpoint's");
    first = state->step;
    updates = state->updates;
    if (scaling && state->lossScale > 0)
      scaler.restore(first, state->lossScale,
                     state->stepLossScale > 0 ? state->stepLossScale
                                              : state->lossScale,
                     state->goodSteps);
    if (stream) {
      // A dataset's position counts rows across epochs: any is valid.
      if (!stream->isDataset && state->dataPosition > stream->count)
        return invalidArgument(
            "checkpoint '" + options.resume + "' continues the data at token " +
            std::to_string(state->dataPosition) + ", past the end of '" +
            options.data + "' (" + std::to_string(stream->count) +
            " tokens); resume with the data file it was trained on");
      stream->position = state->dataPosition;
    }
  }
  Trace *trace = options.trace;
  if (trace)
    trace->setNextStep(first);
  // Step k's update (the optimizer's update number `update`, from 1) of
  // the master weights and optimizer state from the gradients in `slots`,
  // which are `1 / unscale` times the loss's.
  // `norm` holds the whole gradients (clipping's norm), `slots` the shards
  // to update (the same unless the optimizer is sharded).
  auto optimize = [&pool, &options, trace](unsigned step, unsigned update,
                                           double unscale,
                                           const std::vector<ParamSlot> &slots,
                                           const std::vector<ParamSlot> &norm) {
    int64_t start = trace ? trace->now() : 0;
    double gradScale = unscale;
    double gradNorm = options.clipGradNorm > 0 || options.onUpdate
                          ? globalGradNorm(pool, norm) * unscale
                          : 0.0;
    if (options.clipGradNorm > 0)
      gradScale = unscale * clipScale(gradNorm, options.clipGradNorm);
    AdamWConfig adamw = options.adamw;
    SGDConfig sgd = options.sgdConfig;
    double lr = options.lrAt(step);
    adamw.lr = sgd.lr = lr;
    Status s = options.sgd ? sgdStep(pool, sgd, update, slots, gradScale)
                           : adamwStep(pool, adamw, update, slots, gradScale);
    if (options.onUpdate)
      options.onUpdate({step, lr, gradNorm});
    if (trace)
      trace->addHostSpan("optimizer", step, start, trace->now());
    return s;
  };
  // The scale of step `step`'s loss: the loss scaler's (one step stale,
  // LossScale.h) over the step's labels (all K passes), and the loss_scale
  // input that carries it.
  auto stepScale = [&](unsigned step, double &lossScale, NpyArray &scaleArray,
                       int64_t &count) -> Status {
    if (applyFailure.failed())
      return applyFailure;
    count = countLabels();
    if (count == 0)
      return invalidArgument("every label of the batch is the ignore index "
                             "-100; there is nothing to train on");
    scaleArray.dtype = DType::f64;
    lossScale = scaling ? scaler.scaleFor(step) : 1.0;
    if (lossScale <= 0)
      return internalError(
          "the loss scale of step " + std::to_string(step) + " is asked with " +
          std::to_string(scaler.decided()) + " steps decided; report it");
    double scaleValue = lossScale / double(count);
    scaleArray.data.resize(8);
    std::memcpy(scaleArray.data.data(), &scaleValue, 8);
    return Status::ok();
  };
  // Several processes: gradients summed across the ranks (below).
  std::optional<GradientReducer> reducer;
  // ZeRO-1: the steps whose gradients are reduce-scattered (each rank sums
  // its shards only), unless something reads them whole: clipping's norm,
  // --dump-grads (docs/multi-box.md).
  auto scattered = [&](unsigned step) {
    return sharded && options.clipGradNorm <= 0 && !options.onUpdate &&
           (options.dumpGrads.empty() || step != first);
  };
  // Whether step k's gradients (`grads`) are applied: a step whose scaled
  // gradients overflowed is skipped (W_(k+1) = W_k).
  auto decideApply = [&](unsigned step,
                         const std::vector<std::vector<float> *> &grads) {
    if (!scaling)
      return true;
    std::vector<ParamSlot> slots;
    slots.reserve(grads.size());
    bool shards = scattered(step);
    for (size_t i = 0; i < grads.size(); ++i) {
      size_t b = shards ? params[i].shardBegin : 0,
             e = shards ? params[i].shardEnd : grads[i]->size();
      slots.push_back(
          {nullptr, grads[i]->data() + b, nullptr, nullptr, int64_t(e - b)});
    }
    bool finite = allGradientsFinite(pool, slots);
    // Reduce-scattered: every rank's verdict on its shards, as one flag
    // summed across the ranks (exact), so all take the same decision.
    if (shards) {
      double overflowed = finite ? 0.0 : 1.0;
      Status s = reducer->collective(
          step, [&] { return options.comm->sum(&overflowed, 1); });
      if (s.failed() && applyFailure.isOk())
        applyFailure = s;
      finite = s.isOk() && overflowed == 0.0;
    }
    bool apply = scaler.update(finite);
    if (!apply && options.onSkippedStep)
      options.onSkippedStep(step, scaler.getScale());
    return apply;
  };
  auto dumpGradients = [&](std::vector<std::vector<float> *> grads) {
    // Several processes: the summed gradients, once (rank 0).
    if (options.comm && options.comm->rank())
      return Status::ok();
    std::vector<NamedTensor> named;
    named.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i)
      named.push_back(
          {params[i].name, TensorRef{grads[i]->data(), DType::f32,
                                     plan.buffers[params[i].buffer].shape}});
    return writeSafetensors(options.dumpGrads, named);
  };
  // The rates' schedule, which a resume takes (rp-run's RunTrain.cpp).
  CheckpointSchedule schedule{
      options.schedule.kind == LrSchedule::linear   ? "linear"
      : options.schedule.kind == LrSchedule::cosine ? "cosine"
                                                    : "constant",
      options.sgd ? options.sgdConfig.lr : options.adamw.lr,
      options.schedule.warmup, options.schedule.total};
  auto checkpointState = [&](unsigned done, uint64_t position) {
    return CheckpointState{done,
                           options.sync,
                           options.sgd,
                           position,
                           updates,
                           scaling ? scaler.getScale() : 0.0,
                           scaling ? scaler.getPreviousScale() : 0.0,
                           scaler.getGoodSteps(),
                           options.seed,
                           stream && stream->isDataset && options.shuffle
                               ? std::optional<uint64_t>(options.shuffleSeed)
                               : std::nullopt,
                           schedule};
  };
  // Several processes: gradients summed across the ranks as they land, in
  // the order they land (staged plans: by the job that writes them).
  // A staged plan's epilogue uses follow, summed before the epilogue.
  if (options.comm) {
    EpilogueUses uses;
    if (plan.staged)
      uses = epilogueUses(plan, params, landsEarly);
    reducer.emplace(*options.comm,
                    landingOrder(landsWith, params.size(), uses.buffers.size(),
                                 uses.summedPerUse),
                    first, trace, sharded, params.size(), Bucketing(),
                    sharded ? std::function<bool(unsigned)>(scattered)
                            : nullptr);
  }
  // Parameter i's whole weights into `whole` (the master itself unless
  // it is sharded) from every rank's updated chunk.
  auto gatherParam = [&](unsigned step, size_t i, float *whole) -> Status {
    Param &p = params[i];
    return gatherShards(*reducer, step, whole,
                        p.master.data() + (p.shardBegin - p.masterBegin), p);
  };
  // Where parameter i's gathered weights go: straight into the buffer
  // the compute reads when the master is sharded.
  auto wholeOf = [&](size_t i) -> float * {
    return shardMaster ? static_cast<float *>(fwd.buffer(params[i].buffer).data)
                       : params[i].master.data();
  };
  // A checkpoint holds the whole optimizer state: with a sharded one, every
  // rank takes part in gathering it, rank 0 writes.
  auto saveWhole = [&](unsigned done,
                       const std::function<Status()> &write) -> Status {
    if (!sharded)
      return saving ? write() : Status::ok();
    if (done == first)
      return invalidArgument("a sharded optimizer saves after a step; run "
                             "at least one");
    return withWholeState(*reducer, done - 1, params, saving, write);
  };
  if (plan.staged) {
    detail::StagedContext staged{
        plan, fwd, pool, options, onStep, params, global, *lossOut, landsWith,
        writers, landsEarly, updates, first,
        // The next global batch of --data, and the position before it.
        [&]() -> Status {
          return stream ? stream->next(global[tokenInput], global["labels"],
                                       tokenLimit)
                        : Status::ok();
        },
        [&]() -> uint64_t { return stream ? stream->position : 0; },
        [&](unsigned done, uint64_t position) {
          return saveWhole(done, [&] {
            return saveCheckpoint(options.save, params, fwd,
                                  checkpointState(done, position));
          });
        },
        addGradient, stepScale, decideApply, dumpGradients,
        reducer ? &*reducer : nullptr,
        sharded ? std::function<Status(unsigned, size_t, float *)>(gatherParam)
                : nullptr,
        sharded ? std::function<void(unsigned)>(
                      [&](unsigned step) { reducer->release(step); })
                : nullptr,
        shardMaster,
        [&](unsigned step) { fillDropoutKey(inputs, options, step); }};
    return detail::trainStaged(std::move(staged));
  }

  // A sharded optimizer's gathers go between the reducer's sums: its
  // update runs between the steps (the same bits).
  bool overlap = !options.sync && options.overlapOptimizer && !sharded;
  // One worker: the thread the overlapped optimizer runs on. Its loops go
  // to the host pool, which is then called from two threads.
  ThreadPool optimizerThread(overlap ? 2 : 1);
  // Declared after the parameters: its destructor waits before they go.
  PendingOptimizer pending;
  auto checkpoint = [&](unsigned done) -> Status {
    // The checkpoint holds W_(k+1) and the state after step k's update.
    if (Status s = pending.finish(); s.failed())
      return s;
    return saveWhole(done, [&] {
      return saveCheckpoint(
          options.save, params, fwd,
          checkpointState(done, stream ? stream->position : 0));
    });
  };
  // An unstaged plan runs once per microbatch, K * M of them per step.
  unsigned microbatches = M * K;
  if (options.onStart)
    options.onStart();
  for (unsigned step = first; step < first + options.steps; ++step) {
    for (Param &p : params)
      std::fill(p.grad.begin(), p.grad.end(), 0.0f);
    double lossSum = 0;
    if (stream)
      if (Status s =
              stream->next(global[tokenInput], global["labels"], tokenLimit);
          s.failed())
        return s;
    fillDropoutKey(inputs, options, step);
    NpyArray scaleArray;
    double lossScale = 1.0;
    int64_t count = 1;
    if (Status s = stepScale(step, lossScale, scaleArray, count); s.failed())
      return s;
    // Microbatches add their losses and gradients in order, onto zero.
    for (unsigned m = 0; m < microbatches; ++m) {
      for (auto &[name, array] : global)
        if (Status s = fwd.setInput(name, slice(array, m, microbatches));
            s.failed())
          return s;
      if (Status s = fwd.setInput("loss_scale", scaleArray); s.failed())
        return s;
      if (Status s = fwd.run(pool); s.failed())
        return s;
      TensorRef loss = fwd.buffer(*lossOut);
      std::vector<double> l(1);
      TensorRef l64{l.data(), DType::f64, {}};
      if (Status s = host::cast(pool, loss, l64); s.failed())
        return s;
      lossSum += l[0];
      for (Param &p : params)
        if (Status s = addGradient(fwd, p, p.grad); s.failed())
          return s;
    }
    if (reducer) {
      for (size_t i = 0; i < params.size(); ++i)
        reducer->ready(step, i, params[i].grad.data(), params[i].grad.size());
      if (Status s = reducer->finishStep(step, lossSum); s.failed())
        return s;
    }
    if (options.onLabelCount)
      options.onLabelCount(step, count);
    onStep(step, lossSum / double(count));
    std::vector<std::vector<float> *> grads;
    grads.reserve(params.size());
    for (Param &p : params)
      grads.push_back(&p.grad);
    if (step == first && !options.dumpGrads.empty())
      if (Status s = dumpGradients(grads); s.failed())
        return s;
    bool apply = decideApply(step, grads);
    unsigned update = updates + 1;
    updates += apply;
    double unscale = 1.0 / lossScale;
    if (overlap) {
      // The master weights are W_k once step k-1's update is done: step k+1
      // computes with them while step k's update runs.
      if (Status s = pending.finish(); s.failed())
        return s;
      std::vector<ParamSlot> slots;
      for (Param &p : params) {
        std::memcpy(fwd.buffer(p.buffer).data, p.master.data(),
                    p.master.size() * sizeof(float));
        std::swap(p.grad, p.optGrad);
        slots.push_back({p.master.data(), p.optGrad.data(), p.state0.data(),
                         p.state1.data(), int64_t(p.master.size())});
      }
      if (apply)
        pending.task =
            optimizerThread.submit([&pending, &optimize, step, update, unscale,
                                    slots = std::move(slots)] {
              pending.status = optimize(step, update, unscale, slots, slots);
            });
    } else {
      std::vector<ParamSlot> slots, norm;
      for (Param &p : params) {
        slots.push_back(shardSlot(p, p.grad));
        norm.push_back(
            {nullptr, p.grad.data(), nullptr, nullptr, int64_t(p.size)});
      }
      // Async: the next step runs on the weights before this update. A
      // sharded master gathers them (W_k, before its chunk moves on)
      // into the buffers the next step reads.
      std::vector<std::vector<float>> before;
      if (!options.sync && !shardMaster)
        for (Param &p : params)
          before.push_back(p.master);
      if (!options.sync && shardMaster)
        for (size_t i = 0; i < params.size(); ++i)
          if (Status s = gatherParam(step, i, wholeOf(i)); s.failed())
            return s;
      if (apply)
        if (Status s = optimize(step, update, unscale, slots, norm); s.failed())
          return s;
      if (apply && sharded && (options.sync || !shardMaster))
        for (size_t i = 0; i < params.size(); ++i)
          if (Status s = gatherParam(step, i, wholeOf(i)); s.failed())
            return s;
      for (size_t i = 0; i < params.size() && !shardMaster; ++i) {
        const std::vector<float> &w =
            options.sync ? params[i].master : before[i];
        std::memcpy(fwd.buffer(params[i].buffer).data, w.data(),
                    w.size() * sizeof(float));
      }
    }
    unsigned done = step + 1;
    if (!options.save.empty() && options.saveEvery &&
        (done - first) % options.saveEvery == 0)
      if (Status s = checkpoint(done); s.failed())
        return s;
    // The last step's window stays open for the final checkpoint.
    bool last = done == first + options.steps;
    if (sharded && !(last && !options.save.empty()))
      reducer->release(step);
  }
  if (!options.save.empty()) {
    Status s = checkpoint(first + options.steps);
    if (sharded)
      reducer->release(first + options.steps - 1);
    return s;
  }
  return pending.finish();
}
