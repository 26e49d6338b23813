//===- AllReduce.h - the sim's data-parallel step ---------------*- C++ -*-===//
//
// Several boxes (docs/multi-box.md) each run the plan on their own slice of
// the global batch and sum their f32 gradients across the network as they
// land. This times that sum on a network profile (bandwidth, latency, ring
// or tree) from a simulated step: each parameter's gradient is ready when
// the last job that writes it ends (or after the epilogue for the ones it
// sums), the sums go one parameter at a time in that order, and what is
// left after the step's jobs and epilogue is exposed: it lengthens the step.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_SIM_ALLREDUCE_H
#define RP_RUNTIME_SIM_ALLREDUCE_H

#include "rp/runtime/Plan.h"
#include "rp/runtime/sim/Simulate.h"

#include <string>

namespace rp::runtime::sim {

enum class AllReduceAlgorithm { ring, tree };

struct NetworkProfile {
  std::string name;
  double gbps = 0;      ///< per box and direction, GB/s
  double latencyUs = 0; ///< per message
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::ring;
};

/// A shipped network: "25gbe", "100gbe" or "400ib" (Ethernet at 90 % of
/// its line rate, InfiniBand NDR); an error names them otherwise.
Expected<NetworkProfile> networkProfile(const std::string &name);

/// The time of summing `bytes` over `boxes` boxes: ring 2 (N-1) messages
/// of B/N each; tree (pipelined, double binary) 2 log2(N) latencies and 2 B
/// over the bandwidth. 0 for one box.
double allReduceMs(double bytes, unsigned boxes, const NetworkProfile &net);

struct AllReducePrediction {
  unsigned boxes = 1;
  double gradientBytes = 0;
  double allReduceMs = 0;     ///< every parameter's sum, back to back
  double exposedMs = 0;       ///< past the step's jobs and epilogue
  double stepMs = 0;          ///< the boxes' step: the sim's plus the exposed
  double tokensPerSecond = 0; ///< of all boxes
  double efficiency = 0;      ///< over boxes x one box's tokens/s
};

/// The data-parallel step of `boxes` boxes running `plan` as `report`
/// simulated it, over `net`. The sums of a step's gradients start in its
/// last pass (the one that finishes them); in sync mode what is left of
/// them after its jobs and epilogue lengthens the step, in async mode only
/// what is left after the next step too.
AllReducePrediction predictAllReduce(const Plan &plan, const SimReport &report,
                                     unsigned boxes, const NetworkProfile &net,
                                     bool sync);

} // namespace rp::runtime::sim

#endif // RP_RUNTIME_SIM_ALLREDUCE_H
