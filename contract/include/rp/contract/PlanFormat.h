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

} // namespace rp::plan

#endif // RP_CONTRACT_PLANFORMAT_H
