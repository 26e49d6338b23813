//===- Profile.cpp - measured per-layer times from a trace ----------------===//
//
// rp-run --profile: the compute jobs' mean durations turned into the
// per-layer times a profile-guided recompile reads (docs/hardware-
// profiles.md, "Measured profiles"). Programs are named after the layers
// they compute (the compiler's staged export):
//
//   F jobs  "L" (" slotN" added under round-robin): layer L's forward;
//   B jobs  "L.backward" or "A..B.backward": recompute plus backward of one
//           layer or of the layers from A to B;
//   T jobs  "L" or "A..B": the fused tail, forward + loss + backward of its
//           layers with no recompute;
//   "start-grads L", "add-grads L" (per layer), "nothing": gradient
//   accumulation and
//           placeholders, no layer's time.
//
// The job's label (F3, B5, T2) says which kind it is; a tail of one layer
// is named like a forward program. What a single job cannot tell apart is
// split by stated rules, and the file's "note" says which were used.
//
// Where the devices timed each kernel call (Queue::timeCalls), the file's
// "ops" give the median of every call of one op kind, element type,
// operand shapes and work-changing attributes (timing::measuredOpAttrs),
// over the same steps: what a recompile or the sim takes
// for the calls it does not time by layers (rp/timing/Measured.h).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Trace.h"
#include "rp/runtime/sim/PlanTiming.h"

#include "rp/timing/Measured.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

using namespace rp::runtime;

namespace {

/// The program's name without the " slotN" round-robin buffer sets add.
std::string baseName(const std::string &program) {
  size_t at = program.rfind(" slot");
  if (at == std::string::npos || at + 5 == program.size())
    return program;
  for (size_t i = at + 5; i < program.size(); ++i)
    if (program[i] < '0' || program[i] > '9')
      return program;
  return program.substr(0, at);
}

/// Whether `name` ends in `suffix`, which it then loses.
bool dropSuffix(std::string &name, const std::string &suffix) {
  if (name.size() <= suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  name.resize(name.size() - suffix.size());
  return true;
}

bool isBookkeeping(const std::string &base) {
  return base.rfind("start-grads", 0) == 0 || base.rfind("add-grads", 0) == 0 ||
         base == "nothing";
}

/// "A..B" into {A, B}; a single name into {L, L}.
std::pair<std::string, std::string> ends(const std::string &span) {
  size_t at = span.find("..");
  if (at == std::string::npos)
    return {span, span};
  return {span.substr(0, at), span.substr(at + 2)};
}

/// The scope an ONNX node name starts with: "h.1" of "/h.1/attn/MatMul";
/// a name without a leading '/' is its own scope.
std::string scopeOf(const std::string &loc) {
  if (loc.empty() || loc[0] != '/')
    return loc;
  size_t end = loc.find('/', 1);
  return loc.substr(1, end == std::string::npos ? std::string::npos : end - 1);
}

/// "h.12" as {"h", 12}; -1 for a name that does not end in ".N".
std::pair<std::string, long> numbered(const std::string &name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size() ||
      dot + 10 < name.size())
    return {name, -1};
  for (size_t i = dot + 1; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return {name, -1};
  return {name.substr(0, dot), std::stol(name.substr(dot + 1))};
}

/// A rough measure of a kernel call's work, to weigh the parts of one
/// fused job against each other: multiply-adds for matmul and attention,
/// elements written for everything else.
double callCost(const Plan &plan, const KernelCallDesc &call) {
  auto shape = [&](size_t input) -> Shape {
    return input < call.inputs.size() &&
                   call.inputs[input] < plan.buffers.size()
               ? plan.buffers[call.inputs[input]].shape
               : Shape();
  };
  double written = 0;
  for (uint32_t out : call.outputs)
    if (out < plan.buffers.size())
      written += double(plan.buffers[out].size());
  switch (call.op) {
  case OpKind::matmul: {
    Shape a = shape(0);
    bool transposed = !call.ints.empty() && call.ints[0];
    int64_t k = a.empty()                     ? 1
                : transposed && a.size() >= 2 ? a[a.size() - 2]
                                              : a.back();
    // The result alone: a fused epilogue's pre-activation is no product.
    return double(plan.buffers[call.outputs[0]].size()) * double(k);
  }
  case OpKind::moe_grouped_matmul: {
    // Each of the rows [R, K] meets one expert's weight.
    Shape a = shape(0);
    return a.size() == 2 ? written * double(a[1]) : written;
  }
  case OpKind::moe_grouped_matmul_wgrad: {
    Shape a = shape(0), g = shape(1);
    return a.size() == 2 && g.size() == 2
               ? double(numElements(a)) * double(g[1])
               : written;
  }
  case OpKind::linear_cross_entropy:
  case OpKind::linear_cross_entropy_grad: {
    // hidden [..., K] against the [C, K] head: T*K*C forward, three such
    // products backward.
    Shape h = shape(0), w = shape(1);
    if (h.empty() || w.size() != 2 || w[1] <= 0)
      return written;
    double macs = double(numElements(h)) * double(w[0]);
    return call.op == OpKind::linear_cross_entropy ? macs : 3 * macs;
  }
  case OpKind::attention:
  case OpKind::attention_grad: {
    // q [..., S, D] against k [..., T, D]: S*T*D twice forward; the
    // gradient does about twice that.
    Shape q = shape(0), k = shape(1);
    double keys = k.size() >= 2 ? double(k[k.size() - 2]) : 1.0;
    double work = 2.0 * double(numElements(q)) * keys;
    return call.op == OpKind::attention ? work : 2.0 * work;
  }
  default:
    return written;
  }
}

bool isGradientOp(OpKind op) {
  switch (op) {
  case OpKind::cross_entropy_grad:
  case OpKind::linear_cross_entropy_grad:
  case OpKind::unary_grad:
  case OpKind::softmax_grad:
  case OpKind::norm_grad:
  case OpKind::attention_grad:
  case OpKind::gather_grad:
  case OpKind::slice_grad:
  case OpKind::extremum_grad:
  case OpKind::moe_route_grad:
  case OpKind::moe_grouped_matmul_wgrad:
  case OpKind::moe_combine_grad:
    return true;
  default:
    return false;
  }
}

/// A fused tail's layers and the work of each, forward and backward.
struct TailSplit {
  std::vector<std::string> layers;
  std::vector<double> forward, backward;
  bool lossFound = false;
};

/// The layers of the tail "a..b" and the work of its calls per layer. The
/// layers between a and b are named nowhere else in the plan; numbered
/// blocks ("h.3") show in the scopes of the calls. A call goes to the layer
/// its scope names, or else to the layers that no scope names (the prefix
/// and suffix layers gather ops of other scopes: ln_f, lm_head), or else
/// to the last layer. Calls up to the loss are forward, the rest backward.
TailSplit splitTail(const Plan &plan, const ProgramDesc &program,
                    const std::string &a, const std::string &b) {
  TailSplit split;
  split.layers.push_back(a);
  auto [stem, first] = numbered(a);
  auto [lastStem, last] = numbered(b);
  if (first >= 0) {
    std::set<long> inner;
    for (const KernelCallDesc &c : program.calls) {
      auto [s, n] = numbered(scopeOf(c.loc));
      if (s == stem && n > first && (lastStem != stem || n < last))
        inner.insert(n);
    }
    for (long n : inner)
      split.layers.push_back(stem + "." + std::to_string(n));
  }
  if (b != a)
    split.layers.push_back(b);
  size_t count = split.layers.size();
  split.forward.assign(count, 0.0);
  split.backward.assign(count, 0.0);
  std::map<std::string, size_t> index;
  for (size_t k = 0; k < count; ++k)
    index[split.layers[k]] = k;
  std::vector<size_t> unnamed;
  for (size_t k = 0; k < count; ++k) {
    bool named = false;
    for (const KernelCallDesc &c : program.calls)
      named |= scopeOf(c.loc) == split.layers[k];
    if (!named)
      unnamed.push_back(k);
  }
  if (unnamed.empty())
    unnamed.push_back(count - 1);
  size_t boundary = program.calls.size();
  for (size_t i = 0;
       i < program.calls.size() && boundary == program.calls.size(); ++i)
    if (program.calls[i].op == OpKind::cross_entropy ||
        program.calls[i].op == OpKind::linear_cross_entropy)
      boundary = i + 1;
  for (size_t i = 0;
       i < program.calls.size() && boundary == program.calls.size(); ++i)
    if (isGradientOp(program.calls[i].op))
      boundary = i;
  split.lossFound = boundary < program.calls.size();
  for (size_t i = 0; i < program.calls.size(); ++i) {
    const KernelCallDesc &c = program.calls[i];
    std::vector<double> &side = i < boundary ? split.forward : split.backward;
    double cost = callCost(plan, c);
    auto it = index.find(scopeOf(c.loc));
    if (it != index.end()) {
      side[it->second] += cost;
      continue;
    }
    for (size_t k : unnamed)
      side[k] += cost / double(unnamed.size());
  }
  return split;
}

struct Mean {
  double total = 0; ///< sum of the jobs' means
  unsigned jobs = 0;
  size_t firstJob = 0;
  int32_t stage = 0;
  double value() const { return jobs ? total / jobs : 0.0; }
};

struct LayerTimes {
  double forward = -1, recompute = -1, backward = -1;
};

} // namespace

std::map<std::string, rp::timing::MeasuredOpTime>
rp::runtime::measuredOps(const Plan &plan, const Trace::CallSamples &calls) {
  std::map<std::string, timing::MeasuredOpTime> ops;
  std::map<std::string, std::vector<double>> samples;
  for (const auto &[where, ms] : calls) {
    auto [program, index] = where;
    if (program >= plan.programs.size() ||
        index >= plan.programs[program].calls.size() || ms.empty())
      continue;
    const KernelCallDesc &call = plan.programs[program].calls[index];
    uint16_t op = uint16_t(call.op);
    if (!timing::launchesKernel(op))
      continue;
    timing::CallOperands operands = sim::callOperands(plan, call);
    std::string key =
        timing::measuredOpKey(op, operands, call.ints, call.floats);
    auto [it, fresh] = ops.try_emplace(key);
    if (fresh) {
      it->second.op = timing::kernelOpName(op);
      it->second.dtype = operands.dtype;
      for (const timing::Operand &o : operands.inputs)
        it->second.inputs.push_back(o.shape);
      for (const timing::Operand &o : operands.outputs)
        it->second.outputs.push_back(o.shape);
      it->second.attrs = timing::measuredOpAttrs(op, call.ints, call.floats);
    }
    std::vector<double> &all = samples[key];
    all.insert(all.end(), ms.begin(), ms.end());
  }
  // The median, not the mean: a call the OS preempted once is no estimate
  // of the next.
  for (auto &[key, all] : samples) {
    std::sort(all.begin(), all.end());
    size_t n = all.size();
    timing::MeasuredOpTime &t = ops[key];
    t.ms = n % 2 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
    t.calls = n;
  }
  return ops;
}

Expected<std::string> rp::runtime::measuredProfileJson(
    const Plan &plan, const std::vector<double> &jobMs, const std::string &hw,
    uint64_t steps, const std::map<std::string, timing::MeasuredOpTime> &ops) {
  if (jobMs.size() != plan.jobs.size())
    return internalError(
        "measuredProfileJson: " + std::to_string(jobMs.size()) +
        " job times for " + std::to_string(plan.jobs.size()) + " jobs");
  // Per kind (F, B, T) and program base name, the mean over the jobs
  // running it: one job per microbatch, so this is the time per microbatch.
  std::map<std::string, Mean> forward, backward, tail;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobDesc &job = plan.jobs[i];
    if (job.kind != JobKind::run || job.queue != QueueKind::compute ||
        jobMs[i] < 0 || job.label.empty() ||
        job.program >= plan.programs.size())
      continue;
    std::string base = baseName(plan.programs[job.program].name);
    if (isBookkeeping(base))
      continue;
    bool recomputePart = dropSuffix(base, ".recompute");
    dropSuffix(base, ".rest");
    std::map<std::string, Mean> *kind = nullptr;
    switch (job.label[0]) {
    case 'F':
      kind = &forward;
      break;
    case 'B':
      kind = &backward;
      break;
    case 'T':
      kind = &tail;
      break;
    default:
      continue;
    }
    auto [it, fresh] = kind->try_emplace(base);
    if (fresh) {
      it->second.firstJob = i;
      it->second.stage = job.stage;
    }
    it->second.total += jobMs[i];
    // A backward split after its recompute runs as two jobs a microbatch
    // (docs/plan-format.md): their sum is its time, counted once.
    if (!recomputePart)
      ++it->second.jobs;
  }
  if (forward.empty() && backward.empty() && tail.empty())
    return invalidArgument(
        "the trace has no timed layer programs (F, B or T jobs); "
        "--profile needs a training plan that ran at least one step");

  // The layers in model order: the forward stages run them one program per
  // layer, stage by stage.
  std::vector<std::pair<std::string, Mean>> ordered(forward.begin(),
                                                    forward.end());
  std::sort(ordered.begin(), ordered.end(), [](const auto &a, const auto &b) {
    return std::make_pair(a.second.stage, a.second.firstJob) <
           std::make_pair(b.second.stage, b.second.firstJob);
  });
  std::vector<std::string> order;
  std::map<std::string, LayerTimes> layers;
  std::vector<std::string> notes, skipped;
  for (auto &[name, mean] : ordered) {
    if (name.find("..") != std::string::npos) {
      skipped.push_back("forward program '" + name + "'");
      continue;
    }
    order.push_back(name);
    layers[name].forward = mean.value();
  }
  auto position = [&](const std::string &name) -> int {
    auto it = std::find(order.begin(), order.end(), name);
    return it == order.end() ? -1 : int(it - order.begin());
  };
  /// The layers "A..B" covers in model order (either way round), or none
  /// when an end has no forward program of its own.
  auto expand = [&](const std::string &span) {
    auto [a, b] = ends(span);
    int i = position(a), j = position(b);
    std::vector<std::string> out;
    if (i < 0 || j < 0)
      return out;
    for (int k = std::min(i, j); k <= std::max(i, j); ++k)
      out.push_back(order[k]);
    return out;
  };

  bool clamped = false;
  std::vector<std::string> groups;
  for (auto &[name, mean] : backward) {
    const std::string suffix = ".backward";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix)) {
      skipped.push_back("backward program '" + name + "'");
      continue;
    }
    std::string span = name.substr(0, name.size() - suffix.size());
    std::vector<std::string> covered = expand(span);
    if (covered.empty()) {
      skipped.push_back("backward program '" + name +
                        "' (a layer it covers has no forward job)");
      continue;
    }
    double forwardSum = 0;
    for (const std::string &l : covered)
      forwardSum += layers[l].forward;
    for (const std::string &l : covered) {
      LayerTimes &t = layers[l];
      double share = forwardSum > 0 ? t.forward / forwardSum
                                    : 1.0 / double(covered.size());
      double total = mean.value() * share;
      // Recompute runs the layer's forward again: it costs what the
      // forward job measured; the rest of the layer's share is backward.
      t.recompute = std::min(t.forward, total);
      t.backward = total - t.recompute;
      clamped |= total < t.forward;
    }
    if (covered.size() > 1)
      groups.push_back("'" + name + "' across " +
                       std::to_string(covered.size()) + " layers");
  }

  std::vector<std::string> tailOrder;
  std::vector<std::string> tails;
  bool tailGuessed = false;
  for (auto &[name, mean] : tail) {
    auto [a, b] = ends(name);
    const ProgramDesc &program =
        plan.programs[plan.jobs[mean.firstJob].program];
    TailSplit split = splitTail(plan, program, a, b);
    double cost = 0;
    for (size_t k = 0; k < split.layers.size(); ++k)
      cost += split.forward[k] + split.backward[k];
    bool weighed = split.lossFound && cost > 0;
    tailGuessed |= !weighed;
    for (size_t k = 0; k < split.layers.size(); ++k) {
      const std::string &l = split.layers[k];
      double n = double(split.layers.size());
      double fwdMs = weighed ? mean.value() * split.forward[k] / cost
                             : mean.value() / n / 3;
      double bwdMs = weighed ? mean.value() * split.backward[k] / cost
                             : mean.value() / n - fwdMs;
      LayerTimes &t = layers[l];
      if (std::find(order.begin(), order.end(), l) != order.end()) {
        // Timed by its own forward jobs too: keep that forward.
        t.backward = std::max(0.0, fwdMs + bwdMs - t.forward);
        clamped |= fwdMs + bwdMs < t.forward;
        continue;
      }
      if (std::find(tailOrder.begin(), tailOrder.end(), l) == tailOrder.end())
        tailOrder.push_back(l);
      t.forward = fwdMs;
      t.backward = bwdMs;
    }
    tails.push_back("'" + name + "' (" + std::to_string(split.layers.size()) +
                    " layer(s))");
  }

  std::string note = "mean time per microbatch of each layer's compute "
                     "jobs over " +
                     std::to_string(steps) +
                     " step(s) (the first step is left out as warm-up when "
                     "there are more); 'X.backward' is split as recompute = "
                     "forward_ms of X, backward = the rest";
  if (!groups.empty()) {
    note += "; group backward programs split across their layers in "
            "proportion to the layers' forward times:";
    for (const std::string &g : groups)
      note += " " + g;
  }
  if (clamped)
    note += "; where a backward or tail job took less than the forward of "
            "its layers, the forward part is cut to the job's share and "
            "backward_ms is 0";
  if (!tails.empty()) {
    note += "; fused tail(s)";
    for (const std::string &t : tails)
      note += " " + t;
    note += " (forward + loss + backward in one job, no recompute): split "
            "across its layers, and between forward (the calls up to the "
            "loss) and backward, in proportion to an estimate of its kernel "
            "calls' work (multiply-adds of matmuls and attention, elements "
            "written by the others), each call going to the layer its ONNX "
            "scope names, or else to the layers no scope names (prefix, "
            "suffix)";
    if (tailGuessed)
      note += "; a tail with no loss call to tell forward from backward is "
              "shared evenly by its layers, 1/3 forward and 2/3 backward";
  }
  note += "; gradient accumulation (start-grads, add-grads) is in no "
          "layer's time";
  if (!skipped.empty()) {
    note += "; left out, so those layers keep the model's times:";
    for (const std::string &s : skipped)
      note += " " + s;
  }

  // The file's format is the contract's (rp/timing/Measured.h), which
  // rp-compile --measured reads.
  order.insert(order.end(), tailOrder.begin(), tailOrder.end());
  if (!ops.empty())
    note += "; ops: each kernel call's time on its device (the host backend: "
            "wall time around the call; cuda: events around it), the "
            "median over the calls of one op kind, element type, operand "
            "shapes and attributes that change the work, over the same steps";
  timing::MeasuredTimes times;
  times.hw = hw;
  times.note = note;
  times.ops = ops;
  for (const std::string &name : order) {
    const LayerTimes &t = layers[name];
    times.order.push_back(name);
    times.layers[name] = {t.forward, t.recompute, t.backward};
  }
  return timing::formatMeasuredTimes(times);
}

Status rp::runtime::writeMeasuredProfile(const Trace &trace,
                                         const std::string &hw,
                                         const std::string &path) {
  Expected<std::string> text = measuredProfileJson(
      trace.getPlan(), trace.jobMeansMs(), hw, trace.meanSteps(),
      measuredOps(trace.getPlan(), trace.callTimesMs()));
  if (!text)
    return text.getStatus();
  return writeFileAtomically(path, "profile",
                             [&](std::ostream &out) { out << *text; });
}
