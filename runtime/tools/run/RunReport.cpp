//===- RunReport.cpp - what rp-run prints and writes after a run ----------===//
//
// After a staged run: its device memory and where its time went (stderr),
// the --trace and --profile files; after a forward run --dump-outputs.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/FileIO.h"
#include "rp/runtime/host/Kernels.h"

#include <cstdio>
#include <filesystem>

using namespace rp::runtime;
using namespace rp::runtime::run;

int rp::runtime::run::fail(const Status &s) {
  std::fprintf(stderr, "rp-run: error: %s\n", s.getMessage().c_str());
  return exitCode(s);
}

/// A staged plan's device memory, on stderr: each device's arena, and what
/// its buffers would take one apiece.
void rp::runtime::run::reportMemory(const Plan &plan, const HostForward &fwd) {
  const DeviceLayout &layout = fwd.getLayout();
  std::string arenas, apart;
  for (size_t d = 0; d < layout.arenaBytes.size(); ++d) {
    char text[64];
    std::snprintf(text, sizeof(text), "%s%.1f", d ? " " : "",
                  double(layout.arenaBytes[d]) / 1024);
    arenas += text;
    std::snprintf(text, sizeof(text), "%s%.1f", d ? " " : "",
                  double(layout.unsharedBytes[d]) / 1024);
    apart += text;
  }
  std::fprintf(stderr,
               "rp-run: device buffers per device: %s KiB (%s KiB with no "
               "buffer sharing bytes)\n",
               arenas.c_str(), apart.c_str());
  if (plan.plannedPeakBytes.size() == layout.arenaBytes.size()) {
    // What each device allocates, all slots together, against the
    // compiler's peak for the run (plannedRunPeak), which
    // checkAllocationWithinPlan held it to before the run.
    std::string planned;
    std::vector<uint64_t> allocated = fwd.allocatedPerDevice();
    double ratio = 0;
    for (size_t d = 0; d < allocated.size(); ++d) {
      char text[32];
      std::snprintf(text, sizeof(text), "%s%.1f", d ? " " : "",
                    double(plan.plannedPeakBytes[d]) / 1024);
      planned += text;
      uint64_t run =
          plannedRunPeak(plan, d, fwd.getArenaCopies(), fwd.rotates());
      if (run)
        ratio = std::max(ratio, double(allocated[d]) / double(run));
    }
    unsigned slots = fwd.getSlots();
    std::fprintf(
        stderr,
        "rp-run: the compiler's planned peak per device: %s KiB; "
        "arenas at most %.3fx it (%u pass%s in flight%s)\n",
        planned.c_str(), ratio, slots, slots == 1 ? "" : "es",
        fwd.getArenaCopies() < slots ? " sharing one copy of the arenas" : "");
  }
  if (fwd.getSlots() > 1) {
    uint64_t one = 0;
    for (uint64_t bytes : layout.arenaBytes)
      one += bytes;
    std::fprintf(stderr,
                 "rp-run: continuous execution: %u buffer slots%s%s, %.1f "
                 "KiB of device buffers in all (%.1f KiB for one pass)\n",
                 fwd.getSlots(),
                 fwd.rotates() ? ", devices renamed pass by pass"
                 : fwd.getRotationBlocker().empty()
                     ? ""
                     : (", devices not renamed: '" + fwd.getRotationBlocker() +
                        "' keeps its contents from pass to pass")
                           .c_str(),
                 fwd.getArenaCopies() < fwd.getSlots()
                     ? ", one copy of the device arenas shared by both passes "
                       "(a device takes up a pass once it is done with the "
                       "one before)"
                     : "",
                 double(fwd.allocatedDeviceBytes()) / 1024, double(one) / 1024);
  }
}

/// Where a staged run's time went, on stderr: per device, then the host.
void rp::runtime::run::reportTime(const Trace &trace, bool overlapped) {
  const BusySummary &busy = trace.getBusy();
  if (busy.steps == 0)
    return;
  std::fprintf(stderr,
               "rp-run: where the time went, over %llu step(s) whose jobs "
               "ran %.3f ms each:\n",
               static_cast<unsigned long long>(busy.steps),
               double(busy.wall) / 1e6 / double(busy.steps));
  std::fputs(describeBusy(busy).c_str(), stderr);
  std::string host;
  auto totals = trace.getHostTotals();
  for (const char *name : {"prologue", "epilogue", "optimizer"}) {
    auto it = totals.find(name);
    if (it == totals.end() || it->second.second == 0)
      continue;
    char part[96];
    std::snprintf(part, sizeof(part), "%s%s %.3f ms", host.empty() ? "" : ", ",
                  name,
                  double(it->second.first) / 1e6 / double(it->second.second));
    host += part;
  }
  if (!host.empty())
    std::fprintf(stderr, "rp-run: host, per step: %s%s\n", host.c_str(),
                 overlapped ? " (the optimizer overlaps the next step)" : "");
}

/// --trace and --profile after a staged run; the trace is written even
/// when the run failed, as it shows where.
Status rp::runtime::run::writeTraceFiles(const Trace &trace,
                                         const std::string &tracePath,
                                         const std::string &profilePath,
                                         const std::string &profileHw,
                                         bool ranOk) {
  if (!tracePath.empty())
    if (Status s = writeChromeTrace(trace, tracePath); s.failed())
      return s;
  if (!profilePath.empty() && ranOk)
    return writeMeasuredProfile(trace, profileHw, profilePath);
  return Status::ok();
}

/// The first output as f32, as --dump-outputs writes it.
Status rp::runtime::run::dumpOutput(const HostForward &fwd,
                                    const std::string &path) {
  TensorRef out = fwd.output(0);
  if (out.dtype == DType::f32)
    return writeNpy(path, DType::f32, out.shape, out.data);
  std::vector<float> f32(out.size());
  TensorRef dst{f32.data(), DType::f32, out.shape};
  ThreadPool pool(1);
  if (Status s = host::cast(pool, out, dst); s.failed())
    return s;
  return writeNpy(path, DType::f32, out.shape, f32.data());
}

Status rp::runtime::run::checkOutputFolder(const char *flag,
                                           const std::string &path) {
  if (path.empty())
    return Status::ok();
  return checkOutputPath(path, flag);
}
