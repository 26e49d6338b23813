//===- Plan.cpp - loading and validating .rpplan files --------------------===//

#include "rp/runtime/Plan.h"
#include "PlanInternal.h"
#include "rp/contract/PlanFormat.h"
#include "rp/contract/PlanSchemaText.h"
#include "rp/contract/WeightFingerprint.h"
#include "rp/contract/plan_generated.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/kernels/Kinds.h"
#include "rp/runtime/kernels/OpKinds.h"

#include <flatbuffers/idl.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

using namespace rp::runtime;
namespace pf = ::rp::plan;
namespace fs = std::filesystem;

namespace {

/// Builds the messages of one plan file: "<file>: <what>".
struct Checker {
  std::string file;
  Status fail(const std::string &what) const {
    return invalidFormat(file + ": " + what);
  }
};

/// Elements above this are a corrupted shape, not a model (2^48 bytes).
constexpr int64_t kMaxElements = int64_t(1) << 45;

struct Signature {
  int minInputs, maxInputs;
  int ints; ///< exact count, or -1 when the op checks it itself
  int floats;
  int minOutputs = 1, maxOutputs = 1;
};

Signature signatureOf(OpKind op) {
  switch (op) {
  RP_BINARY_OP_CASES:
    return {2, 2, 0, 0};
  case OpKind::cmp:
    return {2, 2, 1, 0};
  case OpKind::where:
    return {3, 3, 0, 0};
  case OpKind::gelu:
    return {1, 1, 1, 0};
  case OpKind::transpose:
  case OpKind::slice:
  case OpKind::reduce:
    return {1, 1, -1, 0};
  case OpKind::concat:
    return {1, 1 << 20, 1, 0};
  case OpKind::gather:
    return {2, 2, 1, 0};
  // ints [transpose_a, transpose_b, (epilogue)]; inputs [a, b, (bias)];
  // outputs [result, (pre-activation)]: plans before the epilogue have two.
  case OpKind::matmul:
    return {2, 3, -1, 0, 1, 2};
  case OpKind::softmax:
  case OpKind::log_softmax:
    return {1, 1, 1, 0};
  case OpKind::layer_norm:
    return {1, 3, 3, 1};
  case OpKind::rms_norm:
    return {1, 2, 2, 1};
  // ints [causal, has_mask, (window), (has_sinks)], floats [scale,
  // (softcap)]: plans written before the window, the sinks and the
  // soft-cap have none of them.
  case OpKind::attention:
    return {3, 5, -1, -1};
  case OpKind::cross_entropy:
    return {2, 2, 1, 0, 2, 2};
  case OpKind::cross_entropy_grad:
    return {3, 3, 1, 0};
  case OpKind::linear_cross_entropy:
    return {3, 3, 2, 0, 2, 2};
  case OpKind::linear_cross_entropy_grad:
    return {4, 4, 2, 0, 2, 2};
  case OpKind::unary_grad:
    return {2, 2, 1, 0};
  case OpKind::softmax_grad:
    return {2, 2, 2, 0};
  case OpKind::norm_grad:
    return {2, 3, 4, 1, 1, 3};
  case OpKind::attention_grad:
    return {4, 6, -1, -1, 3, 4};
  case OpKind::gather_grad:
    return {2, 2, 1, 0};
  case OpKind::slice_grad:
    return {1, 1, -1, 0};
  case OpKind::extremum_grad:
    return {2, 2, -1, 0};
  case OpKind::moe_route:
    return {1, 1, 3, 0, 2, 2};
  case OpKind::moe_route_grad:
    return {3, 3, 2, 0};
  case OpKind::moe_dispatch:
    return {2, 2, 0, 0, 3, 3};
  case OpKind::moe_grouped_matmul:
  case OpKind::moe_grouped_matmul_wgrad:
    return {3, 3, 1, 0};
  case OpKind::moe_combine:
    return {2, 3, 1, 0};
  case OpKind::moe_combine_grad:
    return {3, 4, 1, 0, 1, 2};
  case OpKind::dequantize:
    return {1, 1, 1, 0};
  // inputs [x, key], ints [tensor], floats [p] (HostDropout.cpp)
  case OpKind::dropout:
    return {2, 2, 1, 1};
  default: // unary ops, cast, reshape, broadcast
    return {1, 1, 0, 0};
  }
}

/// attention's ints [causal, has_mask, window, has_sinks]: the sinks are
/// an input after the mask (attention_grad: and a fourth output).
int hasSinks(const KernelCallDesc &call) {
  return call.ints.size() > 3 && call.ints[3] != 0;
}

/// attention's and attention_grad's attributes: ints [causal, has_mask]
/// then an optional window and has_sinks, floats [scale] then an optional
/// softcap.
Status checkAttentionAttrs(const Checker &c, const std::string &name,
                           const KernelCallDesc &call) {
  if (call.ints.size() < 2 || call.ints.size() > 4)
    return c.fail(name + " has " + std::to_string(call.ints.size()) +
                  " integer attributes; it takes 2 to 4");
  if (call.floats.size() != 1 && call.floats.size() != 2)
    return c.fail(name + " has " + std::to_string(call.floats.size()) +
                  " float attributes; it takes 1 or 2");
  return Status::ok();
}

Status checkCall(const Checker &c, const Plan &plan, const std::string &where,
                 const KernelCallDesc &call) {
  Signature sig = signatureOf(call.op);
  std::string name = std::string(opKindName(call.op)) + " (" + where + ")";
  int nIn = call.inputs.size();
  if (nIn < sig.minInputs || nIn > sig.maxInputs)
    return c.fail(name + " has " + std::to_string(nIn) + " inputs; it takes " +
                  std::to_string(sig.minInputs) +
                  (sig.maxInputs != sig.minInputs
                       ? " to " + std::to_string(sig.maxInputs)
                       : ""));
  int nOut = call.outputs.size();
  if (nOut < sig.minOutputs || nOut > sig.maxOutputs)
    return c.fail(name + " has " + std::to_string(nOut) +
                  " outputs; it writes " + std::to_string(sig.minOutputs) +
                  (sig.maxOutputs != sig.minOutputs
                       ? " to " + std::to_string(sig.maxOutputs)
                       : ""));
  for (uint32_t b : call.inputs)
    if (b >= plan.buffers.size())
      return c.fail(name + " reads buffer #" + std::to_string(b) +
                    ", but the plan has " +
                    std::to_string(plan.buffers.size()) + " buffers");
  for (uint32_t outIndex : call.outputs) {
    if (outIndex >= plan.buffers.size())
      return c.fail(name + " writes buffer #" + std::to_string(outIndex) +
                    ", but the plan has " +
                    std::to_string(plan.buffers.size()) + " buffers");
    const BufferDesc &o = plan.buffers[outIndex];
    if (o.weight || !o.constant.empty())
      return c.fail(name + " writes buffer #" + std::to_string(outIndex) +
                    ", which holds a parameter or a constant");
  }
  const BufferDesc &out = plan.buffers[call.outputs[0]];
  if (sig.ints >= 0 && (int)call.ints.size() != sig.ints)
    return c.fail(name + " has " + std::to_string(call.ints.size()) +
                  " integer attributes; it takes " + std::to_string(sig.ints));
  if (sig.floats >= 0 && (int)call.floats.size() != sig.floats)
    return c.fail(name + " has " + std::to_string(call.floats.size()) +
                  " float attributes; it takes " + std::to_string(sig.floats));
  const BufferDesc &in = plan.buffers[call.inputs[0]];
  size_t rank = out.shape.size();
  auto count = [&](size_t expected, const char *what) {
    return call.ints.size() == expected
               ? Status::ok()
               : c.fail(name + " has " + std::to_string(call.ints.size()) +
                        " integer attributes; it takes " +
                        std::to_string(expected) + " (" + what + ")");
  };
  switch (call.op) {
  case OpKind::transpose:
    return count(rank, "the permutation");
  case OpKind::slice:
    return count(2 * rank, "offsets and strides");
  case OpKind::reduce:
  case OpKind::extremum_grad:
    if (call.ints.size() < 3)
      return c.fail(name + " needs a kind, keep_dims and dimensions");
    return Status::ok();
  case OpKind::slice_grad:
    return count(2 * in.shape.size(), "offsets and strides");
  case OpKind::norm_grad:
    // ints: axis, has_scale, with_bias, rms; outputs: dx, [dscale], [dbias]
    if (nIn != 2 + (call.ints[1] != 0) ||
        nOut != 1 + (call.ints[1] != 0) + (call.ints[2] != 0))
      return c.fail(name + " has inputs or outputs that disagree with its "
                           "flags");
    return Status::ok();
  case OpKind::moe_combine:
  case OpKind::moe_combine_grad: {
    // ints: has_weights; inputs: rows, positions, [weights], [grad];
    // outputs: result or rows' gradient, [weights' gradient]
    bool grad = call.op == OpKind::moe_combine_grad;
    bool weights = call.ints[0] != 0;
    if (nIn != 2 + weights + grad || nOut != 1 + (grad && weights))
      return c.fail(name + " has inputs or outputs that disagree with its "
                           "flags");
    return Status::ok();
  }
  case OpKind::attention_grad:
    if (Status s = checkAttentionAttrs(c, name, call); s.failed())
      return s;
    if (nIn != 4 + (call.ints[1] != 0) + hasSinks(call) ||
        int(call.outputs.size()) != 3 + hasSinks(call))
      return c.fail(name + " has inputs that disagree with its flags");
    return Status::ok();
  case OpKind::matmul: {
    if (call.ints.size() != 2 && call.ints.size() != 3)
      return c.fail(name + " has " + std::to_string(call.ints.size()) +
                    " integer attributes; it takes 2 (the transposes) or 3 "
                    "(and the epilogue)");
    int64_t e = call.ints.size() == 3 ? call.ints[2] : 0;
    if (e < 0 || e > int64_t(kernels::MatmulEpilogue::dGeluTanh))
      return c.fail(name + " has an unknown epilogue " + std::to_string(e));
    const bool grad = e >= int64_t(kernels::MatmulEpilogue::dGelu);
    // The bias is a vector of the result's last dimension, in its type; a
    // gelu gradient's pre-activation is the result's shape and type.
    if (nIn != 2 + (e != 0) || (nOut == 2 && (e < 2 || grad)))
      return c.fail(name + " has inputs or outputs that disagree with its "
                           "epilogue");
    if (grad) {
      const BufferDesc &pre = plan.buffers[call.inputs[2]];
      if (pre.shape != out.shape || pre.dtype != out.dtype)
        return c.fail(name + "'s pre-activation is not the result's shape "
                             "and type");
    } else if (e != 0) {
      const BufferDesc &bias = plan.buffers[call.inputs[2]];
      if (bias.shape.size() != 1 || out.shape.empty() ||
          bias.shape[0] != out.shape.back() || bias.dtype != out.dtype)
        return c.fail(name + "'s bias is not a vector of the result's last "
                             "dimension and type");
    }
    if (nOut == 2 && plan.buffers[call.outputs[1]].shape != out.shape)
      return c.fail(name + "'s pre-activation output is not the result's "
                           "shape");
    return Status::ok();
  }
  case OpKind::reshape:
    if (in.size() != out.size())
      return c.fail(name + " reshapes " + std::to_string(in.size()) +
                    " elements into " + std::to_string(out.size()));
    return Status::ok();
  case OpKind::layer_norm:
    if (nIn != 1 + (call.ints[1] != 0) + (call.ints[2] != 0))
      return c.fail(name + " has inputs that disagree with its flags");
    return Status::ok();
  case OpKind::rms_norm:
    if (nIn != 1 + (call.ints[1] != 0))
      return c.fail(name + " has inputs that disagree with its flags");
    return Status::ok();
  case OpKind::attention:
    if (Status s = checkAttentionAttrs(c, name, call); s.failed())
      return s;
    if (nIn != 3 + (call.ints[1] != 0) + hasSinks(call))
      return c.fail(name + " has inputs that disagree with its flags");
    return Status::ok();
  default:
    return Status::ok();
  }
}

/// A scalar vector's elements, each read with memcpy: the FlatBuffers
/// verifier checks the alignment of a vector's length but not of 8-byte
/// elements, so a corrupted plan may put an int64 vector at a 4-aligned
/// address, where a typed load is undefined behaviour (UBSan, fuzzing).
template <typename T, typename V>
std::vector<T> toVector(const flatbuffers::Vector<V> *v) {
  static_assert(std::is_arithmetic_v<V>, "scalar vectors only");
  std::vector<T> out;
  if (!v)
    return out;
  out.reserve(v->size());
  const uint8_t *bytes = v->Data();
  for (uint32_t i = 0; i < v->size(); ++i) {
    V x;
    std::memcpy(&x, bytes + size_t(i) * sizeof(V), sizeof(V));
    out.push_back(static_cast<T>(x));
  }
  return out;
}

std::string str(const flatbuffers::String *s) { return s ? s->str() : ""; }

} // namespace

Expected<Plan> rp::runtime::loadPlan(const std::string &path,
                                     const LoadOptions &options) {
  Checker c{path};
  Expected<std::string> bytes =
      readRegularFile(path, "plan", physicalMemoryBytes());
  if (!bytes)
    return bytes.getStatus();
  Plan plan;
  plan.path = path;
  plan.raw.assign(bytes->begin(), bytes->end());
  const uint8_t *data = plan.raw.data();
  size_t size = plan.raw.size();
  if (size < 8 || !flatbuffers::BufferHasIdentifier(data, pf::kPlanIdentifier))
    return c.fail("not an rp plan (no 'RPPL' identifier); make one with "
                  "rp-compile or rp-translate --rp-export-plan");
  flatbuffers::Verifier verifier(data, size);
  if (!pf::VerifyPlanBuffer(verifier))
    return c.fail("the plan is truncated or corrupted (it fails the "
                  "FlatBuffers structure check); recompile it");
  const pf::Plan *root = pf::GetPlan(data);
  plan.schemaVersion = root->schema_version();
  if (plan.schemaVersion < pf::kOldestPlanSchemaVersion ||
      plan.schemaVersion > pf::kPlanSchemaVersion)
    return c.fail("plan schema version " + std::to_string(plan.schemaVersion) +
                  ", but this runtime reads versions " +
                  std::to_string(pf::kOldestPlanSchemaVersion) + " to " +
                  std::to_string(pf::kPlanSchemaVersion) +
                  "; recompile the model with the matching rp-compile");
  plan.producer = str(root->producer());
  plan.devices = root->devices();
  plan.events = root->events();
  plan.microbatches = root->microbatches();
  if (plan.microbatches == 0)
    return c.fail("the plan runs 0 microbatches");
  if (plan.devices == 0)
    return c.fail("the plan names no device");

  fs::path folder = fs::path(path).parent_path();
  if (const auto *files = root->weight_files())
    for (const pf::WeightFile *f : *files) {
      WeightFileDesc d;
      d.path = f->path()->str();
      d.resolved = (folder / d.path).string();
      d.minSize = f->min_size();
      Expected<uint64_t> size = checkRegularFile(d.resolved, "weight file");
      if (!size && size.getStatus().getCode() == StatusCode::NotFound &&
          options.allowMissingWeights) {
        d.missing = true;
        plan.weightFiles.push_back(std::move(d));
        continue;
      }
      if (!size && size.getStatus().getCode() == StatusCode::NotFound)
        return notFound(path + ": weight file '" + d.path + "' (" + d.resolved +
                        ") is missing; keep weight files beside "
                        "the plan, where rp-compile wrote them, or start "
                        "from random weights made from the plan alone with "
                        "rp-run --init-weights random[:SEED]");
      if (!size)
        return Status(size.getStatus().getCode(),
                      path + ": " + size.getStatus().getMessage());
      uint64_t actual = *size;
      if (actual < d.minSize)
        return c.fail("weight file '" + d.path + "' holds " +
                      std::to_string(actual) + " bytes, but the plan reads " +
                      std::to_string(d.minSize));
      d.fingerprint = f->fingerprint();
      if (d.fingerprint != 0 &&
          ::rp::plan::weightFileFingerprint(d.resolved) != d.fingerprint)
        return c.fail("weight file '" + d.path +
                      "' is not the one the plan was made with (a later "
                      "compile rewrote it and did not finish its plan, or "
                      "it was replaced); recompile the model");
      plan.weightFiles.push_back(std::move(d));
    }

  if (const auto *buffers = root->buffers())
    for (const pf::Buffer *b : *buffers) {
      std::string where = "buffer #" + std::to_string(plan.buffers.size());
      BufferDesc d;
      if (static_cast<int>(b->dtype()) > static_cast<int>(pf::DType::MAX))
        return c.fail(where + " has an unknown element type");
      d.dtype = static_cast<DType>(b->dtype());
      d.shape = toVector<int64_t>(b->shape());
      d.name = str(b->name());
      d.device = b->device();
      int64_t n = 1;
      for (int64_t dim : d.shape) {
        if (dim < 0 || (dim && n > kMaxElements / dim))
          return c.fail(where + " ('" + d.name + "') has an invalid shape");
        n *= dim;
      }
      if (const pf::WeightRange *w = b->weight(); w && !w->stored()) {
        d.weight = WeightRangeDesc{
            0, 0, w->param()->str(), w->trainable(), false, w->init_bound()};
      } else if (w) {
        if (w->file() >= plan.weightFiles.size())
          return c.fail(where + " reads weight file #" +
                        std::to_string(w->file()) + ", but the plan lists " +
                        std::to_string(plan.weightFiles.size()));
        if (w->offset() + d.bytes() > plan.weightFiles[w->file()].minSize)
          return c.fail(where + " ('" + d.name +
                        "') reads past the end its weight file declares");
        d.weight = WeightRangeDesc{w->file(), w->offset(), w->param()->str(),
                                   w->trainable()};
      }
      if (const auto *k = b->constant()) {
        d.constant.assign(k->begin(), k->end());
        if (d.constant.size() != d.bytes())
          return c.fail(where + " embeds " + std::to_string(d.constant.size()) +
                        " bytes, but its shape and type need " +
                        std::to_string(d.bytes()));
      }
      plan.buffers.push_back(std::move(d));
    }

  if (const auto *programs = root->programs())
    for (const pf::Program *p : *programs) {
      ProgramDesc d;
      d.name = p->name()->str();
      if (const auto *calls = p->calls())
        for (const pf::KernelCall *k : *calls) {
          KernelCallDesc call;
          if (static_cast<int>(k->op()) >= kNumOpKinds)
            return c.fail("program '" + d.name + "' calls unknown kernel #" +
                          std::to_string(static_cast<int>(k->op())));
          call.op = static_cast<OpKind>(k->op());
          call.inputs = toVector<uint32_t>(k->inputs());
          call.outputs = toVector<uint32_t>(k->outputs());
          call.ints = toVector<int64_t>(k->ints());
          call.floats = toVector<double>(k->floats());
          call.loc = str(k->loc());
          call.recompute = k->recompute();
          std::string where = "call #" + std::to_string(d.calls.size()) +
                              " of program '" + d.name + "'";
          if (Status s = checkCall(c, plan, where, call); s.failed())
            return s;
          d.calls.push_back(std::move(call));
        }
      plan.programs.push_back(std::move(d));
    }

  if (const auto *jobs = root->jobs())
    for (const pf::Job *j : *jobs) {
      std::string where = "job #" + std::to_string(plan.jobs.size());
      JobDesc d;
      if (static_cast<int>(j->queue()) >= kNumQueueKinds)
        return c.fail(where + " names unknown queue #" +
                      std::to_string(static_cast<int>(j->queue())));
      if (static_cast<int>(j->kind()) > static_cast<int>(pf::JobKind::MAX))
        return c.fail(where + " is of unknown kind #" +
                      std::to_string(static_cast<int>(j->kind())));
      d.kind = static_cast<JobKind>(j->kind());
      d.program = j->program();
      d.device = j->device();
      d.queue = static_cast<QueueKind>(j->queue());
      d.microbatch = j->microbatch();
      d.waits = toVector<uint32_t>(j->waits());
      d.records = toVector<uint32_t>(j->records());
      if (const auto *copies = j->copies())
        for (const pf::Copy *k : *copies)
          d.copies.push_back({k->src(), k->src_offset(), k->dst(),
                              k->dst_offset(), k->bytes()});
      d.stage = j->stage();
      d.label = str(j->label());
      d.predictedStartMs = j->predicted_start_ms();
      d.predictedMs = j->predicted_ms();
      plan.jobs.push_back(std::move(d));
    }
  plan.staged = root->staged();
  plan.prologue = root->prologue();
  plan.epilogue = root->epilogue();
  plan.schedule = str(root->schedule());
  plan.hardware = str(root->hardware());
  plan.passShift = root->pass_shift();
  if (const auto *peaks = root->planned_peak_bytes()) {
    plan.plannedPeakBytes.assign(peaks->begin(), peaks->end());
    if (plan.plannedPeakBytes.size() != plan.devices)
      return c.fail("planned peak memory for " +
                    std::to_string(plan.plannedPeakBytes.size()) +
                    " devices in a plan for " + std::to_string(plan.devices) +
                    "; recompile the model");
  }
  plan.passesInFlight = root->passes_in_flight();
  if (plan.passesInFlight > 2)
    return c.fail("passes in flight " + std::to_string(plan.passesInFlight) +
                  " is not 1 or 2 (0 in older plans); recompile the model");
  plan.arenaCopies = root->arena_copies();
  plan.tf32 = root->tf32();
  if (const pf::LoraSettings *lora = root->lora()) {
    plan.lora.rank = lora->rank();
    plan.lora.alpha = lora->alpha();
    plan.lora.targets = str(lora->targets());
    plan.lora.modulesToSave = str(lora->modules_to_save());
    plan.lora.dropout = lora->dropout();
  }
  if (plan.arenaCopies > 2)
    return c.fail("arena copies " + std::to_string(plan.arenaCopies) +
                  " is not 1 or 2 (0 in older plans); recompile the model");
  if (plan.arenaCopies > std::max(plan.passesInFlight, 1u) &&
      plan.passesInFlight)
    return c.fail(std::to_string(plan.arenaCopies) +
                  " copies of the arenas for " +
                  std::to_string(plan.passesInFlight) +
                  " pass(es) in flight; recompile the model");
  if (plan.passShift < -1 ||
      (plan.passShift >= 0 && uint32_t(plan.passShift) >= plan.devices))
    return c.fail("pass shift " + std::to_string(plan.passShift) +
                  " is not below the plan's " + std::to_string(plan.devices) +
                  " device(s); recompile the model");

  auto bindings = [&](const auto *list, std::vector<BindingDesc> &out,
                      const char *what) -> Status {
    if (!list)
      return Status::ok();
    for (const pf::Binding *b : *list) {
      if (b->buffer() >= plan.buffers.size())
        return c.fail(std::string(what) + " '" + b->name()->str() +
                      "' is buffer #" + std::to_string(b->buffer()) +
                      ", but the plan has " +
                      std::to_string(plan.buffers.size()) + " buffers");
      for (const BindingDesc &seen : out)
        if (seen.name == b->name()->str())
          return c.fail(std::string(what) + " '" + seen.name +
                        "' is listed twice");
      out.push_back({b->name()->str(), b->buffer(), b->limit()});
    }
    return Status::ok();
  };
  if (Status s = bindings(root->inputs(), plan.inputs, "input"); s.failed())
    return s;
  if (Status s = bindings(root->outputs(), plan.outputs, "output"); s.failed())
    return s;
  if (Status s = checkPlanJobs(plan); s.failed())
    return s;
  if (options.checkEvents)
    if (Status s = checkPlanEvents(plan); s.failed())
      return s;
  return plan;
}

Expected<std::string> rp::runtime::describePlanJson(const Plan &plan) {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  opts.output_default_scalars_in_json = true;
  opts.indent_step = 2;
  flatbuffers::Parser parser(opts);
  if (!parser.Parse(pf::kPlanSchemaText))
    return internalError("the built-in plan schema does not parse: " +
                         parser.error_);
  std::string json;
  // The plan passed the verifier, so the one thing strict JSON cannot carry
  // is a string that is not UTF-8: a corrupted plan, not a bug.
  if (!flatbuffers::GenerateText(parser, plan.raw.data(), &json))
    return invalidFormat(plan.path +
                         ": the plan holds a string that is not "
                         "valid UTF-8, which JSON cannot carry; recompile it "
                         "(or use --describe=grid)");
  return json;
}

std::string rp::runtime::describePlanGrid(const Plan &plan) {
  if (plan.staged)
    return describeStagedGrid(plan);
  std::ostringstream os;
  os << "plan " << plan.path << " (schema " << plan.schemaVersion << ", "
     << plan.producer << ")\n";
  os << plan.devices << " device(s), " << plan.buffers.size() << " buffers, "
     << plan.programs.size() << " programs, " << plan.jobs.size() << " jobs\n";
  const char *queues[] = {"compute", "weight-h2d", "act-h2d", "d2h"};
  os << "job  device  queue       mb  program                       calls\n";
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobDesc &j = plan.jobs[i];
    bool run = j.kind == JobKind::run;
    std::string program = run ? plan.programs[j.program].name : "(copy)";
    size_t calls =
        run ? plan.programs[j.program].calls.size() : j.copies.size();
    char line[160];
    snprintf(line, sizeof(line), "%3zu  %6u  %-10s %3u  %-28s %6zu\n", i,
             j.device, queues[static_cast<int>(j.queue) & 3], j.microbatch,
             program.c_str(), calls);
    os << line;
  }
  os << describeBindings(plan);
  return os.str();
}
