//===- ReduceChunks.h - how rp's cuda device splits a reduction -*- C++ -*-===//
//
// The cuda device reduces in one kernel, or in two (chunks' partial sums,
// then each output over its chunks) where few outputs each reduce many
// elements. The compiler's launch count (timing::kernelLaunches) and the
// device both read the rule here, so the count cannot drift from the
// kernels (docs/architecture.md, "the wall").
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_REDUCECHUNKS_H
#define RP_CONTRACT_REDUCECHUNKS_H

#include <cstdint>

namespace rp::plan {

/// Outputs times chunks aimed at: enough threads to fill a GPU.
constexpr int64_t kReduceThreads = int64_t(1) << 17;
/// Elements of a chunk at least, and chunks of an output at most (the
/// second level is one thread per output over its chunks).
constexpr int64_t kReduceMinChunk = 32, kReduceMaxChunks = 1024;

/// The chunks aimed at for `numOut` outputs of `reducedCount` elements
/// each: below 2, one kernel reduces each output whole. The split depends
/// on the shape alone, so the order of the sums (hence the bits) is the
/// same on every GPU.
constexpr int64_t reduceChunkTarget(int64_t reducedCount, int64_t numOut) {
  if (numOut <= 0 || numOut >= kReduceThreads ||
      reducedCount < 2 * kReduceMinChunk)
    return 1;
  int64_t chunks = (kReduceThreads + numOut - 1) / numOut;
  int64_t most = reducedCount / kReduceMinChunk;
  chunks = chunks < most ? chunks : most;
  return chunks < kReduceMaxChunks ? chunks : kReduceMaxChunks;
}

} // namespace rp::plan

#endif // RP_CONTRACT_REDUCECHUNKS_H
