//===- rp-bench-executor.cpp - the executor's cost per command ------------===//
//
// rp-bench-executor [--devices G] [--jobs N] [--steps K] [--threads T]
//
// Builds a staged plan whose kernels are empty: on each of G devices, N
// stage jobs, each a compute job then a download that the next device's
// upload and compute wait for (the shape of a round-robin plan), so every
// command is a real job with real event waits across devices. Runs it K
// times on the host executor (a thread per device queue) and, as the
// baseline, runs the same jobs in a valid order on one thread through the
// same dispatch (HostForward::runJob). Prints the microseconds per command
// of each and their difference: what queues, events and threads cost.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/LastResort.h"
#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/Plan.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace rp::runtime;

namespace {

Plan emptyPipeline(unsigned devices, unsigned jobsPerDevice) {
  Plan plan;
  plan.path = "<empty pipeline>";
  plan.staged = true;
  plan.devices = devices;
  plan.schedule = "round-robin";
  plan.programs.push_back(ProgramDesc{"empty", {}});
  uint32_t lastDownload = ~0u;
  for (unsigned n = 0; n < jobsPerDevice * devices; ++n) {
    uint32_t d = n % devices;
    std::string tag = std::to_string(n);
    JobDesc up;
    up.kind = JobKind::copy;
    up.device = d;
    up.queue = QueueKind::activation_h2d;
    up.label = "IN s" + tag;
    if (lastDownload != ~0u)
      up.waits.push_back(lastDownload);
    up.records.push_back(plan.events++);
    JobDesc compute;
    compute.device = d;
    compute.label = "F" + tag;
    compute.waits.push_back(up.records[0]);
    compute.records.push_back(plan.events++);
    JobDesc down;
    down.kind = JobKind::copy;
    down.device = d;
    down.queue = QueueKind::d2h;
    down.label = "OUT s" + tag;
    down.waits.push_back(compute.records[0]);
    down.records.push_back(plan.events++);
    lastDownload = down.records[0];
    plan.jobs.push_back(up);
    plan.jobs.push_back(compute);
    plan.jobs.push_back(down);
  }
  return plan;
}

unsigned flag(int argc, char **argv, const char *name, unsigned fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name))
      return static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
  return fallback;
}

} // namespace

int main(int argc, char **argv) {
  installLastResort("rp-bench-executor");
  unsigned devices = flag(argc, argv, "--devices", 4);
  unsigned jobs = flag(argc, argv, "--jobs", 200);
  unsigned steps = flag(argc, argv, "--steps", 20);
  unsigned threads = flag(argc, argv, "--threads", 2);
  if (!devices || !jobs || !steps || !threads) {
    std::fprintf(stderr, "rp-bench-executor: --devices, --jobs, --steps and "
                         "--threads must be positive\n");
    return 1;
  }
  Plan plan = emptyPipeline(devices, jobs);
  if (Status s = validatePlanJobs(plan); s.failed()) {
    std::fprintf(stderr, "rp-bench-executor: %s\n", s.getMessage().c_str());
    return 2;
  }
  BackendOptions backendOptions;
  backendOptions.devices = devices;
  backendOptions.threads = threads;
  auto backend = createBackend("host", backendOptions);
  if (!backend) {
    std::fprintf(stderr, "rp-bench-executor: %s\n",
                 backend.getStatus().getMessage().c_str());
    return 2;
  }
  auto fwd = HostForward::create(plan, **backend);
  if (!fwd) {
    std::fprintf(stderr, "rp-bench-executor: %s\n",
                 fwd.getStatus().getMessage().c_str());
    return 2;
  }
  PipelineOptions options;
  auto exec = PipelineExecutor::create(plan, **fwd, options);
  if (!exec) {
    std::fprintf(stderr, "rp-bench-executor: %s\n",
                 exec.getStatus().getMessage().c_str());
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  double best = 1e300, baseline = 1e300;
  ThreadPool pool(1);
  for (unsigned k = 0; k < steps; ++k) {
    auto t0 = Clock::now();
    if (Status s = (*exec)->runJobs(); s.failed()) {
      std::fprintf(stderr, "rp-bench-executor: %s\n", s.getMessage().c_str());
      return 2;
    }
    auto t1 = Clock::now();
    // Plan order is a valid order: every wait is on an earlier job.
    for (const JobDesc &j : plan.jobs)
      if (Status s = (*fwd)->runJob(pool, j); s.failed()) {
        std::fprintf(stderr, "rp-bench-executor: %s\n", s.getMessage().c_str());
        return 2;
      }
    auto t2 = Clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    baseline =
        std::min(baseline, std::chrono::duration<double>(t2 - t1).count());
  }
  double n = plan.jobs.size();
  std::printf("devices=%u commands=%zu (%u stage jobs x compute, upload, "
              "download) steps=%u threads=%u\n",
              devices, plan.jobs.size(), devices * jobs, steps, threads);
  std::printf("executor: %.2f us per command (best step %.3f ms)\n",
              best / n * 1e6, best * 1e3);
  std::printf("one thread, same dispatch: %.3f us per command\n",
              baseline / n * 1e6);
  std::printf("overhead of queues, events and threads: %.2f us per command "
              "(ratio %.1f)\n",
              (best - baseline) / n * 1e6, best / baseline);
  return 0;
}
