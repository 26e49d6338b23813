//===- ExternalizeConstants.cpp - rp-externalize-constants ----------------===//
//
// Moves the large constants import folded out of the IR text into the
// weights file, as frozen params, so that the IR stays small whatever the
// sequence length.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Support/WeightsWriter.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::rp {
#define GEN_PASS_DEF_EXTERNALIZECONSTANTSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct ExternalizeConstantsPass
    : rp::impl::ExternalizeConstantsPassBase<ExternalizeConstantsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (weights.empty())
      return markAllAnalysesPreserved();
    ModuleOp module = getOperation();
    if (maxInlineElements < 0) {
      module.emitError("rp-externalize-constants needs max-inline-elements "
                       ">= 0");
      return signalPassFailure();
    }
    // Splats print as one value and bools as bits; they stay.
    SmallVector<ConstantOp> large;
    module.walk([&](ConstantOp op) {
      auto value = dyn_cast<DenseElementsAttr>(op.getValue());
      if (value && !value.isSplat() &&
          value.getNumElements() > maxInlineElements &&
          !value.getElementType().isInteger(1))
        large.push_back(op);
    });
    if (large.empty())
      return markAllAnalysesPreserved();
    std::string file = relativePath(weights, irDir);
    // Append to the file the importer just wrote, or start a fresh one.
    bool written = false;
    module.walk(
        [&](ParamOp p) { written |= p.getFile() && *p.getFile() == file; });
    WeightsWriter writer(weights);
    Location loc = module.getLoc();
    if (failed(written ? writer.openAppend(loc) : writer.open(loc)))
      return signalPassFailure();
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
    if (failed(writer.commit(loc)))
      return signalPassFailure();
    // The file changed: an IR that records its weight files' fingerprints
    // (rp-verify-weights) records the new one.
    if (module->hasAttr(kWeightFingerprintsAttr))
      recordWeightFingerprints(module, irDir);
  }
};

} // namespace
