//===- RunTrain.cpp - rp-run on a training plan ---------------------------===//
//
// The optimizer's flags into TrainOptions, then train() (Trainer.h) with a
// progress line per step on stderr and `step N loss L` on stdout, then the
// trace files and where the time and memory went.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/Checkpoint.h"
#include "rp/runtime/Comm.h"
#include "rp/runtime/Driver.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>

using namespace rp::runtime;
using namespace rp::runtime::run;

/// --eval-dataset: the steps --eval-every at a time (counted from the first
/// step of the run a resume continues, `first` steps done), each stretch saving
/// the checkpoint the next resumes and the eval runs at (RunEval.cpp); the
/// loss after each, to stderr and the metrics, and the best checkpoint
/// copied to --save-best.
static Status
trainWithEvals(RunOptions &o, const Plan &plan, ComputeSetup &setup,
               ThreadPool &pool, MetricsLog *metrics,
               const std::function<void(unsigned, double)> &onStep,
               const unsigned &lastStep, unsigned first) {
  unsigned total = o.steps;
  unsigned every = o.evalEvery ? o.evalEvery : total;
  double best = HUGE_VAL;
  for (unsigned done = 0; done < total;) {
    // A resumed run evaluates where the uninterrupted one would: after
    // every multiple of --eval-every steps (and at the end).
    unsigned stretch = o.evalEvery ? every - (first + done) % every : every;
    o.train.steps = std::min(stretch, total - done);
    if (Status s = train(plan, *setup.fwd, pool, o.train, onStep); s.failed())
      return s;
    done += o.train.steps;
    o.train.resume = o.train.save;
    Expected<double> loss = evaluate(o, plan, setup, pool, o.train.save);
    if (!loss)
      return loss.getStatus();
    unsigned updates = lastStep + 1;
    bool isBest = *loss < best;
    if (isBest && !o.saveBest.empty())
      if (Status s = copyCheckpoint(o.train.save, o.saveBest); s.failed())
        return s;
    std::fprintf(stderr, "\nrp-run: eval after %u steps: loss %.6f%s\n",
                 updates, *loss,
                 isBest && !o.saveBest.empty()
                     ? (" (the lowest so far: " + o.saveBest + ")").c_str()
                     : "");
    best = std::min(best, *loss);
    if (metrics)
      metrics->eval(updates, *loss);
  }
  return Status::ok();
}

/// A resume's schedule: the checkpoint's for each option not given; one
/// given that differs wins, said on stderr (a deliberate change, as a lower
/// rate for the rest of a run; the rates then are not the uninterrupted
/// run's).
static void takeSchedule(RunOptions &o, const CheckpointSchedule &saved,
                         unsigned step) {
  std::string changed;
  auto note = [&](const char *flag, const std::string &given,
                  const std::string &theirs) {
    if (given != theirs)
      changed += std::string(changed.empty() ? "" : ", ") + flag + " " + given +
                 " (the checkpoint's " + theirs + ")";
  };
  // The shortest of 15 and 17 digits that reads back as the same number.
  auto real = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.15g", v);
    if (std::strtod(text, nullptr) != v)
      std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  if (!o.lrGiven)
    o.lr = saved.lr;
  note("--lr", real(o.lr), real(saved.lr));
  if (!o.lrScheduleGiven)
    o.lrSchedule = saved.kind;
  note("--lr-schedule", o.lrSchedule, saved.kind);
  if (!o.warmupGiven)
    o.train.schedule.warmup = saved.warmup;
  note("--warmup-steps", std::to_string(o.train.schedule.warmup),
       std::to_string(saved.warmup));
  // --total-steps 0: this run's end, as below.
  unsigned &total = o.train.schedule.total;
  if (!o.totalStepsGiven)
    total = saved.total;
  if (saved.total != 0)
    note("--total-steps", std::to_string(total ? total : step + o.steps),
         std::to_string(saved.total));
  if (!changed.empty())
    std::fprintf(stderr,
                 "rp-run: resuming with %s: the learning rates from step %u "
                 "are not the uninterrupted run's\n",
                 changed.c_str(), step);
}

int rp::runtime::run::runTraining(RunOptions &o, const Plan &plan,
                                  ComputeSetup &setup) {
  if (o.syncMode && o.asyncMode)
    return fail(invalidArgument("--sync and --async exclude each other"));
  if (o.evalDataset.empty() && (o.evalEvery || !o.saveBest.empty()))
    return fail(invalidArgument("--eval-every and --save-best evaluate "
                                "--eval-dataset; give it"));
  if (!o.evalDataset.empty() && o.train.save.empty())
    return fail(invalidArgument(
        "--eval-dataset evaluates the checkpoint each stretch of steps "
        "ends with, which the next resumes; give --save"));
  // A resume continues the checkpoint's seed unless --seed is given (the
  // trainer refuses one that differs): the dropout masks go on as the
  // uninterrupted run's. Likewise its shuffle seed and its schedule.
  std::optional<CheckpointState> resumed;
  if (!o.train.resume.empty()) {
    Expected<CheckpointState> state = readCheckpointState(o.train.resume);
    if (!state)
      return fail(state.getStatus());
    resumed = std::move(*state);
    if (!o.seedGiven && resumed->seed)
      o.seed = *resumed->seed;
    if (!o.shuffle && !o.train.dataset.empty() && resumed->shuffleSeed) {
      o.shuffle = true;
      o.shuffleSeed = *resumed->shuffleSeed;
    }
    if (resumed->schedule)
      takeSchedule(o, *resumed->schedule, resumed->step);
  }
  o.train.steps = o.steps;
  o.train.sync = o.syncMode;
  o.train.sgd = o.optimizer == "sgd";
  o.train.seed = o.seed;
  o.train.dropout = !o.noDropout;
  o.train.dumpGrads = o.dumpGrads;
  o.train.data32 = o.dataType == "u32";
  o.train.overlapOptimizer = !o.serialOptimizer;
  o.train.accumulate = o.accumulate;
  o.train.continuous = setup.continuous;
  o.train.lossScaling = !o.noLossScaling;
  o.train.lossScale.initial = o.initialLossScale;
  o.train.onSkippedStep = [](unsigned step, double scale) {
    std::fprintf(stderr,
                 "\nrp-run: step %u: an f16 gradient overflowed; the step "
                 "is skipped and the loss scale is now %g\n",
                 step, scale);
  };
  o.train.trace = setup.trace.get();
  o.train.adamw.lr = o.train.sgdConfig.lr = o.lr;
  if (o.shuffle && o.train.dataset.empty())
    return fail(invalidArgument("--shuffle-seed shuffles a --dataset's rows; "
                                "give --dataset"));
  o.train.shuffle = o.shuffle;
  o.train.shuffleSeed = o.shuffleSeed;
  o.train.schedule.kind = o.lrSchedule == "linear"   ? LrSchedule::linear
                          : o.lrSchedule == "cosine" ? LrSchedule::cosine
                                                     : LrSchedule::constant;
  // Decay ends with this run: a resume of a checkpoint that predates the
  // stored schedule counts from the checkpoint's step.
  if (o.train.schedule.total == 0)
    o.train.schedule.total = (resumed ? resumed->step : 0) + o.steps;
  // --metrics: a step's line once both its loss (onStep) and its update
  // (onUpdate, maybe on the optimizer's thread, maybe a step later) are in.
  std::unique_ptr<MetricsLog> metrics;
  if (!o.metricsPath.empty()) {
    auto opened = MetricsLog::open(o.metricsPath, o.train.sync);
    if (!opened)
      return fail(opened.getStatus());
    metrics = std::move(*opened);
    o.train.onUpdate = [&metrics](const UpdateMetrics &u) {
      metrics->update(u);
    };
  }

  // Each optimizer's own default unless given (DESIGN.md).
  if (o.weightDecayGiven)
    o.train.adamw.weightDecay = o.train.sgdConfig.weightDecay = o.weightDecay;
  for (auto &[name, array] : setup.given)
    o.train.inputs[name] = std::move(array);
  // Several processes: join the job before any step (a bad rendezvous
  // fails here, bounded by the watchdog window).
  Expected<std::optional<Rendezvous>> job = rendezvousFromEnvironment();
  if (!job)
    return fail(job.getStatus());
  std::unique_ptr<Communicator> comm;
  if (*job) {
    CommTimeouts timeouts;
    timeouts.rendezvous = timeouts.collective =
        std::chrono::milliseconds(o.train.watchdogMs);
    auto joined = o.backend == "cuda"
                      ? createDriverCommunicator("cuda", **job, timeouts)
                      : createGlooCommunicator(**job, timeouts);
    if (!joined)
      return fail(joined.getStatus());
    comm = std::move(*joined);
    o.train.comm = comm.get();
    // Each rank's trace and profile: rank 0's at the names given, the
    // others' beside them (NAME.rank1.json), not over them.
    if (comm->rank())
      for (std::string *path : {&o.tracePath, &o.profilePath})
        if (!path->empty()) {
          size_t dot = path->rfind('.');
          size_t slash = path->rfind('/');
          if (dot == std::string::npos ||
              (slash != std::string::npos && dot < slash))
            dot = path->size();
          path->insert(dot, ".rank" + std::to_string(comm->rank()));
        }
    std::fprintf(stderr, "rp-run: %s\n", comm->describe().c_str());
    if (Status s = checkRanksAgree(o, plan, setup, *comm); s.failed()) {
      // Every rank found the same difference: none is lost to the others.
      comm->leave();
      return fail(s);
    }
  }
  if (comm && !o.evalDataset.empty())
    return fail(unsupported("--eval-dataset runs in one process; evaluate "
                            "the checkpoints of several with rp-run "
                            "--init-weights CKPT/weights.safetensors"));
  ThreadPool pool(o.threads);
  auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  // A step's time: from the end of the step `window` before it (the first
  // step's from the start of the steps, after the set-up), over `window`.
  // With two passes in flight the steps overlap and end in uneven pairs,
  // so one step's interval alone says little (a step ending just after
  // the one before it gave millions of tokens/s).
  unsigned window = setup.continuous && setup.fwd->getSlots() >= 2 ? 2u : 1u;
  std::deque<std::chrono::steady_clock::time_point> ends;
  // Each stretch between evaluations starts anew (the eval's time is
  // not a step's); the ETA counts from the first.
  auto firstDone = t0;
  double bestMs = 0;
  unsigned done = 0;
  bool started = false;
  o.train.onStart = [&] {
    auto now = std::chrono::steady_clock::now();
    if (!started)
      t0 = last = firstDone = now;
    // The mean after the first step leaves out the evaluations.
    else if (done > 0)
      firstDone += now - last;
    last = now;
    started = true;
    ends.assign(1, now);
  };
  int64_t tokens = 0;
  for (const BindingDesc &in : plan.inputs)
    if (in.name == "labels")
      // A staged plan binds the global batch, an unstaged one a
      // microbatch.
      tokens = numElements(plan.buffers[in.buffer].shape) *
               (plan.staged ? 1 : plan.microbatches) * o.accumulate;
  // Steps that overlap finish unevenly; the mean after the first is the
  // throughput.
  unsigned lastStep = 0;
  auto onStep = [&](unsigned step, double loss) {
    lastStep = step;
    // The async convention, said where the losses are read
    // (DESIGN.md), once the run has started.
    if (done == 0 && !o.train.sync)
      std::fprintf(stderr, "rp-run: async mode: the loss of step k is at step "
                           "k-1's weights (step 0's at the initial ones, a "
                           "resumed run's first at the checkpoint's compute "
                           "weights); --sync for the loss at step k's own\n");
    std::printf("step %u loss %.9g\n", step, loss);
    double lr = o.train.lrAt(step);
    std::fflush(stdout);
    auto now = std::chrono::steady_clock::now();
    // The step time includes the optimizer, which runs after the
    // callback: it is measured from one callback to the next (over
    // the window).
    if (ends.empty())
      ends.push_back(t0);
    double stepMs =
        std::chrono::duration<double, std::milli>(now - ends.front()).count() /
        double(ends.size());
    ends.push_back(now);
    if (ends.size() > window)
      ends.pop_front();
    last = now;
    if (done == 0)
      firstDone = now;
    bestMs = done == 0 ? stepMs : std::min(bestMs, stepMs);
    ++done;
    double secs = std::chrono::duration<double>(now - t0).count();
    std::fprintf(stderr,
                 "\rrp-run: step %u (%u/%u) loss %.4f lr %.3g  %.0f "
                 "tokens/s, ETA %.1f s ",
                 step, done, o.steps, loss, lr, tokens / (stepMs / 1e3),
                 secs / done * (o.steps - done));
    if (metrics)
      metrics->loss(step, loss, lr, tokens / (stepMs / 1e3));
  };
  uint64_t trainerBytes = 0;
  o.train.onHostBytes = [&](uint64_t bytes) { trainerBytes = bytes; };
  Status s = o.evalDataset.empty()
                 ? rp::runtime::train(plan, *setup.fwd, pool, o.train, onStep)
                 : trainWithEvals(o, plan, setup, pool, metrics.get(), onStep,
                                  lastStep, resumed ? resumed->step : 0);
  std::fprintf(stderr, "\n");
  if (metrics)
    metrics->finish();
  Status written = setup.trace
                       ? writeTraceFiles(*setup.trace, o.tracePath,
                                         o.profilePath, o.profileHw, s.isOk())
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
               o.steps, setup.backend->getName(), o.threads, plan.devices,
               bestMs, meanMs);
  // What crossed the network from this rank (docs/multi-box.md).
  if (comm)
    std::fprintf(stderr,
                 "rp-run: rank %d sent %.3f MiB through its collectives "
                 "(%.3f MiB a step)\n",
                 comm->rank(), double(comm->bytesSent()) / (1 << 20),
                 double(comm->bytesSent()) / (1 << 20) / std::max(o.steps, 1u));
  reportHostMemory(*setup.fwd, trainerBytes);
  if (plan.staged)
    reportMemory(plan, *setup.fwd);
  if (setup.trace)
    reportTime(*setup.trace, !o.serialOptimizer);
  return 0;
}
