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
/// kOldestPlanSchemaVersion up to this one (fields are only appended, so
/// an older plan reads with its absent fields at their defaults).
inline constexpr uint32_t kPlanSchemaVersion = 6;
/// 5: before the dropout op and the LoRA settings.
inline constexpr uint32_t kOldestPlanSchemaVersion = 5;

/// The input of a LoRA plan with dropout (rp-add-lora): one i64 row
/// (seed, step, global microbatch index, on) per microbatch, which the
/// trainer fills each step (kernels/Philox.h's dropoutKeyOfRow).
inline constexpr const char *kDropoutKeyInput = "dropout_key";

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
