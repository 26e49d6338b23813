//===- StagedTrainer.h - training a staged plan pass by pass ----*- C++ -*-===//
//
// The trainer's loop for staged plans (Trainer.h): passes staged into
// buffer slots and submitted while the pass before runs, weight versions
// written per parameter into the slots that wait for them, gradients
// summed in pass order, K passes per optimizer step. train() sets up the
// inputs, parameters and checkpoints and hands the steps to trainStaged.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXEC_STAGEDTRAINER_H
#define RP_RUNTIME_EXEC_STAGEDTRAINER_H

#include "rp/runtime/Executor.h"
#include "rp/runtime/Optimizer.h"
#include "rp/runtime/Trainer.h"

#include <functional>
#include <map>
#include <vector>

namespace rp::runtime::detail {

class GradientReducer;

struct Param {
  std::string name;
  uint32_t buffer;     ///< the plan's parameter buffer
  uint32_t gradOutput; ///< the plan's gradient buffer
  /// The f32 master weights hold elements [masterBegin, masterBegin +
  /// master.size()): all of them, or with the master sharded (ZeRO-1,
  /// docs/multi-box.md) this rank's chunk; the whole weights then live in
  /// the plan's parameter buffers, which the gathers write.
  std::vector<float> master, grad, state0, state1;
  /// The gradient an overlapped optimizer reads, swapped with `grad` when
  /// it starts: the next step accumulates into the other one. Staged plans
  /// sum even steps into `grad` and odd ones into `optGrad`.
  std::vector<float> optGrad;
  /// The elements whose optimizer state this rank keeps (state0/state1
  /// hold [shardBegin, shardEnd)): all of them, or with a sharded
  /// optimizer (ZeRO-1) this rank's chunk, as Communicator::sum splits.
  size_t shardBegin = 0, shardEnd = 0;
  /// The parameter's element count, and where `master` starts in it.
  size_t size = 0, masterBegin = 0;
};

/// The optimizer's slot of `p` with gradient `grad`: its shard.
inline ParamSlot shardSlot(Param &p, std::vector<float> &grad) {
  return {p.master.data() + (p.shardBegin - p.masterBegin),
          grad.data() + p.shardBegin, p.state0.data(), p.state1.data(),
          int64_t(p.shardEnd - p.shardBegin)};
}

/// Waits for an optimizer still running on its own thread when the trainer
/// leaves early: it writes the parameters, which must outlive it.
struct PendingOptimizer {
  TaskHandle task;
  Status status;

  /// Waits for the update in flight, if any; its status.
  Status finish() {
    if (!task.isValid())
      return Status::ok();
    task.wait();
    task = TaskHandle();
    return std::move(status);
  }
  ~PendingOptimizer() {
    if (task.isValid())
      task.wait();
  }
};

/// Microbatch `m` of a global-batch array: rows [m*rows, (m+1)*rows)
/// (TrainData.cpp).
NpyArray slice(const NpyArray &global, unsigned m, unsigned count);

/// What the staged trainer shares with train(): the run's inputs and
/// parameters, and the steps' arithmetic that both kinds of plan use.
struct StagedContext {
  const Plan &plan;
  HostForward &fwd;
  ThreadPool &pool;
  const TrainOptions &options;
  const std::function<void(unsigned, double)> &onStep;
  std::vector<Param> &params;
  std::map<std::string, NpyArray> &global;
  uint32_t lossOut;
  const std::vector<std::vector<size_t>> &landsWith;
  const std::vector<unsigned> &writers;
  const std::vector<bool> &landsEarly;
  unsigned &updates;
  unsigned first;
  /// Reads the next global batch into `global` (--data), and the data
  /// position before it; writes a checkpoint.
  std::function<Status()> readBatch;
  std::function<uint64_t()> dataPosition;
  std::function<Status(unsigned done, uint64_t position)> saveCheckpoint;
  std::function<Status(const HostForward &, Param &, std::vector<float> &,
                       unsigned)>
      addGradient;
  std::function<Status(unsigned, double &, NpyArray &, int64_t &)> stepScale;
  std::function<bool(unsigned, std::vector<std::vector<float> *>)> decideApply;
  std::function<Status(std::vector<std::vector<float> *>)> dumpGradients;
  /// Several processes: sums each step's gradients and loss across the
  /// ranks (null: one process).
  GradientReducer *reducer = nullptr;
  /// A sharded optimizer: after step `step`'s update of parameter i's
  /// shard, gathers its whole weights from every rank into `whole`; then
  /// closes the step.
  std::function<Status(unsigned step, size_t i, float *whole)> gatherParam;
  std::function<void(unsigned step)> releaseStep;
  /// The master weights are sharded: `master` holds this rank's chunk.
  bool shardedMaster = false;
  /// Writes step `step`'s dropout_key rows into `global` (none: no-op).
  std::function<void(unsigned step)> fillDropoutKey;
};

/// The inputs of a staged plan's epilogue that are summed over a step's
/// passes (and across the ranks) before it runs once per step: its f32
/// downloads, when the epilogue makes nothing but parameters' gradients
/// from them (a tied parameter's uses). `summedPerUse[i]`: parameter i's
/// gradient is the epilogue's alone. Empty when the epilogue must run per
/// pass.
struct EpilogueUses {
  std::vector<uint32_t> buffers;
  std::vector<bool> summedPerUse;
};
/// (EpilogueUses.cpp)
EpilogueUses epilogueUses(const Plan &plan, const std::vector<Param> &params,
                          const std::vector<bool> &landsEarly);

/// Runs `c.options.steps` steps of a staged plan.
Status trainStaged(StagedContext c);

} // namespace rp::runtime::detail

#endif // RP_RUNTIME_EXEC_STAGEDTRAINER_H
