//===- PredictTimes.cpp - the predicted timeline of a staged plan ---------===//
//
// The compiler's prediction of a plan is taken from the plan itself: every
// job's kernel calls and copies, timed by the runtime's timing model
// (rp/timing) and laid out by the same timing core the sim device resolves
// its steps with. The two then time the same work the same way, and
// `rp-run --backend sim` reproduces the predicted timeline (a test holds
// them within 1%); what is left to differ is how the executor enqueues.
//
//===----------------------------------------------------------------------===//

#include "StagedExporter.h"
#include "rp/timing/Measured.h"
#include "rp/timing/Timeline.h"

using namespace mlir;
using namespace mlir::rp;
namespace timing = ::rp::timing;

static_assert(static_cast<int>(pf::Queue::MAX) + 1 ==
                  static_cast<int>(timing::Lane::host),
              "the plan's queues are the timing core's first lanes");

static bool isFloat(pf::DType t) {
  return t == pf::DType::f32 || t == pf::DType::f16 || t == pf::DType::bf16 ||
         t == pf::DType::f64;
}

bool mlir::rp::predictJobTimes(std::vector<uint8_t> &bytes,
                               const timing::HardwareModel &hw,
                               std::string &error,
                               const timing::MeasuredTimes *measured) {
  pf::Plan *plan = pf::GetMutablePlan(bytes.data());
  const auto *buffers = plan->buffers();
  const auto *programs = plan->programs();
  auto *jobs = plan->mutable_jobs();
  if (!jobs || !buffers)
    return true;
  auto operand = [&](uint32_t b, timing::CallOperands &call, bool &typed) {
    const pf::Buffer *buf = buffers->Get(b);
    timing::Operand o;
    if (buf->shape())
      o.shape.assign(buf->shape()->begin(), buf->shape()->end());
    o.elementBytes = planDTypeBytes(buf->dtype());
    if (!typed && isFloat(buf->dtype())) {
      call.dtype = pf::EnumNameDType(buf->dtype());
      typed = true;
    }
    return o;
  };
  std::vector<double> programMs(programs ? programs->size() : 0, -1);
  auto dispatchOf = [&](uint32_t p) {
    double ms = 0;
    if (const auto *calls = programs->Get(p)->calls())
      for (const pf::KernelCall *c : *calls)
        ms += hw.hostDispatchMs(uint16_t(c->op()));
    return ms;
  };
  // A call's operands and integer attributes, as the sim reads them.
  auto operandsOf = [&](const pf::KernelCall *c, std::vector<int64_t> &ints) {
    timing::CallOperands call;
    bool typed = false;
    if (c->inputs())
      for (uint32_t b : *c->inputs())
        call.inputs.push_back(operand(b, call, typed));
    if (c->outputs())
      for (uint32_t b : *c->outputs())
        call.outputs.push_back(operand(b, call, typed));
    if (c->ints())
      ints.assign(c->ints()->begin(), c->ints()->end());
    return call;
  };
  // The kernels a program launches as the cuda device does, each issued
  // by the host (kernel_host_us; timing::kernelLaunches, as the sim).
  auto callsOf = [&](uint32_t p) -> size_t {
    size_t n = 0;
    if (const auto *calls = programs->Get(p)->calls())
      for (const pf::KernelCall *c : *calls) {
        std::vector<int64_t> ints;
        timing::CallOperands call = operandsOf(c, ints);
        n += timing::kernelLaunches(uint16_t(c->op()), ints, call.inputs,
                                    call.outputs);
      }
    return n;
  };
  auto timeProgram = [&](uint32_t p) {
    if (programMs[p] >= 0)
      return programMs[p];
    double ms = 0;
    if (const auto *calls = programs->Get(p)->calls())
      for (const pf::KernelCall *c : *calls) {
        std::vector<int64_t> ints;
        timing::CallOperands call = operandsOf(c, ints);
        std::vector<double> floats;
        if (c->floats())
          floats.assign(c->floats()->begin(), c->floats()->end());
        // Its measured time where the file's "ops" name it, as the sim.
        ms += timing::timedCallMs(hw, measured, uint16_t(c->op()), call, ints,
                                  floats);
      }
    if (measured && programs->Get(p)->name()) {
      // A fused tail runs forward and backward without recompute; its
      // job's label says so (T2 mb0).
      bool tail = false;
      for (uint32_t i = 0; i < jobs->size(); ++i) {
        const pf::Job *job = jobs->Get(i);
        tail |= job->kind() == pf::JobKind::run && job->program() == p &&
                job->label() && job->label()->str().rfind('T', 0) == 0;
      }
      if (std::optional<double> m = timing::measuredProgramMs(
              *measured, programs->Get(p)->name()->str(), tail))
        ms = *m;
    }
    // The host's per-call dispatch work, on top of measured times too
    // (as the sim charges it); on shared interpreters too, as the sim; its
    // issue work beside the kernels.
    return programMs[p] = hw.programMs(ms, dispatchOf(p), callsOf(p));
  };

  timing::Graph g;
  g.devices = plan->devices();
  g.gpusPerLink = hw.gpusPerLink;
  g.host = hw.hostModel();
  // The host's hand-off to a job waiting on another queue, as the sim.
  g.handoffMs = hw.jobUs * 1e-3;
  std::vector<int64_t> recorder(plan->events(), -1);
  for (uint32_t i = 0; i < jobs->size(); ++i)
    if (const auto *records = jobs->Get(i)->records())
      for (uint32_t e : *records)
        if (e < recorder.size() && recorder[e] < 0)
          recorder[e] = i;
  for (uint32_t i = 0; i < jobs->size(); ++i) {
    const pf::Job *job = jobs->Get(i);
    timing::Task t;
    t.device = job->device();
    t.lane = static_cast<timing::Lane>(job->queue());
    if (job->kind() == pf::JobKind::run) {
      t.ms = timeProgram(job->program());
      t.dispatchMs = dispatchOf(job->program());
      t.issueMs = hw.issueMs(callsOf(job->program()));
    } else if (job->copies()) {
      for (const pf::Copy *c : *job->copies()) {
        bool fromHost = buffers->Get(c->src())->device() < 0;
        bool toHost = buffers->Get(c->dst())->device() < 0;
        t.ms += fromHost ? hw.copyMs(double(c->bytes()), true)
                : toHost ? hw.copyMs(double(c->bytes()), false)
                         : hw.deviceCopyMs(double(c->bytes()));
      }
    }
    if (job->waits())
      for (uint32_t e : *job->waits()) {
        if (e >= recorder.size() || recorder[e] < 0) {
          error = "job " + std::to_string(i) + " waits for event " +
                  std::to_string(e) + ", which no job records";
          return false;
        }
        t.waits.push_back(unsigned(recorder[e]));
      }
    g.tasks.push_back(std::move(t));
  }
  size_t stuck = 0;
  std::optional<timing::Times> times = timing::resolve(g, &stuck);
  if (!times) {
    error = "the plan's jobs cannot all run: job " + std::to_string(stuck) +
            " waits in a cycle";
    return false;
  }
  for (uint32_t i = 0; i < jobs->size(); ++i) {
    pf::Job *job = jobs->GetMutableObject(i);
    if (!job->mutate_predicted_start_ms(times->start[i]) ||
        !job->mutate_predicted_ms(times->end[i] - times->start[i])) {
      error = "job " + std::to_string(i) + " has no predicted time field";
      return false;
    }
  }
  return true;
}

std::optional<PredictedStep> mlir::rp::predictedStep(ArrayRef<uint8_t> bytes) {
  fb::Verifier verifier(bytes.data(), bytes.size());
  if (!pf::VerifyPlanBuffer(verifier))
    return std::nullopt;
  const pf::Plan *plan = pf::GetPlan(bytes.data());
  if (!plan->staged() || !plan->jobs() || plan->devices() == 0)
    return std::nullopt;
  PredictedStep step;
  double busy = 0;
  for (const pf::Job *job : *plan->jobs()) {
    step.jobsMs =
        std::max(step.jobsMs, job->predicted_start_ms() + job->predicted_ms());
    if (job->queue() == pf::Queue::compute)
      busy += job->predicted_ms();
  }
  if (step.jobsMs > 0)
    step.bubble = 1 - busy / (plan->devices() * step.jobsMs);
  return step;
}
