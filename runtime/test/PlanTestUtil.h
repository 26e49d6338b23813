//===- PlanTestUtil.h - building plans in tests -----------------*- C++ -*-===//
//
// Tests describe a plan with the runtime's own structs (Plan.h) through
// PlanBuilder, then write it with the FlatBuffers builder exactly as the
// compiler's exporter does and read it back with loadPlan, so every test
// plan also goes through the loader's checks. Plans that must fail those
// checks on purpose (the watchdog's) are loaded valid and broken after.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_PLANTESTUTIL_H
#define RP_RUNTIME_TEST_PLANTESTUTIL_H

#include "rp/contract/PlanFormat.h"
#include "rp/contract/plan_generated.h"
#include "rp/runtime/Device.h"
#include "rp/runtime/Plan.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace rp::runtime::test {

namespace pf = ::rp::plan;

/// `plan` as the bytes of a .rpplan file.
inline std::vector<uint8_t> serializePlan(const Plan &plan) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<pf::Buffer>> buffers;
  for (const BufferDesc &b : plan.buffers) {
    flatbuffers::Offset<pf::WeightRange> weight = 0;
    if (b.weight)
      weight = pf::CreateWeightRangeDirect(
          fbb, b.weight->file, b.weight->offset, b.weight->param.c_str(),
          b.weight->trainable, b.weight->stored, b.weight->initBound);
    buffers.push_back(pf::CreateBufferDirect(
        fbb, static_cast<pf::DType>(b.dtype), &b.shape, weight,
        b.constant.empty() ? nullptr : &b.constant, b.name.c_str(), b.device));
  }
  std::vector<flatbuffers::Offset<pf::Program>> programs;
  for (const ProgramDesc &p : plan.programs) {
    std::vector<flatbuffers::Offset<pf::KernelCall>> calls;
    for (const KernelCallDesc &c : p.calls)
      calls.push_back(pf::CreateKernelCallDirect(
          fbb, static_cast<pf::OpKind>(c.op), &c.inputs, &c.outputs, &c.ints,
          &c.floats, c.loc.c_str()));
    programs.push_back(pf::CreateProgramDirect(fbb, p.name.c_str(), &calls));
  }
  std::vector<flatbuffers::Offset<pf::Job>> jobs;
  for (const JobDesc &j : plan.jobs) {
    std::vector<flatbuffers::Offset<pf::Copy>> copies;
    for (const CopyDesc &c : j.copies)
      copies.push_back(
          pf::CreateCopy(fbb, c.src, c.srcOffset, c.dst, c.dstOffset, c.bytes));
    jobs.push_back(pf::CreateJobDirect(
        fbb, j.program, j.device, static_cast<pf::Queue>(j.queue), j.microbatch,
        &j.waits, &j.records, static_cast<pf::JobKind>(j.kind), &copies,
        j.stage, j.label.c_str()));
  }
  auto bindings = [&](const std::vector<BindingDesc> &list) {
    std::vector<flatbuffers::Offset<pf::Binding>> out;
    for (const BindingDesc &b : list)
      out.push_back(
          pf::CreateBindingDirect(fbb, b.name.c_str(), b.buffer, b.limit));
    return out;
  };
  auto inputs = bindings(plan.inputs), outputs = bindings(plan.outputs);
  fbb.Finish(pf::CreatePlanDirect(fbb, pf::kPlanSchemaVersion, "PlanTestUtil",
                                  plan.devices, plan.events, nullptr, &buffers,
                                  &programs, &jobs, &inputs, &outputs,
                                  plan.microbatches, plan.staged, plan.prologue,
                                  plan.epilogue, plan.schedule.c_str()),
             pf::kPlanIdentifier);
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

/// `name` in the temporary folder, unique to this process: ctest runs
/// tests (and people run test binaries) side by side.
inline std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "rp-" + std::to_string(::getpid()) + "-" + name;
}

inline std::string writePlanFile(const Plan &plan, const std::string &name) {
  std::string path = tempPath(name);
  std::vector<uint8_t> bytes = serializePlan(plan);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  return path;
}

/// Writes `plan` to the temporary folder as `name`, loads it, removes it.
inline Expected<Plan> writeAndLoad(const Plan &plan, const std::string &name,
                                   const LoadOptions &options = {}) {
  std::string path = writePlanFile(plan, name);
  Expected<Plan> loaded = loadPlan(path, options);
  std::remove(path.c_str());
  return loaded;
}

inline KernelCallDesc call(OpKind op, std::vector<uint32_t> inputs,
                           std::vector<uint32_t> outputs,
                           std::vector<int64_t> ints = {},
                           std::vector<double> floats = {}) {
  KernelCallDesc c;
  c.op = op;
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  c.ints = std::move(ints);
  c.floats = std::move(floats);
  return c;
}

/// BackendOptions for `devices` devices sharing `threads` threads.
inline BackendOptions backendOptions(uint32_t devices, unsigned threads) {
  BackendOptions o;
  o.devices = devices;
  o.threads = threads;
  return o;
}

/// Appends buffers, programs, events and jobs to `plan`, returning indices.
struct PlanBuilder {
  Plan plan;

  PlanBuilder(uint32_t devices, uint32_t microbatches, bool staged) {
    plan.devices = devices;
    plan.microbatches = microbatches;
    plan.staged = staged;
    plan.schedule = staged ? "test" : "";
  }

  uint32_t buffer(const std::string &name, Shape shape, int32_t device = -1,
                  DType dtype = DType::f32) {
    BufferDesc b;
    b.name = name;
    b.shape = std::move(shape);
    b.device = device;
    b.dtype = dtype;
    plan.buffers.push_back(std::move(b));
    return uint32_t(plan.buffers.size() - 1);
  }
  /// A trainable f32 host parameter, uniform in [-bound, bound] from the
  /// run's seed (HostForward::initParameters).
  uint32_t param(const std::string &name, Shape shape, double bound = 0.5) {
    uint32_t b = buffer(name, std::move(shape));
    plan.buffers[b].weight = WeightRangeDesc{
        0, 0, name, /*trainable=*/true, /*stored=*/false, bound};
    return b;
  }
  uint32_t program(const std::string &name, std::vector<KernelCallDesc> calls) {
    plan.programs.push_back({name, std::move(calls)});
    return uint32_t(plan.programs.size() - 1);
  }
  uint32_t event() { return plan.events++; }

  size_t run(uint32_t device, uint32_t program, std::vector<uint32_t> waits,
             std::vector<uint32_t> records, const std::string &label,
             uint32_t microbatch = 0) {
    JobDesc j;
    j.kind = JobKind::run;
    j.program = program;
    j.device = device;
    j.queue = QueueKind::compute;
    j.microbatch = microbatch;
    j.waits = std::move(waits);
    j.records = std::move(records);
    j.label = label;
    plan.jobs.push_back(std::move(j));
    return plan.jobs.size() - 1;
  }
  size_t copy(uint32_t device, QueueKind queue, std::vector<CopyDesc> copies,
              std::vector<uint32_t> waits, std::vector<uint32_t> records,
              const std::string &label, uint32_t microbatch = 0) {
    JobDesc j;
    j.kind = JobKind::copy;
    j.device = device;
    j.queue = queue;
    j.microbatch = microbatch;
    j.copies = std::move(copies);
    j.waits = std::move(waits);
    j.records = std::move(records);
    j.label = label;
    plan.jobs.push_back(std::move(j));
    return plan.jobs.size() - 1;
  }
  /// Copies the whole of `src` into `dst` at byte offset `dstOffset`, or
  /// (slice) `bytes of dst` from `src` at `srcOffset`.
  CopyDesc whole(uint32_t src, uint32_t dst, uint64_t dstOffset = 0) const {
    return {src, 0, dst, dstOffset, plan.buffers[src].bytes()};
  }
  CopyDesc part(uint32_t src, uint64_t srcOffset, uint32_t dst) const {
    return {src, srcOffset, dst, 0, plan.buffers[dst].bytes()};
  }

  void input(const std::string &name, uint32_t buffer, int64_t limit = 0) {
    plan.inputs.push_back({name, buffer, limit});
  }
  void output(const std::string &name, uint32_t buffer) {
    plan.outputs.push_back({name, buffer, 0});
  }
};

} // namespace rp::runtime::test

#endif // RP_RUNTIME_TEST_PLANTESTUTIL_H
