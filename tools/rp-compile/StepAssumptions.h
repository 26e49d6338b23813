//===- StepAssumptions.h - what rp-compile's predicted step assumes -*- C++
//-*-===//
//
// The part of rp-compile's summary that says what the predicted step
// assumes and leaves out, and its range over what the profile cannot know
// (rp/timing/Assumptions.h; kept out of rp-compile.cpp, whose `rp::` is
// mlir::rp, beside the contract's ::rp::timing).
//
//===----------------------------------------------------------------------===//

#ifndef RP_TOOLS_RPCOMPILE_STEPASSUMPTIONS_H
#define RP_TOOLS_RPCOMPILE_STEPASSUMPTIONS_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::rp {

/// Appends, after the predicted step: its range at the fast and slow ends
/// of the profile's unknown inputs (rp-plan-memory's `rp.step_range_ms`),
/// or that the profile names none; then what it assumes and leaves out.
void printStepAssumptions(ModuleOp module, ScheduleOp s, llvm::raw_ostream &os);

} // namespace mlir::rp

#endif // RP_TOOLS_RPCOMPILE_STEPASSUMPTIONS_H
