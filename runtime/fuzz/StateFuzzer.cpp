//===- StateFuzzer.cpp - libFuzzer target of the checkpoint state reader --===//
//
// Parses the input as a checkpoint's state.json; a parsed state must be in
// range and survive a round trip through formatCheckpointState unchanged.

#include "FuzzCheck.h"
#include "rp/runtime/Checkpoint.h"

#include <cmath>
#include <string_view>

using namespace rp::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Expected<CheckpointState> state = parseCheckpointState(text, "state.json");
  if (!state) {
    rp::fuzz::requireUserError(state.getStatus());
    return 0;
  }
  rp::fuzz::require(state->step <= kMaxCheckpointSteps, "step over the cap");
  rp::fuzz::require(state->updates <= state->step, "more updates than steps");
  rp::fuzz::require(std::isfinite(state->lossScale) && state->lossScale >= 0 &&
                        std::isfinite(state->stepLossScale) &&
                        state->stepLossScale >= 0,
                    "loss scale out of range");
  Expected<CheckpointState> again =
      parseCheckpointState(formatCheckpointState(*state), "again.json");
  rp::fuzz::require(bool(again), "a written state does not read back");
  rp::fuzz::require(
      again->step == state->step && again->updates == state->updates &&
          again->goodSteps == state->goodSteps &&
          again->dataPosition == state->dataPosition &&
          again->sync == state->sync && again->sgd == state->sgd &&
          again->lossScale == state->lossScale &&
          again->stepLossScale == state->stepLossScale,
      "a state changes in a round trip");
  return 0;
}
