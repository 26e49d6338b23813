//===- DeviceMemory.h - where a staged plan's device buffers live -*- C++
//-*-===//
//
// A staged plan's device buffers are packed into one arena per device by
// the contract's packing (rp/contract/ArenaPacking.h: two buffers share
// bytes when the plan itself orders their uses). Passes that overlap
// (continuous execution) run on separate copies of the arenas
// (HostForward's slots), or on one copy that a device takes up for the next
// pass only once its part of the pass before is over (PipelineExecutor),
// so one pass's order is enough.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_DEVICEMEMORY_H
#define RP_RUNTIME_DEVICEMEMORY_H

#include "rp/contract/ArenaPacking.h"
#include "rp/runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace rp::runtime {

/// Offsets inside each device's arena: the contract's packing
/// (rp/contract/ArenaPacking.h), which the compiler's exporter also runs to
/// write the plan's planned peak. Its paddingBytes are the slack the arena
/// may take over that peak where the peak comes from the compiler's memory
/// model (rp-plan-memory), which counts tensors' bytes, not where the
/// runtime puts them.
using DeviceLayout = ::rp::arena::Layout;

/// Packs the device buffers of a staged plan (an unstaged plan, or one
/// without device buffers, gets one private range per buffer).
Expected<DeviceLayout> planDeviceMemory(const Plan &plan);

/// Checks a layout against the plan, pair by pair: two device buffers whose
/// byte ranges overlap must have every use of one happen before every use
/// of the other, and neither may hold contents that outlive a step.
/// Internal (the tests' and the loader's second opinion) on failure.
Status verifyDeviceLayout(const Plan &plan, const DeviceLayout &layout);

/// The compiler's planned peak of one pass on device `d`: the plan's
/// planned_peak_bytes cover all its copies of the arenas (Plan::arenaCopies,
/// or one per pass in flight where that is 0; one pass's peak in plans
/// older than passes_in_flight).
uint64_t plannedPassPeak(const Plan &plan, size_t d);

/// The compiler's planned peak on device `d` for a run with `copies`
/// copies of the arenas (`rotating`: renamed devices): the plan's
/// planned_peak_bytes, that many copies' share of it when fewer than the
/// plan's, and for plans older than passes_in_flight one pass's peak per
/// copy (the largest device's when renamed).
uint64_t plannedRunPeak(const Plan &plan, size_t d, unsigned copies,
                        bool rotating);

/// One pass's arenas against the compiler's planned peak of one pass
/// (plannedPassPeak): each arena may exceed its device's peak by the
/// device's alignment padding at most. A rotating layout (continuous
/// execution renames devices pass by pass) sizes every arena as the largest
/// and puts any plan device's buffers on any device, so each is held to the
/// largest peak. `margin` allows that fraction of the peak more.
/// ResourceExhausted, naming the device, both sizes and what to do, when an
/// arena is larger; ok when the plan carries no peak.
Status checkArenasWithinPlan(const Plan &plan, const DeviceLayout &layout,
                             bool rotating = false, double margin = 0);

/// What a run allocates per device, `allocated` (every copy of its arena:
/// HostForward::allocatedPerDevice), against the plan's planned peak for
/// the run's `copies` of the arenas (plannedRunPeak), the device's
/// alignment padding per copy allowed (each renamed device's the largest
/// padding) and nothing more; `slots` (passes in flight) is for the
/// message. ResourceExhausted with both sizes, the passes, the copies and
/// what to do when a device's total is larger; ok when the plan carries no
/// peak.
Status checkAllocationWithinPlan(const Plan &plan, const DeviceLayout &layout,
                                 const std::vector<uint64_t> &allocated,
                                 unsigned slots, unsigned copies,
                                 bool rotating);

} // namespace rp::runtime

#endif // RP_RUNTIME_DEVICEMEMORY_H
