//===- PassesInFlight.h - what a continuous run allocates -----*- C++ -*-===//
//
// A continuous run keeps two passes in flight, each on its own copy of the
// device arenas or both on one copy (a device waits for its own part of
// the pass before), so what it allocates per device is a function of one
// pass's memory plan (MemoryPlan::peakBytes), the copies and whether the
// devices are renamed. rp-plan-memory decides the copies with it, and
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
/// one device) moves the jobs, on one copy of the arenas or two. With one
/// pass in flight every pass waits for the one before, so renaming would
/// gain nothing and the devices keep their own arenas.
inline bool renamesDevices(unsigned shiftPerPass, unsigned passes) {
  return passes >= 2 && shiftPerPass != 0;
}

/// What a continuous run allocates per device for one pass's planned
/// peaks `passPeaks` (MemoryPlan::peakBytes): `copies` copies of the
/// arenas, and with renamed devices every copy as large as the largest
/// device's (any device may run any plan device's work).
std::vector<int64_t> runPeakBytes(llvm::ArrayRef<int64_t> passPeaks,
                                  unsigned copies, bool renamed);

/// Copies of the arenas a continuous run with two passes in flight keeps:
/// 2, one per pass, when two copies (runPeakBytes) fit `budget` on every
/// device, else 1, one set the two passes share, a device taking up the
/// next pass's work once its own part of the pass before is done.
unsigned chooseArenaCopies(llvm::ArrayRef<int64_t> passPeaks, int64_t budget,
                           bool renamed);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PASSESINFLIGHT_H
