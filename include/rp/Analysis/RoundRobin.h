//===- RoundRobin.h - RoundPipe's round-robin schedule ----------*- C++ -*-===//
//
// The schedule of one training iteration under round-robin dispatch: stage
// job n (forward stages, the fused tail, backward stages) runs on device
// n mod G and loops over all M microbatches. Per job: its weights are
// uploaded once on the weight queue, no earlier than the job two turns
// back on the same device has finished (two weight sets resident: the
// running and the prefetched one); per microbatch, the input comes through
// host memory (D2H on the producing device, H2D on the activation queue),
// then compute, then the output goes back to host; tail and backward jobs
// download their weight gradients once, after the last microbatch.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_ROUNDROBIN_H
#define RP_ANALYSIS_ROUNDROBIN_H

#include "rp/Analysis/HardwareProfile.h"
#include "rp/Analysis/Partition.h"
#include "rp/Analysis/ScheduleTiming.h"

namespace mlir::rp {

Schedule roundRobinSchedule(const Partition &partition,
                            llvm::ArrayRef<LayerCost> layers,
                            const HardwareProfile &hw, unsigned devices,
                            unsigned microbatches);

} // namespace mlir::rp

#endif // RP_ANALYSIS_ROUNDROBIN_H
