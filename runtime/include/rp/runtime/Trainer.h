//===- Trainer.h - training steps on one host device ------------*- C++ -*-===//
//
// Runs a training plan (rp-compile without --forward-only) step by step:
// each step splits the global batch into the plan's microbatches, runs the
// plan once per microbatch with loss_scale = 1 / (non-ignored labels of the
// global batch), sums the gradients, then updates the f32 master weights
// with the optimizer. A staged plan takes the global batch whole and runs
// one pipeline step (PipelineExecutor: prologue, jobs on every device,
// epilogue), which gives a loss_sum per microbatch and summed gradients.
// Modes as DESIGN.md defines them: sync computes g_k at W_k; async (the
// default) computes g_k at W_max(k-1, 0); both set W_{k+1} = Opt(W_k, g_k).
//
// Staged plans run continuously (DESIGN.md, "Continuous execution"): pass
// p+1 is staged into the other buffer slot and submitted while pass p runs,
// its weight uploads gated per parameter on the weight version it needs
// (sync: W_k, async: W_max(k-1,0)), and each pass may rename the devices
// (the round-robin job counter carried across passes). The results are the
// bits of running the passes one after another.
//
// Async mode overlaps: once step k's gradients are in, its optimizer runs
// on its own thread (its loops on the host pool) while step k+1 runs on
// W_k, which needs nothing from that update. Step k+1 accumulates into a
// second gradient buffer, so the update reads g_k alone; the trainer waits
// for it before the weights it makes are needed (the copy to the plan's
// weights after step k+1, a checkpoint, the end).
//
// Several processes (TrainOptions::comm, docs/multi-box.md): each rank
// trains on its slice of the global batch; a step's gradients are summed
// across the ranks parameter by parameter as they land (GradientReducer),
// then the loss sum, before the f16 check, clipping and the optimizer.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TRAINER_H
#define RP_RUNTIME_TRAINER_H

#include "rp/runtime/Comm.h"
#include "rp/runtime/Executor.h"
#include "rp/runtime/LossScale.h"
#include "rp/runtime/Optimizer.h"
#include "rp/runtime/Trace.h"

#include <functional>
#include <map>

namespace rp::runtime {

/// The learning rate of each optimizer step (Hugging Face's schedules, so a
/// run matches transformers' get_*_schedule_with_warmup): step k (from 0)
/// uses base * factor(k), factor rising linearly from 0 over `warmup` steps,
/// then constant, falling linearly to 0 at `total` steps, or along half a
/// cosine to 0 at `total`.
struct LrSchedule {
  enum Kind { constant, linear, cosine } kind = constant;
  unsigned warmup = 0;
  unsigned total = 0;
  double factor(unsigned step) const;
};

/// What step k's update used, for the metrics (rp-run --metrics).
struct UpdateMetrics {
  unsigned step = 0;
  double lr = 0;
  /// The global L2 norm of the step's gradients before clipping.
  double gradNorm = 0;
};

struct TrainOptions {
  unsigned steps = 1;
  bool sync = false;
  bool sgd = false; ///< else AdamW
  AdamWConfig adamw;
  SGDConfig sgdConfig;
  double clipGradNorm = 0.0; ///< 0: no clipping
  uint64_t seed = 0;
  /// LoRA dropout (a plan with a dropout_key input) masks its adapters'
  /// inputs, keyed by `seed` and the step; false (an eval run): no mask.
  bool dropout = true;
  /// Global-batch arrays by input name (labels included); inputs not given
  /// are synthetic from `seed`.
  std::map<std::string, NpyArray> inputs;
  /// Where to write step 0's gradients (safetensors), if anywhere.
  std::string dumpGrads;
  /// A flat token file (nanoGPT-style, little-endian uint16 or uint32):
  /// each step reads the next global batch of sequences from it, labels
  /// being the next tokens, wrapping at the end.
  std::string data;
  bool data32 = false;
  /// A pretokenized dataset (`python -m rp data`, docs/finetune.md): rows of
  /// tokens and labels (-100 where ignored), each step the next global
  /// batch of rows, epoch after epoch, in a seeded order per epoch when
  /// `shuffle`; the position is the rows read so far.
  std::string dataset;
  bool shuffle = false;
  uint64_t shuffleSeed = 0;
  /// The learning rate along the steps (the optimizer's lr is the base).
  LrSchedule schedule;
  /// Hears of every applied update (possibly from the optimizer's thread,
  /// after onStep of that step or of the next).
  std::function<void(const UpdateMetrics &)> onUpdate;
  /// Called once the set-up is done, just before the first step's work
  /// (the start of the first step's time, not the set-up's).
  std::function<void()> onStart;
  /// Hears, before onStep(k, loss), the labels (not -100) step k's loss is
  /// the mean over, so that losses over several steps can be weighted.
  std::function<void(unsigned, int64_t)> onLabelCount;

  /// The learning rate of step `step`'s update.
  double lrAt(unsigned step) const {
    return (sgd ? sgdConfig.lr : adamw.lr) * schedule.factor(step);
  }
  /// Checkpoints: written to `save` at the end and every `saveEvery` steps
  /// (0: never), atomically; `resume` continues from one.
  std::string save;
  unsigned saveEvery = 0;
  std::string resume;
  /// Resume from a checkpoint whose weights or optimizer state hold NaN or
  /// infinities (rp-run --allow-nonfinite); refused otherwise.
  bool allowNonfinite = false;
  /// Staged plans: the executor's watchdog, in ms without progress.
  unsigned watchdogMs = 60000;
  /// Async mode: run step k's optimizer on its own thread while step k+1
  /// runs (on the weights before that update, so the results are the same
  /// bits as running it between the steps, which `false` does).
  bool overlapOptimizer = true;
  /// Passes of the plan's microbatches per optimizer step (--accumulate):
  /// inputs hold K global batches, gradients are summed over the K passes
  /// in pass order and the step's loss is the token-weighted mean over all
  /// K * M microbatches.
  unsigned accumulate = 1;
  /// Staged plans: overlap passes (continuous execution) when the buffers
  /// come in two slots (ForwardOptions::slots); false keeps a barrier after
  /// every pass (--step-barrier).
  bool continuous = true;
  /// Where the staged executor records its jobs and the trainer its
  /// optimizer spans (Trace.h), if anywhere.
  Trace *trace = nullptr;
  /// Plans that compute in f16 train with dynamic loss scaling (LossScale.h)
  /// unless this is off; `onSkippedStep(step, newScale)` hears of every step
  /// skipped for an inf or NaN gradient.
  bool lossScaling = true;
  LossScaleConfig lossScale;
  std::function<void(unsigned, double)> onSkippedStep;
  /// Several processes (docs/multi-box.md): the inputs hold the global
  /// batch of every rank and this rank trains on its slice; gradients and
  /// the loss are summed across the ranks as they land, before loss
  /// scaling's check, clipping and the optimizer, so every rank takes the
  /// same steps. Only rank 0 writes checkpoints. Null: one process.
  Communicator *comm = nullptr;
  /// Several processes: shard the optimizer state (ZeRO-1). Each rank keeps
  /// the Adam moments (SGD's momentum) of its chunk of every parameter,
  /// updates that chunk of the master weights and all-gathers the rest, so
  /// the state's host memory falls with the world size; the bits are those
  /// of the unsharded update. The update runs between the steps.
  bool shardOptimizer = false;
  /// Hears, once the parameters are set up, the host bytes the trainer
  /// allocated beside the plan's buffers (trainerHostBytes' parts).
  std::function<void(uint64_t)> onHostBytes;
};

/// The host bytes train() allocates beside the plan's buffers for one
/// process (no sharded optimizer): per trained parameter, 4 bytes an
/// element each for the f32 master weights, the gradient sum and AdamW's
/// two moments, one more for the second sum (an overlapped optimizer or a
/// staged plan) and one for a staged plan's stash of the weights its
/// passes in flight compute with. rp-compile's host memory counts them.
uint64_t trainerHostBytes(const Plan &plan, bool overlapOptimizer);

/// True when `plan` is a training plan (it takes a loss_scale).
bool isTrainingPlan(const Plan &plan);

/// Runs `options.steps` steps (after the ones a resumed checkpoint has
/// done); calls `onStep(step, loss)` after each, with `step` counted from
/// the start of training. `pool` runs the host's work (the prologue and
/// epilogue, the optimizer); a staged plan's jobs run on fwd's backend.
Status train(const Plan &plan, HostForward &fwd, ThreadPool &pool,
             const TrainOptions &options,
             const std::function<void(unsigned, double)> &onStep);

} // namespace rp::runtime

#endif // RP_RUNTIME_TRAINER_H
