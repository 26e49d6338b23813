//===- AllReduce.cpp - the sim's prediction of a data-parallel step -------===//

#include "rp/runtime/sim/AllReduce.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

using namespace rp::runtime;
using namespace rp::runtime::sim;

Expected<NetworkProfile>
rp::runtime::sim::networkProfile(const std::string &name) {
  // Line rate in Gb/s, 90 % of it usable; a switch hop's latency.
  if (name == "25gbe")
    return NetworkProfile{name, 25 * 0.9 / 8, 10, AllReduceAlgorithm::ring};
  if (name == "100gbe")
    return NetworkProfile{name, 100 * 0.9 / 8, 5, AllReduceAlgorithm::ring};
  if (name == "400ib")
    return NetworkProfile{name, 400 * 0.9 / 8, 2, AllReduceAlgorithm::ring};
  return invalidArgument("--network '" + name +
                         "' is not a shipped network; give 25gbe, 100gbe or "
                         "400ib");
}

double rp::runtime::sim::allReduceMs(double bytes, unsigned boxes,
                                     const NetworkProfile &net) {
  if (boxes < 2 || bytes <= 0)
    return 0;
  double n = boxes, perByteMs = 1e-6 / net.gbps,
         latencyMs = net.latencyUs / 1e3;
  if (net.algorithm == AllReduceAlgorithm::tree)
    return 2 * std::ceil(std::log2(n)) * latencyMs + 2 * bytes * perByteMs;
  return 2 * (n - 1) * (latencyMs + bytes / n * perByteMs);
}

AllReducePrediction
rp::runtime::sim::predictAllReduce(const Plan &plan, const SimReport &report,
                                   unsigned boxes, const NetworkProfile &net,
                                   bool sync) {
  // When each parameter's gradient is ready within the step, and its bytes
  // (the host sums in f32).
  double jobsEnd = report.jobsMs + report.epilogueMs;
  std::vector<bool> summedAfter(plan.buffers.size(), false);
  if (plan.epilogue >= 0)
    for (const KernelCallDesc &c : plan.programs[plan.epilogue].calls)
      for (uint32_t b : c.outputs)
        summedAfter[b] = true;
  std::vector<std::pair<double, double>> ready; // (ms, bytes)
  AllReducePrediction p;
  p.boxes = boxes;
  for (const BindingDesc &o : plan.outputs) {
    if (o.name.rfind("grad:", 0) != 0)
      continue;
    double bytes = 4.0 * double(plan.buffers[o.buffer].size());
    double at = -1;
    if (!summedAfter[o.buffer])
      for (size_t j = 0; j < plan.jobs.size() && j < report.jobEndMs.size();
           ++j)
        for (const CopyDesc &c : plan.jobs[j].copies)
          if (c.dst == o.buffer)
            at = std::max(at, report.jobEndMs[j]);
    ready.emplace_back(at < 0 ? jobsEnd : at, bytes);
    p.gradientBytes += bytes;
  }
  std::stable_sort(
      ready.begin(), ready.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  double finish = 0;
  for (auto [at, bytes] : ready) {
    double t = allReduceMs(bytes, boxes, net);
    finish = std::max(finish, at) + t;
    p.allReduceMs += t;
  }
  // Sync: the next step computes with this step's update, which waits for
  // the last sum. Async: the next step computes on the weights before it,
  // so the sums and the update hide behind it up to a step's length.
  double after = finish - jobsEnd;
  if (!sync)
    after -= report.stepMs;
  p.exposedMs = boxes > 1 ? std::max(0.0, after) : 0;
  p.stepMs = report.stepMs + p.exposedMs;
  p.tokensPerSecond =
      p.stepMs > 0 ? boxes * report.tokens / (p.stepMs / 1e3) : 0;
  p.efficiency = report.tokensPerSecond > 0
                     ? p.tokensPerSecond / (boxes * report.tokensPerSecond)
                     : 0;
  return p;
}
