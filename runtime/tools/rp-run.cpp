//===- rp-run.cpp - run an rp plan ----------------------------------------===//
//
// rp-run PLAN.rpplan [--backend host] [--input NAME=FILE.npy]...
//        [--dump-outputs FILE.npy] [--seed N] [--threads N] [--devices N]
//        [--watchdog-ms MS] [--describe=json|grid] [--trace FILE.json]
//        [--profile FILE.json [--profile-hw NAME]]
//
// Streams and exit codes follow DESIGN.md: a forward-only plan prints
// nothing on stdout and a summary on stderr; --describe prints the plan on
// stdout and runs nothing. Exit 0 ok, 1 user error, 2 internal error (a
// staged plan that stalls, caught by the executor's watchdog, is one).
//
// --backend sim runs the same executor on virtual devices (sim/Simulate.h):
// nothing is loaded, allocated or computed; stdout gets the predicted
// figures as `key value` lines, stderr a summary.
//
// A staged plan is always traced (Trace.h: two clock reads per job), so
// that rp-run can say on stderr where the time went: per device, the share
// of the steps its compute queue was busy, and its copy queues'. --trace
// keeps every span for the Chrome trace file; --profile turns the compute
// jobs' times into per-layer times for rp-compile --measured.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Comm.h"
#include "rp/runtime/Executor.h"
#include "rp/runtime/LastResort.h"
#include "rp/runtime/Npy.h"
#include "rp/runtime/Pipeline.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Trace.h"
#include "rp/runtime/Trainer.h"
#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/sim/AllReduce.h"
#include "rp/runtime/sim/Simulate.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <unistd.h>

using namespace rp::runtime;

static int fail(const Status &s) {
  std::fprintf(stderr, "rp-run: error: %s\n", s.getMessage().c_str());
  return exitCode(s);
}

/// A staged plan's device memory, on stderr: each device's arena, and what
/// its buffers would take one apiece.
static void reportMemory(const HostForward &fwd) {
  const DeviceLayout &layout = fwd.getLayout();
  std::string arenas, apart;
  for (size_t d = 0; d < layout.arenaBytes.size(); ++d) {
    char text[64];
    std::snprintf(text, sizeof(text), "%s%.1f", d ? " " : "",
                  double(layout.arenaBytes[d]) / 1024);
    arenas += text;
    std::snprintf(text, sizeof(text), "%s%.1f", d ? " " : "",
                  double(layout.unsharedBytes[d]) / 1024);
    apart += text;
  }
  std::fprintf(stderr,
               "rp-run: device buffers per device: %s KiB (%s KiB with no "
               "buffer sharing bytes)\n",
               arenas.c_str(), apart.c_str());
  if (fwd.getSlots() > 1) {
    uint64_t one = 0;
    for (uint64_t bytes : layout.arenaBytes)
      one += bytes;
    std::fprintf(stderr,
                 "rp-run: continuous execution: %u buffer slots%s, %.1f KiB "
                 "of device buffers in all (%.1f KiB for one pass)\n",
                 fwd.getSlots(),
                 fwd.rotates() ? ", devices renamed pass by pass"
                 : fwd.getRotationBlocker().empty()
                     ? ""
                     : (", devices not renamed: '" + fwd.getRotationBlocker() +
                        "' keeps its contents from pass to pass")
                           .c_str(),
                 double(fwd.allocatedDeviceBytes()) / 1024, double(one) / 1024);
  }
}

/// Where a staged run's time went, on stderr: per device, then the host.
static void reportTime(const Trace &trace, bool overlapped) {
  const BusySummary &busy = trace.getBusy();
  if (busy.steps == 0)
    return;
  std::fprintf(stderr,
               "rp-run: where the time went, over %llu step(s) whose jobs "
               "ran %.3f ms each:\n",
               static_cast<unsigned long long>(busy.steps),
               double(busy.wall) / 1e6 / double(busy.steps));
  std::fputs(describeBusy(busy).c_str(), stderr);
  std::string host;
  auto totals = trace.getHostTotals();
  for (const char *name : {"prologue", "epilogue", "optimizer"}) {
    auto it = totals.find(name);
    if (it == totals.end() || it->second.second == 0)
      continue;
    char part[96];
    std::snprintf(part, sizeof(part), "%s%s %.3f ms", host.empty() ? "" : ", ",
                  name,
                  double(it->second.first) / 1e6 / double(it->second.second));
    host += part;
  }
  if (!host.empty())
    std::fprintf(stderr, "rp-run: host, per step: %s%s\n", host.c_str(),
                 overlapped ? " (the optimizer overlaps the next step)" : "");
}

/// --trace and --profile after a staged run; the trace is written even
/// when the run failed, as it shows where.
static Status writeTraceFiles(const Trace &trace, const std::string &tracePath,
                              const std::string &profilePath,
                              const std::string &profileHw, bool ranOk) {
  if (!tracePath.empty())
    if (Status s = writeChromeTrace(trace, tracePath); s.failed())
      return s;
  if (!profilePath.empty() && ranOk)
    return writeMeasuredProfile(trace, profileHw, profilePath);
  return Status::ok();
}

/// The first output as f32, as --dump-outputs writes it.
static Status dumpOutput(const HostForward &fwd, const std::string &path) {
  TensorRef out = fwd.output(0);
  if (out.dtype == DType::f32)
    return writeNpy(path, DType::f32, out.shape, out.data);
  std::vector<float> f32(out.size());
  TensorRef dst{f32.data(), DType::f32, out.shape};
  ThreadPool pool(1);
  if (Status s = host::cast(pool, out, dst); s.failed())
    return s;
  return writeNpy(path, DType::f32, out.shape, f32.data());
}

/// Checks a numeric option: finite and from `lo` up to `hi` (`hi` itself
/// excluded when `hiOpen`), the range named in the message. PyTorch's
/// optimizers refuse the same values; running on with a default instead
/// would be a silent wrong answer.
static Status checkNumber(const char *flag, double value, double lo, double hi,
                          bool hiOpen, const char *range) {
  bool ok = std::isfinite(value) && value >= lo &&
            (hiOpen ? value < hi : value <= hi);
  if (ok)
    return Status::ok();
  char given[64];
  std::snprintf(given, sizeof(given), "%g", value);
  return invalidArgument(std::string(flag) + " " + given + ": " + range);
}

int main(int argc, char **argv) {
  installLastResort("rp-run");
  CLI::App app{"rp-run: runs a compiled rp plan"};
  std::string planPath, backend = "host", describeMode, dumpPath;
  std::vector<std::string> inputs;
  std::string labelsPath, dumpGrads, optimizer = "adamw", initWeights;
  TrainOptions train;
  bool syncMode = false, asyncMode = false;
  uint64_t seed = 0;
  unsigned steps = 1;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("plan", planPath, "the .rpplan file");
  bool listDevices = false;
  app.add_flag("--list-devices", listDevices,
               "list every backend, whether it is built in and its devices, "
               "then exit");
  // The backends DESIGN.md names; createBackend says which are built in.
  app.add_option("--backend", backend,
                 "the devices to run on: host (default), cuda or sim")
      ->check(CLI::IsMember({"host", "cuda", "sim"}));
  std::string hardware, measuredPath;
  app.add_option("--hw", hardware,
                 "sim: the hardware profile to time on, a shipped name "
                 "(profiles/) or a JSON file (default: the plan's)");
  app.add_option("--measured", measuredPath,
                 "sim: per-layer times (rp-run --profile's file, or any of "
                 "that form) that replace the model's for the programs of "
                 "the layers they name");
  unsigned boxes = 1;
  std::string network = "25gbe", networkAlgorithm = "ring";
  app.add_option("--boxes", boxes,
                 "sim: also predict this many boxes training data-parallel "
                 "(the all-reduce of the gradients over --network)")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--network", network,
                 "sim with --boxes: 25gbe (default), 100gbe or 400ib");
  app.add_option("--network-algorithm", networkAlgorithm,
                 "sim with --boxes: ring (default) or tree")
      ->check(CLI::IsMember({"ring", "tree"}));
  app.add_option("--input", inputs, "NAME=FILE.npy, once per model input");
  app.add_option("--dump-outputs", dumpPath,
                 "write the first output of step 0 as f32 .npy");
  app.add_option("--seed", seed, "seed of synthetic inputs");
  app.add_option("--steps", steps,
                 "steps to run (a forward-only plan repeats its forward)")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--threads", threads,
                 "worker threads (default: cores), shared by the devices of "
                 "a staged plan")
      ->check(CLI::Range(1u, 1024u));
  unsigned devices = 0;
  app.add_option("--devices", devices,
                 "the devices to run on; must be the plan's device count")
      ->check(CLI::Range(1u, 256u)); // rp-compile's cap
  app.add_option("--watchdog-ms", train.watchdogMs,
                 "stop a staged plan's step after this many ms without "
                 "progress (default 60000)")
      ->check(CLI::Range(1u, 86400000u));
  LoadOptions loadOptions;
  bool uncheckedEvents = false;
  // Hidden: lets tests run a plan that would stall, to see the watchdog.
  app.add_flag("--unchecked-events", uncheckedEvents,
               "skip the loader's event checks (tests of the watchdog)")
      ->group("");
  app.add_option("--describe", describeMode, "print the plan and exit")
      ->check(CLI::IsMember({"json", "grid"}));
  app.add_option("--labels", labelsPath, "labels of the global batch (.npy)");
  app.add_option("--data", train.data,
                 "train on a flat token file (nanoGPT-style), the next "
                 "global batch every step");
  std::string dataType = "u16";
  app.add_option("--data-type", dataType, "u16 (default) or u32 tokens")
      ->check(CLI::IsMember({"u16", "u32"}));
  app.add_option("--save", train.save,
                 "write a checkpoint folder at the end (atomically)");
  app.add_option("--save-every", train.saveEvery,
                 "also write the checkpoint every K steps")
      ->check(CLI::Range(0u, 1000000u));
  app.add_option("--resume", train.resume,
                 "continue from a checkpoint folder for --steps more steps");
  app.add_option("--init-weights", initWeights,
                 "replace initial parameter values by name (.safetensors)");
  app.add_option("--dump-grads", dumpGrads,
                 "write step 0's gradients of the trainable parameters "
                 "(.safetensors)");
  app.add_option("--optimizer", optimizer, "adamw or sgd")
      ->check(CLI::IsMember({"adamw", "sgd"}));
  double lr = AdamWConfig().lr, weightDecay = 0;
  app.add_option("--lr", lr, "learning rate (default 1e-3)");
  app.add_option("--beta1", train.adamw.beta1, "AdamW beta1");
  app.add_option("--beta2", train.adamw.beta2, "AdamW beta2");
  app.add_option("--eps", train.adamw.eps, "AdamW epsilon");
  app.add_option("--momentum", train.sgdConfig.momentum, "SGD momentum");
  app.add_option("--weight-decay", weightDecay,
                 "weight decay (AdamW 1e-2, SGD 0 by default)");
  app.add_option("--clip-grad-norm", train.clipGradNorm,
                 "clip the global gradient norm to this (0: off)");
  std::string tracePath, profilePath, profileHw = "host";
  app.add_option("--trace", tracePath,
                 "write a Chrome trace of a staged plan's steps (Perfetto, "
                 "chrome://tracing)");
  app.add_option("--profile", profilePath,
                 "write measured per-layer times of a staged training plan "
                 "(for rp-compile --measured)");
  app.add_option("--profile-hw", profileHw,
                 "the hardware profile --profile's times are for (default "
                 "host)");
  unsigned accumulate = 1;
  app.add_option("--accumulate", accumulate,
                 "passes of the plan's microbatches per optimizer step "
                 "(gradient accumulation; inputs hold that many global "
                 "batches)");
  bool stepBarrier = false;
  app.add_flag("--step-barrier", stepBarrier,
               "staged plans: finish each pass before the next starts "
               "(no continuous execution; to compare)");
  bool serialOptimizer = false;
  app.add_flag("--serial-optimizer", serialOptimizer,
               "async mode: run each step's optimizer between the steps "
               "instead of beside the next one (same results; to compare)");
  bool noLossScaling = false;
  app.add_flag("--no-loss-scaling", noLossScaling,
               "f16 plans: train without dynamic loss scaling");
  double initialLossScale = LossScaleConfig().initial;
  app.add_option("--initial-loss-scale", initialLossScale,
                 "f16 plans: the dynamic loss scale to start from (halved "
                 "on an overflowing step, which is skipped; doubled after "
                 "2000 good steps)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--shard-optimizer", train.shardOptimizer,
               "several processes: each keeps the optimizer state of 1/N "
               "of the parameters (ZeRO-1); the same bits");
  app.add_flag("--sync", syncMode, "gradients of step k at W_k");
  app.add_flag("--async", asyncMode,
               "gradients of step k at W_(k-1) (the default)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  constexpr double kInf = HUGE_VAL;
  const struct {
    const char *flag;
    double value, lo, hi;
    bool hiOpen;
    const char *range;
  } numbers[] = {
      {"--lr", lr, 0, kInf, true, "the learning rate is a finite number >= 0"},
      {"--beta1", train.adamw.beta1, 0, 1, true, "AdamW's beta1 is in [0, 1)"},
      {"--beta2", train.adamw.beta2, 0, 1, true, "AdamW's beta2 is in [0, 1)"},
      {"--eps", train.adamw.eps, 0, kInf, true,
       "AdamW's epsilon is a finite number >= 0"},
      {"--momentum", train.sgdConfig.momentum, 0, kInf, true,
       "SGD's momentum is a finite number >= 0"},
      {"--weight-decay", weightDecay, 0, kInf, true,
       "the weight decay is a finite number >= 0"},
      {"--clip-grad-norm", train.clipGradNorm, 0, kInf, true,
       "the gradient norm to clip to is a finite number >= 0 (0: off)"},
      {"--initial-loss-scale", initialLossScale, 0, kInf, true,
       "the initial loss scale is a finite number > 0"},
  };
  for (const auto &n : numbers)
    if (Status s = checkNumber(n.flag, n.value, n.lo, n.hi, n.hiOpen, n.range);
        s.failed())
      return fail(s);

  if (listDevices) {
    // DESIGN.md's lines: host: N threads, cuda: N devices or cuda: 0
    // devices (<reason>), sim: available.
    std::cout << "host: " << threads << " threads\n";
    Expected<uint32_t> gpus = countCudaDevices();
    if (gpus) {
      BackendOptions all;
      all.devices = *gpus;
      Expected<std::unique_ptr<Backend>> b = createBackend("cuda", all);
      std::cout << "cuda: " << *gpus << " devices ("
                << (b ? (*b)->describe() : b.getStatus().getMessage()) << ")\n";
    } else {
      std::cout << "cuda: 0 devices (" << gpus.getStatus().getMessage()
                << ")\n";
    }
    Expected<std::unique_ptr<Backend>> sim = createBackend("sim", {});
    std::cout << "sim: "
              << (sim ? "available (virtual devices timed on a hardware "
                        "profile; the plan's, or --hw)"
                      : "0 devices (" + sim.getStatus().getMessage() + ")")
              << "\n";
    // Several processes (docs/multi-box.md): what this one would join.
    Expected<std::optional<Rendezvous>> job = rendezvousFromEnvironment();
    std::string sums =
        std::string(glooBuiltIn() ? "gloo (tcp) on host and sim"
                                  : "no gloo (built without libgloo-dev)") +
        (ncclBuiltIn() ? ", nccl on cuda" : "");
    if (!job)
      std::cout << "communicator: none (" << job.getStatus().getMessage()
                << ")\n";
    else if (!*job)
      std::cout << "communicator: none (one process; " << sums
                << " under torchrun's or mpirun's environment)\n";
    else
      std::cout << "communicator: " << sums << ", rank " << (*job)->rank
                << " of " << (*job)->worldSize << " (" << (*job)->launcher
                << "), master " << (*job)->masterAddr << ":"
                << (*job)->masterPort << "\n";
    return 0;
  }
  if (planPath.empty())
    return fail(invalidArgument("give the .rpplan file to run (rp-compile "
                                "writes one), or --list-devices"));
  loadOptions.checkEvents = !uncheckedEvents;
  Expected<Plan> plan = loadPlan(planPath, loadOptions);
  if (!plan)
    return fail(plan.getStatus());
  if (devices && devices != plan->devices)
    return fail(invalidArgument(
        "--devices " + std::to_string(devices) + ", but '" + planPath +
        "' was compiled for " + std::to_string(plan->devices) +
        " device(s); recompile it with rp-compile --devices " +
        std::to_string(devices) + ", or leave out --devices"));
  if (!describeMode.empty()) {
    if (describeMode == "grid") {
      std::cout << describePlanGrid(*plan);
      return 0;
    }
    Expected<std::string> json = describePlanJson(*plan);
    if (!json)
      return fail(json.getStatus());
    std::cout << *json;
    return 0;
  }
  if (!hardware.empty() && backend != "sim")
    return fail(invalidArgument("--hw times the sim backend's commands; the " +
                                backend + " backend runs them"));
  if (!measuredPath.empty() && backend != "sim")
    return fail(
        invalidArgument("--measured times the sim backend's programs; the " +
                        backend + " backend runs them (use --backend sim)"));
  if (backend == "sim") {
    const std::pair<const char *, bool> unused[] = {
        {"--input", !inputs.empty()},
        {"--labels", !labelsPath.empty()},
        {"--data", !train.data.empty()},
        {"--save", !train.save.empty()},
        {"--resume", !train.resume.empty()},
        {"--init-weights", !initWeights.empty()},
        {"--dump-outputs", !dumpPath.empty()},
        {"--dump-grads", !dumpGrads.empty()},
        {"--profile", !profilePath.empty()}};
    for (auto [flag, given] : unused)
      if (given)
        return fail(invalidArgument(
            std::string(flag) +
            " is for backends that compute; the sim "
            "backend only times the plan's commands (leave it out)"));
    if (syncMode && asyncMode)
      return fail(invalidArgument("--sync and --async exclude each other"));
    if (accumulate < 1 || accumulate > 1000000)
      return fail(invalidArgument(
          "--accumulate " + std::to_string(accumulate) +
          " is not a number of passes; give 1 or more (passes of " +
          std::to_string(plan->microbatches) + " microbatches per step)"));
    if (!plan->staged)
      return fail(invalidArgument(
          "the sim backend times staged plans (training plans from "
          "rp-compile); '" +
          planPath + "' runs its jobs in order on one device"));
    if (hardware.empty())
      hardware = plan->hardware;
    if (hardware.empty())
      return fail(invalidArgument(
          "'" + planPath +
          "' does not say which hardware profile it was "
          "compiled for (an older plan); give --hw NAME|FILE.json"));
    if (!tracePath.empty()) {
      std::filesystem::path folder =
          std::filesystem::path(tracePath).parent_path();
      std::error_code ec;
      if (!folder.empty() && !std::filesystem::is_directory(folder, ec))
        return fail(notFound("the folder of --trace '" + tracePath +
                             "' does not exist; create it first"));
    }
    BackendOptions so;
    so.devices = plan->devices;
    so.hardware = hardware;
    Expected<std::unique_ptr<sim::SimBackend>> simBackend =
        sim::SimBackend::create(so);
    if (!simBackend)
      return fail(
          Status(simBackend.getStatus().getCode(),
                 "--backend sim: " + simBackend.getStatus().getMessage()));
    if (!measuredPath.empty()) {
      std::string error;
      std::optional<rp::timing::MeasuredTimes> times =
          rp::timing::loadMeasuredTimes(measuredPath, error);
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
    if (!tracePath.empty())
      simTrace = std::make_unique<Trace>(*plan, /*keepSteps=*/true);
    sim::SimulateOptions options;
    options.steps = steps;
    options.sync = syncMode;
    options.stepBarrier = stepBarrier;
    options.accumulate = accumulate;
    options.lossScaling = !noLossScaling;
    options.trace = simTrace.get();
    Expected<sim::SimReport> report =
        sim::simulate(*plan, **simBackend, options);
    if (!report)
      return fail(report.getStatus());
    if (simTrace)
      if (Status s = writeChromeTrace(*simTrace, tracePath); s.failed())
        return fail(s);
    std::cout << sim::formatReport(*report);
    if (boxes > 1) {
      Expected<sim::NetworkProfile> net = sim::networkProfile(network);
      if (!net)
        return fail(net.getStatus());
      net->algorithm = networkAlgorithm == "tree"
                           ? sim::AllReduceAlgorithm::tree
                           : sim::AllReduceAlgorithm::ring;
      sim::AllReducePrediction dp =
          sim::predictAllReduce(*plan, *report, boxes, *net, syncMode);
      std::printf("boxes %u\nnetwork %s %s\ngradient_bytes %.0f\n"
                  "allreduce_ms %.6g\nallreduce_exposed_ms %.6g\n"
                  "boxes_step_ms %.6g\nboxes_tokens_per_s %.6g\n"
                  "scaling_efficiency %.4f\n",
                  boxes, net->name.c_str(), networkAlgorithm.c_str(),
                  dp.gradientBytes, dp.allReduceMs, dp.exposedMs, dp.stepMs,
                  dp.tokensPerSecond, dp.efficiency);
      std::fflush(stdout);
    }
    std::fprintf(stderr,
                 "rp-run: simulated %u %s steps of %s on %s: step %.3f ms "
                 "(jobs %.3f ms, optimizer %.3f ms%s), %.0f tokens/s, "
                 "bubble %.1f%%\n",
                 report->steps, syncMode ? "sync" : "async", planPath.c_str(),
                 (*simBackend)->describe().c_str(), report->stepMs,
                 report->jobsMs, report->optimizerMs,
                 syncMode ? ", after the step" : ", beside the next step",
                 report->tokensPerSecond, report->bubblePct);
    if (report->continuous)
      std::fprintf(
          stderr,
          "rp-run: continuous: %u pass(es) per step, %u in flight, devices "
          "shifted by %u per pass%s; steady step over a window of %u "
          "step(s), bubble %.1f%% there; the run %.3f ms, its "
          "bubble (fill and drain once) %.1f%%\n",
          accumulate, report->inFlight, report->shift,
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
    return 0;
  }
  // A plan of a large shape (python -m rp.shapes qwen3-32b) loads nowhere
  // but the sim: say so before allocating, not after the kernel's OOM
  // killer. Host buffers always live in this machine's memory, device
  // buffers too on the host backend.
  {
    double bytes = 0;
    for (const BufferDesc &b : plan->buffers)
      if (b.onHost() || backend == "host")
        bytes += double(b.bytes());
    double ram =
        double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (ram > 0 && bytes > ram)
      return fail(resourceExhausted(
          "'" + planPath + "' needs " +
          std::to_string(int64_t(bytes / double(1ull << 30))) +
          " GiB of host memory on the " + backend +
          " backend, but this machine has " +
          std::to_string(int64_t(ram / double(1ull << 30))) +
          " GiB; time it with --backend sim (it allocates nothing), or "
          "compile a smaller shape"));
  }
  BackendOptions backendOptions;
  backendOptions.devices = plan->devices;
  backendOptions.threads = threads;
  Expected<std::unique_ptr<Backend>> devicesOf =
      createBackend(backend, backendOptions);
  if (!devicesOf)
    return fail(Status(devicesOf.getStatus().getCode(),
                       "--backend " + backend + ": " +
                           devicesOf.getStatus().getMessage()));
  if (!plan->staged && (!tracePath.empty() || !profilePath.empty()))
    return fail(invalidArgument(
        "--trace and --profile time the jobs of a staged plan; '" + planPath +
        "' runs its jobs in order on one device (a --forward-only or older "
        "plan): compile a training plan with rp-compile"));
  if (!profilePath.empty() && !isTrainingPlan(*plan))
    return fail(invalidArgument("--profile needs a training plan: it times "
                                "the backward of every layer too"));
  // Before training, not after it: a typo in a folder should not cost a
  // whole run.
  for (auto [flag, path] : {std::pair{"--trace", &tracePath},
                            std::pair{"--profile", &profilePath}}) {
    if (path->empty())
      continue;
    std::filesystem::path folder = std::filesystem::path(*path).parent_path();
    std::error_code ec;
    if (!folder.empty() && !std::filesystem::is_directory(folder, ec))
      return fail(notFound(std::string("the folder of ") + flag + " '" + *path +
                           "' does not exist; create it first"));
  }
  std::unique_ptr<Trace> trace;
  if (plan->staged)
    trace = std::make_unique<Trace>(*plan, /*keepSteps=*/!tracePath.empty());

  if (accumulate < 1 || accumulate > 1000000)
    return fail(invalidArgument(
        "--accumulate " + std::to_string(accumulate) +
        " is not a number of passes; give 1 or more (passes of " +
        std::to_string(plan->microbatches) + " microbatches per step)"));
  if (accumulate > 1 && !isTrainingPlan(*plan))
    return fail(invalidArgument("--accumulate needs a training plan: '" +
                                planPath + "' computes no gradients"));
  auto start = std::chrono::steady_clock::now();
  // A staged training plan runs continuously: two passes in flight, each on
  // its own slot of buffers, with the devices renamed pass after pass.
  ForwardOptions forwardOptions;
  bool continuous = plan->staged && isTrainingPlan(*plan) && !stepBarrier;
  forwardOptions.slots = continuous ? 2 : 1;
  forwardOptions.rotate = continuous;
  Expected<std::unique_ptr<HostForward>> fwd =
      HostForward::create(*plan, **devicesOf, forwardOptions);
  if (!fwd)
    return fail(fwd.getStatus());
  if (Status s = (*fwd)->initParameters(seed); s.failed())
    return fail(s);
  if (!initWeights.empty()) {
    Expected<SafetensorsFile> file = readSafetensors(initWeights);
    if (!file)
      return fail(file.getStatus());
    if (Status s = (*fwd)->overrideParameters(*file); s.failed())
      return fail(s);
  }
  std::vector<std::pair<std::string, NpyArray>> given;
  for (const std::string &spec : inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(
          invalidArgument("--input takes NAME=FILE.npy, got '" + spec + "'"));
    Expected<NpyArray> array = readNpy(spec.substr(eq + 1));
    if (!array)
      return fail(array.getStatus());
    given.push_back({spec.substr(0, eq), std::move(*array)});
  }
  if (!labelsPath.empty()) {
    Expected<NpyArray> array = readNpy(labelsPath);
    if (!array)
      return fail(array.getStatus());
    given.push_back({"labels", std::move(*array)});
  }
  // A misspelt name would otherwise leave that input synthetic.
  for (auto &[name, array] : given) {
    bool known =
        name != "loss_scale" &&
        std::any_of(plan->inputs.begin(), plan->inputs.end(),
                    [&n = name](const BindingDesc &b) { return b.name == n; });
    if (!known) {
      std::string names;
      for (const BindingDesc &b : plan->inputs)
        if (b.name != "loss_scale")
          names += (names.empty() ? "" : ", ") + b.name;
      return fail(invalidArgument(
          "the plan has no input '" + name + "' (inputs: " + names + ")" +
          (name == "labels" ? "; --labels is for training plans" : "")));
    }
  }

  if (isTrainingPlan(*plan)) {
    if (syncMode && asyncMode)
      return fail(invalidArgument("--sync and --async exclude each other"));
    train.steps = steps;
    train.sync = syncMode;
    train.sgd = optimizer == "sgd";
    train.seed = seed;
    train.dumpGrads = dumpGrads;
    train.data32 = dataType == "u32";
    train.overlapOptimizer = !serialOptimizer;
    train.accumulate = accumulate;
    train.continuous = continuous;
    train.lossScaling = !noLossScaling;
    train.lossScale.initial = initialLossScale;
    train.onSkippedStep = [](unsigned step, double scale) {
      std::fprintf(stderr,
                   "\nrp-run: step %u: an f16 gradient overflowed; the step "
                   "is skipped and the loss scale is now %g\n",
                   step, scale);
    };
    train.trace = trace.get();
    train.adamw.lr = train.sgdConfig.lr = lr;
    // Each optimizer's own default unless given (DESIGN.md).
    if (app.count("--weight-decay"))
      train.adamw.weightDecay = train.sgdConfig.weightDecay = weightDecay;
    for (auto &[name, array] : given)
      train.inputs[name] = std::move(array);
    // Several processes: join the job before any step (a bad rendezvous
    // fails here, bounded by the watchdog window).
    Expected<std::optional<Rendezvous>> job = rendezvousFromEnvironment();
    if (!job)
      return fail(job.getStatus());
    std::unique_ptr<Communicator> comm;
    if (*job) {
      CommTimeouts timeouts;
      timeouts.rendezvous = timeouts.collective =
          std::chrono::milliseconds(train.watchdogMs);
      auto joined = backend == "cuda" ? createNcclCommunicator(**job, timeouts)
                                      : createGlooCommunicator(**job, timeouts);
      if (!joined)
        return fail(joined.getStatus());
      comm = std::move(*joined);
      train.comm = comm.get();
      // Each rank's trace and profile: rank 0's at the names given, the
      // others' beside them (NAME.rank1.json), not over them.
      if (comm->rank())
        for (std::string *path : {&tracePath, &profilePath})
          if (!path->empty()) {
            size_t dot = path->rfind('.');
            size_t slash = path->rfind('/');
            if (dot == std::string::npos ||
                (slash != std::string::npos && dot < slash))
              dot = path->size();
            path->insert(dot, ".rank" + std::to_string(comm->rank()));
          }
      std::fprintf(stderr, "rp-run: %s\n", comm->describe().c_str());
    }
    ThreadPool pool(threads);
    auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    double bestMs = 0;
    unsigned done = 0;
    int64_t tokens = 0;
    for (const BindingDesc &in : plan->inputs)
      if (in.name == "labels")
        // A staged plan binds the global batch, an unstaged one a
        // microbatch.
        tokens = numElements(plan->buffers[in.buffer].shape) *
                 (plan->staged ? 1 : plan->microbatches) * accumulate;
    // Steps that overlap finish unevenly; the mean after the first is the
    // throughput.
    auto firstDone = t0;
    Status s = rp::runtime::train(
        *plan, **fwd, pool, train, [&](unsigned step, double loss) {
          std::printf("step %u loss %.9g\n", step, loss);
          std::fflush(stdout);
          auto now = std::chrono::steady_clock::now();
          // The step time includes the optimizer, which runs after the
          // callback: it is measured from one callback to the next.
          double stepMs =
              std::chrono::duration<double, std::milli>(now - last).count();
          last = now;
          if (done == 0)
            firstDone = now;
          bestMs = done == 0 ? stepMs : std::min(bestMs, stepMs);
          ++done;
          double secs = std::chrono::duration<double>(now - t0).count();
          std::fprintf(stderr,
                       "\rrp-run: step %u (%u/%u) loss %.4f  %.0f tokens/s, "
                       "ETA %.1f s ",
                       step, done, steps, loss, tokens / (stepMs / 1e3),
                       secs / done * (steps - done));
        });
    std::fprintf(stderr, "\n");
    Status written = trace ? writeTraceFiles(*trace, tracePath, profilePath,
                                             profileHw, s.isOk())
                           : Status::ok();
    if (s.failed())
      return fail(s);
    if (comm)
      comm->leave();
    if (written.failed())
      return fail(written);
    double meanMs =
        done > 1 ? std::chrono::duration<double, std::milli>(last - firstDone)
                           .count() /
                       (done - 1)
                 : bestMs;
    std::fprintf(stderr,
                 "rp-run: trained %u steps on %s (%u threads, %u "
                 "device(s)); best step %.3f ms, mean %.3f ms after the "
                 "first\n",
                 steps, (*devicesOf)->getName(), threads, plan->devices, bestMs,
                 meanMs);
    if (plan->staged)
      reportMemory(**fwd);
    if (trace)
      reportTime(*trace, !serialOptimizer);
    return 0;
  }
  if (!dumpGrads.empty() || !labelsPath.empty())
    return fail(invalidArgument("--labels and --dump-grads need a training "
                                "plan (rp-compile without --forward-only)"));
  for (auto &[name, array] : given)
    if (Status s = (*fwd)->setInput(name, array); s.failed())
      return fail(s);
  if (Status s = (*fwd)->setSyntheticInputs(seed); s.failed())
    return fail(s);
  ThreadPool pool(threads);
  std::unique_ptr<PipelineExecutor> pipeline;
  if (!plan->staged && backend != "host")
    std::fprintf(stderr,
                 "rp-run: warning: '%s' is a forward-only plan, whose jobs "
                 "run in order on the host kernels; --backend %s runs "
                 "staged (training) plans only\n",
                 planPath.c_str(), backend.c_str());
  if (plan->staged) {
    PipelineOptions po;
    po.progressWindow = std::chrono::milliseconds(train.watchdogMs);
    po.trace = trace.get();
    auto created = PipelineExecutor::create(*plan, **fwd, po);
    if (!created)
      return fail(created.getStatus());
    pipeline = std::move(*created);
  }
  double loadMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  // The fastest step is the one least disturbed by the rest of the machine.
  double bestMs = 0;
  for (unsigned step = 0; step < steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = pipeline ? pipeline->step(pool) : (*fwd)->run(pool);
    if (s.failed()) {
      if (trace)
        (void)writeTraceFiles(*trace, tracePath, "", "", false);
      return fail(s);
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    bestMs = step == 0 ? ms : std::min(bestMs, ms);
  }
  if (trace)
    if (Status s = writeTraceFiles(*trace, tracePath, "", "", true); s.failed())
      return fail(s);
  if (!dumpPath.empty())
    if (Status s = dumpOutput(**fwd, dumpPath); s.failed())
      return fail(s);
  if (plan->staged)
    reportMemory(**fwd);
  if (trace)
    reportTime(*trace, false);
  if (plan->outputs.empty())
    return 0;
  TensorRef out = (*fwd)->output(0);
  std::fprintf(stderr,
               "rp-run: forward of %s on host (%u threads): %zu jobs, "
               "output '%s' %s; load %.1f ms, best of %u steps %.3f ms\n",
               planPath.c_str(), threads, plan->jobs.size(),
               plan->outputs[0].name.c_str(), describe(out).c_str(), loadMs,
               steps, bestMs);
  return 0;
}
