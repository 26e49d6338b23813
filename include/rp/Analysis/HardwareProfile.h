//===- HardwareProfile.h - device rates the cost model uses -----*- C++ -*-===//
//
// A hardware profile is a small JSON file (docs/hardware-profiles.md): peak
// compute per element type, device memory bandwidth and size, and the PCIe
// link to the host. The shipped profiles (profiles/*.json) are compiled into
// the tools; a user passes a path to use their own. A measured profile, the
// per-layer times `rp-run --profile` writes, overrides the model's times.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_HARDWAREPROFILE_H
#define RP_ANALYSIS_HARDWAREPROFILE_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::rp {

struct HardwareProfile {
  std::string name;
  /// Peak dense rate in TFLOP/s by element type name (`f32`, `bf16`, ...).
  llvm::StringMap<double> tflops;
  /// The share of peak compute and bandwidth a kernel reaches.
  double computeEfficiency = 1.0;
  double memoryGBps = 0;
  double memoryEfficiency = 1.0;
  double memoryGiB = 0;
  double h2dGBps = 0;
  double d2hGBps = 0;
  /// GPUs that share one host link (a PCIe switch): their copies contend.
  unsigned gpusPerLink = 1;
  double launchUs = 0;
  /// The rate the host's optimizer streams its state at (AdamW reads and
  /// writes 28 bytes per parameter, bench/adamw_vs_torch.py); 0 leaves the
  /// optimizer step untimed.
  double optimizerGBps = 0;
  /// The JSON text it was parsed from (empty for a profile built in code):
  /// the timing model (runtime/include/rp/timing/Hardware.h) reads it again
  /// for what only it knows, the per op kind efficiencies.
  std::string text;

  /// Effective FLOP/s for `elementType`, failure when the profile has no rate
  /// for it. Integer types run at the f32 rate.
  FailureOr<double> flopsPerSecond(Type elementType) const;
  double bytesPerSecond() const { return memoryGBps * 1e9 * memoryEfficiency; }
  double memoryBytes() const { return memoryGiB * (1ull << 30); }
};

/// Names of the profiles compiled into the tools, sorted.
std::vector<std::string> shippedProfileNames();

/// Loads a shipped profile by name, or a file when `nameOrPath` names one
/// (contains a `/` or ends in `.json`). Errors say what is wrong and where.
FailureOr<HardwareProfile> loadHardwareProfile(llvm::StringRef nameOrPath,
                                               MLIRContext *context);

/// Parses profile JSON text; `source` names it in errors.
FailureOr<HardwareProfile> parseHardwareProfile(llvm::StringRef text,
                                                llvm::StringRef source,
                                                MLIRContext *context);

/// Measured times of one layer; fields left out keep the model's value.
struct MeasuredLayer {
  std::optional<double> forwardMs, recomputeMs, backwardMs;
};

struct MeasuredProfile {
  /// The profile the times were measured on, when the file says.
  std::string hw;
  llvm::StringMap<MeasuredLayer> layers;
  std::vector<std::string> order;
};

/// The function attribute (a path) by which rp-partition hands its
/// `measured` file to the passes after it and to the plan exporter, so the
/// schedule's estimate and the plan's predicted times use the same times.
constexpr llvm::StringLiteral kMeasuredAttr = "rp.measured";

/// Loads the per-layer times `rp-run --profile` writes.
FailureOr<MeasuredProfile> loadMeasuredProfile(llvm::StringRef path,
                                               MLIRContext *context);

/// What the cost passes take: a profile and, when `measuredPath` is not
/// empty, measured per-layer times.
struct CostInputs {
  HardwareProfile hw;
  std::optional<MeasuredProfile> measured;
};
FailureOr<CostInputs> loadCostInputs(llvm::StringRef hw,
                                     llvm::StringRef measuredPath,
                                     MLIRContext *context);

} // namespace mlir::rp

#endif // RP_ANALYSIS_HARDWAREPROFILE_H
