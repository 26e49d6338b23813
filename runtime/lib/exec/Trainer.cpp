//===- Trainer.cpp - training steps on one host device --------------------===//

#include "rp/runtime/Trainer.h"
#include "Fences.h"
#include "StagedTrainer.h"
#include "rp/runtime/Checkpoint.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/Pipeline.h"
#include "rp/runtime/Safetensors.h"
#include "rp/runtime/host/Kernels.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstring>
#include <optional>
#include <random>

using namespace rp::runtime;

/// Labels equal to this are ignored (DESIGN.md, Loss).
static constexpr int64_t kIgnoreIndex = -100;

bool rp::runtime::isTrainingPlan(const Plan &plan) {
  for (const BindingDesc &in : plan.inputs)
    if (in.name == "loss_scale")
      return true;
  return false;
}

namespace {

using detail::Param;
using detail::PendingOptimizer;
using detail::slice;

/// The shape of input `in`'s global batch: a staged plan binds the global
/// batch itself, an unstaged one a microbatch.
/// With `accumulate` K, a step takes K such batches (K passes).
Shape globalShape(const Plan &plan, const BindingDesc &in,
                  unsigned accumulate = 1) {
  Shape shape = plan.buffers[in.buffer].shape;
  if (!shape.empty())
    shape[0] *= (plan.staged ? 1 : plan.microbatches) * accumulate;
  return shape;
}

/// A synthetic global batch for `in`: ids below the binding's limit, or
/// N(0, 1) floats, from the seed.
Expected<NpyArray> synthetic(const Plan &plan, const BindingDesc &in,
                             uint64_t seed, unsigned accumulate) {
  const BufferDesc &b = plan.buffers[in.buffer];
  NpyArray a;
  a.dtype = b.dtype;
  a.shape = globalShape(plan, in, accumulate);
  a.data.resize(numElements(a.shape) * dtypeSize(a.dtype));
  std::mt19937_64 rng(seed ^ std::hash<std::string>()(in.name));
  if (a.dtype == DType::i64 || a.dtype == DType::i32) {
    if (in.limit <= 0)
      return invalidArgument("input '" + in.name +
                             "' has no known id range for synthetic data; "
                             "give it with --input or --labels");
    for (int64_t i = 0; i < numElements(a.shape); ++i) {
      int64_t id = static_cast<int64_t>(rng() % uint64_t(in.limit));
      if (a.dtype == DType::i64)
        reinterpret_cast<int64_t *>(a.data.data())[i] = id;
      else
        reinterpret_cast<int32_t *>(a.data.data())[i] = int32_t(id);
    }
    return a;
  }
  if (a.dtype != DType::f32)
    return invalidArgument("synthetic data for '" + in.name +
                           "' is f32 or ids only; give it with --input");
  for (int64_t i = 0; i < numElements(a.shape); ++i) {
    double u1 = (double(rng() >> 11) + 0.5) / double(1ull << 53);
    double u2 = (double(rng() >> 11) + 0.5) / double(1ull << 53);
    reinterpret_cast<float *>(a.data.data())[i] = static_cast<float>(
        std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return a;
}


/// Streams a flat token file: sequence after sequence, labels shifted by
/// one token (the data loader shifts; the graph never does).
struct TokenStream {
  std::vector<uint32_t> tokens;
  uint64_t position = 0;

  static Expected<TokenStream> open(const std::string &path, bool wide) {
    Expected<std::string> raw =
        readRegularFile(path, "data file", physicalMemoryBytes());
    if (!raw)
      return raw.getStatus();
    size_t width = wide ? 4 : 2;
    if (raw->size() % width)
      return invalidArgument("data file '" + path + "' holds " +
                             std::to_string(raw->size()) +
                             " bytes, not a whole "
                             "number of " +
                             (wide ? "uint32" : "uint16") + " tokens");
    TokenStream s;
    s.tokens.resize(raw->size() / width);
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      uint32_t v = 0;
      for (size_t b = 0; b < width; ++b)
        v |= uint32_t(static_cast<unsigned char>((*raw)[i * width + b]))
             << (8 * b);
      s.tokens[i] = v;
    }
    return s;
  }

  /// Fills `tokens` and `labels` ([rows, seq], i64) with the next windows.
  Status next(NpyArray &tokensOut, NpyArray &labelsOut, int64_t limit) {
    int64_t rows = tokensOut.shape[0], seq = tokensOut.shape[1];
    if (tokens.size() < static_cast<size_t>(seq) + 1)
      return invalidArgument("the data file holds " +
                             std::to_string(tokens.size()) +
                             " tokens, fewer than one sequence of " +
                             std::to_string(seq + 1));
    auto *t = reinterpret_cast<int64_t *>(tokensOut.data.data());
    auto *l = reinterpret_cast<int64_t *>(labelsOut.data.data());
    for (int64_t r = 0; r < rows; ++r) {
      if (position + seq + 1 > tokens.size())
        position = 0;
      for (int64_t k = 0; k < seq; ++k) {
        uint32_t a = tokens[position + k], b = tokens[position + k + 1];
        if (limit > 0 && (a >= uint64_t(limit) || b >= uint64_t(limit)))
          return invalidArgument("token " + std::to_string(std::max(a, b)) +
                                 " of the data file is outside the model's "
                                 "vocabulary of " + std::to_string(limit));
        t[r * seq + k] = a;
        l[r * seq + k] = b;
      }
      position += seq;
    }
    return Status::ok();
  }
};

/// Writes a checkpoint folder atomically (Checkpoint.h).
Status saveCheckpoint(const std::string &dir, const std::vector<Param> &params,
                      const HostForward &fwd, const CheckpointState &state) {
  std::vector<NamedTensor> master, compute, opt;
  for (const Param &p : params) {
    TensorRef live = fwd.buffer(p.buffer);
    master.push_back({p.name, TensorRef{const_cast<float *>(p.master.data()),
                                        DType::f32, live.shape}});
    // The weights the next step computes with (W_k in async mode).
    compute.push_back({p.name, live});
    opt.push_back({p.name + ".state0",
                   TensorRef{const_cast<float *>(p.state0.data()), DType::f32,
                             live.shape}});
    opt.push_back({p.name + ".state1",
                   TensorRef{const_cast<float *>(p.state1.data()), DType::f32,
                             live.shape}});
  }
  return saveCheckpointFolder(dir,
                              {{"weights.safetensors", std::move(master)},
                               {"compute.safetensors", std::move(compute)},
                               {"optimizer.safetensors", std::move(opt)}},
                              state);
}

/// Loads a checkpoint into the parameters' master weights, optimizer state
/// and the plan's (compute) weights; returns the steps done.
Expected<CheckpointState> loadCheckpoint(const std::string &dir,
                                         std::vector<Param> &params,
                                         HostForward &fwd) {
  Expected<std::string> folder = findCheckpoint(dir);
  if (!folder)
    return folder.getStatus();
  std::string statePath = *folder + "/state.json";
  Expected<std::string> text =
      readRegularFile(statePath, "checkpoint state", kMaxJsonBytes);
  if (!text)
    return text.getStatus();
  Expected<CheckpointState> state = parseCheckpointState(*text, statePath);
  if (!state)
    return state.getStatus();
  auto master = readSafetensors(*folder + "/weights.safetensors");
  auto compute = readSafetensors(*folder + "/compute.safetensors");
  auto opt = readSafetensors(*folder + "/optimizer.safetensors");
  for (auto *f : {&master, &compute, &opt})
    if (!*f)
      return f->getStatus();
  auto take = [&](SafetensorsFile &file, const std::string &name,
                  size_t size) -> Expected<const std::vector<uint8_t> *> {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end() || it->second.dtype != DType::f32 ||
        it->second.data.size() != size * sizeof(float))
      return invalidArgument("checkpoint '" + dir + "' has no f32 '" + name +
                             "' of " + std::to_string(size) +
                             " elements; it is from another model");
    return &it->second.data;
  };
  for (Param &p : params) {
    size_t n = p.master.size();
    auto m = take(*master, p.name, n), c = take(*compute, p.name, n),
         s0 = take(*opt, p.name + ".state0", n),
         s1 = take(*opt, p.name + ".state1", n);
    for (auto *e : {&m, &c, &s0, &s1})
      if (!*e)
        return e->getStatus();
    std::memcpy(p.master.data(), (*m)->data(), n * sizeof(float));
    std::memcpy(p.state0.data(), (*s0)->data(), n * sizeof(float));
    std::memcpy(p.state1.data(), (*s1)->data(), n * sizeof(float));
    std::memcpy(fwd.buffer(p.buffer).data, (*c)->data(), n * sizeof(float));
  }
  return state;
}

} // namespace

Status rp::runtime::train(const Plan &plan, HostForward &fwd,
                          ThreadPool &pool, const TrainOptions &options,
                          const std::function<void(unsigned, double)> &onStep) {
  unsigned M = plan.microbatches;
  unsigned K = options.accumulate;
  if (K < 1)
    return invalidArgument("--accumulate must be at least 1 (passes of " +
                           std::to_string(M) +
                           " microbatches per optimizer step)");
  // Before any work: a save must not replace what is not a checkpoint.
  if (!options.save.empty())
    if (Status s = checkSaveTarget(options.save); s.failed())
      return s;
  // Global batches of every input but the loss scale.
  std::map<std::string, NpyArray> global;
  const BindingDesc *labels = nullptr, *scale = nullptr;
  for (const BindingDesc &in : plan.inputs) {
    if (in.name == "loss_scale") {
      scale = &in;
      continue;
    }
    if (in.name == "labels")
      labels = &in;
    auto it = options.inputs.find(in.name);
    NpyArray a;
    if (it != options.inputs.end()) {
      a = it->second;
    } else {
      auto s = synthetic(plan, in, options.seed, K);
      if (!s)
        return s.getStatus();
      a = std::move(*s);
    }
    Shape whole = globalShape(plan, in, K);
    Shape mb = whole;
    if (!mb.empty()) {
      if (mb[0] % M)
        return invalidFormat("input '" + in.name + "' binds a global batch " +
                             describeShape(whole) + " that " +
                             std::to_string(M) +
                             " microbatches do not divide");
      mb[0] /= M;
    }
    if (!mb.empty() && K > 1)
      mb[0] /= K;
    if (a.shape.empty() || a.shape != whole)
      return invalidArgument(
          "input '" + in.name + "' has shape " + describeShape(a.shape) +
          "; the plan takes " + std::to_string(M * K) + " microbatches of " +
          describeShape(mb) + " (dimension 0 is the global batch" +
          (K > 1 ? ", " + std::to_string(K) + " passes of " +
                       std::to_string(M) + " microbatches per step"
                 : std::string()) +
          ")");
    global[in.name] = std::move(a);
  }
  if (!scale)
    return invalidArgument("the plan has no loss_scale input; it is not a "
                           "training plan");
  // --data: the token input and the labels come from the stream, a new
  // global batch every step.
  std::optional<TokenStream> stream;
  std::string tokenInput;
  if (!options.data.empty()) {
    if (!labels)
      return invalidArgument("--data needs a cross-entropy training plan "
                             "(one with a labels input)");
    for (const BindingDesc &in : plan.inputs) {
      const BufferDesc &b = plan.buffers[in.buffer];
      if (&in == labels || &in == scale)
        continue;
      if (b.dtype != DType::i64 || b.shape.size() != 2 || !tokenInput.empty())
        return invalidArgument("--data feeds a model whose only other input "
                               "is i64 token ids [batch, seq]; '" + in.name +
                               "' is " + dtypeName(b.dtype) +
                               describeShape(b.shape));
      tokenInput = in.name;
    }
    auto s = TokenStream::open(options.data, options.data32);
    if (!s)
      return s.getStatus();
    stream = std::move(*s);
  }
  int64_t tokenLimit = 0;
  for (const BindingDesc &in : plan.inputs)
    if (in.name == tokenInput)
      tokenLimit = in.limit;
  // Token-weighted mean over the global batch: one count for all
  // microbatches. An output loss counts 1 per microbatch (the step loss is
  // the mean of the microbatches' losses).
  auto countLabels = [&]() -> int64_t {
    if (!labels)
      return int64_t(M) * K;
    const NpyArray &l = global["labels"];
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
      p.master.assign(w.as<float>(), w.as<float>() + w.size());
      p.grad.assign(w.size(), 0.0f);
      p.state0.assign(w.size(), 0.0f);
      p.state1.assign(w.size(), 0.0f);
      if (options.overlapOptimizer || plan.staged)
        p.optGrad.assign(w.size(), 0.0f);
      params.push_back(std::move(p));
      break;
    }
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
  unsigned updates = 0;
  unsigned first = 0;
  if (!options.resume.empty()) {
    auto state = loadCheckpoint(options.resume, params, fwd);
    if (!state)
      return state.getStatus();
    if (state->sync != options.sync || state->sgd != options.sgd)
      return invalidArgument("checkpoint '" + options.resume + "' was made "
                             "with --" + (state->sync ? "sync" : "async") +
                             " and --optimizer " +
                             (state->sgd ? "sgd" : "adamw") +
                             "; resume with the same");
    first = state->step;
    updates = state->updates;
    if (scaling && state->lossScale > 0)
      scaler.restore(first, state->lossScale,
                     state->stepLossScale > 0 ? state->stepLossScale
                                              : state->lossScale,
                     state->goodSteps);
    if (stream) {
      if (state->dataPosition > stream->tokens.size())
        return invalidArgument(
            "checkpoint '" + options.resume + "' continues the data at token " +
            std::to_string(state->dataPosition) + ", past the end of '" +
            options.data + "' (" + std::to_string(stream->tokens.size()) +
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
  auto optimize = [&pool, &options, trace](unsigned step, unsigned update,
                                           double unscale,
                                           const std::vector<ParamSlot> &slots) {
    int64_t start = trace ? trace->now() : 0;
    double gradScale = unscale;
    if (options.clipGradNorm > 0)
      gradScale = unscale * clipScale(globalGradNorm(pool, slots) * unscale,
                                      options.clipGradNorm);
    Status s =
        options.sgd
            ? sgdStep(pool, options.sgdConfig, update, slots, gradScale)
            : adamwStep(pool, options.adamw, update, slots, gradScale);
    if (trace)
      trace->addHostSpan("optimizer", step, start, trace->now());
    return s;
  };
  // The scale of step `step`'s loss: the loss scaler's (one step stale,
  // LossScale.h) over the step's labels (all K passes), and the loss_scale
  // input that carries it.
  auto stepScale = [&](unsigned step, double &lossScale, NpyArray &scaleArray,
                       int64_t &count) -> Status {
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
  // Whether step k's gradients (`grads`) are applied: a step whose scaled
  // gradients overflowed is skipped (W_(k+1) = W_k).
  auto decideApply = [&](unsigned step,
                         std::vector<std::vector<float> *> grads) -> bool {
    if (!scaling)
      return true;
    std::vector<ParamSlot> slots;
    for (std::vector<float> *g : grads)
      slots.push_back(
          {nullptr, g->data(), nullptr, nullptr, int64_t(g->size())});
    bool apply = scaler.update(allGradientsFinite(pool, slots));
    if (!apply && options.onSkippedStep)
      options.onSkippedStep(step, scaler.getScale());
    return apply;
  };
  auto dumpGradients = [&](std::vector<std::vector<float> *> grads) {
    std::vector<NamedTensor> named;
    for (size_t i = 0; i < params.size(); ++i)
      named.push_back(
          {params[i].name, TensorRef{grads[i]->data(), DType::f32,
                                     plan.buffers[params[i].buffer].shape}});
    return writeSafetensors(options.dumpGrads, named);
  };
  auto checkpointState = [&](unsigned done, uint64_t position) {
    return CheckpointState{done,
                           options.sync,
                           options.sgd,
                           position,
                           updates,
                           scaling ? scaler.getScale() : 0.0,
                           scaling ? scaler.getPreviousScale() : 0.0,
                           scaler.getGoodSteps()};
  };
  if (plan.staged)
    return detail::trainStaged(detail::StagedContext{
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
          return saveCheckpoint(options.save, params, fwd,
                                checkpointState(done, position));
        },
        addGradient, stepScale, decideApply, dumpGradients});

  bool overlap = !options.sync && options.overlapOptimizer;
  // One worker: the thread the overlapped optimizer runs on. Its loops go
  // to the host pool, which is then called from two threads.
  ThreadPool optimizerThread(overlap ? 2 : 1);
  // Declared after the parameters: its destructor waits before they go.
  PendingOptimizer pending;
  auto checkpoint = [&](unsigned done) -> Status {
    // The checkpoint holds W_(k+1) and the state after step k's update.
    if (Status s = pending.finish(); s.failed())
      return s;
    return saveCheckpoint(options.save, params, fwd,
                          checkpointState(done, stream ? stream->position : 0));
  };
  // An unstaged plan runs once per microbatch, K * M of them per step.
  unsigned microbatches = M * K;
  for (unsigned step = first; step < first + options.steps; ++step) {
    for (Param &p : params)
      std::fill(p.grad.begin(), p.grad.end(), 0.0f);
    double lossSum = 0;
    if (stream)
      if (Status s = stream->next(global[tokenInput], global["labels"],
                                  tokenLimit);
          s.failed())
        return s;
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
    onStep(step, lossSum / double(count));
    std::vector<std::vector<float> *> grads;
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
        pending.task = optimizerThread.submit(
            [&pending, &optimize, step, update, unscale,
             slots = std::move(slots)] {
              pending.status = optimize(step, update, unscale, slots);
            });
    } else {
      std::vector<ParamSlot> slots;
      for (Param &p : params)
        slots.push_back({p.master.data(), p.grad.data(), p.state0.data(),
                         p.state1.data(), int64_t(p.master.size())});
      // Async: the next step runs on the weights before this update.
      std::vector<std::vector<float>> before;
      if (!options.sync)
        for (Param &p : params)
          before.push_back(p.master);
      if (apply)
        if (Status s = optimize(step, update, unscale, slots); s.failed())
          return s;
      for (size_t i = 0; i < params.size(); ++i) {
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
  }
  if (!options.save.empty())
    return checkpoint(first + options.steps);
  return pending.finish();
}
