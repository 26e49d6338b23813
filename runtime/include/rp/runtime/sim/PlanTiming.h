//===- PlanTiming.h - a plan's kernel calls timed by rp/timing ---*- C++
//-*-===//
//
// The bridge from a loaded plan to the shared timing model: a kernel call's
// operands as rp/timing sees them (shapes, element sizes, the float type
// that picks the rate). The sim device times its launches with it, and
// traces use it to show how much of a backward job recomputes the forward.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_SIM_PLANTIMING_H
#define RP_RUNTIME_SIM_PLANTIMING_H

#include "rp/runtime/Plan.h"
#include "rp/timing/Hardware.h"
#include "rp/timing/Measured.h"

namespace rp::runtime::sim {

/// `call`'s operands as rp/timing sees them: each buffer's shape and
/// element size, and the first float operand's type.
timing::CallOperands callOperands(const Plan &plan, const KernelCallDesc &call);

/// The time of `call`, a kernel call of `plan`, on `hw`: its measured time
/// where `measured` (may be null) names its op and shapes
/// (timing::timedCallMs), else the model's.
double callTimeMs(const timing::HardwareModel &hw, const Plan &plan,
                  const KernelCallDesc &call,
                  const timing::MeasuredTimes *measured = nullptr);

/// The share of program `program`'s modelled time its recompute calls take
/// (KernelCallDesc::recompute), in [0, 1]; 0 when it has none.
double recomputeShare(const timing::HardwareModel &hw, const Plan &plan,
                      uint32_t program);

} // namespace rp::runtime::sim

#endif // RP_RUNTIME_SIM_PLANTIMING_H
