//===- PlanTiming.cpp - a plan's kernel calls timed by rp/timing ----------===//

#include "rp/runtime/sim/PlanTiming.h"

using namespace rp::runtime;

rp::timing::CallOperands sim::callOperands(const Plan &plan,
                                           const KernelCallDesc &call) {
  timing::CallOperands ops;
  bool typed = false;
  auto operand = [&](uint32_t b) {
    const BufferDesc &buf = plan.buffers[b];
    if (!typed && isFloat(buf.dtype)) {
      ops.dtype = dtypeName(buf.dtype);
      typed = true;
    }
    return timing::Operand{buf.shape, unsigned(dtypeSize(buf.dtype))};
  };
  for (uint32_t b : call.inputs)
    ops.inputs.push_back(operand(b));
  for (uint32_t b : call.outputs)
    ops.outputs.push_back(operand(b));
  return ops;
}

double sim::callTimeMs(const timing::HardwareModel &hw, const Plan &plan,
                       const KernelCallDesc &call,
                       const timing::MeasuredTimes *measured) {
  return timing::timedCallMs(hw, measured, uint16_t(call.op),
                             callOperands(plan, call), call.ints, call.floats);
}

double sim::recomputeShare(const timing::HardwareModel &hw, const Plan &plan,
                           uint32_t program) {
  double all = 0, recompute = 0;
  for (const KernelCallDesc &call : plan.programs[program].calls) {
    double ms = callTimeMs(hw, plan, call);
    all += ms;
    if (call.recompute)
      recompute += ms;
  }
  return all > 0 ? recompute / all : 0.0;
}
