//===- PlanInternal.h - shared between the plan library's files -*- C++ -*-===//

#ifndef RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H
#define RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H

#include "rp/runtime/Plan.h"

#include <string>

namespace rp::runtime {

/// describePlanGrid of a staged plan: the device x slot grid.
std::string describeStagedGrid(const Plan &plan);

} // namespace rp::runtime

#endif // RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H
