//===- StepAssumptions.cpp - what rp-compile's predicted step assumes -----===//

#include "StepAssumptions.h"

#include "rp/timing/Assumptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::rp;
namespace timing = ::rp::timing;

/// What the predicted step assumes and leaves out, with its range over
/// what the profile cannot know (rp/timing/Assumptions.h: rp-plan-memory
/// timed the step again at the fast and slow ends of the profile's
/// "unknown" inputs).
void mlir::rp::printStepAssumptions(ModuleOp module, ScheduleOp s,
                                    llvm::raw_ostream &os) {
  std::string profile = s.getPartition().getHw().getProfile().str(), error;
  std::optional<timing::HardwareModel> hw =
      timing::loadHardwareModel(profile, error);
  std::optional<std::vector<timing::UnknownInput>> unknown =
      timing::loadUnknownInputs(profile, error);
  if (!hw || !unknown)
    return; // the passes read the profile: not reached
  auto range = s->getAttrOfType<DenseF64ArrayAttr>(timing::kStepRangeAttr);
  if (range && range.size() == 2)
    os << llvm::format(" (%.3f - %.3f ms over what ", range[0], range[1])
       << profile << " cannot know: " << timing::describeUnknown(*unknown)
       << ")";
  else
    os << " (no range: '" << profile
       << "' names no unknown input; its host terms are measured or set)";
  std::string measured;
  RPDialect *dialect = module.getContext()->getLoadedDialect<RPDialect>();
  for (auto func : module.getOps<func::FuncOp>())
    if (StringAttr path = dialect->getMeasuredAttrHelper().getAttr(func))
      measured = ", measured layer times from " + path.str();
  os << "; the predicted step assumes " << timing::describeAssumed(*hw)
     << measured << "; it leaves out " << timing::modelLeavesOut(*hw)
     << " and the host prologue and epilogue programs";
}
