//===- PlanWriter.h - building a .rpplan from IR ----------------*- C++ -*-===//
//
// What the unstaged export (PlanExport.cpp: the model's layers in order on
// one device) and the staged export (StagedExport.cpp: a pipeline
// schedule's commands on every device) share: buffers for values, kernel
// calls for ops, programs, and the plan's tables.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_TARGET_PLANEXPORT_PLANWRITER_H
#define RP_LIB_TARGET_PLANEXPORT_PLANWRITER_H

#include "rp/Dialect/RP/RPOps.h"
#include "rp/Target/PlanExport.h"
#include "rp/contract/plan_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::rp {

namespace pf = ::rp::plan;
namespace fb = ::flatbuffers;

struct KernelSpec {
  pf::OpKind op;
  SmallVector<Value> inputs;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
};

std::optional<pf::DType> planDTypeOf(Type type);
/// The kernel call of a forward op (PlanExportForward.cpp), or nullopt for
/// any other op.
std::optional<KernelSpec> forwardKernelSpec(Operation *op);
/// The kernel call of an rp.moe op (PlanExportMoE.cpp), or nullopt for any
/// other op.
std::optional<KernelSpec> moeKernelSpec(Operation *op);
/// The kernel call of the loss or a gradient op (PlanExportGrad.cpp), or
/// nullopt for any other op.
std::optional<KernelSpec> gradientKernelSpec(Operation *op);
/// The attention kernel's call, the forward's and the gradient's alike:
/// inputs q, k, v, [mask], [sinks], then `grad` (the gradient's dy);
/// ints [causal, has_mask, (window), (has_sinks)]; floats [scale,
/// (softcap)]. The window, the sinks and the soft-cap are written only when
/// set (the window as 0 before has_sinks), so plans without them read as
/// before.
template <typename AttentionLikeOp>
KernelSpec attentionCall(pf::OpKind kind, AttentionLikeOp o, double scale,
                         Value grad = {}) {
  KernelSpec s{kind, {o.getQuery(), o.getKey(), o.getValue()}};
  if (o.getMask())
    s.inputs.push_back(o.getMask());
  if (o.getSinks())
    s.inputs.push_back(o.getSinks());
  if (grad)
    s.inputs.push_back(grad);
  s.ints = {o.getCausal(), o.getMask() != nullptr};
  if (auto window = o.getWindow())
    s.ints.push_back(*window);
  else if (o.getSinks())
    s.ints.push_back(0);
  if (o.getSinks())
    s.ints.push_back(1);
  s.floats = {scale};
  if (auto cap = o.getSoftcap())
    s.floats.push_back(cap->convertToDouble());
  return s;
}
/// For integer inputs used as indices: the bound they must stay under (the
/// gathered dimension, the class count), or 0 when unknown.
int64_t planIndexLimit(Value v);

class PlanWriter {
public:
  PlanWriter(const PlanExportOptions &options) : options(options) {}

  /// One device, layers in order, run once per microbatch.
  LogicalResult run(func::FuncOp main, std::vector<uint8_t> &bytes);
  /// Every command of `schedule` as jobs on the devices' queues.
  LogicalResult runStaged(func::FuncOp main, ScheduleOp schedule,
                          std::vector<uint8_t> &bytes);

private:
  friend class StagedExporter;

  /// The buffer index of `v`: its override when one is set, else its own
  /// buffer, created on first use on `device`.
  uint32_t bufferOf(Value v, StringRef name = {});
  /// A new buffer of `type` (dimension 0 scaled by `rows`) on `device`.
  uint32_t newBuffer(Type type, StringRef name, int device, int64_t rows = 1);
  LogicalResult addParam(ParamOp param);
  LogicalResult addConstant(ConstantOp c);
  /// Appends a program of `ops`' kernel calls (after the `prefix` calls,
  /// before the `extra` ones) and returns its index.
  FailureOr<uint32_t>
  addProgram(StringRef name, ArrayRef<Operation *> ops,
             ArrayRef<fb::Offset<pf::KernelCall>> extra = {},
             ArrayRef<fb::Offset<pf::KernelCall>> prefix = {});
  /// A call of `op` (copy when `add` is false, else `dst += src`).
  fb::Offset<pf::KernelCall> copyCall(uint32_t src, uint32_t dst, bool add);
  FailureOr<KernelSpec> specOf(Operation *op);
  void finish(std::vector<uint8_t> &bytes, unsigned devices, unsigned events,
              bool staged, int prologue, int epilogue, StringRef schedule,
              StringRef hardware = "", int passShift = -1);

  const PlanExportOptions &options;
  /// One for forward plans; staged plans take their schedule's.
  unsigned microbatches = 1;
  /// Staged plans: per device, the memory plan's peak (rp-plan-memory).
  std::vector<uint64_t> plannedPeakBytes;
  /// Staged training plans: passes in flight (0: not decided).
  unsigned passesInFlight = 0;
  /// Staged training plans: copies of the device arenas (0: not decided).
  unsigned arenaCopies = 0;
  fb::FlatBufferBuilder fbb{1 << 16};
  std::vector<fb::Offset<pf::Buffer>> buffers;
  std::vector<int64_t> bufferBytes;
  llvm::DenseMap<Value, uint32_t> bufferIndex;
  /// Where values live in the program being written (a stage job's
  /// device buffers), consulted before bufferIndex.
  llvm::DenseMap<Value, uint32_t> overrides;
  /// The device new buffers are placed on (-1: host).
  int device = -1;
  std::vector<fb::Offset<pf::WeightFile>> weightFiles;
  llvm::StringMap<uint32_t> weightFileIndex;
  std::vector<uint64_t> weightFileMinSize;
  std::vector<std::string> weightFilePaths;
  std::vector<fb::Offset<pf::Program>> programs;
  std::vector<fb::Offset<pf::Job>> jobs;
  std::vector<fb::Offset<pf::Binding>> inputs, outputs;
};

} // namespace mlir::rp

#endif // RP_LIB_TARGET_PLANEXPORT_PLANWRITER_H
