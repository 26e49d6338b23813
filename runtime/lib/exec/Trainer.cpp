//===- Trainer.cpp - training steps on one host device --------------------===//

#include "rp/runtime/Trainer.h"
#include "rp/runtime/Safetensors.h"
#include "rp/runtime/host/Kernels.h"

#include <cstring>
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

struct Param {
  std::string name;
  uint32_t buffer;                 ///< the plan's parameter buffer
  uint32_t gradOutput;             ///< the plan's gradient buffer
  std::vector<float> master, grad, state0, state1;
};

/// A synthetic global batch for `in`: ids below the binding's limit, or
/// N(0, 1) floats, from the seed.
Expected<NpyArray> synthetic(const Plan &plan, const BindingDesc &in,
                             uint64_t seed) {
  const BufferDesc &b = plan.buffers[in.buffer];
  NpyArray a;
  a.dtype = b.dtype;
  a.shape = b.shape;
  if (!a.shape.empty())
    a.shape[0] *= plan.microbatches;
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

/// Microbatch `m` of a global-batch array: rows [m*rows, (m+1)*rows).
NpyArray slice(const NpyArray &global, unsigned m, unsigned count) {
  NpyArray part;
  part.dtype = global.dtype;
  part.shape = global.shape;
  part.shape[0] /= count;
  size_t bytes = numElements(part.shape) * dtypeSize(part.dtype);
  part.data.assign(global.data.begin() + m * bytes,
                   global.data.begin() + (m + 1) * bytes);
  return part;
}

} // namespace

Status rp::runtime::train(const Plan &plan, HostForward &fwd,
                          ThreadPool &pool, const TrainOptions &options,
                          const std::function<void(unsigned, double)> &onStep) {
  unsigned M = plan.microbatches;
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
      auto s = synthetic(plan, in, options.seed);
      if (!s)
        return s.getStatus();
      a = std::move(*s);
    }
    const Shape &mb = plan.buffers[in.buffer].shape;
    if (a.shape.empty() || mb.empty() || a.shape.size() != mb.size() ||
        a.shape[0] != mb[0] * int64_t(M) ||
        !std::equal(a.shape.begin() + 1, a.shape.end(), mb.begin() + 1))
      return invalidArgument(
          "input '" + in.name + "' has shape " + describeShape(a.shape) +
          "; the plan takes " + std::to_string(M) + " microbatches of " +
          describeShape(mb) + " (dimension 0 is the global batch)");
    global[in.name] = std::move(a);
  }
  if (!scale)
    return invalidArgument("the plan has no loss_scale input; it is not a "
                           "training plan");
  // Token-weighted mean over the global batch: one count for all
  // microbatches. An output loss counts 1 per microbatch (the step loss is
  // the mean of the microbatches' losses).
  int64_t count = labels ? 0 : M;
  if (labels) {
    const NpyArray &l = global["labels"];
    for (int64_t i = 0; i < numElements(l.shape); ++i) {
      int64_t v = l.dtype == DType::i64
                      ? reinterpret_cast<const int64_t *>(l.data.data())[i]
                      : reinterpret_cast<const int32_t *>(l.data.data())[i];
      count += v != kIgnoreIndex;
    }
  }
  if (labels && count == 0)
    return invalidArgument("every label of the batch is the ignore index "
                           "-100; there is nothing to train on");
  NpyArray scaleArray;
  scaleArray.dtype = DType::f64;
  double scaleValue = 1.0 / double(count);
  scaleArray.data.resize(8);
  std::memcpy(scaleArray.data.data(), &scaleValue, 8);

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
      params.push_back(std::move(p));
      break;
    }
  }
  uint32_t lossOut = 0, countOut = 0;
  for (const BindingDesc &o : plan.outputs) {
    if (o.name == "loss_sum")
      lossOut = o.buffer;
    if (o.name == "count")
      countOut = o.buffer;
  }
  (void)countOut;

  for (unsigned step = 0; step < options.steps; ++step) {
    for (Param &p : params)
      std::fill(p.grad.begin(), p.grad.end(), 0.0f);
    double lossSum = 0;
    for (unsigned m = 0; m < M; ++m) {
      for (auto &[name, array] : global)
        if (Status s = fwd.setInput(name, slice(array, m, M)); s.failed())
          return s;
      if (Status s = fwd.setInput("loss_scale", scaleArray); s.failed())
        return s;
      if (Status s = fwd.run(pool); s.failed())
        return s;
      TensorRef loss = fwd.buffer(lossOut);
      std::vector<double> l(1);
      TensorRef l64{l.data(), DType::f64, {}};
      if (Status s = host::cast(pool, loss, l64); s.failed())
        return s;
      lossSum += l[0];
      for (Param &p : params) {
        TensorRef g = fwd.buffer(p.gradOutput);
        std::vector<float> g32(g.size());
        TensorRef dst{g32.data(), DType::f32, g.shape};
        if (Status s = host::cast(pool, g, dst); s.failed())
          return s;
        // Microbatches add in order: the sum is the same for any thread
        // count.
        for (size_t i = 0; i < g32.size(); ++i)
          p.grad[i] += g32[i];
      }
    }
    onStep(step, lossSum / double(count));
    if (step == 0 && !options.dumpGrads.empty()) {
      std::vector<NamedTensor> grads;
      for (Param &p : params)
        grads.push_back({p.name, TensorRef{p.grad.data(), DType::f32,
                                           plan.buffers[p.buffer].shape}});
      if (Status s = writeSafetensors(options.dumpGrads, grads); s.failed())
        return s;
    }
    std::vector<ParamSlot> slots;
    for (Param &p : params)
      slots.push_back({p.master.data(), p.grad.data(), p.state0.data(),
                       p.state1.data(), int64_t(p.master.size())});
    double gradScale = 1.0;
    if (options.clipGradNorm > 0)
      gradScale = clipScale(globalGradNorm(pool, slots), options.clipGradNorm);
    // Async: the next step runs on the weights before this update.
    std::vector<std::vector<float>> before;
    if (!options.sync)
      for (Param &p : params)
        before.push_back(p.master);
    Status s = options.sgd
                   ? sgdStep(pool, options.sgdConfig, step + 1, slots, gradScale)
                   : adamwStep(pool, options.adamw, step + 1, slots, gradScale);
    if (s.failed())
      return s;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> &w = options.sync ? params[i].master : before[i];
      std::memcpy(fwd.buffer(params[i].buffer).data, w.data(),
                  w.size() * sizeof(float));
    }
  }
  return Status::ok();
}
