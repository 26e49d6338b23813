//===- PlanInternal.h - shared between the plan library's files -*- C++ -*-===//

#ifndef RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H
#define RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H

#include "rp/runtime/Plan.h"

#include <cstdint>
#include <string>

namespace rp::runtime {

/// The plan's inputs and outputs, a line each (name, dtype, shape): the
/// last lines of both grids.
std::string describeBindings(const Plan &plan);

/// describePlanGrid of a staged plan: the device x slot grid.
std::string describeStagedGrid(const Plan &plan);

/// The bytes a tensor of `shape` and `dtype` takes, or false when a
/// dimension is negative or the product of the nonzero dimensions and the
/// element size does not fit a signed 64-bit count: what the .npy and
/// .safetensors readers check a file's header with. The zeros are left out
/// as numpy leaves them out: an empty array of (10^12, 10^7, 0) is refused
/// (numpy: "array is too big"), since every element count taken of its
/// shape later (numElements) would overflow.
inline bool checkedByteSize(const Shape &shape, DType dtype, uint64_t &bytes) {
  int64_t product = int64_t(dtypeSize(dtype));
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d == 0)
      empty = true;
    else if (__builtin_mul_overflow(product, d, &product))
      return false;
  }
  bytes = empty ? 0 : uint64_t(product);
  return true;
}

} // namespace rp::runtime

#endif // RP_RUNTIME_LIB_PLAN_PLANINTERNAL_H
