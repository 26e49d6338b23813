//===- CostModel.cpp - profiles and layer costs, once per compile ---------===//

#include "rp/Analysis/CostModel.h"
#include "rp/Analysis/PartitionSearch.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::rp;

static std::string absolute(StringRef path) {
  if (path.empty())
    return "";
  SmallString<256> abs(path);
  (void)llvm::sys::fs::make_absolute(abs);
  return abs.str().str();
}

FailureOr<const CostInputs *>
CostModel::inputs(StringRef hw, StringRef measured, MLIRContext *context) {
  auto key = std::make_pair(hw.str(), absolute(measured));
  auto it = parsed.find(key);
  if (it == parsed.end()) {
    FailureOr<CostInputs> loaded = loadCostInputs(hw, measured, context);
    if (failed(loaded))
      return failure();
    it = parsed
             .emplace(key,
                      std::make_shared<const CostInputs>(std::move(*loaded)))
             .first;
  }
  return it->second.get();
}

FailureOr<const std::vector<LayerCost> *>
CostModel::layerCosts(func::FuncOp func, StringRef hw, StringRef measured,
                      bool strict) {
  auto key = std::make_tuple(func.getOperation(), hw.str(), absolute(measured),
                             strict);
  auto it = costs.find(key);
  if (it != costs.end())
    return &it->second;
  FailureOr<const CostInputs *> in = inputs(hw, measured, func.getContext());
  if (failed(in))
    return failure();
  FailureOr<std::vector<LayerCost>> derived = analyzeLayerCosts(
      func, (*in)->hw, (*in)->measured ? &*(*in)->measured : nullptr, strict);
  if (failed(derived))
    return failure();
  return &costs.emplace(key, std::move(*derived)).first->second;
}

CostModel CostModel::forScratch() const {
  CostModel scratch(nullptr);
  scratch.parsed = parsed;
  searchMemo();
  scratch.memo = memo;
  return scratch;
}

SearchMemo &CostModel::searchMemo() const {
  if (!memo)
    memo = std::make_shared<SearchMemo>();
  return *memo;
}
