//===- VerifyGraph.cpp - rp-verify-graph ----------------------------------===//
//
// Module-wide rules of an rp graph that no single op verifier can see.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace mlir::rp {
#define GEN_PASS_DEF_VERIFYGRAPHPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Two params with one name must describe the same weight.
static bool sameWeight(ParamOp a, ParamOp b) {
  return a.getType() == b.getType() && a.getTrainable() == b.getTrainable() &&
         a.getFile() == b.getFile() && a.getOffset() == b.getOffset();
}

struct VerifyGraphPass : rp::impl::VerifyGraphPassBase<VerifyGraphPass> {
  void runOnOperation() override {
    bool ok = succeeded(checkParams()) && succeeded(checkLayers());
    if (!ok)
      signalPassFailure();
    markAllAnalysesPreserved();
  }

  LogicalResult checkParams() {
    llvm::StringMap<ParamOp> byName;
    // Byte ranges per file, ordered by offset, to find overlaps.
    llvm::StringMap<std::map<int64_t, ParamOp>> byFile;
    bool ok = true;
    getOperation().walk([&](ParamOp param) {
      auto [it, inserted] = byName.try_emplace(param.getName(), param);
      if (!inserted) {
        if (!sameWeight(it->second, param)) {
          InFlightDiagnostic diag =
              param.emitOpError("parameter '")
              << param.getName()
              << "' is declared again with another type, trainable flag "
                 "or storage";
          diag.attachNote(it->second.getLoc()) << "first declared here";
          ok = false;
        }
        return;
      }
      ++numParams;
      if (param.getFile())
        byFile[*param.getFile()].emplace(param.getOffsetAttr().getInt(), param);
    });
    for (auto &file : byFile) {
      ParamOp prev;
      for (auto &[offset, param] : file.second) {
        if (prev &&
            prev.getOffsetAttr().getInt() + prev.getSizeInBytes() > offset) {
          InFlightDiagnostic diag =
              param.emitOpError("parameter '")
              << param.getName() << "' stored at bytes [" << offset << ", "
              << offset + param.getSizeInBytes() << ") of '" << file.first()
              << "' overlaps parameter '" << prev.getName() << "'";
          diag.attachNote(prev.getLoc())
              << "'" << prev.getName() << "' is declared here";
          ok = false;
        }
        prev = param;
      }
    }
    return success(ok);
  }

  LogicalResult checkLayers() {
    bool ok = true;
    getOperation().walk([&](func::FuncOp func) {
      llvm::StringMap<LayerOp> names;
      func.walk([&](LayerOp layer) {
        ++numLayers;
        if (layer->getParentOp() != func) {
          layer.emitOpError("must sit directly in a function body, not in ")
              << layer->getParentOp()->getName();
          ok = false;
        }
        auto [it, inserted] = names.try_emplace(layer.getName(), layer);
        if (!inserted) {
          InFlightDiagnostic diag = layer.emitOpError("layer name '")
                                    << layer.getName() << "' is used twice in '"
                                    << func.getSymName() << "'";
          diag.attachNote(it->second.getLoc()) << "first used here";
          ok = false;
        }
      });
    });
    return success(ok);
  }
};

} // namespace
