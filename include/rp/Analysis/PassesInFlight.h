//===- PassesInFlight.h - what a continuous run allocates -----*- C++ -*-===//
//
// A continuous run keeps each pass in flight on its own copy of the device
// arenas, so what it allocates per device is a function of one pass's
// memory plan (MemoryPlan::peakBytes), the passes in flight and whether
// the devices are renamed. rp-plan-memory decides the passes with it, and
// the plan export, the verifier, rp-compile's summary and
// --report-max-seq count with it. Free of MLIR and of the timing core, so
// tools include it alone.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_PASSESINFLIGHT_H
#define RP_ANALYSIS_PASSESINFLIGHT_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace mlir::rp {

/// Whether a continuous run with `passes` in flight renames the devices pass
/// by pass (the runtime's rule, rp-run and the sim): two passes in flight
/// whose pass shift (Pipeline::shiftPerPass, 0 for static schedules and
/// one device) moves the jobs. With one pass in flight every pass waits
/// for the one before, so renaming would gain nothing and the devices
/// keep their own arenas.
inline bool renamesDevices(unsigned shiftPerPass, unsigned passes) {
  return passes >= 2 && shiftPerPass != 0;
}

/// What a continuous run allocates per device for one pass's planned
/// peaks `passPeaks` (MemoryPlan::peakBytes): a copy of the arenas per
/// pass in flight, and with renamed devices every copy as large as the
/// largest device's (any device may run any plan device's work).
std::vector<int64_t> runPeakBytes(llvm::ArrayRef<int64_t> passPeaks,
                                  unsigned passes, bool renamed);

/// Passes in flight a continuous run keeps: 2 when two copies of the
/// arenas (runPeakBytes) fit `budget` on every device, else 1 (long
/// sequences; a pass then starts after the one before has finished).
unsigned choosePassesInFlight(llvm::ArrayRef<int64_t> passPeaks, int64_t budget,
                              bool renamedWithTwo);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PASSESINFLIGHT_H
