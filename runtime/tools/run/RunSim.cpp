//===- RunSim.cpp - rp-run --backend sim ----------------------------------===//
//
// Runs the same executor on virtual devices (sim/Simulate.h): nothing is
// loaded, allocated or computed; stdout gets the predicted figures as
// `key value` lines, stderr a summary (docs/sim.md).
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/sim/AllReduce.h"
#include "rp/runtime/sim/Simulate.h"
#include "rp/timing/Assumptions.h"

#include <cstdio>
#include <iostream>

using namespace rp::runtime;
using namespace rp::runtime::run;

int rp::runtime::run::runSim(RunOptions &o, const Plan &plan) {
  const std::pair<const char *, bool> unused[] = {
      {"--input", !o.inputs.empty()},
      {"--labels", !o.labelsPath.empty()},
      {"--data", !o.train.data.empty()},
      {"--save", !o.train.save.empty()},
      {"--resume", !o.train.resume.empty()},
      {"--init-weights", !o.initWeights.empty()},
      {"--dump-outputs", !o.dumpPath.empty()},
      {"--dump-grads", !o.dumpGrads.empty()},
      {"--profile", !o.profilePath.empty()},
      {"--tf32", o.tf32}};
  for (auto [flag, given] : unused)
    if (given)
      return fail(invalidArgument(
          std::string(flag) +
          " is for backends that compute; the sim "
          "backend only times the plan's commands (leave it out)"));
  if (o.syncMode && o.asyncMode)
    return fail(invalidArgument("--sync and --async exclude each other"));
  if (o.accumulate < 1 || o.accumulate > 1000000)
    return fail(invalidArgument(
        "--accumulate " + std::to_string(o.accumulate) +
        " is not a number of passes; give 1 or more (passes of " +
        std::to_string(plan.microbatches) + " microbatches per step)"));
  if (!plan.staged)
    return fail(invalidArgument(
        "the sim backend times staged plans (training plans from "
        "rp-compile); '" +
        o.planPath + "' runs its jobs in order on one device"));
  if (o.hardware.empty())
    o.hardware = plan.hardware;
  if (o.hardware.empty())
    return fail(invalidArgument(
        "'" + o.planPath +
        "' does not say which hardware profile it was "
        "compiled for (an older plan); give --hw NAME|FILE.json"));
  if (Status s = checkOutputFolder("--trace", o.tracePath); s.failed())
    return fail(s);
  BackendOptions so;
  so.devices = plan.devices;
  so.hardware = o.hardware;
  Expected<std::unique_ptr<sim::SimBackend>> simBackend =
      sim::SimBackend::create(so);
  if (!simBackend)
    return fail(
        Status(simBackend.getStatus().getCode(),
               "--backend sim: " + simBackend.getStatus().getMessage()));
  if (!o.measuredPath.empty()) {
    std::string error;
    std::optional<rp::timing::MeasuredTimes> times =
        rp::timing::loadMeasuredTimes(o.measuredPath, error);
    if (!times)
      return fail(invalidArgument("--measured: " + error));
    if (!times->hw.empty() && times->hw != (*simBackend)->getHardware().name)
      return fail(invalidArgument(
          "--measured: the times were taken on '" + times->hw +
          "', but the sim times on '" + (*simBackend)->getHardware().name +
          "'; give --hw " + times->hw + " or times taken on this profile"));
    (*simBackend)->setMeasured(std::move(*times));
  }
  std::unique_ptr<Trace> simTrace;
  if (!o.tracePath.empty())
    simTrace = std::make_unique<Trace>(plan, /*keepSteps=*/true);
  sim::SimulateOptions options;
  options.steps = o.steps;
  options.sync = o.syncMode;
  options.stepBarrier = o.stepBarrier;
  options.accumulate = o.accumulate;
  options.passesInFlight = o.passesInFlight;
  options.arenaCopies = o.arenaCopies;
  options.trace = simTrace.get();
  Expected<sim::SimReport> report = sim::simulate(plan, **simBackend, options);
  if (!report)
    return fail(report.getStatus());
  if (simTrace)
    if (Status s = writeChromeTrace(*simTrace, o.tracePath); s.failed())
      return fail(s);
  std::cout << sim::formatReport(*report);
  // What the figures assume and leave out, and their range over what the
  // profile cannot know: the same plan timed again with every unknown
  // input at its slow end, then at its fast end (docs/sim.md).
  std::string error;
  std::optional<std::vector<rp::timing::UnknownInput>> unknown =
      rp::timing::loadUnknownInputs(o.hardware, error);
  if (!unknown)
    return fail(invalidArgument(error));
  const rp::timing::HardwareModel &hw = (*simBackend)->getHardware();
  std::string range, rangeLines;
  if (!unknown->empty()) {
    double tokens[2], step[2];
    for (bool slow : {true, false}) {
      Expected<std::unique_ptr<sim::SimBackend>> end =
          sim::SimBackend::create(so);
      if (!end)
        return fail(end.getStatus());
      (*end)->setHardware(rp::timing::atEnd(hw, *unknown, slow));
      if (!o.measuredPath.empty())
        (*end)->setMeasured(
            *rp::timing::loadMeasuredTimes(o.measuredPath, error));
      sim::SimulateOptions at = options;
      at.trace = nullptr;
      Expected<sim::SimReport> r = sim::simulate(plan, **end, at);
      if (!r)
        return fail(r.getStatus());
      tokens[slow] = r->tokensPerSecond;
      step[slow] = r->stepMs;
    }
    char lines[200];
    std::snprintf(lines, sizeof(lines),
                  "tokens_per_s_low %.9g\ntokens_per_s_high %.9g\n"
                  "step_ms_low %.9g\nstep_ms_high %.9g\n",
                  tokens[1], tokens[0], step[0], step[1]);
    rangeLines = lines;
    char text[160];
    std::snprintf(text, sizeof(text),
                  "%.0f - %.0f tokens/s (step %.3f - %.3f ms)", tokens[1],
                  tokens[0], step[0], step[1]);
    range = std::string(text) + " over what '" + hw.name + "' cannot know (" +
            rp::timing::describeUnknown(*unknown) +
            "): the slow and fast ends together";
  } else {
    range = "no range: '" + hw.name +
            "' names no unknown input (its host terms are measured or set)";
  }
  if (o.boxes > 1) {
    Expected<sim::NetworkProfile> net = sim::networkProfile(o.network);
    if (!net)
      return fail(net.getStatus());
    net->algorithm = o.networkAlgorithm == "tree"
                         ? sim::AllReduceAlgorithm::tree
                         : sim::AllReduceAlgorithm::ring;
    sim::AllReducePrediction dp =
        sim::predictAllReduce(plan, *report, o.boxes, *net, o.syncMode);
    std::printf("boxes %u\nnetwork %s %s\ngradient_bytes %.0f\n"
                "allreduce_ms %.6g\nallreduce_exposed_ms %.6g\n"
                "boxes_step_ms %.6g\nboxes_tokens_per_s %.6g\n"
                "scaling_efficiency %.4f\n",
                o.boxes, net->name.c_str(), o.networkAlgorithm.c_str(),
                dp.gradientBytes, dp.allReduceMs, dp.exposedMs, dp.stepMs,
                dp.tokensPerSecond, dp.efficiency);
    std::fflush(stdout);
  }
  // After the other figures, so their order stays what it was.
  std::cout << rangeLines;
  std::fprintf(stderr,
               "rp-run: simulated %u %s steps of %s on %s: step %.3f ms "
               "(jobs %.3f ms, optimizer %.3f ms%s), %.0f tokens/s, "
               "bubble %.1f%%\n",
               report->steps, o.syncMode ? "sync" : "async", o.planPath.c_str(),
               (*simBackend)->describe().c_str(), report->stepMs,
               report->jobsMs, report->optimizerMs,
               o.syncMode ? ", after the step" : ", beside the next step",
               report->tokensPerSecond, report->bubblePct);
  if (report->continuous)
    std::fprintf(stderr,
                 "rp-run: continuous: %u pass(es) per step, %u in flight on %u "
                 "cop%s of the arenas, devices "
                 "shifted by %u per pass%s; steady step over a window of %u "
                 "step(s), bubble %.1f%% there; the run %.3f ms, its "
                 "bubble (fill and drain once) %.1f%%\n",
                 o.accumulate, report->inFlight, report->arenaCopies,
                 report->arenaCopies == 1 ? "y" : "ies", report->shift,
                 report->notRenamed.empty()
                     ? ""
                     : (" (" + report->notRenamed + ")").c_str(),
                 report->rotationSteps, report->steadyBubblePct, report->runMs,
                 report->bubblePct);
  // Per device, shares of the steady step's period (barriers) or of the
  // run (continuous).
  double span = report->continuous ? report->runMs : report->stepMs;
  for (size_t d = 0; d < report->devices.size(); ++d) {
    const sim::DeviceTime &t = report->devices[d];
    double p = span > 0 ? 100 / span : 0;
    std::fprintf(stderr,
                 "rp-run: device %zu: compute %.1f%% busy; idle: fill "
                 "%.1f%%, switch %.1f%%, drain %.1f%%, intra %.1f%% "
                 "(copies in flight %.1f%%)\n",
                 d, t.runBusyMs * p, t.fillMs * p, t.switchMs * p,
                 t.drainMs * p, t.intraMs * p, t.exposedCommMs * p);
  }
  // Last, so the lines before keep their order.
  std::fprintf(stderr,
               "rp-run: the prediction assumes %s%s; it leaves out %s; %s\n",
               rp::timing::describeAssumed(hw).c_str(),
               o.measuredPath.empty()
                   ? ""
                   : (", measured layer times from " + o.measuredPath).c_str(),
               rp::timing::modelLeavesOut(hw).c_str(), range.c_str());
  return 0;
}
