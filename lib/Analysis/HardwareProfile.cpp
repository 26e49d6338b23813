//===- HardwareProfile.cpp - loading hardware and measured profiles -------===//

#include "rp/Analysis/HardwareProfile.h"
#include "rp/timing/Hardware.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "rp/Support/ToolGuards.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::rp;
namespace json = llvm::json;

namespace {

struct ShippedProfile {
  const char *name;
  const char *text;
};

// Generated from profiles/*.json by lib/Analysis/CMakeLists.txt.
const ShippedProfile kShipped[] = {
#include "HardwareProfiles.inc"
};

/// Reads the JSON number fields of a profile, naming the file and field in
/// every error.
class FieldReader {
public:
  FieldReader(const json::Object &object, StringRef source,
              MLIRContext *context)
      : object(object), source(source), context(context) {}

  InFlightDiagnostic error() {
    return emitError(FileLineColLoc::get(context, source, 1, 1));
  }

  /// A positive number (or zero when `allowZero`); `required` fields must
  /// be present.
  LogicalResult number(StringRef key, double &out, bool required = true,
                       bool allowZero = false) {
    const json::Value *v = object.get(key);
    if (!v) {
      if (!required)
        return success();
      return error() << "hardware profile '" << source << "' has no field \""
                     << key << "\"; see docs/hardware-profiles.md";
    }
    std::optional<double> d = v->getAsNumber();
    if (!d || !(*d > 0 || (allowZero && *d == 0)))
      return error() << "hardware profile '" << source << "': \"" << key
                     << "\" must be a " << (allowZero ? "" : "positive ")
                     << "number" << (allowZero ? ", at least 0" : "");
    out = *d;
    return success();
  }

private:
  const json::Object &object;
  StringRef source;
  MLIRContext *context;
};

FailureOr<json::Value> parseJson(StringRef text, StringRef what,
                                 StringRef source, MLIRContext *context) {
  llvm::Expected<json::Value> value = json::parse(text);
  if (!value)
    return emitError(FileLineColLoc::get(context, source, 1, 1))
           << what << " '" << source
           << "' is not valid JSON: " << llvm::toString(value.takeError());
  return std::move(*value);
}

FailureOr<std::string> readFile(StringRef path, StringRef what,
                                MLIRContext *context) {
  // A FIFO would block the read, /dev/zero fill memory (ToolGuards.h).
  if (std::string why = checkRegularInput(path, what); !why.empty())
    return emitError(UnknownLoc::get(context)) << why;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return emitError(UnknownLoc::get(context))
           << "cannot read " << what << " '" << path
           << "': " << buffer.getError().message();
  return (*buffer)->getBuffer().str();
}

const char *const kProfileKeys[] = {
    "name",         "description",       "tflops",     "compute_efficiency",
    "memory_gbps",  "memory_efficiency", "memory_gib", "h2d_gbps",
    "d2h_gbps",     "gpus_per_link",     "launch_us",  "optimizer_gbps",
    "op_efficiency"};

} // namespace

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
  std::vector<std::string> names;
  for (const ShippedProfile &p : kShipped)
    names.push_back(p.name);
  llvm::sort(names);
  return names;
}

FailureOr<HardwareProfile>
mlir::rp::parseHardwareProfile(StringRef text, StringRef source,
                               MLIRContext *context) {
  FailureOr<json::Value> value =
      parseJson(text, "hardware profile", source, context);
  if (failed(value))
    return failure();
  const json::Object *object = value->getAsObject();
  if (!object)
    return emitError(FileLineColLoc::get(context, source, 1, 1))
           << "hardware profile '" << source << "' must be a JSON object";
  FieldReader read(*object, source, context);
  for (const auto &kv : *object)
    if (!llvm::is_contained(kProfileKeys, StringRef(kv.first)))
      return read.error() << "hardware profile '" << source
                          << "' has an unknown field \"" << kv.first.str()
                          << "\"; known fields: "
                          << llvm::join(llvm::ArrayRef(kProfileKeys), ", ");

  HardwareProfile profile;
  profile.name = object->getString("name").value_or(source).str();
  const json::Object *rates = object->getObject("tflops");
  if (!rates || rates->empty())
    return read.error() << "hardware profile '" << source
                        << "' needs \"tflops\": an object of peak TFLOP/s "
                           "per element type, e.g. {\"f32\": 82.6}";
  for (const auto &kv : *rates) {
    std::optional<double> d = kv.second.getAsNumber();
    if (!d || !(*d > 0))
      return read.error() << "hardware profile '" << source << "': tflops \""
                          << kv.first.str() << "\" must be a positive number";
    profile.tflops[kv.first.str()] = *d;
  }
  double gpusPerLink = 1;
  if (failed(read.number("compute_efficiency", profile.computeEfficiency,
                         /*required=*/false)) ||
      failed(read.number("memory_gbps", profile.memoryGBps)) ||
      failed(read.number("memory_efficiency", profile.memoryEfficiency,
                         /*required=*/false)) ||
      failed(read.number("memory_gib", profile.memoryGiB)) ||
      failed(read.number("h2d_gbps", profile.h2dGBps)) ||
      failed(read.number("d2h_gbps", profile.d2hGBps)) ||
      failed(read.number("gpus_per_link", gpusPerLink, /*required=*/false)) ||
      failed(read.number("launch_us", profile.launchUs, /*required=*/false,
                         /*allowZero=*/true)) ||
      failed(read.number("optimizer_gbps", profile.optimizerGBps,
                         /*required=*/false, /*allowZero=*/true)))
    return failure();
  if (profile.computeEfficiency > 1 || profile.memoryEfficiency > 1)
    return read.error() << "hardware profile '" << source
                        << "': efficiencies are shares of peak, at most 1";
  if (gpusPerLink != static_cast<unsigned>(gpusPerLink))
    return read.error() << "hardware profile '" << source
                        << "': \"gpus_per_link\" must be a whole number";
  profile.gpusPerLink = static_cast<unsigned>(gpusPerLink);
  // The fields above passed; the timing model the plan exporter and the
  // sim device use (rp/timing) reads them again, and the per op kind
  // efficiencies, which only it knows: a broken one fails here, at the
  // start of a compile.
  std::string error;
  if (!::rp::timing::parseHardwareModel(text.str(), source.str(), error))
    return read.error() << error;
  profile.text = text.str();
  return profile;
}

FailureOr<HardwareProfile> mlir::rp::loadHardwareProfile(StringRef nameOrPath,
                                                         MLIRContext *context) {
  if (nameOrPath.contains('/') || nameOrPath.ends_with(".json")) {
    FailureOr<std::string> text =
        readFile(nameOrPath, "hardware profile", context);
    if (failed(text))
      return failure();
    return parseHardwareProfile(*text, nameOrPath, context);
  }
  for (const ShippedProfile &p : kShipped)
    if (nameOrPath == p.name)
      return parseHardwareProfile(p.text, p.name, context);
  return emitError(UnknownLoc::get(context))
         << "unknown hardware profile '" << nameOrPath
         << "'; shipped profiles: " << llvm::join(shippedProfileNames(), ", ")
         << "; or give the path of a profile JSON file";
}

FailureOr<MeasuredProfile> mlir::rp::loadMeasuredProfile(StringRef path,
                                                         MLIRContext *context) {
  FailureOr<std::string> text = readFile(path, "measured profile", context);
  if (failed(text))
    return failure();
  FailureOr<json::Value> value =
      parseJson(*text, "measured profile", path, context);
  if (failed(value))
    return failure();
  auto error = [&]() {
    return emitError(FileLineColLoc::get(context, path, 1, 1))
           << "measured profile '" << path << "': ";
  };
  const json::Object *object = value->getAsObject();
  const json::Array *layers = object ? object->getArray("layers") : nullptr;
  if (!layers)
    return error() << "expected an object with a \"layers\" array";
  MeasuredProfile profile;
  if (std::optional<StringRef> hw = object->getString("hw"))
    profile.hw = hw->str();
  for (auto [index, entry] : llvm::enumerate(*layers)) {
    const json::Object *layer = entry.getAsObject();
    std::optional<StringRef> name =
        layer ? layer->getString("name") : std::nullopt;
    if (!name)
      return error() << "layers[" << index << "] needs a \"name\"";
    if (profile.layers.count(*name))
      return error() << "layer '" << *name << "' is listed twice";
    MeasuredLayer times;
    for (auto [key, field] : {std::pair{"forward_ms", &times.forwardMs},
                              std::pair{"recompute_ms", &times.recomputeMs},
                              std::pair{"backward_ms", &times.backwardMs}}) {
      const json::Value *v = layer->get(key);
      if (!v)
        continue;
      std::optional<double> d = v->getAsNumber();
      if (!d || *d < 0)
        return error() << "layer '" << *name << "': \"" << key
                       << "\" must be a number of milliseconds, at least 0";
      *field = *d;
    }
    profile.layers[*name] = times;
    profile.order.push_back(name->str());
  }
  return profile;
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
