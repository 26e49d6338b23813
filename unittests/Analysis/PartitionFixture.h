//===- PartitionFixture.h - the partition memory tests' models --*- C++ -*-===//
//
// What PartitionMemoryTest and PartitionHostBudgetTest share: twelve
// layers of 128 MiB of weights (and as much gradient), a device of a given
// memory on 25 GB/s links, and the leanest partition.
//
//===----------------------------------------------------------------------===//

#ifndef RP_UNITTESTS_ANALYSIS_PARTITIONFIXTURE_H
#define RP_UNITTESTS_ANALYSIS_PARTITIONFIXTURE_H

#include "rp/Analysis/PartitionMemory.h"

#include <vector>

namespace mlir::rp::fixture {

/// Twelve layers of 128 MiB of weights and gradients, `workBytes` of
/// intermediates and `actBytes` activations a microbatch; `time(i)` their
/// forward (and recompute) time, `backward(i, forward)` their backward's.
template <typename Time, typename Backward>
std::vector<LayerCost> twelveLayers(int64_t workBytes, int64_t actBytes,
                                    Time &&time, Backward &&backward) {
  std::vector<LayerCost> layers(12);
  for (unsigned i = 0; i < layers.size(); ++i) {
    LayerCost &c = layers[i];
    c.forwardMs = c.recomputeMs = time(i);
    c.backwardMs = backward(i, c.forwardMs);
    c.paramBytes = c.gradBytes = int64_t(1) << 27;
    c.workBytes = workBytes;
    c.actInBytes = c.actOutBytes = actBytes;
  }
  return layers;
}

/// A device of `gib` GiB on 25 GB/s links each way.
inline HardwareProfile device(double gib) {
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = 25;
  hw.memoryGiB = gib;
  return hw;
}

/// The leanest partition: one-layer tail and stages.
inline Partition leanest(unsigned n) {
  std::vector<unsigned> ones(n - 1, 1);
  return partitionFromSizes(ones, 1, ones, n);
}

/// The host bytes `p`'s memory plan stages (the pinned staging buffers).
inline int64_t staged(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                      const SearchTarget &t) {
  return devicePeak(p, layers, t).hostBytes;
}

} // namespace mlir::rp::fixture

#endif // RP_UNITTESTS_ANALYSIS_PARTITIONFIXTURE_H
