//===- Executor.h - running a plan's forward on the host --------*- C++ -*-===//
//
// The one-device forward executor: allocates every buffer of the plan,
// fills parameters from the weight files and constants from the plan, takes
// the model inputs, and runs the jobs in order, each program's kernel calls
// on the host kernel library. The staged executor (Pipeline.h) uses its
// buffers and its runJob/runProgram, so that there is one kernel dispatch;
// on the host device every device's memory is host memory.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXECUTOR_H
#define RP_RUNTIME_EXECUTOR_H

#include "rp/runtime/Npy.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Safetensors.h"
#include "rp/runtime/ThreadPool.h"

#include <memory>

namespace rp::runtime {

class HostForward {
public:
  /// Allocates the plan's buffers and loads parameters and constants.
  static Expected<std::unique_ptr<HostForward>> create(const Plan &plan);
  ~HostForward();

  /// Sets input `name` from `array`, converting between i32 and i64 ids and
  /// from f64/f32 data to the input's float type. The shape must match.
  Status setInput(const std::string &name, const NpyArray &array);
  /// Fills every input not set yet: ids uniform in their range, floats from
  /// N(0, 1), all from `seed`.
  Status setSyntheticInputs(uint64_t seed);
  /// Gives parameters that have no stored value their initial value:
  /// uniform in [-init_bound, init_bound] from `seed`, or zeros.
  Status initParameters(uint64_t seed);
  /// Replaces parameters by name (rp-run --init-weights): every tensor of
  /// the file must name a parameter of the plan, with its shape.
  Status overrideParameters(const SafetensorsFile &file);
  /// Runs every job of an unstaged plan in order (a staged plan runs with
  /// PipelineExecutor).
  Status run(ThreadPool &pool);
  /// Runs program `index`'s kernel calls in order on `pool`; a failure names
  /// the program, the call and its op.
  Status runProgram(ThreadPool &pool, uint32_t index);
  /// Runs one job of the plan: its program, or its byte copies. Safe from
  /// several threads at once for jobs that touch disjoint buffers.
  Status runJob(ThreadPool &pool, const JobDesc &job);

  TensorRef buffer(uint32_t index) const;
  TensorRef output(size_t i) const;

private:
  explicit HostForward(const Plan &plan) : plan(plan) {}
  Status runCall(ThreadPool &pool, const ProgramDesc &program, size_t index);

  const Plan &plan;
  std::vector<uint8_t *> storage;
  std::vector<bool> inputSet;
};

} // namespace rp::runtime

#endif // RP_RUNTIME_EXECUTOR_H
