//===- HardwareProfile.cpp - the contract's profiles for MLIR -------------===//
//
// Parsing is the contract's (contract/lib/Hardware.cpp, Measured.cpp); this
// only places its errors: at the file's first line when a file's content is
// wrong, nowhere when there is no such profile or it cannot be read.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/HardwareProfile.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"

using namespace mlir;
using namespace mlir::rp;

static InFlightDiagnostic errorIn(StringRef source, MLIRContext *context) {
  return emitError(FileLineColLoc::get(context, source, 1, 1));
}

FailureOr<double> HardwareProfile::flopsPerSecond(Type elementType) const {
  std::string key = "f32";
  if (isa<FloatType>(elementType)) {
    llvm::raw_string_ostream os(key);
    key.clear();
    elementType.print(os);
  }
  auto it = tflops.find(key);
  if (it == tflops.end())
    return failure();
  return it->second * 1e12 * computeEfficiency;
}

std::vector<std::string> mlir::rp::shippedProfileNames() {
  return ::rp::timing::shippedHardwareNames();
}

FailureOr<HardwareProfile>
mlir::rp::parseHardwareProfile(StringRef text, StringRef source,
                               MLIRContext *context) {
  std::string error;
  // A compile plans device memory, so memory_gib is required here.
  std::optional<::rp::timing::HardwareModel> model =
      ::rp::timing::parseHardwareModel(text.str(), source.str(), error,
                                       /*needMemory=*/true);
  if (!model)
    return errorIn(source, context) << error;
  HardwareProfile profile;
  static_cast<::rp::timing::HardwareModel &>(profile) = std::move(*model);
  return profile;
}

FailureOr<HardwareProfile> mlir::rp::loadHardwareProfile(StringRef nameOrPath,
                                                         MLIRContext *context) {
  std::string text, source, error;
  if (!::rp::timing::readHardwareProfile(nameOrPath.str(), text, source, error))
    return emitError(UnknownLoc::get(context)) << error;
  return parseHardwareProfile(text, source, context);
}

FailureOr<MeasuredProfile> mlir::rp::loadMeasuredProfile(StringRef path,
                                                         MLIRContext *context) {
  std::string text, error;
  if (!::rp::timing::readMeasuredProfile(path.str(), text, error))
    return emitError(UnknownLoc::get(context)) << error;
  std::optional<MeasuredProfile> times =
      ::rp::timing::parseMeasuredTimes(text, path.str(), error);
  if (!times)
    return errorIn(path, context) << error;
  return std::move(*times);
}

FailureOr<CostInputs> mlir::rp::loadCostInputs(StringRef hw,
                                               StringRef measuredPath,
                                               MLIRContext *context) {
  FailureOr<HardwareProfile> profile = loadHardwareProfile(hw, context);
  if (failed(profile))
    return failure();
  CostInputs inputs{std::move(*profile), std::nullopt};
  if (!measuredPath.empty()) {
    FailureOr<MeasuredProfile> times =
        loadMeasuredProfile(measuredPath, context);
    if (failed(times))
      return failure();
    inputs.measured = std::move(*times);
  }
  return inputs;
}
