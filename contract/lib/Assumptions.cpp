//===- Assumptions.cpp - what a prediction assumes and leaves out ---------===//

#include "rp/timing/Assumptions.h"

#include "Json.h"

#include <cmath>
#include <cstdio>

using namespace rp::timing;
using json = nlohmann::json;

namespace {

/// A field a range may name: where its value lives, whether a larger value
/// is slower (a cost) or faster (a rate), and how it reads.
struct Ranged {
  const char *field;
  double HardwareModel::*member; ///< null: gpus_per_link (unsigned)
  bool largerIsSlower;
  const char *format; ///< printf of low and high
};

const Ranged kRanged[] = {
    {"host_dram_gbps", &HardwareModel::hostDramGBps, false,
     "host DRAM %g-%g GB/s"},
    {"gpus_per_link", nullptr, true, "%g-%g GPUs per uplink"},
    {"uplink_gbps", &HardwareModel::uplinkGBps, false, "uplinks of %g-%g GB/s"},
    {"h2d_gbps", &HardwareModel::h2dGBps, false, "uploads at %g-%g GB/s"},
    {"d2h_gbps", &HardwareModel::d2hGBps, false, "downloads at %g-%g GB/s"},
    {"pageable_gbps", &HardwareModel::pageableGBps, false,
     "pageable copies at %g-%g GB/s"},
    {"optimizer_gbps", &HardwareModel::optimizerGBps, false,
     "the optimizer at %g-%g GB/s"},
    {"launch_us", &HardwareModel::launchUs, true, "a kernel launch %g-%g us"},
    {"job_us", &HardwareModel::jobUs, true, "a hand-off %g-%g us"},
    {"moe_host_us", &HardwareModel::moeHostUs, true,
     "%g-%g us of host work a MoE routing"},
    {"kernel_host_us", &HardwareModel::kernelHostUs, true,
     "%g-%g us of host work issuing a kernel"},
};

const Ranged *ranged(const std::string &field) {
  for (const Ranged &r : kRanged)
    if (field == r.field)
      return &r;
  return nullptr;
}

double valueOf(const HardwareModel &hw, const Ranged &r) {
  return r.member ? hw.*r.member : double(hw.gpusPerLink);
}

std::string format(const char *f, double a, double b) {
  char text[128];
  std::snprintf(text, sizeof(text), f, a, b);
  return text;
}

} // namespace

const char *const rp::timing::kModelLeavesOut =
    "kernels overlapping on one GPU, clocks and power limits, copy "
    "priorities, NUMA, PCIe latency, the CPU cores the executor's threads "
    "and the optimizer share";

std::string rp::timing::modelLeavesOut(const HardwareModel &hw) {
  if (hw.hostCores == 0)
    return kModelLeavesOut;
  // The devices' compute, the trainer's and the optimizer's work are on
  // the cores; the copy threads' memcpy is not.
  return "kernels overlapping on one GPU, clocks and power limits, copy "
         "priorities, NUMA, PCIe latency, the copy threads' CPU time";
}

std::optional<std::vector<UnknownInput>>
rp::timing::parseUnknownInputs(const std::string &text,
                               const std::string &source,
                               const HardwareModel &hw, std::string &error) {
  std::string where = "hardware profile '" + source + "'";
  json j;
  if (!rp::contract::parseJson(text, "hardware profile", source, j, error))
    return std::nullopt;
  std::vector<UnknownInput> out;
  if (!j.is_object() || !j.contains("unknown"))
    return out;
  const json &u = j["unknown"];
  std::string names;
  for (const Ranged &r : kRanged)
    names += (names.empty() ? "" : ", ") + std::string(r.field);
  if (!u.is_object()) {
    error = where +
            ": \"unknown\" must be an object of fields and their "
            "[low, high] ranges (" +
            names + ")";
    return std::nullopt;
  }
  for (auto &item : u.items())
    if (!ranged(item.key())) {
      error = where + ": \"unknown\" names \"" + item.key() +
              "\", which is not a box-dependent field; known: " + names;
      return std::nullopt;
    }
  // In the order kRanged reads best in, not the file's.
  for (const Ranged &rr : kRanged) {
    if (!u.contains(rr.field))
      continue;
    const Ranged *r = &rr;
    std::string field = rr.field;
    const json &v = u[rr.field];
    if (!v.is_array() || v.size() != 2 || !v[0].is_number() ||
        !v[1].is_number() || !(v[0].get<double>() > 0) ||
        !(v[1].get<double>() >= v[0].get<double>()) ||
        !std::isfinite(v[1].get<double>())) {
      error = where + ": unknown \"" + field +
              "\" must be [low, high], two positive numbers, low first";
      return std::nullopt;
    }
    UnknownInput in{field, v[0].get<double>(), v[1].get<double>()};
    if (!r->member &&
        (in.low != std::floor(in.low) || in.high != std::floor(in.high))) {
      error = where + ": unknown \"gpus_per_link\" must be whole numbers";
      return std::nullopt;
    }
    // The profile's own value is the prediction's middle: a range that
    // leaves it out would bound some other box.
    double value = valueOf(hw, *r);
    if (value < in.low || value > in.high) {
      error = where + ": \"" + field + "\" is " + format("%g", value, 0) +
              ", outside its unknown range [" +
              format("%g, %g", in.low, in.high) + "]";
      return std::nullopt;
    }
    out.push_back(std::move(in));
  }
  return out;
}

std::optional<std::vector<UnknownInput>>
rp::timing::loadUnknownInputs(const std::string &nameOrPath,
                              std::string &error) {
  std::string text, source;
  if (!readHardwareProfile(nameOrPath, text, source, error))
    return std::nullopt;
  std::optional<HardwareModel> hw = parseHardwareModel(text, source, error);
  if (!hw)
    return std::nullopt;
  return parseUnknownInputs(text, source, *hw, error);
}

HardwareModel rp::timing::atEnd(const HardwareModel &hw,
                                const std::vector<UnknownInput> &unknown,
                                bool slow) {
  HardwareModel out = hw;
  for (const UnknownInput &in : unknown) {
    const Ranged *r = ranged(in.field);
    if (!r)
      continue;
    double v = slow == r->largerIsSlower ? in.high : in.low;
    if (r->member)
      out.*r->member = v;
    else
      out.gpusPerLink = unsigned(v);
  }
  out.name = hw.name + (slow ? " (slow end)" : " (fast end)");
  return out;
}

std::string
rp::timing::describeUnknown(const std::vector<UnknownInput> &unknown) {
  std::string out;
  for (const UnknownInput &in : unknown)
    if (const Ranged *r = ranged(in.field))
      out += (out.empty() ? "" : ", ") + format(r->format, in.low, in.high);
  return out;
}

std::string rp::timing::describeAssumed(const HardwareModel &hw) {
  std::string out = "kernels at " + hw.name + "'s peak x op efficiency";
  if (!hw.kernels.empty())
    out += " (" + std::to_string(hw.kernels.size()) +
           " op kind(s) at their implementation's rate)";
  out += format(", copies at %g/%g GB/s per GPU link", hw.h2dGBps, hw.d2hGBps);
  if (!hw.pinned)
    out += format(" (pageable: %g GB/s)", hw.pageableGBps, 0);
  out += ", " + std::to_string(hw.gpusPerLink) + " GPU(s) per uplink";
  if (hw.uplinkGBps > 0)
    out += format(" of %g GB/s", hw.uplinkGBps, 0);
  out += hw.hostDramGBps > 0 ? format(", host DRAM %g GB/s", hw.hostDramGBps, 0)
                             : ", host DRAM unlimited";
  out += hw.optimizerGBps > 0
             ? format(", the optimizer %g B a parameter at %g GB/s",
                      kOptimizerBytesPerParam, hw.optimizerGBps)
             : ", the optimizer untimed";
  out += format(", a kernel launch %g us, a hand-off %g us", hw.launchUs,
                hw.jobUs);
  if (hw.moeHostUs > 0)
    out += format(", %g us of host work a MoE routing", hw.moeHostUs, 0);
  if (hw.kernelHostUs > 0)
    out += format(", %g us of host work issuing each kernel, beside it",
                  hw.kernelHostUs, 0);
  if (hw.hostCores > 0)
    out += format(", the devices' compute and the host's work sharing %g "
                  "CPU core(s)",
                  hw.hostCores, 0);
  if (hw.moeHostUs > 0 || hw.kernelHostUs > 0)
    out += hw.hostInterpreters
               ? format(" on %g host interpreter(s) every GPU shares",
                        hw.hostInterpreters, 0)
               : " on each GPU's own thread";
  return out;
}
