//===- Assumptions.h - what a prediction assumes and leaves out -*- C++ -*-===//
//
// Every prediction rp prints (rp-compile's predicted step, the sim's
// tokens/s) says what it takes from its profile, what the model leaves
// out, and, for the inputs the card's datasheet cannot give (host DRAM
// bandwidth, the PCIe tree, the optimizer's rate on the box's CPU, a CUDA
// launch and hand-off that no GPU run has measured yet), a range: the
// profile's optional "unknown" field lists them as
// {"host_dram_gbps": [100, 300], ...}, and a prediction is made again at
// the slow and the fast end of all of them at once (each term only slows a
// run as it gets worse, so the joint ends bound the prediction).
//
// Kept apart from HardwareModel so that the compiler's many includers of
// Hardware.h do not change with it; parseHardwareModel checks the field.
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_ASSUMPTIONS_H
#define RP_TIMING_ASSUMPTIONS_H

#include "rp/timing/Hardware.h"

#include <optional>
#include <string>
#include <vector>

namespace rp::timing {

/// One input the profile cannot know, with the range a prediction is given
/// over (low <= the profile's own value <= high, in the field's units).
struct UnknownInput {
  std::string field;
  double low = 0, high = 0;
};

/// The profile's "unknown" field, checked against its parsed model `hw`
/// (each field one the ranges may name, its value inside its range);
/// std::nullopt with `error` when it is malformed. Empty when absent.
std::optional<std::vector<UnknownInput>>
parseUnknownInputs(const std::string &text, const std::string &source,
                   const HardwareModel &hw, std::string &error);

/// The unknown inputs of the profile `nameOrPath` names (as
/// loadHardwareModel reads it, NAME:as-built included).
std::optional<std::vector<UnknownInput>>
loadUnknownInputs(const std::string &nameOrPath, std::string &error);

/// `hw` with every unknown input at its slow end (`slow`) or its fast one.
HardwareModel atEnd(const HardwareModel &hw,
                    const std::vector<UnknownInput> &unknown, bool slow);

/// "host DRAM 100-300 GB/s, 1-4 GPUs per uplink, ...".
std::string describeUnknown(const std::vector<UnknownInput> &unknown);

/// What a prediction on `hw` takes from it: the kernels' rates, the
/// links, host DRAM, the uplinks, the optimizer, launch and hand-off.
std::string describeAssumed(const HardwareModel &hw);

/// The attribute by which rp-plan-memory hands rp-compile's summary the
/// predicted step at the fast and slow ends ([fast, slow] ms) of the
/// profile's unknown inputs, on the rp.schedule op.
inline constexpr const char *kStepRangeAttr = "rp.step_range_ms";

/// What the timing model leaves out, whatever the profile
/// (docs/sim.md, "What the model includes and leaves out").
extern const char *const kModelLeavesOut;

/// What it leaves out on `hw`: kModelLeavesOut, less the CPU cores where
/// the profile counts them (host_cores).
std::string modelLeavesOut(const HardwareModel &hw);

} // namespace rp::timing

#endif // RP_TIMING_ASSUMPTIONS_H
