//===- RunHostMemory.cpp - what a run holds in host memory ----------------===//
//
// Before a run allocates its buffers: the host bytes it will hold (the
// plan's host buffers in every slot, and the trainer's master weights,
// gradient sums and optimizer state), against the machine's memory
// (MemAvailable in /proc/meminfo, or --host-memory-gib): a plan that would
// overcommit the host is refused, with what to do, rather than left to
// swap or to the kernel's OOM killer part way through. After the run: the
// same parts as allocated (docs/nf4.md, "Host memory").
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/Trainer.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

using namespace rp::runtime;
using namespace rp::runtime::run;

static std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", double(bytes) / (1ull << 30));
  return text;
}

/// GiB for --host-budget-gib: rounded down, to 2 decimals.
static std::string budgetText(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g",
                std::floor(double(bytes) / (1ull << 30) * 100 + 1e-6) / 100);
  return text;
}

/// The machine's available memory in bytes (0 where /proc/meminfo does
/// not say).
static uint64_t availableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

Status rp::runtime::run::checkHostMemory(const RunOptions &o, const Plan &plan,
                                         unsigned slots, bool training) {
  uint64_t buffers = hostBufferBytes(plan, slots);
  uint64_t trainer = training ? trainerHostBytes(plan, !o.serialOptimizer) : 0;
  uint64_t need = buffers + trainer;
  bool given = o.hostMemoryGiB > 0;
  uint64_t have =
      given ? uint64_t(o.hostMemoryGiB * double(1ull << 30)) : availableBytes();
  if (have == 0 || need <= have)
    return Status::ok();
  std::string why =
      "the run would hold " + gib(need) +
      " of host memory (the plan's host "
      "buffers " +
      gib(buffers) + " in " + std::to_string(slots) + " slot" +
      (slots == 1 ? "" : "s") +
      (training ? ", the trainer's master weights, gradient sums and "
                  "optimizer state " +
                      gib(trainer)
                : std::string()) +
      "), over the " + gib(have) +
      (given ? " of --host-memory-gib" : " this machine has available") +
      ": compile the plan with --host-budget-gib " + budgetText(have) +
      " (rp-compile holds its stages to it, or says what would fit)";
  if (slots > 1)
    why += ", or run it with --passes-in-flight 1 (" +
           gib(hostBufferBytes(plan, 1) + trainer) + ")";
  return Status(StatusCode::ResourceExhausted, why);
}

void rp::runtime::run::reportHostMemory(const HostForward &fwd,
                                        uint64_t trainer) {
  std::string slots;
  for (unsigned s = 0; s < fwd.getSlots(); ++s)
    slots += std::string(s ? ", " : "") +
             (s ? "the second pass's " : "one pass's ") +
             std::to_string(fwd.allocatedHostBytes(s));
  uint64_t buffers = fwd.allocatedHostBytes();
  uint64_t total = buffers + trainer;
  std::fprintf(stderr,
               "rp-run: host memory allocated %s bytes (%s): the plan's "
               "host buffers %s (%s), the trainer's master weights, "
               "gradient sums and optimizer state %s\n",
               std::to_string(total).c_str(), gib(total).c_str(),
               std::to_string(buffers).c_str(), slots.c_str(),
               std::to_string(trainer).c_str());
}
