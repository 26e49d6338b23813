//===- ImportPipeline.cpp - what the tools share on an ONNX file ----------===//

#include "rp/Import/ONNX/ImportPipeline.h"

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallString.h"
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
  for (const std::string &p : paddingIdx) {
    std::string error;
    if (failed(parsePaddingIdxOption(p, options, error)))
      return emitError(loc) << error;
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
