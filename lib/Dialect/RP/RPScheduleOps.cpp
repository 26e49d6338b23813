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

static constexpr llvm::StringLiteral kScheduleNames =
    "round-robin, gpipe, 1f1b, interleaved-1f1b or looped-bfs";

void PartitionAttr::print(AsmPrinter &p) const {
  p << "<schedule = \"" << stringifyScheduleKind(getSchedule())
    << "\", devices = " << getDevices()
    << ", microbatches = " << getMicrobatches() << ", hw = \""
    << getHw().getProfile() << "\", ";
  // The defaults stay unwritten, so most partitions read as they always did.
  if (getPartitioner() != Partitioner::rp)
    p << "partitioner = \"" << stringifyPartitioner(getPartitioner()) << "\", ";
  if (isMixed()) {
    p << "recompute = [";
    llvm::interleaveComma(getGrains(), p, [&](RecomputeGrain g) {
      p << "\"" << stringifyRecomputeGrain(g) << "\"";
    });
    p << "], ";
  } else if (getRecompute() != RecomputeGrain::stage) {
    p << "recompute = \"" << stringifyRecomputeGrain(getRecompute()) << "\", ";
  }
  if (getTailJobs() != 1)
    p << "tail_jobs = " << getTailJobs() << ", ";
  p << "forward = ";
  printSizes(p, getForward());
  p << ", backward = ";
  printSizes(p, getBackward());
  p << ">";
}

/// Parses `"name"` into one of an enum's cases, or reports the name and
/// the cases at its location.
template <typename Enum>
static ParseResult
parseEnumString(AsmParser &parser, Enum &out, StringRef what,
                StringRef expected,
                std::optional<Enum> (*symbolize)(StringRef)) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseString(&name))
    return failure();
  std::optional<Enum> value = symbolize(name);
  if (!value)
    return parser.emitError(loc)
           << "unknown " << what << " '" << name << "'; expected " << expected;
  out = *value;
  return success();
}

Attribute PartitionAttr::parse(AsmParser &parser, Type) {
  std::string hw;
  ScheduleKind schedule = ScheduleKind::roundRobin;
  Partitioner partitioner = Partitioner::rp;
  RecomputeGrain recompute = RecomputeGrain::stage;
  unsigned devices = 0, microbatches = 0, tailJobs = 1;
  SmallVector<int64_t> forward, backward;
  SmallVector<RecomputeGrain> grains;
  auto sizes = [&](SmallVector<int64_t> &out) {
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
      return parser.parseInteger(out.emplace_back());
    });
  };
  if (parser.parseLess() || parser.parseKeyword("schedule") ||
      parser.parseEqual() ||
      parseEnumString(parser, schedule, "schedule", kScheduleNames,
                      &symbolizeScheduleKind) ||
      parser.parseComma() || parser.parseKeyword("devices") ||
      parser.parseEqual() || parser.parseInteger(devices) ||
      parser.parseComma() || parser.parseKeyword("microbatches") ||
      parser.parseEqual() || parser.parseInteger(microbatches) ||
      parser.parseComma() || parser.parseKeyword("hw") || parser.parseEqual() ||
      parser.parseString(&hw) || parser.parseComma())
    return {};
  if (succeeded(parser.parseOptionalKeyword("partitioner")) &&
      (parser.parseEqual() ||
       parseEnumString(parser, partitioner, "partitioner",
                       "rp, roundpipe or exhaustive", &symbolizePartitioner) ||
       parser.parseComma()))
    return {};
  // One grain, or a list of one per backward stage after the tail.
  auto grain = [&](RecomputeGrain &out) {
    return parseEnumString(parser, out, "recompute grain",
                           "stage, layer or auto", &symbolizeRecomputeGrain);
  };
  auto grainOrList = [&]() -> ParseResult {
    if (failed(parser.parseOptionalLSquare()))
      return grain(recompute);
    return failure(parser.parseCommaSeparatedList([&] {
      return grain(grains.emplace_back());
    }) || parser.parseRSquare());
  };
  if (succeeded(parser.parseOptionalKeyword("recompute")) &&
      (parser.parseEqual() || grainOrList() || parser.parseComma()))
    return {};
  if (succeeded(parser.parseOptionalKeyword("tail_jobs")) &&
      (parser.parseEqual() || parser.parseInteger(tailJobs) ||
       parser.parseComma()))
    return {};
  // A list of equal grains is that one grain.
  if (!grains.empty() && llvm::all_equal(grains)) {
    recompute = grains.front();
    grains.clear();
  }
  if (parser.parseKeyword("forward") || parser.parseEqual() || sizes(forward) ||
      parser.parseComma() || parser.parseKeyword("backward") ||
      parser.parseEqual() || sizes(backward) || parser.parseGreater())
    return {};
  HardwareAttr hwAttr =
      parser.getChecked<HardwareAttr>(parser.getContext(), hw);
  if (!hwAttr)
    return {};
  return parser.getChecked<PartitionAttr>(
      parser.getContext(), schedule, devices, microbatches, hwAttr, partitioner,
      recompute, forward, backward, tailJobs, grains);
}

PartitionAttr PartitionAttr::withGrains(ArrayRef<RecomputeGrain> grains) const {
  bool uniform = grains.empty() || llvm::all_equal(grains);
  RecomputeGrain one = grains.empty() ? getRecompute() : grains.front();
  return get(getContext(), getSchedule(), getDevices(), getMicrobatches(),
             getHw(), getPartitioner(), uniform ? one : RecomputeGrain::stage,
             getForward(), getBackward(), getTailJobs(),
             uniform ? ArrayRef<RecomputeGrain>{} : grains);
}

LogicalResult
PartitionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      ScheduleKind schedule, unsigned devices,
                      unsigned microbatches, HardwareAttr hw,
                      Partitioner partitioner, RecomputeGrain recompute,
                      ArrayRef<int64_t> forward, ArrayRef<int64_t> backward,
                      unsigned tailJobs, ArrayRef<RecomputeGrain> grains) {
  if (devices == 0 || microbatches == 0)
    return emitError() << "devices and microbatches must be at least 1";
  if (tailJobs != 1 && tailJobs != 2)
    return emitError() << "tail_jobs must be 1 or 2, not " << tailJobs;
  // With one microbatch two tail jobs take alternate token slices, which
  // the attribute does not record: the pipeline passes check that
  // (loadPipelineInputs).
  if (tailJobs == 2 && schedule != ScheduleKind::roundRobin)
    return emitError() << "tail_jobs = 2 takes alternate microbatches (or "
                          "token slices) of a round-robin schedule, so it "
                          "needs round-robin";
  if (!hw)
    return emitError() << "needs a hardware profile";
  if (partitioner == Partitioner::roundpipe &&
      schedule != ScheduleKind::roundRobin)
    return emitError() << "partitioner roundpipe cuts round-robin stages, "
                          "not "
                       << stringifyScheduleKind(schedule) << " ones";
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
  if (!grains.empty() && grains.size() + 1 != backward.size())
    return emitError() << "recompute lists " << grains.size()
                       << " grains but there are " << backward.size() - 1
                       << " backward stages after the tail; give one grain "
                          "per backward stage, or one for all";
  if (llvm::is_contained(grains, RecomputeGrain::automatic))
    return emitError() << "a per-stage recompute list holds chosen grains, "
                          "stage or layer; give \"auto\" alone to have "
                          "rp-choose-recompute choose them";
  return success();
}

//===----------------------------------------------------------------------===//
// HardwareAttr
//===----------------------------------------------------------------------===//

LogicalResult HardwareAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef profile) {
  if (profile.empty())
    return emitError() << "needs a hardware profile: a shipped name or a "
                          "JSON file";
  return success();
}

//===----------------------------------------------------------------------===//
// Schedule ops
//===----------------------------------------------------------------------===//

void ScheduleOp::build(OpBuilder &builder, OperationState &state,
                       StringRef function) {
  state.addAttribute(getFunctionAttrName(state.name),
                     FlatSymbolRefAttr::get(builder.getContext(), function));
  Region *body = state.addRegion();
  body->push_back(new Block);
}

/// The function attribute rp-partition records its decision in.
static constexpr llvm::StringLiteral kPartitionAttr = "rp.partition";

PartitionAttr ScheduleOp::getPartition() {
  Operation *func =
      SymbolTable::lookupNearestSymbolFrom(*this, getFunctionAttr());
  return func ? func->getAttrOfType<PartitionAttr>(kPartitionAttr)
              : PartitionAttr();
}

/// Checks a command against its schedule's partition: a compute runs one
/// of the step's `microbatches`, and every command runs on one of its
/// devices.
static LogicalResult verifyCommand(Operation *op, PartitionAttr partition,
                                   int64_t microbatches, int64_t device,
                                   std::optional<int64_t> mb) {
  if (mb && (*mb < 0 || *mb >= microbatches))
    return op->emitOpError("runs microbatch ")
           << *mb << " of a step of " << microbatches;
  if (device < 0 || device >= int64_t(partition.getDevices()))
    return op->emitOpError("runs on device ")
           << device << " but the schedule has " << partition.getDevices();
  return success();
}

// The checks against the function's partition: a symbol use, verified once
// the whole module is.
LogicalResult ScheduleOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *func =
      symbolTable.lookupNearestSymbolFrom(*this, getFunctionAttr());
  if (!func)
    return emitOpError("schedules @")
           << getFunction() << ", which is not in the module";
  auto partition = func->getAttrOfType<PartitionAttr>(kPartitionAttr);
  if (!partition)
    return emitOpError("schedules @")
           << getFunction()
           << ", which has no rp.partition; run rp-partition first";
  if (auto peaks = getPeakBytes();
      peaks && peaks->size() != partition.getDevices())
    return emitOpError("has ") << peaks->size() << " peak_bytes for "
                               << partition.getDevices() << " devices";
  // Token slices run as microbatches (rp-lower-schedule's
  // rp.token_slices): K of them per microbatch of the partition.
  int64_t microbatches = partition.getMicrobatches();
  if (auto slices = (*this)->getAttrOfType<IntegerAttr>("rp.token_slices"))
    microbatches *= slices.getInt();
  for (Operation &op : getBody().front()) {
    LogicalResult ok =
        TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](ComputeOp c) {
              return verifyCommand(c, partition, microbatches, c.getDevice(),
                                   int64_t(c.getMb()));
            })
            .Case([&](CopyOp c) {
              return verifyCommand(c, partition, microbatches, c.getDevice(),
                                   std::nullopt);
            })
            .Default([](Operation *) { return success(); });
    if (failed(ok))
      return failure();
  }
  return success();
}

LogicalResult ComputeOp::verify() {
  // I64Attr getters return uint64_t: compare as signed.
  int64_t begin = getBegin(), end = getEnd();
  if (begin < 0 || end <= begin)
    return emitOpError("has an empty layer range [")
           << begin << ", " << end << ")";
  // A fifth offset places a token-sliced tail's or backward's key and
  // value gradient accumulator; a forward has none.
  if (auto offsets = getOffsets();
      offsets && offsets->size() != 4 &&
      (offsets->size() != 5 || getKind() == LayerRole::forward))
    return emitOpError("needs 4 offsets (weights, input, output, work), or 5 "
                       "for a tail or backward with a key and value gradient "
                       "accumulator");
  if (!(getMs().convertToDouble() >= 0))
    return emitOpError("has a negative time");
  return success();
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
  if (!(getMs().convertToDouble() >= 0))
    return emitOpError("has a negative time");
  return success();
}
