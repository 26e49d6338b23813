//===- PlanExport.cpp - rp plans into .rpplan files -----------------------===//
//
// Walks `func.func @main`: arguments and results become the plan's inputs
// and outputs, parameters become buffers backed by weight-file ranges,
// constants become buffers with embedded bytes, every other value a buffer
// of its own, and each rp.layer a program of kernel calls run by one job.
// Each op's kernel call (its attributes as `ints` and `floats`, in the
// order runtime/lib/Executor reads them) is in PlanExportForward.cpp,
// PlanExportGrad.cpp and PlanExportMoE.cpp.
//
//===----------------------------------------------------------------------===//

#include "PlanWriter.h"
#include "rp/Analysis/CostModel.h"
#include "rp/Analysis/MatmulEpilogueMatch.h"
#include "rp/Support/AtomicWrite.h"
#include "rp/contract/MatmulEpilogue.h"
#include "rp/contract/PlanFormat.h"
#include "rp/contract/WeightFingerprint.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace mlir;
using namespace mlir::rp;

std::optional<pf::DType> mlir::rp::planDTypeOf(Type type) {
  Type e = getElementTypeOrSelf(type);
  if (e.isF32())
    return pf::DType::f32;
  if (e.isF16())
    return pf::DType::f16;
  if (e.isBF16())
    return pf::DType::bf16;
  if (e.isF64())
    return pf::DType::f64;
  if (e.isInteger(64))
    return pf::DType::i64;
  if (e.isInteger(32))
    return pf::DType::i32;
  if (e.isInteger(1))
    return pf::DType::i1;
  if (e.isInteger(8))
    return pf::DType::u8;
  return std::nullopt;
}

/// `path` relative to `base`, with ".." where needed; both made absolute.
static std::string relativeTo(StringRef path, StringRef base) {
  SmallString<256> p(path), b(base);
  llvm::sys::fs::make_absolute(p);
  llvm::sys::fs::make_absolute(b);
  llvm::sys::path::remove_dots(p, true);
  llvm::sys::path::remove_dots(b, true);
  SmallVector<StringRef> pc(llvm::sys::path::begin(p), llvm::sys::path::end(p));
  SmallVector<StringRef> bc(llvm::sys::path::begin(b), llvm::sys::path::end(b));
  size_t common = 0;
  while (common < pc.size() && common < bc.size() && pc[common] == bc[common])
    ++common;
  SmallString<256> out;
  for (size_t i = common; i < bc.size(); ++i)
    llvm::sys::path::append(out, "..");
  for (size_t i = common; i < pc.size(); ++i)
    llvm::sys::path::append(out, pc[i]);
  return out.str().str();
}

uint32_t PlanWriter::newBuffer(Type type, StringRef name, int onDevice,
                               int64_t rows) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> dims(t.getShape());
  if (rows != 1) {
    if (dims.empty())
      dims.push_back(rows);
    else
      dims[0] *= rows;
  }
  int64_t bytes = getElementTypeOrSelf(t).getIntOrFloatBitWidth() <= 8
                      ? 1
                      : getElementTypeOrSelf(t).getIntOrFloatBitWidth() / 8;
  for (int64_t d : dims)
    bytes *= d;
  auto shape = fbb.CreateVector(dims.data(), dims.size());
  auto buf = pf::CreateBuffer(fbb, *planDTypeOf(t), shape, 0, 0,
                              name.empty() ? 0 : fbb.CreateString(name.str()),
                              onDevice);
  buffers.push_back(buf);
  bufferBytes.push_back(bytes);
  return buffers.size() - 1;
}

uint32_t PlanWriter::bufferOf(Value v, StringRef name) {
  if (auto it = overrides.find(v); it != overrides.end())
    return it->second;
  auto it = bufferIndex.find(v);
  if (it != bufferIndex.end())
    return it->second;
  uint32_t index = newBuffer(v.getType(), name, device);
  bufferIndex[v] = index;
  return index;
}

LogicalResult PlanWriter::addParam(ParamOp param) {
  if (!planDTypeOf(param.getType()))
    return param.emitOpError("has an element type plans cannot hold");
  if (!param.getFile()) {
    auto type = param.getType();
    auto shape = fbb.CreateVector(type.getShape().data(), type.getRank());
    double bound = param.getInit() ? param.getInit()->convertToDouble() : 0.0;
    auto range = pf::CreateWeightRange(
        fbb, 0, 0, fbb.CreateString(param.getName().str()),
        param.getTrainable(), /*stored=*/false, bound);
    bufferIndex[param.getResult()] = buffers.size();
    buffers.push_back(
        pf::CreateBuffer(fbb, *planDTypeOf(type), shape, range, 0,
                         fbb.CreateString(param.getName().str())));
    bufferBytes.push_back(param.getSizeInBytes());
    return success();
  }
  SmallString<256> path(*param.getFile());
  if (llvm::sys::path::is_relative(path)) {
    path = options.irDir;
    llvm::sys::path::append(path, *param.getFile());
  }
  std::string rel = relativeTo(path, options.planDir);
  auto [it, inserted] =
      weightFileIndex.try_emplace(rel, weightFilePaths.size());
  if (inserted) {
    weightFilePaths.push_back(rel);
    weightFileMinSize.push_back(0);
  }
  uint32_t file = it->second;
  uint64_t offset = param.getOffsetAttr().getInt();
  weightFileMinSize[file] = std::max<uint64_t>(weightFileMinSize[file],
                                               offset + param.getSizeInBytes());
  auto type = param.getType();
  auto shape = fbb.CreateVector(type.getShape().data(), type.getRank());
  auto range = pf::CreateWeightRange(fbb, file, offset,
                                     fbb.CreateString(param.getName().str()),
                                     param.getTrainable());
  bufferIndex[param.getResult()] = buffers.size();
  buffers.push_back(pf::CreateBuffer(fbb, *planDTypeOf(type), shape, range, 0,
                                     fbb.CreateString(param.getName().str())));
  bufferBytes.push_back(param.getSizeInBytes());
  return success();
}

LogicalResult PlanWriter::addConstant(ConstantOp c) {
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense)
    return c.emitOpError(
        "holds a non-dense constant, which plans cannot embed");
  std::vector<uint8_t> data;
  Type element = dense.getElementType();
  if (element.isInteger(1)) {
    for (bool b : dense.getValues<bool>())
      data.push_back(b);
  } else {
    int64_t size = getElementSizeInBytes(element);
    ArrayRef<char> raw = dense.getRawData();
    for (int64_t i = 0, n = dense.getNumElements(); i < n; ++i) {
      const char *src = raw.data() + (dense.isSplat() ? 0 : i * size);
      data.insert(data.end(), src, src + size);
    }
  }
  auto type = c.getType();
  auto shape = fbb.CreateVector(type.getShape().data(), type.getRank());
  bufferIndex[c.getResult()] = buffers.size();
  buffers.push_back(pf::CreateBuffer(fbb, *planDTypeOf(type), shape, 0,
                                     fbb.CreateVector(data), 0, device));
  bufferBytes.push_back(data.size());
  return success();
}

FailureOr<KernelSpec> PlanWriter::specOf(Operation *op) {
  for (auto family : {forwardKernelSpec, gradientKernelSpec, moeKernelSpec})
    if (std::optional<KernelSpec> spec = family(op))
      return *spec;
  return op->emitOpError("has no kernel in the plan format");
}

/// The exclusive bound of integer ids `v` carries when some gather uses it
/// as indices (the table's size along the gathered axis); 0 when none does.
int64_t mlir::rp::planIndexLimit(Value v) {
  int64_t limit = 0;
  auto tighten = [&](int64_t l) {
    if (l > 0)
      limit = limit ? std::min(limit, l) : l;
  };
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto g = dyn_cast<GatherOp>(user); g && use.get() == g.getIndices())
      tighten(g.getInput().getType().getDimSize(g.getAxis()));
    else if (auto ce = dyn_cast<CrossEntropyOp>(user);
             ce && use.get() == ce.getLabels())
      tighten(ce.getLogits().getType().getShape().back());
    else if (auto lce = dyn_cast<LinearCrossEntropyOp>(user);
             lce && use.get() == lce.getLabels())
      tighten(lce.getWeight().getType().getDimSize(0));
    else if (auto lceg = dyn_cast<LinearCrossEntropyGradOp>(user);
             lceg && use.get() == lceg.getLabels())
      tighten(lceg.getWeight().getType().getDimSize(0));
    else if (auto layer = dyn_cast<LayerOp>(user))
      tighten(planIndexLimit(
          layer.getBody().front().getArgument(use.getOperandNumber())));
  }
  return limit;
}

static std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  // A fused op (rp.linear_cross_entropy) is named by its last named part.
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : llvm::reverse(fused.getLocations()))
      if (std::string name = locationName(part); !name.empty())
        return name;
  return {};
}

/// Whether `v` holds its value where `at` runs (a fused call is written at
/// its matmul's place, so what it reads must exist there).
static bool availableAt(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return true; // A block argument of this block or an enclosing one.
  return def->getBlock() != at->getBlock() || def->isBeforeInBlock(at);
}

/// One matmul call with its epilogue (rp-fuse-matmul-epilogue).
struct FusedMatmul {
  KernelSpec spec;
  SmallVector<Value> results;
};

/// The fused calls of the marked matmuls among `ops`, keyed by matmul, and
/// the ops they absorb; a matmul whose pattern does not hold within `ops`
/// (its add in another program, say) is written unfused.
static llvm::DenseMap<Operation *, FusedMatmul>
fuseEpilogues(ArrayRef<Operation *> ops,
              llvm::SmallPtrSetImpl<Operation *> &absorbed) {
  llvm::DenseMap<Operation *, FusedMatmul> fused;
  llvm::SmallPtrSet<Operation *, 32> inProgram(ops.begin(), ops.end());
  auto within = [&](Operation *o) {
    return inProgram.contains(o) && !absorbed.contains(o);
  };
  for (Operation *op : ops) {
    auto mm = dyn_cast<MatmulOp>(op);
    if (!mm || !mm->hasAttr(kEpilogueAttr))
      continue;
    std::optional<EpilogueMatch> m = matchMatmulEpilogue(mm, within);
    if (!m)
      continue;
    FusedMatmul f;
    f.spec = KernelSpec{pf::OpKind::matmul,
                        {mm.getLhs(), mm.getRhs()},
                        {mm.getTransposeA(), mm.getTransposeB()},
                        {}};
    if (m->kind == EpilogueMatch::Kind::dgelu) {
      Value pre = m->grad.getInput();
      if (!availableAt(pre, mm))
        continue;
      bool tanh = m->grad.getKind() == UnaryGradKind::gelu_tanh;
      f.spec.inputs.push_back(pre);
      f.spec.ints.push_back(int64_t(tanh ? ::rp::plan::MatmulEpilogue::dGeluTanh
                                         : ::rp::plan::MatmulEpilogue::dGelu));
      f.results.push_back(m->grad.getResult());
      absorbed.insert(m->grad);
    } else {
      if (!availableAt(m->bias, mm))
        continue;
      f.spec.inputs.push_back(m->bias);
      Value sum = m->add.getResult();
      if (m->kind == EpilogueMatch::Kind::biasGelu) {
        bool tanh = m->gelu.getApproximate() == GeluApproximation::tanh;
        f.spec.ints.push_back(
            int64_t(tanh ? ::rp::plan::MatmulEpilogue::biasGeluTanh
                         : ::rp::plan::MatmulEpilogue::biasGelu));
        f.results.push_back(m->gelu.getResult());
        // The sum as a second result where anything else reads it (the
        // gelu's gradient).
        if (!sum.hasOneUse())
          f.results.push_back(sum);
        absorbed.insert(m->gelu);
      } else {
        f.spec.ints.push_back(int64_t(::rp::plan::MatmulEpilogue::bias));
        f.results.push_back(sum);
      }
      absorbed.insert(m->add);
    }
    fused[mm] = std::move(f);
  }
  return fused;
}

FailureOr<uint32_t>
PlanWriter::addProgram(StringRef name, ArrayRef<Operation *> ops,
                       ArrayRef<fb::Offset<pf::KernelCall>> extra,
                       ArrayRef<fb::Offset<pf::KernelCall>> prefix) {
  std::vector<fb::Offset<pf::KernelCall>> calls(prefix.begin(), prefix.end());
  llvm::SmallPtrSet<Operation *, 16> absorbed;
  llvm::DenseMap<Operation *, FusedMatmul> fused = fuseEpilogues(ops, absorbed);
  for (Operation *opPtr : ops) {
    Operation &op = *opPtr;
    if (absorbed.contains(opPtr))
      continue;
    if (auto c = dyn_cast<ConstantOp>(op)) {
      // A program written twice (two slots of a stage job) shares them.
      if (!bufferIndex.count(c.getResult()) && failed(addConstant(c)))
        return failure();
      continue;
    }
    if (isa<YieldOp>(op))
      continue;
    auto f = fused.find(opPtr);
    FailureOr<KernelSpec> spec =
        f != fused.end() ? FailureOr<KernelSpec>(f->second.spec) : specOf(&op);
    if (failed(spec))
      return failure();
    for (Value r : op.getResults())
      if (!planDTypeOf(r.getType()))
        return op.emitOpError("has an element type plans cannot hold");
    std::vector<uint32_t> ins, outs;
    for (Value v : spec->inputs)
      ins.push_back(bufferOf(v));
    if (f != fused.end())
      for (Value r : f->second.results)
        outs.push_back(bufferOf(r));
    else
      for (Value r : op.getResults())
        outs.push_back(bufferOf(r));
    std::string loc = locationName(op.getLoc());
    calls.push_back(pf::CreateKernelCall(
        fbb, spec->op, fbb.CreateVector(ins), fbb.CreateVector(outs),
        fbb.CreateVector(spec->ints.data(), spec->ints.size()),
        fbb.CreateVector(spec->floats.data(), spec->floats.size()),
        loc.empty() ? 0 : fbb.CreateString(loc), op.hasAttr(kRecomputeAttr)));
  }
  llvm::append_range(calls, extra);
  programs.push_back(pf::CreateProgram(fbb, fbb.CreateString(name.str()),
                                       fbb.CreateVector(calls)));
  return programs.size() - 1;
}

fb::Offset<pf::KernelCall> PlanWriter::copyCall(uint32_t src, uint32_t dst,
                                                bool add) {
  std::vector<uint32_t> ins = {src}, outs = {dst};
  if (add)
    ins.insert(ins.begin(), dst);
  return pf::CreateKernelCall(fbb, add ? pf::OpKind::add : pf::OpKind::reshape,
                              fbb.CreateVector(ins), fbb.CreateVector(outs));
}

void PlanWriter::finish(std::vector<uint8_t> &bytes, unsigned devices,
                        unsigned events, bool staged, int prologue,
                        int epilogue, StringRef schedule, StringRef hardware,
                        int passShift) {
  // The weight files are complete: the plan records which ones it was made
  // with (WeightFingerprint.h), so a later compile that rewrites them
  // without finishing its plan leaves a pair the loader refuses.
  for (auto [path, size] : llvm::zip(weightFilePaths, weightFileMinSize)) {
    SmallString<256> full(path);
    if (llvm::sys::path::is_relative(full)) {
      full = options.planDir;
      llvm::sys::path::append(full, path);
    }
    weightFiles.push_back(pf::CreateWeightFile(
        fbb, fbb.CreateString(path), size,
        ::rp::plan::weightFileFingerprint(full.str().str()).value_or(0)));
  }
  fb::Offset<pf::LoraSettings> lora = 0;
  if (options.lora.rank > 0)
    lora = pf::CreateLoraSettings(fbb, options.lora.rank, options.lora.alpha,
                                  fbb.CreateString(options.lora.targets),
                                  fbb.CreateString(options.lora.modulesToSave),
                                  options.lora.dropout);
  auto plan = pf::CreatePlan(
      fbb, ::rp::plan::kPlanSchemaVersion, fbb.CreateString(options.producer),
      devices, events, fbb.CreateVector(weightFiles), fbb.CreateVector(buffers),
      fbb.CreateVector(programs), fbb.CreateVector(jobs),
      fbb.CreateVector(inputs), fbb.CreateVector(outputs), microbatches, staged,
      prologue, epilogue,
      schedule.empty() ? 0 : fbb.CreateString(schedule.str()),
      hardware.empty() ? 0 : fbb.CreateString(hardware.str()), passShift,
      plannedPeakBytes.empty() ? 0 : fbb.CreateVector(plannedPeakBytes),
      passesInFlight, arenaCopies, options.tf32, lora);
  pf::FinishPlanBuffer(fbb, plan);
  bytes.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

LogicalResult PlanWriter::run(func::FuncOp main, std::vector<uint8_t> &bytes) {
  for (auto [i, arg] : llvm::enumerate(main.getArguments())) {
    if (!planDTypeOf(arg.getType()) || !isa<RankedTensorType>(arg.getType()))
      return main.emitOpError("argument #")
             << i << " is not a tensor a plan can hold";
    auto name = main.getArgAttrOfType<StringAttr>(i, "rp.name");
    std::string n = name ? name.str() : "arg" + std::to_string(i);
    inputs.push_back(pf::CreateBinding(fbb, fbb.CreateString(n),
                                       bufferOf(arg, n), planIndexLimit(arg)));
  }
  // Ops outside layers run as one program per run of consecutive ops.
  std::vector<Operation *> loose;
  auto flushLoose = [&]() -> LogicalResult {
    if (loose.empty())
      return success();
    FailureOr<uint32_t> p =
        addProgram("ops." + std::to_string(programs.size()), loose);
    loose.clear();
    if (failed(p))
      return failure();
    jobs.push_back(pf::CreateJob(fbb, *p, /*device=*/0, pf::Queue::compute));
    return success();
  };
  for (Operation &op : main.getBody().front()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (failed(addParam(param)))
        return failure();
    } else if (auto c = dyn_cast<ConstantOp>(op); c && loose.empty()) {
      if (failed(addConstant(c)))
        return failure();
    } else if (auto layer = dyn_cast<LayerOp>(op)) {
      if (failed(flushLoose()))
        return failure();
      Block &inner = layer.getBody().front();
      for (auto [arg, input] :
           llvm::zip(inner.getArguments(), layer.getInputs()))
        bufferIndex[arg] = bufferOf(input);
      std::vector<Operation *> ops;
      for (Operation &o : inner)
        ops.push_back(&o);
      FailureOr<uint32_t> p = addProgram(layer.getName(), ops);
      if (failed(p))
        return failure();
      jobs.push_back(pf::CreateJob(fbb, *p, /*device=*/0, pf::Queue::compute));
      auto yield = cast<YieldOp>(inner.getTerminator());
      for (auto [result, value] :
           llvm::zip(layer.getResults(), yield.getOperands()))
        bufferIndex[result] = bufferOf(value);
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(flushLoose()))
        return failure();
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        auto name = main.getResultAttrOfType<StringAttr>(i, "rp.name");
        std::string n = name ? name.str() : "result" + std::to_string(i);
        outputs.push_back(
            pf::CreateBinding(fbb, fbb.CreateString(n), bufferOf(v)));
      }
    } else {
      loose.push_back(&op);
    }
  }
  finish(bytes, /*devices=*/1, /*events=*/0, /*staged=*/false, -1, -1, "");
  return success();
}

LogicalResult mlir::rp::exportPlan(ModuleOp module,
                                   const PlanExportOptions &options,
                                   std::vector<uint8_t> &bytes) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("no 'func.func @main' to export as a plan");
  auto schedules = module.getOps<ScheduleOp>();
  if (schedules.empty())
    return PlanWriter(options).run(main, bytes);
  if (std::next(schedules.begin()) != schedules.end())
    return module.emitError("the module has several rp.schedule ops; a plan "
                            "runs one");
  return PlanWriter(options).runStaged(main, *schedules.begin(), bytes);
}

FailureOr<size_t> mlir::rp::exportPlanToFile(ModuleOp module,
                                             const PlanExportOptions &options,
                                             StringRef path) {
  std::vector<uint8_t> bytes;
  if (failed(exportPlan(module, options, bytes)))
    return failure();
  llvm::Error err = writeFileAtomically(path, [&](raw_ostream &os) {
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  });
  if (err)
    return module.emitError(llvm::toString(std::move(err)));
  return bytes.size();
}

FailureOr<size_t> mlir::rp::exportPlanToFile(ModuleOp module,
                                             PlanExportOptions options,
                                             StringRef path,
                                             AnalysisManager analyses) {
  options.costs = &analyses.getAnalysis<CostModel>();
  return exportPlanToFile(module, options, path);
}
