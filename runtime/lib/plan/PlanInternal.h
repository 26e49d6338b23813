//===- PlanInternal.h - shared between the plan library's files -*- C++ -*-===//

#ifndef RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H
#define RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H

#include "rp/runtime/Plan.h"

#include <cstdint>
#include <string>

namespace rp::runtime {

/// describePlanGrid of a staged plan: the device x slot grid.
std::string describeStagedGrid(const Plan &plan);

/// The bytes a tensor of `shape` and `dtype` takes, or false when a
/// dimension is negative or the product overflows: what the .npy and
/// .safetensors readers check a file's header with.
inline bool checkedByteSize(const Shape &shape, DType dtype, uint64_t &bytes) {
  bytes = dtypeSize(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes))
      return false;
  return true;
}

} // namespace rp::runtime

#endif // RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H
