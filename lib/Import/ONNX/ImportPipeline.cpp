//===- ImportPipeline.cpp - what the tools run on an ONNX file ------------===//

#include "rp/Import/ONNX/ImportPipeline.h"
#include "WeightsWriter.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::rp;

FailureOr<ONNXImportOptions> ImportCLOptions::get(StringRef input,
                                                  StringRef output,
                                                  MLIRContext *context) const {
  ONNXImportOptions options;
  Location loc = FileLineColLoc::get(context, input, 0, 0);
  for (const std::string &s : shapes) {
    std::string error;
    if (failed(parseShapeOption(s, options, error)))
      return emitError(loc) << error;
  }
  for (const std::string &f : frozen) {
    std::string error;
    if (!llvm::Regex(f).isValid(error))
      return emitError(loc) << "bad --frozen pattern '" << f << "': " << error;
    options.frozenPatterns.push_back(f);
  }
  // Beside the output when there is one, else beside the model.
  SmallString<256> anchor(output == "-" ? input : output);
  options.irDir =
      output == "-" ? "." : llvm::sys::path::parent_path(anchor).str();
  if (options.irDir.empty())
    options.irDir = ".";
  if (!weights.empty()) {
    options.weightsPath = weights;
  } else {
    llvm::sys::path::replace_extension(anchor, "weights.bin");
    options.weightsPath = anchor.str().str();
  }
  return options;
}

/// Constants past this many elements leave the IR text for the weights file.
static constexpr int64_t kMaxInlineElements = 1 << 16;

/// Moves the large constants import folded (rotary tables, masks: anything
/// input-independent) out of the IR text into the weights file, as frozen
/// params, so that the IR stays small whatever the sequence length. Splats
/// print as one value and bools as bits; they stay.
static LogicalResult
externalizeLargeConstants(ModuleOp module, const ONNXImportOptions &options) {
  SmallVector<ConstantOp> large;
  module.walk([&](ConstantOp op) {
    auto value = dyn_cast<DenseElementsAttr>(op.getValue());
    if (value && !value.isSplat() &&
        value.getNumElements() > kMaxInlineElements &&
        !value.getElementType().isInteger(1))
      large.push_back(op);
  });
  if (large.empty())
    return success();
  std::string file =
      onnx_import::relativePath(options.weightsPath, options.irDir);
  // Append to the file the importer just wrote, or start a fresh one.
  bool written = false;
  module.walk(
      [&](ParamOp p) { written |= p.getFile() && *p.getFile() == file; });
  onnx_import::WeightsWriter writer(options.weightsPath);
  Location loc = module.getLoc();
  if (failed(written ? writer.openAppend(loc) : writer.open(loc)))
    return failure();
  llvm::StringSet<> names;
  module.walk([&](ParamOp p) { names.insert(p.getName()); });
  for (ConstantOp op : large) {
    auto value = cast<DenseElementsAttr>(op.getValue());
    ArrayRef<char> raw = value.getRawData();
    int64_t offset = writer.append(StringRef(raw.data(), raw.size()));
    std::string base = "folded";
    if (auto name = dyn_cast<NameLoc>(op.getLoc()))
      base = name.getName().str() + ":folded";
    std::string name = base;
    for (int k = 1; !names.insert(name).second; ++k)
      name = base + "." + std::to_string(k);
    OpBuilder b(op);
    auto param = ParamOp::create(b, op.getLoc(), value.getType(), name,
                                 /*trainable=*/false, b.getStringAttr(file),
                                 b.getI64IntegerAttr(offset), FloatAttr());
    op.replaceAllUsesWith(param.getResult());
    op.erase();
  }
  return writer.commit(loc);
}

OwningOpRef<ModuleOp>
mlir::rp::importAndPrepare(StringRef path, MLIRContext *context,
                           const ONNXImportOptions &options) {
  OwningOpRef<ModuleOp> module = importONNXModel(path, context, options);
  if (!module)
    return nullptr;
  PassManager pm(context);
  // CSE merges the per-layer copies of exporter constants, which exposes
  // folds the first round could not see.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  // Decomposed norms, activations and attention become one op each, so the
  // runtime runs one kernel and autodiff applies one rule. Layer norm goes
  // first: its core would otherwise also read as an RMS norm.
  pm.addPass(createFuseLayerNormPass());
  pm.addPass(createFuseRmsNormPass());
  pm.addPass(createFuseGeluPass());
  pm.addPass(createFuseSiluPass());
  pm.addPass(createFuseAttentionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module)))
    return nullptr;
  // After fusion, which reads constant masks (a causal one becomes a flag),
  // and before grouping, which passes params into layers.
  if (failed(externalizeLargeConstants(*module, options)))
    return nullptr;
  pm.clear();
  pm.addPass(createGroupLayersPass());
  pm.addPass(createVerifyGraphPass());
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

void mlir::rp::printLayerSummary(ModuleOp module, llvm::raw_ostream &os) {
  int index = 0;
  module.walk([&](LayerOp layer) {
    int64_t ops = 0, params = 0, bytes = 0;
    layer.getBody().walk([&](Operation *op) {
      if (!isa<YieldOp>(op))
        ++ops;
    });
    for (Value in : layer.getInputs())
      if (auto p = in.getDefiningOp<ParamOp>()) {
        ++params;
        bytes += p.getSizeInBytes();
      }
    os << llvm::format("%3d  %-28s %5lld ops %4lld params %12lld bytes\n",
                       index++, layer.getName().str().c_str(), (long long)ops,
                       (long long)params, (long long)bytes);
  });
  if (index == 0)
    os << "no layers found\n";
}
