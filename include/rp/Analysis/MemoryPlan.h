//===- MemoryPlan.h - static buffers of a pipeline --------------*- C++ -*-===//
//
// Every buffer a pipeline's commands touch, placed at a fixed offset in its
// device's arena (or the host's pinned pool), so that the runtime never
// allocates during a step. Two buffers share bytes only when every command
// of one happens before every command of the other (waits and queue
// order), whatever the timing; the peak is the arena's size.
//
// Buffers: per weight set its weights (and gradients, accumulated over the
// microbatches); per compute its input (every upload it waits for: with
// token slices the kept prefix too; a static stage's forward input stays
// until its backward), its output (every download of it) and its working
// memory; per tail or backward job of a token-sliced schedule the key and
// value gradients it sums over its slices; on the host, per download the
// staged value until its last upload, plus the weights and gradients of
// the whole model.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_MEMORYPLAN_H
#define RP_ANALYSIS_MEMORYPLAN_H

#include "rp/Analysis/PassesInFlight.h"
#include "rp/Analysis/Pipeline.h"

#include <array>
#include <memory>

namespace mlir::rp {

/// Which commands happen before which: the transitive closure of waits
/// and queue order over a schedule in issue order.
class HappensBefore {
public:
  /// The reach rows are a function of the commands' queues and earlier
  /// waits alone: a schedule of the same shape as one of the last few
  /// built shares their rows (a report's trials plan one partition's
  /// schedule at length after length; its buffers' sizes change, not
  /// its order), and the horizons asked of them.
  explicit HappensBefore(const Schedule &schedule);
  /// Whether `a` has finished whenever `b` starts.
  bool operator()(unsigned a, unsigned b) const {
    return a < b && (*reach)[b][a / 64] >> (a % 64) & 1;
  }
  /// Per command u (indexed by command): 1 + the last command of `pool`
  /// (ascending) that u does not happen before, or u + 1 where every
  /// later one of `pool` waits for u. Two commands u and v >= horizon[u]
  /// of the pool are ordered, so two buffers whose users lie in the pool
  /// are apart in time once one's first user is at or past the horizon of
  /// all the other's users: placePool tests the others user by user.
  std::vector<unsigned> horizons(llvm::ArrayRef<unsigned> pool) const;

  struct Rows;

private:
  std::shared_ptr<Rows> rows;
  /// rows' reach: per command, the earlier commands it waits for,
  /// transitively, as bits.
  const std::vector<std::vector<uint64_t>> *reach = nullptr;
};

enum class BufferRole : uint8_t {
  weights,
  input,
  output,
  work,
  staged,
  keyGrads
};

struct PlannedBuffer {
  BufferRole role;
  /// The device, or the device count for the host's pinned pool.
  unsigned device;
  int64_t bytes = 0;
  int64_t offset = 0;
  /// The commands that read or write it.
  std::vector<unsigned> users;
  /// For messages: `weights of set 3 (layers 6-8)`, `work of B5 mb0`.
  std::string what;
};

struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;
  /// Per device, the arena size; then the host's staged activations.
  std::vector<int64_t> peakBytes;
  int64_t stagedHostBytes = 0;
  /// The model's weights and gradients, pinned on the host.
  int64_t pinnedHostBytes = 0;
  /// Per command: its weights, input, output and work buffers, and, for a
  /// token-sliced schedule's tail or backward compute whose layers keep
  /// keys, its job's key and value gradient accumulator (-1: none).
  std::vector<std::array<int, 5>> commandBuffers;
};

/// The device of `mp` with the largest peak (the first on ties), that peak
/// and its biggest buffer: what limits the plan, as reports name it.
struct FullestDevice {
  unsigned device = 0;
  int64_t peak = 0;
  int64_t biggestBytes = 0;
  std::string biggest;
};
FullestDevice fullestDevice(const MemoryPlan &mp);

/// Plans the buffers of `pipeline` (whose transfers are inserted):
/// collectBuffers, then placeBuffers.
MemoryPlan planMemory(const Pipeline &pipeline,
                      llvm::ArrayRef<LayerCost> layers);

/// Every buffer of `pipeline` with its bytes and users, none placed yet
/// (no peaks): what a caller may bound (liveBytesBounds) before paying for
/// the placement, which compares the buffers of a pool that its horizons
/// leave (HappensBefore::horizons).
MemoryPlan collectBuffers(const Pipeline &pipeline,
                          llvm::ArrayRef<LayerCost> layers);

/// Places `mp`'s buffers (from collectBuffers of `pipeline`) and sets its
/// peaks.
void placeBuffers(MemoryPlan &mp, const Pipeline &pipeline);

/// Places the buffers of one pool of `mp` (a device, or the device count
/// for the host) and returns its peak: a pool's offsets depend on its own
/// buffers only, so a caller may place the host first and stop there.
/// First fit in issue order; with `largestFirstToo` (the devices) also
/// first fit largest first where issue order peaks over the pool's live
/// bytes (liveBytesBounds), keeping the lower peak (issue order on ties).
int64_t placePool(MemoryPlan &mp, const HappensBefore &hb, unsigned pool,
                  bool largestFirstToo);

/// Per device, then the host: a lower bound of the peak placeBuffers will
/// give that pool, the most bytes whose users' spans in issue order all
/// cover one command. Linear in the buffers after a sort; used to drop a
/// partition whose plan cannot fit before placing it (holdToHostBudget).
std::vector<int64_t> liveBytesBounds(const MemoryPlan &mp, unsigned devices);

/// Whether two placed buffers may share bytes: every command of one
/// happens before every command of the other.
bool disjointInTime(const PlannedBuffer &a, const PlannedBuffer &b,
                    const HappensBefore &hb);

} // namespace mlir::rp

#endif // RP_ANALYSIS_MEMORYPLAN_H
