//===- DeviceMemory.h - where a staged plan's device buffers live -*- C++
//-*-===//
//
// A staged plan names every tensor a step touches as its own buffer, so
// allocating each one apart would hold every stage's activations on a
// device at once. The layout packs each device's buffers into one arena and
// lets two buffers share bytes when the plan itself orders them: every use
// of the earlier one happens before the use that first writes the later
// one. "Happens before" is the plan's own order (jobs on one queue run in
// order, a waiting job runs after the job recording the event, calls of one
// program in order), the same edges the executor enforces with device
// events; so a reuse never needs a synchronization the plan does not have
// (the stream-ordered reuse of reference/roundpipe.md §2.9, decided ahead
// of time). Passes that overlap (continuous execution) run on separate
// copies of the arenas (HostForward's slots), or on one copy that a device
// takes up for the next pass only once its part of the pass before is
// over (PipelineExecutor), so one pass's order is enough.
//
// A buffer is shared only when its contents never outlive a step: it has no
// initial contents, no host program touches it, and one use writes all of
// it before (in happens-before order) every other use. Any other device
// buffer gets bytes of its own.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_DEVICEMEMORY_H
#define RP_RUNTIME_DEVICEMEMORY_H

#include "rp/runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace rp::runtime {

/// Offsets inside each device's arena.
struct DeviceLayout {
  /// Byte alignment of every offset (enough for any kernel's vector loads
  /// and for cudaMalloc'd arenas).
  static constexpr uint64_t kAlignment = 256;
  /// Per device: the arena's size, and the bytes its buffers would take
  /// allocated one by one (aligned the same way), for reports.
  std::vector<uint64_t> arenaBytes, unsharedBytes;
  /// Per device: the bytes that aligning each buffer adds to its size, the
  /// slack the arena may take over the compiler's planned peak (which
  /// counts tensors' bytes, not where the runtime puts them).
  std::vector<uint64_t> paddingBytes;
  /// Per plan buffer: its offset in its device's arena (0 for host buffers).
  std::vector<uint64_t> offset;
  /// Per plan buffer: whether it shares bytes with another buffer.
  std::vector<bool> shared;
  /// Per plan buffer: whether its contents never outlive a step (no
  /// initial contents, written before every read), so that it may share
  /// bytes, alone in its range or not. Continuous execution may place such
  /// a buffer on any device (HostForward's rotation).
  std::vector<bool> transient;
};

/// The happens-before order of a staged plan's jobs within one step:
/// before(a, b) when job a finishes before job b starts in every run.
class JobOrder {
public:
  /// Fails (InvalidArgument) when the jobs' waits and queue order form a
  /// cycle, which checkPlanEvents refuses too.
  static Expected<JobOrder> build(const Plan &plan);
  bool before(size_t a, size_t b) const {
    return (reach[a * words + b / 64] >> (b % 64)) & 1;
  }
  /// Job j's position in one topological order of the jobs.
  size_t rank(size_t j) const { return ranks[j]; }
  /// Row a of the order: the jobs after job a, as `rowWords()` words of a
  /// bitset (for summaries over many jobs, DeviceMemory.cpp's lives).
  const uint64_t *after(size_t a) const { return &reach[a * words]; }
  size_t rowWords() const { return words; }

private:
  size_t words = 0;
  /// Row a: the jobs that run after job a, as a bitset.
  std::vector<uint64_t> reach;
  std::vector<size_t> ranks;
};

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
