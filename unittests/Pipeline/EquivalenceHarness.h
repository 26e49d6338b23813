//===- EquivalenceHarness.h - compile and train in one process -*- C++ -*-===//
//
// What the equivalence tests (EquivalenceTest.cpp, EquivalenceF16Test.cpp)
// share: a plan's configuration (schedule, devices, microbatches, dtype,
// partition, recompute grain, tail jobs), rp-compile's training path run in
// process, and a host training run that checks the plan's device layout
// (shared arenas, the compiler's peak) before it trains.
//
//===----------------------------------------------------------------------===//

#ifndef RP_UNITTESTS_PIPELINE_EQUIVALENCEHARNESS_H
#define RP_UNITTESTS_PIPELINE_EQUIVALENCEHARNESS_H

#include "TrainOutcome.h"

#include "rp/runtime/Trainer.h"

#include <functional>
#include <string>

namespace rp::test {

struct Config {
  std::string schedule;
  unsigned devices, microbatches;
  bool bf16 = false;
  bool f16 = false;
  /// A user partition (--stages) and layer-grain recompute.
  std::string stages;
  bool layerGrain = false;
  /// The fused tail's stage jobs (--tail-jobs).
  unsigned tailJobs = 1;
  /// Each backward stage's grain (--recompute-stages), when given.
  std::string grains;
  std::string name() const {
    return schedule + " G=" + std::to_string(devices) +
           " M=" + std::to_string(microbatches) + (bf16 ? " bf16" : "") +
           (f16 ? " f16" : "") + (stages.empty() ? "" : " " + stages) +
           (layerGrain ? " layer" : "") +
           (tailJobs != 1 ? " tail-jobs=" + std::to_string(tailJobs) : "") +
           (grains.empty() ? "" : " " + grains);
  }
};

/// A fresh folder for one test's plans and checkpoints.
std::string scratchDir();

/// rp-compile's training path: import, the training pipeline, export.
/// Returns the plan's path ("" after a failure, which the test reports).
std::string compile(const std::string &model, const Config &c,
                    const std::string &dir);

/// How the trainer runs the passes: a barrier after each (one buffer
/// slot), or continuously as rp-run does (two slots, devices renamed).
enum class Run { barrier, continuous };

/// Trains the plan at `planPath` for three steps (seed 5, the checkpoint in
/// `dir`/checkpoint) after `tweak` has changed the options: its losses and
/// final weights.
Outcome train(const std::string &planPath, bool sync, const std::string &dir,
              const std::function<void(runtime::TrainOptions &)> &tweak = {},
              Run run = Run::barrier);

/// The path of an exported test model (RP_TEST_MODELS).
std::string modelPath(const char *name);

} // namespace rp::test

#endif // RP_UNITTESTS_PIPELINE_EQUIVALENCEHARNESS_H
