//===- Checkpoint.h - rp-run's checkpoint folders ---------------*- C++ -*-===//
//
// A checkpoint is a folder: weights.safetensors (f32 master weights),
// compute.safetensors (the weights the next step computes with: W_k in
// async mode), optimizer.safetensors (<param>.state0/.state1) and
// state.json (CheckpointState). It is saved whole or not at all: the files
// go to a fresh `DIR.tmp`, are fsynced, and the folder replaces `DIR` in one
// atomic exchange (FileIO.h), so at every instant `DIR` loads as the old
// checkpoint or the new one. state.json is read with every field's type and
// range checked.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_CHECKPOINT_H
#define RP_RUNTIME_CHECKPOINT_H

#include "rp/runtime/Safetensors.h"
#include "rp/runtime/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rp::runtime {

/// The most steps a checkpoint may say were done: far beyond any run, and
/// low enough that the steps done plus rp-run's --steps never wrap.
constexpr unsigned kMaxCheckpointSteps = 1u << 30;

/// The learning-rate schedule of a run (rp-run's --lr, --lr-schedule,
/// --warmup-steps, --total-steps, the total resolved: never 0).
struct CheckpointSchedule {
  std::string kind = "constant"; ///< constant, linear or cosine
  double lr = 0;
  unsigned warmup = 0;
  unsigned total = 0;
  bool operator==(const CheckpointSchedule &o) const {
    return kind == o.kind && lr == o.lr && warmup == o.warmup &&
           total == o.total;
  }
};

/// What a checkpoint holds besides tensors (state.json).
struct CheckpointState {
  unsigned step = 0; ///< steps done
  bool sync = false;
  bool sgd = false;
  uint64_t dataPosition = 0; ///< next token of --data
  /// Updates applied (steps minus those skipped by loss scaling), and the
  /// loss scaler's state (scale 0: none): the scale after every verdict
  /// (step + 1 runs at it), the one step `step` runs at (decided a step
  /// earlier, LossScale.h; 0 in files that predate it: `lossScale`) and
  /// the good steps in a row.
  unsigned updates = 0;
  double lossScale = 0;
  double stepLossScale = 0;
  unsigned goodSteps = 0;
  /// The run's --seed (LoRA dropout's masks, synthetic inputs): a resume
  /// takes it, so the masks go on as the uninterrupted run's. Absent in
  /// files that predate it.
  std::optional<uint64_t> seed;
  /// A --dataset run's --shuffle-seed (none: file order), which a resume
  /// takes likewise, so the rows come in the uninterrupted run's order.
  std::optional<uint64_t> shuffleSeed;
  /// The schedule the run's steps took their rates from, which a resume
  /// takes for the options it is not given, so a decay goes on to the
  /// uninterrupted run's end with no --total-steps given again. Absent in
  /// files that predate it.
  std::optional<CheckpointSchedule> schedule;
};

/// state.json's text for `state`.
std::string formatCheckpointState(const CheckpointState &state);

/// Parses state.json's text, checking every field's type and range; `path`
/// names it in messages.
Expected<CheckpointState> parseCheckpointState(std::string_view text,
                                               const std::string &path);

/// Checks, before any work, that `--save DIR` may be written: DIR does not
/// exist, is an empty folder, or is an rp checkpoint (a folder holding a
/// state.json). Anything else would be deleted by the save, so it is
/// refused.
Status checkSaveTarget(const std::string &dir);

/// The folder that holds checkpoint `dir`: `dir` itself, or `dir`.old when
/// a save on a file system without atomic exchange was interrupted between
/// its two renames.
Expected<std::string> findCheckpoint(const std::string &dir);

/// The state.json of checkpoint `dir` (findCheckpoint's folder), parsed.
Expected<CheckpointState> readCheckpointState(const std::string &dir);

/// One safetensors file of a checkpoint.
struct CheckpointFile {
  std::string name; ///< "weights.safetensors"
  std::vector<NamedTensor> tensors;
};

/// Saves `files` and `state` as checkpoint folder `dir`, atomically and
/// durably (see the file comment).
Status saveCheckpointFolder(const std::string &dir,
                            const std::vector<CheckpointFile> &files,
                            const CheckpointState &state);

} // namespace rp::runtime

#endif // RP_RUNTIME_CHECKPOINT_H
