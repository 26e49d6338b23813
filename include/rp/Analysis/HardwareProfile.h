//===- HardwareProfile.h - the contract's profiles for MLIR -----*- C++ -*-===//
//
// The compiler's adapter over the contract library (contract/, docs/
// architecture.md): a hardware profile (docs/hardware-profiles.md) is the
// contract's HardwareModel, parsed by its one parser, with the rate of an
// MLIR element type added; a measured profile (the per-layer times `rp-run
// --profile` writes) is the contract's MeasuredTimes. Errors become MLIR
// diagnostics: where a file is named, at its first line. Passes get both
// parsed once per compile through the CostModel analysis (CostModel.h).
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_HARDWAREPROFILE_H
#define RP_ANALYSIS_HARDWAREPROFILE_H

#include "rp/timing/Hardware.h"
#include "rp/timing/Measured.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Types.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::rp {

struct HardwareProfile : ::rp::timing::HardwareModel {
  /// Effective FLOP/s for `elementType`, failure when the profile has no rate
  /// for it. Integer types run at the f32 rate.
  FailureOr<double> flopsPerSecond(Type elementType) const;
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

/// Per-layer times in milliseconds, -1 where the file gives none (a
/// missing recompute_ms is forward_ms).
using MeasuredProfile = ::rp::timing::MeasuredTimes;

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
