//===- RoundRobin.cpp - RoundPipe's round-robin schedule ------------------===//

#include "rp/Analysis/RoundRobin.h"

using namespace mlir;
using namespace mlir::rp;

namespace {

enum class JobKind { forward, tail, backward };

struct Job {
  JobKind kind;
  StageRange range;
};

double transferMs(int64_t bytes, double gbps) {
  return bytes / (gbps * 1e9) * 1e3;
}

} // namespace

Schedule mlir::rp::roundRobinSchedule(const Partition &partition,
                                      llvm::ArrayRef<LayerCost> layers,
                                      const HardwareProfile &hw,
                                      unsigned devices, unsigned microbatches) {
  std::vector<Job> jobs;
  for (const StageRange &s : partition.forward)
    jobs.push_back({JobKind::forward, s});
  jobs.push_back({JobKind::tail, partition.tail});
  for (const StageRange &s : partition.backward)
    jobs.push_back({JobKind::backward, s});

  Schedule sched;
  sched.devices = devices;
  // Per job, its per-microbatch output transfers and its last compute.
  std::vector<std::vector<unsigned>> outputs(jobs.size());
  std::vector<unsigned> lastCompute(jobs.size());
  for (unsigned n = 0; n < jobs.size(); ++n) {
    const Job &job = jobs[n];
    unsigned dev = n % devices;
    std::string name = std::to_string(n);
    double computeMs = 0;
    int64_t weights = 0, grads = 0;
    for (unsigned l = job.range.begin; l < job.range.end; ++l) {
      const LayerCost &c = layers[l];
      computeMs += job.kind == JobKind::forward ? c.recomputeMs
                   : job.kind == JobKind::tail  ? c.forwardMs + c.backwardMs
                                                : c.recomputeMs + c.backwardMs;
      weights += c.paramBytes;
      grads += c.gradBytes;
    }
    const LayerCost &first = layers[job.range.begin];
    const LayerCost &last = layers[job.range.end - 1];
    // Bytes in per microbatch: the activation (forward, tail), or the
    // output gradient plus the saved input (backward).
    int64_t inBytes = job.kind == JobKind::backward
                          ? last.actOutBytes + first.actInBytes
                          : first.actInBytes;
    // Bytes out: the activation (forward) or the input gradient, which the
    // stage holding layer 0 does not send.
    int64_t outBytes = job.kind == JobKind::forward ? last.actOutBytes
                       : job.range.begin == 0       ? 0
                                                    : first.actInBytes;

    Command up{dev,
               Queue::weightH2D,
               transferMs(weights, hw.h2dGBps),
               {},
               "UP s" + name};
    if (n >= 2 * devices)
      up.waits.push_back(lastCompute[n - 2 * devices]);
    unsigned upload = sched.add(std::move(up));

    for (unsigned m = 0; m < microbatches; ++m) {
      std::string mb = " mb" + std::to_string(m);
      Command compute{dev, Queue::compute, computeMs, {upload}, ""};
      compute.label = (job.kind == JobKind::forward ? "F"
                       : job.kind == JobKind::tail  ? "T"
                                                    : "B") +
                      name + mb;
      if (n > 0) {
        Command in{dev,
                   Queue::activationH2D,
                   transferMs(inBytes, hw.h2dGBps),
                   {outputs[n - 1][m]},
                   "IN s" + name + mb};
        compute.waits.push_back(sched.add(std::move(in)));
      }
      unsigned c = sched.add(std::move(compute));
      lastCompute[n] = c;
      outputs[n].push_back(sched.add({dev,
                                      Queue::d2h,
                                      transferMs(outBytes, hw.d2hGBps),
                                      {c},
                                      "OUT s" + name + mb}));
    }
    if (job.kind != JobKind::forward && grads > 0)
      sched.add({dev,
                 Queue::d2h,
                 transferMs(grads, hw.d2hGBps),
                 {lastCompute[n]},
                 "GRAD s" + name});
  }
  return sched;
}
