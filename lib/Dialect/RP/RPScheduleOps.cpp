//===- RPScheduleOps.cpp - rp plan-level types, attributes and ops --------===//

#include "rp/Dialect/RP/RPDialect.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::rp;

#define GET_TYPEDEF_CLASSES
#include "rp/Dialect/RP/RPTypes.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "rp/Dialect/RP/RPAttrDefs.cpp.inc"

void RPDialect::registerScheduleTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "rp/Dialect/RP/RPTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "rp/Dialect/RP/RPAttrDefs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// PartitionAttr
//===----------------------------------------------------------------------===//

static void printSizes(AsmPrinter &p, ArrayRef<int64_t> sizes) {
  p << "[";
  llvm::interleaveComma(sizes, p);
  p << "]";
}

void PartitionAttr::print(AsmPrinter &p) const {
  p << "<schedule = \"" << getSchedule() << "\", devices = " << getDevices()
    << ", microbatches = " << getMicrobatches() << ", hw = \"" << getHw()
    << "\", forward = ";
  printSizes(p, getForward());
  p << ", backward = ";
  printSizes(p, getBackward());
  p << ">";
}

Attribute PartitionAttr::parse(AsmParser &parser, Type) {
  std::string schedule, hw;
  unsigned devices = 0, microbatches = 0;
  SmallVector<int64_t> forward, backward;
  auto sizes = [&](SmallVector<int64_t> &out) {
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
      return parser.parseInteger(out.emplace_back());
    });
  };
  if (parser.parseLess() || parser.parseKeyword("schedule") ||
      parser.parseEqual() || parser.parseString(&schedule) ||
      parser.parseComma() || parser.parseKeyword("devices") ||
      parser.parseEqual() || parser.parseInteger(devices) ||
      parser.parseComma() || parser.parseKeyword("microbatches") ||
      parser.parseEqual() || parser.parseInteger(microbatches) ||
      parser.parseComma() || parser.parseKeyword("hw") ||
      parser.parseEqual() || parser.parseString(&hw) || parser.parseComma() ||
      parser.parseKeyword("forward") || parser.parseEqual() ||
      sizes(forward) || parser.parseComma() ||
      parser.parseKeyword("backward") || parser.parseEqual() ||
      sizes(backward) || parser.parseGreater())
    return {};
  return parser.getChecked<PartitionAttr>(parser.getContext(), schedule,
                                          devices, microbatches, hw, forward,
                                          backward);
}

LogicalResult
PartitionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef schedule, unsigned devices,
                      unsigned microbatches, StringRef hw,
                      ArrayRef<int64_t> forward, ArrayRef<int64_t> backward) {
  if (!llvm::is_contained(
          {"round-robin", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs"},
          schedule))
    return emitError() << "unknown schedule '" << schedule
                       << "'; expected round-robin, gpipe, 1f1b, "
                          "interleaved-1f1b or looped-bfs";
  if (devices == 0 || microbatches == 0)
    return emitError() << "devices and microbatches must be at least 1";
  if (backward.empty())
    return emitError() << "the backward list must hold at least the tail";
  if (llvm::any_of(forward, [](int64_t s) { return s <= 0; }) ||
      llvm::any_of(backward, [](int64_t s) { return s <= 0; }))
    return emitError() << "stage sizes must be positive";
  int64_t fwd = 0, bwd = 0;
  for (int64_t s : forward)
    fwd += s;
  for (int64_t s : backward)
    bwd += s;
  if (fwd + backward.front() != bwd)
    return emitError() << "the forward stages and the tail cover " << fwd
                       << " + " << backward.front()
                       << " layers but the backward stages cover " << bwd;
  return success();
}

//===----------------------------------------------------------------------===//
// Schedule ops
//===----------------------------------------------------------------------===//

void ScheduleOp::build(OpBuilder &builder, OperationState &state,
                       StringRef function, StringRef kind, int64_t devices,
                       int64_t microbatches, StringRef hw) {
  state.addAttribute(getFunctionAttrName(state.name),
                     FlatSymbolRefAttr::get(builder.getContext(), function));
  state.addAttribute(getKindAttrName(state.name), builder.getStringAttr(kind));
  state.addAttribute(getDevicesAttrName(state.name),
                     builder.getI64IntegerAttr(devices));
  state.addAttribute(getMicrobatchesAttrName(state.name),
                     builder.getI64IntegerAttr(microbatches));
  state.addAttribute(getHwAttrName(state.name), builder.getStringAttr(hw));
  Region *body = state.addRegion();
  body->push_back(new Block);
}

LogicalResult ScheduleOp::verify() {
  if (!llvm::is_contained(
          {"round-robin", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs"},
          getKind()))
    return emitOpError("unknown schedule '")
           << getKind()
           << "'; expected round-robin, gpipe, 1f1b, interleaved-1f1b or "
              "looped-bfs";
  if (auto peaks = getPeakBytes();
      peaks && peaks->size() != getDevices())
    return emitOpError("has ") << peaks->size() << " peak_bytes for "
                               << getDevices() << " devices";
  return success();
}

/// Checks what every schedule command shares: a device of the schedule
/// and a non-negative time.
static LogicalResult verifyCommand(Operation *op, int64_t device, double ms) {
  auto schedule = op->getParentOfType<ScheduleOp>();
  if (device < 0 || device >= int64_t(schedule.getDevices()))
    return op->emitOpError("runs on device ")
           << device << " but the schedule has " << schedule.getDevices();
  if (!(ms >= 0))
    return op->emitOpError("has a negative time");
  return success();
}

LogicalResult ComputeOp::verify() {
  // I64Attr getters return uint64_t: compare as signed.
  int64_t begin = getBegin(), end = getEnd(), mb = getMb();
  if (begin < 0 || end <= begin)
    return emitOpError("has an empty layer range [")
           << begin << ", " << end << ")";
  auto schedule = (*this)->getParentOfType<ScheduleOp>();
  if (mb < 0 || mb >= int64_t(schedule.getMicrobatches()))
    return emitOpError("runs microbatch ")
           << mb << " of a step of " << schedule.getMicrobatches();
  if (auto offsets = getOffsets(); offsets && offsets->size() != 4)
    return emitOpError("needs 4 offsets (weights, input, output, work)");
  return verifyCommand(*this, getDevice(), getMs().convertToDouble());
}

LogicalResult CopyOp::verify() {
  bool up = getDirection() == CopyDirection::h2d;
  if ((getKind() == CopyKind::weights && !up) ||
      (getKind() == CopyKind::weight_grads && up))
    return emitOpError("copies ")
           << stringifyCopyKind(getKind()) << " the wrong way";
  bool perMicrobatch =
      getKind() == CopyKind::activation || getKind() == CopyKind::gradient;
  if (perMicrobatch != getMb().has_value() ||
      perMicrobatch != getBoundary().has_value())
    return emitOpError(perMicrobatch
                           ? "of an activation or gradient needs mb and "
                             "boundary"
                           : "of weights or weight gradients takes no mb or "
                             "boundary");
  if (int64_t(getBytes()) < 0)
    return emitOpError("moves a negative number of bytes");
  return verifyCommand(*this, getDevice(), getMs().convertToDouble());
}
