//===- PlanFormat.h - constants of the .rpplan format -----------*- C++ -*-===//
//
// Shared by the compiler's exporter and the runtime's loader, with the
// generated plan_generated.h (contract/schema/plan.fbs).
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_PLANFORMAT_H
#define RP_CONTRACT_PLANFORMAT_H

#include <cstdint>

namespace rp::plan {

/// Bumped on every change a reader must know about; the loader accepts
/// exactly this version.
inline constexpr uint32_t kPlanSchemaVersion = 5;

/// The file identifier at bytes 4..8 of every plan (plan.fbs).
inline constexpr const char *kPlanIdentifier = "RPPL";

/// The most devices and microbatches a plan may have: rp-compile and
/// rp-opt's rp-train-pipeline refuse more where the options are parsed,
/// rp-run --devices takes the same range. Compile time and memory grow with
/// devices times microbatches: 256 devices or 1024 microbatches of a
/// 4-layer model compile in seconds, 4096 devices took 75 s and 2.4 GB.
inline constexpr unsigned kMaxPlanDevices = 256;
inline constexpr unsigned kMaxPlanMicrobatches = 1024;

} // namespace rp::plan

#endif // RP_CONTRACT_PLANFORMAT_H
