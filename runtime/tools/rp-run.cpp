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
// This file parses the flags and checks what holds in every mode; each
// mode is a function of its own (run/RunModes.h).
//
//===----------------------------------------------------------------------===//

#include "run/NumberFlags.h"
#include "run/RunModes.h"

#include "rp/contract/PlanFormat.h"
#include "rp/runtime/Comm.h"
#include "rp/runtime/Driver.h"
#include "rp/runtime/LastResort.h"
#include "rp/runtime/RandomInit.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

using namespace rp::runtime;
using namespace rp::runtime::run;

int rp::runtime::run::listDevices(const RunOptions &o) {
  // DESIGN.md's lines: host: N threads, cuda: N devices or cuda: 0
  // devices (<reason>), sim: available.
  std::cout << "host: " << o.threads << " threads\n";
  Expected<uint32_t> gpus = countDevices("cuda");
  if (gpus) {
    BackendOptions all;
    all.devices = *gpus;
    Expected<std::unique_ptr<Backend>> b = createBackend("cuda", all);
    std::cout << "cuda: " << *gpus << " devices ("
              << (b ? (*b)->describe() : b.getStatus().getMessage()) << ")\n";
  } else {
    std::cout << "cuda: 0 devices (" << gpus.getStatus().getMessage() << ")\n";
  }
  // Which attention kernel each GPU runs (cuDNN or CUDA cores, and why),
  // or, without a GPU, whether cuDNN loads (docs/cuda.md).
  std::istringstream attention(describeDriverAttention("cuda"));
  for (std::string line; std::getline(attention, line);)
    std::cout << "cuda " << line << "\n";
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
      (driverHasCommunicator("cuda") ? ", nccl on cuda" : "");
  if (!job)
    std::cout << "communicator: none (" << job.getStatus().getMessage()
              << ")\n";
  else if (!*job)
    std::cout << "communicator: none (one process; " << sums
              << " under torchrun's or mpirun's environment)\n";
  else
    std::cout << "communicator: " << sums << ", rank " << (*job)->rank << " of "
              << (*job)->worldSize << " (" << (*job)->launcher << "), master "
              << (*job)->masterAddr << ":" << (*job)->masterPort << "\n";
  return 0;
}

int rp::runtime::run::describePlan(const RunOptions &o, const Plan &plan) {
  if (o.describeMode == "grid") {
    std::cout << describePlanGrid(plan);
    return 0;
  }
  Expected<std::string> json = describePlanJson(plan);
  if (!json)
    return fail(json.getStatus());
  std::cout << *json;
  return 0;
}

int main(int argc, char **argv) {
  installLastResort("rp-run");
  RunOptions o;
  CLI::App app{"rp-run: runs a compiled rp plan"};
  NumberFlags numbers;
  o.threads = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("plan", o.planPath, "the .rpplan file");
  app.add_flag("--list-devices", o.listDevices,
               "list every backend, whether it is built in and its devices, "
               "then exit");
  // The backends DESIGN.md names; createBackend says which are built in.
  app.add_option("--backend", o.backend,
                 "the devices to run on: host (default), cuda or sim")
      ->check(CLI::IsMember({"host", "cuda", "sim"}));
  app.add_option("--hw", o.hardware,
                 "sim: the hardware profile to time on, a shipped name "
                 "(profiles/) or a JSON file (default: the plan's)");
  app.add_option("--measured", o.measuredPath,
                 "sim: per-layer times (rp-run --profile's file, or any of "
                 "that form) that replace the model's for the programs of "
                 "the layers they name");
  numbers.whole(app, "--boxes", o.boxes, 1, 4096,
                "sim: also predict this many boxes training data-parallel "
                "(the all-reduce of the gradients over --network)");
  app.add_option("--network", o.network,
                 "sim with --boxes: 25gbe (default), 100gbe or 400ib");
  app.add_option("--network-algorithm", o.networkAlgorithm,
                 "sim with --boxes: ring (default) or tree")
      ->check(CLI::IsMember({"ring", "tree"}));
  app.add_option("--input", o.inputs, "NAME=FILE.npy, once per model input");
  app.add_option("--dump-outputs", o.dumpPath,
                 "write the first output of step 0 as f32 .npy");
  numbers.whole(app, "--seed", o.seed, 0, UINT64_MAX,
                "seed of synthetic inputs and of LoRA dropout's masks "
                "(--resume: the checkpoint's)");
  app.add_flag("--no-dropout", o.noDropout,
               "run a LoRA dropout plan without its masks (an evaluation; "
               "--eval-dataset's evals do so themselves)");
  numbers.whole(app, "--steps", o.steps, 1, 1000000,
                "steps to run (a forward-only plan repeats its forward)");
  numbers.whole(app, "--threads", o.threads, 1, 1024,
                "worker threads (default: cores), shared by the devices of "
                "a staged plan");
  numbers.whole(app, "--devices", o.devices, 1, ::rp::plan::kMaxPlanDevices,
                "the devices to run on; must be the plan's device count");
  numbers.whole(app, "--watchdog-ms", o.train.watchdogMs, 1, 86400000,
                "stop a staged plan's step after this many ms without "
                "progress (default 60000)");
  // Hidden: lets tests run a plan that would stall, to see the watchdog.
  app.add_flag("--unchecked-events", o.uncheckedEvents,
               "skip the loader's event checks (tests of the watchdog)")
      ->group("");
  app.add_option("--describe", o.describeMode, "print the plan and exit")
      ->check(CLI::IsMember({"json", "grid"}));
  app.add_option("--labels", o.labelsPath, "labels of the global batch (.npy)");
  app.add_option("--data", o.train.data,
                 "train on a flat token file (nanoGPT-style), the next "
                 "global batch every step");
  app.add_option("--dataset", o.train.dataset,
                 "train on a pretokenized dataset (python -m rp data): the "
                 "next global batch of its rows every step, epoch after "
                 "epoch (docs/finetune.md)");
  numbers.whole(app, "--shuffle-seed", o.shuffleSeed, 0, UINT64_MAX,
                "--dataset: read each epoch's rows in an order shuffled "
                "from this seed (default: the file's order)");
  app.add_option("--lr-schedule", o.lrSchedule,
                 "constant (default), linear or cosine: the learning rate "
                 "after --warmup-steps, linear and cosine decaying to 0 at "
                 "--total-steps (transformers' schedules)")
      ->check(CLI::IsMember({"constant", "linear", "cosine"}));
  numbers.whole(app, "--warmup-steps", o.train.schedule.warmup, 0, 1000000,
                "steps of linear warmup from 0 to --lr");
  numbers.whole(app, "--total-steps", o.train.schedule.total, 0, 1000000,
                "the steps linear and cosine decay over (default: --steps; "
                "a resume takes the checkpoint's)");
  app.add_option("--metrics", o.metricsPath,
                 "append a JSON line per step to this file: step, loss, the "
                 "weights the loss is at, lr, grad_norm, tokens/s");
  app.add_option("--eval-dataset", o.evalDataset,
                 "every --eval-every steps and at the end, the token-weighted "
                 "mean loss over this dataset's rows at the master weights "
                 "(no update; needs --save), to --metrics and stderr");
  numbers.whole(app, "--eval-every", o.evalEvery, 1, 1000000,
                "--eval-dataset: steps between evaluations (default: at the "
                "end only)");
  app.add_option("--save-best", o.saveBest,
                 "--eval-dataset: copy the checkpoint with the lowest eval "
                 "loss so far to this folder");
  app.add_option("--data-type", o.dataType, "u16 (default) or u32 tokens")
      ->check(CLI::IsMember({"u16", "u32"}));
  app.add_option("--save", o.train.save,
                 "write a checkpoint folder at the end (atomically)");
  numbers.whole(app, "--save-every", o.train.saveEvery, 0, 1000000,
                "also write the checkpoint every K steps");
  app.add_option("--resume", o.train.resume,
                 "continue from a checkpoint folder for --steps more steps");
  app.add_option("--init-weights", o.initWeights,
                 "replace initial parameter values by name (.safetensors), "
                 "or random[:SEED]: every parameter made from the plan alone "
                 "(normal(0, 0.02) matrices and embeddings, ones for norm "
                 "scales, zeros else; SEED 0 by default), no weights file "
                 "needed");
  app.add_flag("--allow-nonfinite", o.train.allowNonfinite,
               "accept NaN, infinite or huge (above 1.8e19) values in "
               "--init-weights and in a --resume checkpoint (refused by "
               "default: they train into NaN)");
  app.add_flag("--tf32", o.tf32,
               "cuda: f32 GEMMs round their inputs to TF32 on the tensor "
               "cores (off by default: f32 products as the host's)");
  app.add_option("--dump-grads", o.dumpGrads,
                 "write step 0's gradients of the trainable parameters "
                 "(.safetensors)");
  app.add_option("--optimizer", o.optimizer, "adamw or sgd")
      ->check(CLI::IsMember({"adamw", "sgd"}));
  o.lr = AdamWConfig().lr;
  // PyTorch's optimizers refuse the same values; running on with a
  // default instead would be a silent wrong answer.
  constexpr double kInf = HUGE_VAL;
  numbers.real(app, "--lr", o.lr, 0, kInf, true,
               "the learning rate is a finite number >= 0",
               "learning rate (default 1e-3)");
  numbers.real(app, "--beta1", o.train.adamw.beta1, 0, 1, true,
               "AdamW's beta1 is in [0, 1)", "AdamW beta1");
  numbers.real(app, "--beta2", o.train.adamw.beta2, 0, 1, true,
               "AdamW's beta2 is in [0, 1)", "AdamW beta2");
  numbers.real(app, "--eps", o.train.adamw.eps, 0, kInf, true,
               "AdamW's epsilon is a finite number >= 0", "AdamW epsilon");
  numbers.real(app, "--momentum", o.train.sgdConfig.momentum, 0, kInf, true,
               "SGD's momentum is a finite number >= 0", "SGD momentum");
  numbers.real(app, "--weight-decay", o.weightDecay, 0, kInf, true,
               "the weight decay is a finite number >= 0",
               "weight decay (AdamW 1e-2, SGD 0 by default)");
  numbers.real(app, "--clip-grad-norm", o.train.clipGradNorm, 0, kInf, true,
               "the gradient norm to clip to is a finite number >= 0 (0: off)",
               "clip the global gradient norm to this (0: off)");
  app.add_option("--trace", o.tracePath,
                 "write a Chrome trace of a staged plan's steps (Perfetto, "
                 "chrome://tracing)");
  app.add_option("--profile", o.profilePath,
                 "write measured per-layer times of a staged training plan "
                 "(for rp-compile --measured)");
  app.add_option("--profile-hw", o.profileHw,
                 "the hardware profile --profile's times are for (default "
                 "host)");
  // These three are checked against the plan (RunCompute.cpp, whose
  // messages name its choice); their text is read here.
  numbers.whole(app, "--accumulate", o.accumulate, 0, UINT_MAX,
                "passes of the plan's microbatches per optimizer step "
                "(gradient accumulation; inputs hold that many global "
                "batches)",
                "give a whole number of passes, 1 or more");
  app.add_flag("--step-barrier", o.stepBarrier,
               "staged plans: finish each pass before the next starts "
               "(no continuous execution; to compare)");
  numbers.whole(app, "--passes-in-flight", o.passesInFlight, 0, UINT_MAX,
                "staged training plans: passes in flight, 1 or 2 (default: "
                "the plan's, which the compiler chose to fit the devices)",
                "give 1 or 2 (0: the plan's)");
  numbers.whole(app, "--arena-copies", o.arenaCopies, 0, UINT_MAX,
                "staged training plans: copies of the device arenas, 1 "
                "(two passes in flight share one, a device taking up a "
                "pass once it is done with the one before) or 2 (one per "
                "pass in flight); default: the plan's",
                "give 1 or 2 (0: the plan's)");
  numbers.real(app, "--host-memory-gib", o.hostMemoryGiB, 0, kInf, true,
               "give a number of GiB >= 0",
               "the host memory the run may hold (default: the machine's "
               "available memory): a plan whose host buffers and trainer "
               "would hold more is refused before it allocates them");
  app.add_flag("--serial-optimizer", o.serialOptimizer,
               "async mode: run each step's optimizer between the steps "
               "instead of beside the next one (same results; to compare)");
  app.add_flag("--no-loss-scaling", o.noLossScaling,
               "f16 plans: train without dynamic loss scaling");
  o.initialLossScale = LossScaleConfig().initial;
  // Above 0: the smallest positive double is the least value allowed.
  numbers.real(app, "--initial-loss-scale", o.initialLossScale,
               std::numeric_limits<double>::denorm_min(), kInf, true,
               "the initial loss scale is a finite number > 0",
               "f16 plans: the dynamic loss scale to start from (halved "
               "on an overflowing step, which is skipped; doubled after "
               "2000 good steps)");
  app.add_flag("--shard-optimizer", o.train.shardOptimizer,
               "several processes: each keeps the optimizer state and "
               "master weights of 1/N of the parameters and sums only its "
               "1/N of the gradients (ZeRO-1; all of them with "
               "--clip-grad-norm); the same bits");
  app.add_flag("--sync", o.syncMode, "gradients of step k at W_k");
  app.add_flag("--async", o.asyncMode,
               "gradients of step k at W_(k-1) (the default)");
  // A refused command line reads as every other refusal: the tool, the
  // word error, what was wrong (CLI11's own text only said the last two).
  app.failure_message([](const CLI::App *, const CLI::Error &e) {
    return std::string("rp-run: error: ") + e.what() +
           " (rp-run --help lists the options)\n";
  });
  // CLI11 reads `--metrics=` (nothing after '=') as "take the next
  // argument": `--metrics= --lr=abc` named a metrics file "--lr=abc" and
  // never checked --lr (found by fuzz/options_fuzz.py).
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.size() > 3 && arg.substr(0, 2) == "--" && arg.back() == '=') {
      std::string flag(arg.substr(0, arg.size() - 1));
      std::fprintf(stderr,
                   "rp-run: error: %s= gives no value; write %s=VALUE or "
                   "%s VALUE\n",
                   flag.c_str(), flag.c_str(), flag.c_str());
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  o.weightDecayGiven = app.count("--weight-decay") > 0;
  o.shuffle = app.count("--shuffle-seed") > 0;
  o.seedGiven = app.count("--seed") > 0;
  o.lrGiven = app.count("--lr") > 0;
  o.lrScheduleGiven = app.count("--lr-schedule") > 0;
  o.warmupGiven = app.count("--warmup-steps") > 0;
  o.totalStepsGiven = app.count("--total-steps") > 0;

  if (Status s = numbers.read(app); s.failed())
    return fail(s);
  if (o.listDevices)
    return listDevices(o);
  if (o.planPath.empty())
    return fail(invalidArgument("give the .rpplan file to run (rp-compile "
                                "writes one), or --list-devices"));
  LoadOptions loadOptions;
  loadOptions.checkEvents = !o.uncheckedEvents;
  {
    // random[:SEED] makes every parameter on the box: the weight files
    // may be absent.
    uint64_t seed = 0;
    std::string error;
    if (parseRandomInit(o.initWeights, seed, error)) {
      if (!error.empty())
        return fail(invalidArgument(error));
      loadOptions.allowMissingWeights = true;
    }
    // The sim reads no weights: a plan without its weights file times too.
    if (o.backend == "sim")
      loadOptions.allowMissingWeights = true;
  }
  Expected<Plan> plan = loadPlan(o.planPath, loadOptions);
  if (!plan)
    return fail(plan.getStatus());
  if (o.devices && o.devices != plan->devices)
    return fail(invalidArgument(
        "--devices " + std::to_string(o.devices) + ", but '" + o.planPath +
        "' was compiled for " + std::to_string(plan->devices) +
        " device(s); recompile it with rp-compile --devices " +
        std::to_string(o.devices) + ", or leave out --devices"));
  if (!o.describeMode.empty())
    return describePlan(o, *plan);
  if (!o.hardware.empty() && o.backend != "sim")
    return fail(invalidArgument("--hw times the sim backend's commands; the " +
                                o.backend + " backend runs them"));
  if (!o.measuredPath.empty() && o.backend != "sim")
    return fail(
        invalidArgument("--measured times the sim backend's programs; the " +
                        o.backend + " backend runs them (use --backend sim)"));
  if (o.backend == "sim")
    return runSim(o, *plan);
  ComputeSetup setup;
  if (int code = setUpCompute(o, *plan, setup))
    return code;
  if (isTrainingPlan(*plan))
    return runTraining(o, *plan, setup);
  return runForward(o, *plan, setup);
}
