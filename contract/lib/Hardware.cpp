//===- Hardware.cpp - a hardware profile and how long work takes ----------===//

#include "rp/timing/Hardware.h"
#include "rp/timing/Assumptions.h"

#include "Json.h"

#include <algorithm>
#include <cmath>
#include <thread>
#if defined(__linux__)
#include <sched.h>
#endif

using namespace rp::timing;
using json = nlohmann::json;

namespace {

struct ShippedProfile {
  const char *name;
  const char *text;
};

// Generated from profiles/*.json by contract/CMakeLists.txt.
const ShippedProfile kShipped[] = {
#include "ShippedProfiles.inc"
};

const char *const kKeys[] = {"name",           "description",
                             "tflops",         "compute_efficiency",
                             "memory_gbps",    "memory_efficiency",
                             "memory_gib",     "h2d_gbps",
                             "d2h_gbps",       "gpus_per_link",
                             "launch_us",      "optimizer_gbps",
                             "op_efficiency",  "uplink_gbps",
                             "host_dram_gbps", "pinned",
                             "pageable_gbps",  "job_us",
                             "kernels",        "as_built_kernels",
                             "moe_host_us",    "host_interpreters",
                             "kernel_host_us", "host_cores",
                             "unknown"};

/// A share of peak: a number in (0, 1] or a curve of [work, share] pairs.
bool readCurve(const json &v, const std::string &where, Curve &out,
               std::string &error) {
  auto share = [&](const json &s, double &d) {
    if (!s.is_number() || !(s.get<double>() > 0) || s.get<double>() > 1) {
      error = where + " must be a share of peak in (0, 1]";
      return false;
    }
    d = s.get<double>();
    return true;
  };
  if (v.is_number()) {
    double d;
    if (!share(v, d))
      return false;
    out.points = {{1.0, d}};
    return true;
  }
  if (!v.is_array() || v.empty()) {
    error = where + " must be a number or a list of [work, share] points";
    return false;
  }
  for (const json &p : v) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() ||
        !(p[0].get<double>() > 0)) {
      error = where + " must list [work, share] points with positive work "
                      "(FLOPs for compute, bytes for memory)";
      return false;
    }
    double d;
    if (!share(p[1], d))
      return false;
    if (!out.points.empty() &&
        !(p[0].get<double>() > out.points.back().first)) {
      error = where + " must list its points by increasing work";
      return false;
    }
    out.points.emplace_back(p[0].get<double>(), d);
  }
  return true;
}

} // namespace

double Curve::at(double work) const {
  if (points.empty())
    return 1;
  if (points.size() == 1 || work <= points.front().first)
    return points.front().second;
  if (work >= points.back().first)
    return points.back().second;
  size_t i = 1;
  while (points[i].first < work)
    ++i;
  auto [x0, y0] = points[i - 1];
  auto [x1, y1] = points[i];
  double f = (std::log(work) - std::log(x0)) / (std::log(x1) - std::log(x0));
  return y0 + f * (y1 - y0);
}

double HardwareModel::hostDispatchMs(uint16_t op) const {
  std::string name = kernelOpName(op);
  return name == "moe_route" || name == "moe_route_grad" ? moeHostUs * 1e-3 : 0;
}

double HardwareModel::kernelMs(uint16_t op, const KernelWork &work,
                               const std::string &dtype) const {
  if (!work.launches)
    return 0;
  auto rate = tflops.find(dtype);
  if (rate == tflops.end())
    rate = tflops.find("f32");
  double peak = rate == tflops.end() ? 0 : rate->second * 1e12;
  double ce = computeEfficiency, me = memoryEfficiency;
  const char *opName = kernelOpName(op);
  // The implementation the backend runs, where the profile names one with
  // a measured rate: its FLOPs at that rate, its bytes as any kernel's.
  if (auto impl = kernels.find(opName);
      impl != kernels.end() && impl->second.tflops > 0) {
    double seconds = work.flops / (impl->second.tflops * 1e12);
    if (work.bytes > 0 && memoryGBps > 0)
      seconds = std::max(seconds, work.bytes / (memoryGBps * 1e9 * me));
    return seconds * 1e3 + double(work.launches) * launchUs * 1e-3;
  }
  auto it = opEfficiency.find(opName);
  // A grouped GEMM the profile does not measure runs as its groups'
  // matmuls do, each at one group's size.
  double groups = std::max(1.0, work.groups);
  if (it == opEfficiency.end() && groups > 1)
    it = opEfficiency.find("matmul");
  if (it != opEfficiency.end()) {
    if (it->second.compute)
      ce = it->second.compute->at(work.flops / groups);
    if (it->second.memory)
      me = it->second.memory->at(work.bytes / groups);
  }
  double seconds = 0;
  if (work.flops > 0 && peak > 0)
    seconds = work.flops / (peak * ce);
  if (work.bytes > 0 && memoryGBps > 0)
    seconds = std::max(seconds, work.bytes / (memoryGBps * 1e9 * me));
  return seconds * 1e3 + double(work.launches) * launchUs * 1e-3;
}

double HardwareModel::copyMs(double bytes, bool toDevice) const {
  double gbps = toDevice ? h2dGBps : d2hGBps;
  if (!pinned && pageableGBps > 0)
    gbps = std::min(gbps, pageableGBps);
  return gbps > 0 ? bytes / (gbps * 1e9) * 1e3 : 0;
}

unsigned rp::timing::machineCores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    return unsigned(CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

HostModel HardwareModel::hostModel() const {
  HostModel h;
  h.h2dGBps = h2dGBps;
  h.d2hGBps = d2hGBps;
  if (!pinned && pageableGBps > 0) {
    h.h2dGBps = std::min(h2dGBps, pageableGBps);
    h.d2hGBps = std::min(d2hGBps, pageableGBps);
  }
  h.uplinkGBps = uplinkGBps;
  h.dramGBps = hostDramGBps;
  // A pageable copy is a CPU copy into a pinned staging buffer (read and
  // write) and the DMA's read of it.
  h.copyDramFactor = pinned ? 1 : 3;
  h.interpreters = hostInterpreters;
  h.cores = hostCores;
  return h;
}

double HardwareModel::deviceCopyMs(double bytes) const {
  return memoryGBps > 0
             ? 2 * bytes / (memoryGBps * 1e9 * memoryEfficiency) * 1e3
             : 0;
}

double HardwareModel::optimizerMs(double params) const {
  return hostMs(params * kOptimizerBytesPerParam);
}

double HardwareModel::hostMs(double bytes) const {
  return optimizerGBps > 0 ? bytes / (optimizerGBps * 1e9) * 1e3 : 0;
}

double rp::timing::callMs(const HardwareModel &hw, uint16_t op,
                          const CallOperands &call,
                          const std::vector<int64_t> &ints) {
  return hw.kernelMs(op, kernelWork(op, call.inputs, call.outputs, ints),
                     call.dtype);
}

std::optional<HardwareModel>
rp::timing::parseHardwareModel(const std::string &text,
                               const std::string &source, std::string &error,
                               bool needMemory) {
  std::string where = "hardware profile '" + source + "'";
  json j;
  if (!rp::contract::parseJson(text, "hardware profile", source, j, error))
    return std::nullopt;
  if (!j.is_object()) {
    error = where + " must be a JSON object";
    return std::nullopt;
  }
  for (auto &[key, value] : j.items())
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      std::string known;
      for (const char *k : kKeys)
        known += (known.empty() ? "" : ", ") + std::string(k);
      error = where + " has an unknown field \"" + key +
              "\"; known fields: " + known;
      return std::nullopt;
    }
  HardwareModel hw;
  hw.name = j.contains("name") && j["name"].is_string()
                ? j["name"].get<std::string>()
                : source;
  if (!j.contains("tflops") || !j["tflops"].is_object() ||
      j["tflops"].empty()) {
    error = where + " needs \"tflops\": an object of peak TFLOP/s per "
                    "element type, e.g. {\"f32\": 82.6}";
    return std::nullopt;
  }
  for (auto &[type, v] : j["tflops"].items()) {
    if (!v.is_number() || !(v.get<double>() > 0)) {
      error = where + ": tflops \"" + type + "\" must be a positive number";
      return std::nullopt;
    }
    hw.tflops[type] = v.get<double>();
  }
  auto number = [&](const char *key, double &out, bool required,
                    bool allowZero) {
    if (!j.contains(key)) {
      if (required)
        error = where + " has no field \"" + key +
                "\"; see docs/hardware-profiles.md";
      return !required;
    }
    const json &v = j[key];
    if (!v.is_number() ||
        !(v.get<double>() > 0 || (allowZero && v.get<double>() == 0))) {
      error = where + ": \"" + key + "\" must be a " +
              (allowZero ? "number, at least 0" : "positive number");
      return false;
    }
    out = v.get<double>();
    return true;
  };
  double gpusPerLink = 1, interpreters = 0;
  if (!number("compute_efficiency", hw.computeEfficiency, false, false) ||
      !number("memory_gbps", hw.memoryGBps, true, false) ||
      !number("memory_efficiency", hw.memoryEfficiency, false, false) ||
      !number("memory_gib", hw.memoryGiB, needMemory, false) ||
      !number("h2d_gbps", hw.h2dGBps, true, false) ||
      !number("d2h_gbps", hw.d2hGBps, true, false) ||
      !number("gpus_per_link", gpusPerLink, false, false) ||
      !number("launch_us", hw.launchUs, false, true) ||
      !number("optimizer_gbps", hw.optimizerGBps, false, true) ||
      !number("uplink_gbps", hw.uplinkGBps, false, true) ||
      !number("host_dram_gbps", hw.hostDramGBps, false, true) ||
      !number("pageable_gbps", hw.pageableGBps, false, true) ||
      !number("job_us", hw.jobUs, false, true) ||
      !number("moe_host_us", hw.moeHostUs, false, true) ||
      !number("kernel_host_us", hw.kernelHostUs, false, true) ||
      !number("host_interpreters", interpreters, false, true))
    return std::nullopt;
  if (interpreters != std::floor(interpreters)) {
    error = where + ": \"host_interpreters\" must be a whole number";
    return std::nullopt;
  }
  hw.hostInterpreters = unsigned(interpreters);
  if (j.contains("host_cores")) {
    const json &v = j["host_cores"];
    if (v.is_string() && v.get<std::string>() == "machine") {
      hw.hostCores = machineCores();
    } else if (v.is_number() && v.get<double>() >= 0 && v.get<double>() < 1e6) {
      hw.hostCores = v.get<double>();
    } else {
      error = where + ": \"host_cores\" must be a number, at least 0 (0: "
                      "a processor per device; a fraction: the share of the "
                      "machine the run gets) or \"machine\" (this "
                      "machine's cores)";
      return std::nullopt;
    }
  }
  if (j.contains("pinned")) {
    if (!j["pinned"].is_boolean()) {
      error = where + ": \"pinned\" must be true or false";
      return std::nullopt;
    }
    hw.pinned = j["pinned"].get<bool>();
  }
  if (hw.computeEfficiency > 1 || hw.memoryEfficiency > 1) {
    error = where + ": efficiencies are shares of peak, at most 1";
    return std::nullopt;
  }
  if (gpusPerLink != std::floor(gpusPerLink)) {
    error = where + ": \"gpus_per_link\" must be a whole number";
    return std::nullopt;
  }
  hw.gpusPerLink = unsigned(gpusPerLink);
  if (j.contains("op_efficiency")) {
    const json &ops = j["op_efficiency"];
    if (!ops.is_object()) {
      error = where + ": \"op_efficiency\" must be an object of op kinds";
      return std::nullopt;
    }
    for (auto &[op, v] : ops.items()) {
      bool known = false;
      for (uint16_t k = 0; k < kNumKernelOps; ++k)
        known |= op == kernelOpName(k);
      if (!known) {
        error = where + ": \"op_efficiency\" names \"" + op +
                "\", which is not a plan op kind (matmul, attention, "
                "attention_grad, rms_norm, ...: plan.fbs OpKind)";
        return std::nullopt;
      }
      if (!v.is_object() || v.empty()) {
        error = where + ": op_efficiency \"" + op +
                "\" must be an object with \"compute\" and/or \"memory\"";
        return std::nullopt;
      }
      OpEfficiency e;
      for (auto &[part, curve] : v.items()) {
        if (part != "compute" && part != "memory") {
          error = where + ": op_efficiency \"" + op + "\" has \"" + part +
                  "\"; only \"compute\" and \"memory\" are known";
          return std::nullopt;
        }
        Curve c;
        if (!readCurve(curve, where + ": op_efficiency \"" + op + "\" " + part,
                       c, error))
          return std::nullopt;
        (part == "compute" ? e.compute : e.memory) = std::move(c);
      }
      hw.opEfficiency[op] = std::move(e);
    }
  }
  // "as_built_kernels" is checked here and applied by the loader
  // (readHardwareProfile, NAME:as-built).
  for (const char *field : {"kernels", "as_built_kernels"}) {
    if (!j.contains(field))
      continue;
    const json &ks = j[field];
    if (!ks.is_object()) {
      error = where + ": \"" + field + "\" must be an object of op kinds";
      return std::nullopt;
    }
    for (auto &[op, v] : ks.items()) {
      if (kernelOpIndex(op) < 0) {
        error = where + ": \"kernels\" names \"" + op +
                "\", which is not a plan op kind (plan.fbs OpKind)";
        return std::nullopt;
      }
      if (!v.is_object() || !v.contains("name") || !v["name"].is_string() ||
          (v.contains("tflops") &&
           (!v["tflops"].is_number() || !(v["tflops"].get<double>() > 0)))) {
        error = where + ": kernels \"" + op +
                "\" must be {\"name\": \"...\", \"tflops\": achieved rate}";
        return std::nullopt;
      }
      for (auto &[key, unused] : v.items())
        if (key != "name" && key != "tflops" && key != "source") {
          error = where + ": kernels \"" + op + "\" has \"" + key +
                  "\"; known: name, tflops, source";
          return std::nullopt;
        }
      KernelImpl impl;
      impl.name = v["name"].get<std::string>();
      impl.tflops = v.contains("tflops") ? v["tflops"].get<double>() : 0;
      // An implementation cannot beat the card.
      double best = 0;
      for (auto &[type, r] : hw.tflops)
        best = std::max(best, r);
      if (impl.tflops > best) {
        error = where + ": kernels \"" + op + "\" runs at " +
                std::to_string(impl.tflops) + " TFLOP/s, above the card's peak";
        return std::nullopt;
      }
      if (std::string(field) == "kernels")
        hw.kernels[op] = std::move(impl);
    }
  }
  // The ranges of what the profile cannot know are read by the tools that
  // print a prediction (Assumptions.h); a broken one is refused here, with
  // the rest of the profile.
  if (!parseUnknownInputs(text, source, hw, error))
    return std::nullopt;
  return hw;
}

std::vector<std::string> rp::timing::shippedHardwareNames() {
  std::vector<std::string> names;
  for (const ShippedProfile &p : kShipped)
    names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

bool readProfileText(const std::string &nameOrPath, std::string &text,
                     std::string &source, std::string &error);

} // namespace

bool rp::timing::namesProfileFile(const std::string &nameOrPath) {
  return nameOrPath.find('/') != std::string::npos ||
         (nameOrPath.size() > 5 &&
          nameOrPath.compare(nameOrPath.size() - 5, 5, ".json") == 0);
}

bool rp::timing::readHardwareProfile(const std::string &given,
                                     std::string &text, std::string &source,
                                     std::string &error) {
  // NAME:as-built: the profile with its "as_built_kernels" as its kernels,
  // so a prediction is of the kernels rp's backend runs today rather than
  // of a tuned library's (docs/hardware-profiles.md).
  static const std::string kAsBuilt = ":as-built";
  bool asBuilt = given.size() > kAsBuilt.size() &&
                 given.compare(given.size() - kAsBuilt.size(), kAsBuilt.size(),
                               kAsBuilt) == 0;
  std::string nameOrPath =
      asBuilt ? given.substr(0, given.size() - kAsBuilt.size()) : given;
  if (!readProfileText(nameOrPath, text, source, error))
    return false;
  if (!asBuilt)
    return true;
  source = given;
  json j;
  if (!rp::contract::parseJson(text, "hardware profile", source, j, error))
    return false;
  if (!j.is_object() || !j.contains("as_built_kernels")) {
    error = "hardware profile '" + nameOrPath +
            "' has no \"as_built_kernels\" for " + given;
    return false;
  }
  json kernels = j.contains("kernels") ? j["kernels"] : json::object();
  for (auto &[op, v] : j["as_built_kernels"].items())
    kernels[op] = v;
  j["kernels"] = kernels;
  j["name"] = (j.contains("name") && j["name"].is_string()
                   ? j["name"].get<std::string>()
                   : nameOrPath) +
              kAsBuilt;
  text = j.dump(2);
  return true;
}

namespace {

bool readProfileText(const std::string &nameOrPath, std::string &text,
                     std::string &source, std::string &error) {
  source = nameOrPath;
  if (rp::timing::namesProfileFile(nameOrPath))
    return rp::contract::readJsonFile(nameOrPath, "hardware profile",
                                      "hardware profile", text, error);
  for (const ShippedProfile &p : kShipped)
    if (nameOrPath == p.name) {
      text = p.text;
      return true;
    }
  std::string names;
  for (const std::string &n : shippedHardwareNames())
    names += (names.empty() ? "" : ", ") + n;
  error = "unknown hardware profile '" + nameOrPath +
          "'; shipped profiles: " + names +
          "; or give the path of a profile JSON file (NAME:as-built for "
          "the kernels rp runs today)";
  return false;
}

} // namespace

std::optional<HardwareModel>
rp::timing::loadHardwareModel(const std::string &nameOrPath, std::string &error,
                              bool needMemory) {
  std::string text, source;
  if (!readHardwareProfile(nameOrPath, text, source, error))
    return std::nullopt;
  return parseHardwareModel(text, source, error, needMemory);
}
