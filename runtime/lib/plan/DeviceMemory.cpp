//===- DeviceMemory.cpp - packing a staged plan's device buffers ----------===//

#include "rp/runtime/DeviceMemory.h"

#include <algorithm>
#include <cstdio>

using namespace rp::runtime;

/// What packing reads of the plan (the contract's arena::PlanShape).
static rp::arena::PlanShape shapeOf(const Plan &plan) {
  rp::arena::PlanShape s;
  s.devices = plan.devices;
  s.events = plan.events;
  s.staged = plan.staged;
  s.prologue = plan.prologue;
  s.epilogue = plan.epilogue;
  s.buffers.reserve(plan.buffers.size());
  for (const BufferDesc &b : plan.buffers)
    s.buffers.push_back(
        {b.device, b.bytes(), b.weight.has_value() || !b.constant.empty()});
  for (const auto *bindings : {&plan.inputs, &plan.outputs})
    for (const BindingDesc &b : *bindings)
      if (b.buffer < s.buffers.size())
        s.buffers[b.buffer].keeps = true;
  s.programs.reserve(plan.programs.size());
  for (const ProgramDesc &p : plan.programs) {
    rp::arena::Program &q = s.programs.emplace_back();
    q.calls.reserve(p.calls.size());
    for (const KernelCallDesc &c : p.calls)
      q.calls.push_back({c.inputs, c.outputs});
  }
  s.jobs.reserve(plan.jobs.size());
  for (const JobDesc &j : plan.jobs) {
    rp::arena::Job &k = s.jobs.emplace_back();
    k.run = j.kind == JobKind::run;
    k.program = j.program;
    k.device = j.device;
    k.queue = uint32_t(j.queue);
    k.waits = j.waits;
    k.records = j.records;
    for (const CopyDesc &c : j.copies)
      k.copies.push_back({c.src, c.dst, c.dstOffset, c.bytes});
  }
  return s;
}

Expected<DeviceLayout> rp::runtime::planDeviceMemory(const Plan &plan) {
  return rp::arena::pack(shapeOf(plan));
}

Status rp::runtime::verifyDeviceLayout(const Plan &plan,
                                       const DeviceLayout &layout) {
  auto pair = rp::arena::overlapInUse(shapeOf(plan), layout);
  if (!pair)
    return Status::ok();
  const BufferDesc &a = plan.buffers[pair->first];
  const BufferDesc &c = plan.buffers[pair->second];
  return internalError("buffers '" + a.name + "' and '" + c.name +
                       "' share bytes of device " + std::to_string(a.device) +
                       " while both hold values in use; the device "
                       "memory layout is wrong");
}

/// The copies of the arenas the plan's planned_peak_bytes count: its
/// arena_copies, else one per pass in flight (0: one pass's peak, older
/// plans).
static unsigned plannedCopies(const Plan &plan) {
  return plan.arenaCopies ? plan.arenaCopies : plan.passesInFlight;
}

uint64_t rp::runtime::plannedPassPeak(const Plan &plan, size_t d) {
  return plan.plannedPeakBytes[d] / std::max(plannedCopies(plan), 1u);
}

uint64_t rp::runtime::plannedRunPeak(const Plan &plan, size_t d,
                                     unsigned copies, bool rotating) {
  // Older plans carry one pass's peak: a copy per arena copy (the largest
  // when renamed). Fewer copies than the plan's (rp-run --step-barrier,
  // --arena-copies 1) hold the run to that many copies' share; more to
  // the plan's peak.
  if (!plan.passesInFlight) {
    uint64_t largest = 0;
    for (uint64_t p : plan.plannedPeakBytes)
      largest = std::max(largest, p);
    return uint64_t(copies) * (rotating ? largest : plan.plannedPeakBytes[d]);
  }
  if (copies < plannedCopies(plan))
    return plannedPassPeak(plan, d) * copies;
  return plan.plannedPeakBytes[d];
}

Status rp::runtime::checkAllocationWithinPlan(
    const Plan &plan, const DeviceLayout &layout,
    const std::vector<uint64_t> &allocated, unsigned slots, unsigned copies,
    bool rotating) {
  size_t n = allocated.size();
  if (plan.plannedPeakBytes.size() != n || layout.paddingBytes.size() != n)
    return Status::ok();
  uint64_t padding = 0;
  for (size_t d = 0; d < n; ++d)
    padding = std::max(padding, layout.paddingBytes[d]);
  unsigned planned = plannedCopies(plan);
  unsigned passes = plan.passesInFlight;
  for (size_t d = 0; d < n; ++d) {
    uint64_t peak = plannedRunPeak(plan, d, copies, rotating);
    uint64_t slack =
        uint64_t(copies) * (rotating ? padding : layout.paddingBytes[d]);
    if (allocated[d] <= peak + slack)
      continue;
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.3f",
                  peak ? double(allocated[d]) / double(peak) : 0.0);
    std::string what =
        (slots == 1    ? std::string("1 pass in flight: one copy of the arenas")
         : copies == 1 ? std::to_string(slots) +
                             " passes in flight sharing one copy of the arenas"
                       : std::to_string(slots) +
                             " passes in flight, a copy of the arenas each") +
        (rotating ? ", every device sized as the largest since devices are "
                    "renamed pass by pass"
                  : "");
    // What the plan's peak covers.
    std::string covers;
    if (passes && copies < planned)
      covers =
          " for " + std::to_string(copies) + " of its " +
          std::to_string(planned) +
          (plan.arenaCopies ? " copies of the arenas" : " passes in flight");
    else if (passes)
      covers = " for its " + std::to_string(passes) + " pass" +
               (passes == 1 ? "" : "es") + " in flight" +
               (plan.arenaCopies == 1 && passes > 1
                    ? " sharing one copy of the arenas"
                    : "");
    std::string advice;
    if (passes && copies > planned)
      advice = plan.arenaCopies && passes > 1
                   ? "the plan shares one copy of the arenas between its " +
                         std::to_string(passes) +
                         " passes in flight because two copies do not fit "
                         "its devices: leave --arena-copies out"
                   : "the plan keeps " + std::to_string(passes) +
                         " pass in flight on one copy of the arenas: leave "
                         "--passes-in-flight out, or keep two passes on one "
                         "copy of the arenas with --arena-copies 1";
    else if (passes && slots > passes)
      advice = "the plan keeps " + std::to_string(passes) +
               " pass in flight, each device on its own arena, and more "
               "passes rename the devices, every arena sized as the "
               "largest: leave --passes-in-flight out";
    else
      advice = "the plan's memory model (rp-plan-memory) misses what this "
               "runtime keeps, so the plan may not fit the device it was "
               "planned for: recompile it with this version's rp-compile, "
               "and if that does not help, report it with the plan";
    return Status(StatusCode::ResourceExhausted,
                  "device " + std::to_string(d) + " allocates " +
                      std::to_string(allocated[d]) + " bytes of buffers (" +
                      what + "), over the compiler's planned peak of " +
                      std::to_string(peak) + " bytes" + covers + " plus " +
                      std::to_string(slack) + " bytes of alignment padding (" +
                      ratio + "x the peak); " + advice);
  }
  return Status::ok();
}

Status rp::runtime::checkArenasWithinPlan(const Plan &plan,
                                          const DeviceLayout &layout,
                                          bool rotating, double margin) {
  size_t n = layout.arenaBytes.size();
  if (plan.plannedPeakBytes.size() != n || layout.paddingBytes.size() != n)
    return Status::ok();
  uint64_t largest = 0, peak = 0, padding = 0;
  for (size_t d = 0; d < n; ++d) {
    largest = std::max(largest, layout.arenaBytes[d]);
    peak = std::max<uint64_t>(peak, plannedPassPeak(plan, d));
    padding = std::max(padding, layout.paddingBytes[d]);
  }
  for (size_t d = 0; d < n; ++d) {
    uint64_t arena = rotating ? largest : layout.arenaBytes[d];
    uint64_t planned = rotating ? peak : plannedPassPeak(plan, d);
    uint64_t slack = (rotating ? padding : layout.paddingBytes[d]) +
                     uint64_t(margin * double(planned));
    if (arena <= planned + slack)
      continue;
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.3f",
                  planned ? double(arena) / double(planned) : 0.0);
    return Status(
        StatusCode::ResourceExhausted,
        "device " + std::to_string(d) + "'s buffers take " +
            std::to_string(arena) + " bytes in one pass" +
            (rotating ? " (every device sized as the largest, since "
                        "devices are renamed pass by pass)"
                      : "") +
            ", over the compiler's planned peak of " + std::to_string(planned) +
            " bytes plus " + std::to_string(slack) + " bytes of " +
            (margin > 0 ? "margin and " : "") + "alignment padding (" + ratio +
            "x the peak); the plan's memory model (rp-plan-memory) misses "
            "what this runtime keeps, so the plan may not fit the device it "
            "was planned for: recompile it with this version's rp-compile, "
            "and if that does not help, report it with the plan");
  }
  return Status::ok();
}
