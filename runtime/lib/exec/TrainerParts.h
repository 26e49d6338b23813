//===- TrainerParts.h - the trainer's data and checkpoints ------*- C++ -*-===//
//
// What train() (Trainer.cpp) takes from its neighbours: the run's global
// batches and the --data token stream (TrainData.cpp), and the checkpoint
// of its parameters (TrainCheckpoint.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXEC_TRAINERPARTS_H
#define RP_RUNTIME_EXEC_TRAINERPARTS_H

#include "StagedTrainer.h"
#include "rp/runtime/Checkpoint.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rp::runtime::detail {

/// The shape of input `in`'s global batch: a staged plan binds the global
/// batch itself, an unstaged one a microbatch.
/// With `accumulate` K, a step takes K such batches (K passes).
Shape globalShape(const Plan &plan, const BindingDesc &in,
                  unsigned accumulate = 1);

/// A synthetic global batch for `in`: ids below the binding's limit, or
/// N(0, 1) floats, from the seed.
Expected<NpyArray> synthetic(const Plan &plan, const BindingDesc &in,
                             uint64_t seed, unsigned accumulate);

/// Streams a flat token file: sequence after sequence, labels shifted by
/// one token (the data loader shifts; the graph never does).
struct TokenStream {
  /// The open token file: windows are read where they lie (pread), so a
  /// file of any size costs one window of memory (reading it whole took
  /// three times its size).
  struct File {
    int fd = -1;
    std::string path;
    ~File();
  };
  std::shared_ptr<File> file;
  /// Tokens in the file, and bytes per token (2: uint16, 4: uint32).
  uint64_t count = 0;
  unsigned width = 2;
  uint64_t position = 0;
  /// This rank's slice of the global batch: its rows of `world` times the
  /// rows next() fills.
  unsigned rank = 0, world = 1;

  static Expected<TokenStream> open(const std::string &path, bool wide);

  /// A pretokenized dataset (Dataset.cpp, docs/finetune.md) instead: rows
  /// of `rowLength` tokens and labels; `position` counts the rows read,
  /// across epochs.
  bool isDataset = false;
  uint32_t rowLength = 0;
  uint64_t rows = 0;
  std::vector<int32_t> rowTokens, rowLabels, rowSegments;
  /// Where each step's segments go (the plan's `segment_ids` input: the
  /// document of each token, from which a packed model's graph builds its
  /// block-diagonal mask and position ids); null when the plan has none.
  NpyArray *segmentsOut = nullptr;
  bool shuffle = false;
  uint64_t shuffleSeed = 0;
  /// The current epoch's order of the rows (shuffled).
  std::vector<uint64_t> order;
  uint64_t orderEpoch = UINT64_MAX;
  /// The labels other than -100 in the last global batch (every rank's).
  int64_t lastCount = 0;

  static Expected<TokenStream> openDataset(const std::string &path,
                                           bool shuffle, uint64_t seed);

  /// Fills `tokens` and `labels` ([rows, seq], i64) with the next windows.
  Status next(NpyArray &tokensOut, NpyArray &labelsOut, int64_t limit);

private:
  Status nextRows(NpyArray &tokensOut, NpyArray &labelsOut, int64_t limit);
  /// Tokens [first, first + window.size()) of the file.
  Status readWindow(uint64_t first, std::vector<uint32_t> &window) const;
  uint64_t rowAt(uint64_t position);
};

/// A run's inputs: the global batch of every input but the loss scale, and
/// with --data the stream that refills the token input and the labels.
struct TrainInputs {
  std::map<std::string, NpyArray> global;
  const BindingDesc *labels = nullptr, *scale = nullptr;
  std::optional<TokenStream> stream;
  std::string tokenInput;
  /// --dataset: the input fed each row's segments (`segment_ids`), if any.
  std::string segmentInput;
  int64_t tokenLimit = 0;
  /// Several processes: the labels of every rank (the loss counts them
  /// all); `global` holds this rank's slice.
  NpyArray allLabels;
  /// The plan has a dropout_key input (LoRA dropout): `global` holds its
  /// rows, which fillDropoutKey writes each step.
  bool dropoutKey = false;
};

/// Writes step `step`'s dropout_key rows (seed, step, global microbatch
/// index, on) into `in.global`, when the plan has the input.
void fillDropoutKey(TrainInputs &in, const TrainOptions &options,
                    unsigned step);

/// Reads and checks the run's inputs (--input/--labels, synthetic, --data).
Status loadTrainInputs(const Plan &plan, const TrainOptions &options,
                       TrainInputs &out);

/// Writes a checkpoint folder atomically (Checkpoint.h).
Status saveCheckpoint(const std::string &dir, const std::vector<Param> &params,
                      const HostForward &fwd, const CheckpointState &state);

/// Loads a checkpoint into the parameters' master weights, optimizer state
/// and the plan's (compute) weights; returns the steps done. Non-finite
/// weights or state (or negative AdamW second moments) are refused unless
/// `allowNonfinite`.
Expected<CheckpointState> loadCheckpoint(const std::string &dir,
                                         std::vector<Param> &params,
                                         HostForward &fwd, bool allowNonfinite);

} // namespace rp::runtime::detail

#endif // RP_RUNTIME_EXEC_TRAINERPARTS_H
