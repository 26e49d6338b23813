//===- ArenaPacking.h - where a staged plan's device buffers live -*- C++ -*-//
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
// of time).
//
// A buffer is shared only when its contents never outlive a step: it has no
// initial contents, no host program touches it, and one use writes all of
// it before (in happens-before order) every other use. Any other device
// buffer gets bytes of its own.
//
// The packing is part of the contract because both sides need the same
// answer: the runtime allocates the arenas it gives, and the compiler's
// exporter writes them into the plan's planned peak, so that the peak the
// runtime holds its arenas to is never below what it packs (a buffer with
// several values, such as a gradient each microbatch writes again, is not
// one interval of time, and no count of bytes live at once bounds a first
// fit of such buffers).
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_ARENAPACKING_H
#define RP_CONTRACT_ARENAPACKING_H

#include <cstdint>
#include <optional>
#include <vector>

namespace rp::arena {

/// What packing reads of a plan (plan.fbs), as the runtime's loader and the
/// compiler's exporter both see it.
struct Buffer {
  /// -1: host memory; k: the memory of device k.
  int32_t device = -1;
  uint64_t bytes = 0;
  /// Initial contents (a weight range or a constant), or bound to a plan
  /// input or output: the buffer keeps bytes of its own.
  bool keeps = false;
};
struct Call {
  std::vector<uint32_t> inputs, outputs;
};
struct Program {
  std::vector<Call> calls;
};
struct Copy {
  uint32_t src = 0, dst = 0;
  uint64_t dstOffset = 0, bytes = 0;
};
struct Job {
  /// A run job runs `program`; a copy job makes `copies`.
  bool run = true;
  uint32_t program = 0, device = 0, queue = 0;
  std::vector<uint32_t> waits, records;
  std::vector<Copy> copies;
};
struct PlanShape {
  uint32_t devices = 1, events = 0;
  bool staged = false;
  /// The host programs before and after the jobs (-1: none).
  int32_t prologue = -1, epilogue = -1;
  std::vector<Buffer> buffers;
  std::vector<Program> programs;
  std::vector<Job> jobs;
};

/// Offsets inside each device's arena.
struct Layout {
  /// Byte alignment of every offset (enough for any kernel's vector loads
  /// and for cudaMalloc'd arenas).
  static constexpr uint64_t kAlignment = 256;
  /// Per device: the arena's size, and the bytes its buffers would take
  /// allocated one by one (aligned the same way), for reports.
  std::vector<uint64_t> arenaBytes, unsharedBytes;
  /// Per device: the bytes that aligning each buffer adds to its size.
  std::vector<uint64_t> paddingBytes;
  /// Per plan buffer: its offset in its device's arena (0 for host buffers).
  std::vector<uint64_t> offset;
  /// Per plan buffer: whether it shares bytes with another buffer.
  std::vector<bool> shared;
  /// Per plan buffer: whether its contents never outlive a step (no
  /// initial contents, written before every read), so that it may share
  /// bytes, alone in its range or not.
  std::vector<bool> transient;
};

/// The happens-before order of a staged plan's jobs within one step:
/// before(a, b) when job a finishes before job b starts in every run.
class JobOrder {
public:
  /// Null when the jobs' waits and queue order form a cycle.
  static std::optional<JobOrder> build(const PlanShape &plan);
  bool before(size_t a, size_t b) const {
    return (reach[a * words + b / 64] >> (b % 64)) & 1;
  }
  /// Job j's position in one topological order of the jobs.
  size_t rank(size_t j) const { return ranks[j]; }
  /// Row a of the order: the jobs after job a, as `rowWords()` words of a
  /// bitset.
  const uint64_t *after(size_t a) const { return &reach[a * words]; }
  size_t rowWords() const { return words; }

private:
  size_t words = 0;
  /// Row a: the jobs that run after job a, as a bitset.
  std::vector<uint64_t> reach;
  std::vector<size_t> ranks;
};

/// Packs the device buffers of a staged plan: first fit, largest buffer
/// first (an unstaged plan, or one whose jobs wait in a cycle, gets one
/// private range per buffer).
Layout pack(const PlanShape &plan);

/// The bytes of every device's arena when the devices are renamed pass by
/// pass (the runtime's rotating layout, runtime/lib/exec/Executor.cpp):
/// the transient buffers at their packed offsets, as far as the largest
/// device's reach, then every device's other buffers (constants) one after
/// another, since whichever device a pass lands on reads them. 0 when a
/// job or program writes one of those others: that is state of its device,
/// and the runtime does not rename.
uint64_t renamedArenaBytes(const PlanShape &plan, const Layout &layout);

/// Two device buffers of `layout` whose byte ranges overlap while one of
/// them holds a value the other's uses meet (or that outlives a step);
/// null when there are none.
std::optional<std::pair<uint32_t, uint32_t>> overlapInUse(const PlanShape &plan,
                                                          const Layout &layout);

} // namespace rp::arena

#endif // RP_CONTRACT_ARENAPACKING_H
