//===- RunForward.cpp - rp-run on a forward-only plan ---------------------===//
//
// Binds the given inputs (the rest synthetic from --seed), runs --steps
// forwards, staged through the pipeline executor or job by job on the host
// kernels, and reports the best step; --dump-outputs writes the first
// output.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/PipelineExecutor.h"

#include <algorithm>
#include <cstdio>

using namespace rp::runtime;
using namespace rp::runtime::run;

int rp::runtime::run::runForward(const RunOptions &o, const Plan &plan,
                                 ComputeSetup &setup) {
  if (!o.dumpGrads.empty() || !o.labelsPath.empty())
    return fail(invalidArgument("--labels and --dump-grads need a training "
                                "plan (rp-compile without --forward-only)"));
  for (auto &[name, array] : setup.given)
    if (Status s = setup.fwd->setInput(name, array); s.failed())
      return fail(s);
  if (Status s = setup.fwd->setSyntheticInputs(o.seed); s.failed())
    return fail(s);
  ThreadPool pool(o.threads);
  std::unique_ptr<PipelineExecutor> pipeline;
  if (!plan.staged && o.backend != "host")
    std::fprintf(stderr,
                 "rp-run: warning: '%s' is a forward-only plan, whose jobs "
                 "run in order on the host kernels; --backend %s runs "
                 "staged (training) plans only\n",
                 o.planPath.c_str(), o.backend.c_str());
  if (plan.staged) {
    PipelineOptions po;
    po.progressWindow = std::chrono::milliseconds(o.train.watchdogMs);
    po.trace = setup.trace.get();
    auto created = PipelineExecutor::create(plan, *setup.fwd, po);
    if (!created)
      return fail(created.getStatus());
    pipeline = std::move(*created);
  }
  double loadMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - setup.start)
                      .count();
  // The fastest step is the one least disturbed by the rest of the machine.
  double bestMs = 0;
  for (unsigned step = 0; step < o.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = pipeline ? pipeline->step(pool) : setup.fwd->run(pool);
    if (s.failed()) {
      if (setup.trace)
        (void)writeTraceFiles(*setup.trace, o.tracePath, "", "", false);
      return fail(s);
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    bestMs = step == 0 ? ms : std::min(bestMs, ms);
  }
  if (setup.trace)
    if (Status s = writeTraceFiles(*setup.trace, o.tracePath, "", "", true);
        s.failed())
      return fail(s);
  if (!o.dumpPath.empty())
    if (Status s = dumpOutput(*setup.fwd, o.dumpPath); s.failed())
      return fail(s);
  if (plan.staged)
    reportMemory(plan, *setup.fwd);
  if (setup.trace)
    reportTime(*setup.trace, false);
  if (plan.outputs.empty())
    return 0;
  TensorRef out = setup.fwd->output(0);
  std::fprintf(stderr,
               "rp-run: forward of %s on host (%u threads): %zu jobs, "
               "output '%s' %s; load %.1f ms, best of %u steps %.3f ms\n",
               o.planPath.c_str(), o.threads, plan.jobs.size(),
               plan.outputs[0].name.c_str(), describe(out).c_str(), loadMs,
               o.steps, bestMs);
  return 0;
}
