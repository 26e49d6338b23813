//===- RunModes.h - rp-run's options and its modes --------------*- C++ -*-===//
//
// rp-run parses its flags into one RunOptions (rp-run.cpp), checks what
// holds for every mode, then hands the plan to one mode: --list-devices,
// --describe, the sim (RunSim.cpp), training (RunTrain.cpp) or a forward
// run (RunForward.cpp); what the two computing modes share to get going is
// setUpCompute (RunCompute.cpp), what they print after RunReport.cpp.
// Every mode returns rp-run's exit code (DESIGN.md: 0 ok, 1 user error, 2
// internal error) and prints its own errors through fail().
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TOOLS_RUN_RUNMODES_H
#define RP_RUNTIME_TOOLS_RUN_RUNMODES_H

#include "rp/runtime/Comm.h"
#include "rp/runtime/Device.h"
#include "rp/runtime/Executor.h"
#include "rp/runtime/Npy.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Trace.h"
#include "rp/runtime/Trainer.h"
#include "rp/timing/Hardware.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rp::runtime::run {

/// Every flag of rp-run, as parsed; the defaults are rp-run's.
struct RunOptions {
  std::string planPath, backend = "host", describeMode, dumpPath;
  std::vector<std::string> inputs;
  std::string labelsPath, dumpGrads, optimizer = "adamw", initWeights;
  TrainOptions train;
  bool syncMode = false, asyncMode = false;
  bool noDropout = false;
  /// cuda: f32 GEMMs in TF32 (BackendOptions::tf32).
  bool tf32 = false;
  uint64_t seed = 0;
  /// --seed was given: a resume refuses a checkpoint of another seed
  /// rather than taking the checkpoint's.
  bool seedGiven = false;
  unsigned steps = 1;
  unsigned threads = 1;
  bool listDevices = false;
  std::string hardware, measuredPath;
  unsigned devices = 0;
  bool uncheckedEvents = false;
  std::string dataType = "u16";
  double lr = 0, weightDecay = 0;
  /// --weight-decay was given: each optimizer keeps its own default if not.
  bool weightDecayGiven = false;
  std::string tracePath, profilePath, profileHw = rp::timing::kDefaultHardware;
  unsigned accumulate = 1;
  bool stepBarrier = false, serialOptimizer = false, noLossScaling = false;
  /// Continuous runs: passes in flight (1 or 2); 0 takes the plan's.
  unsigned passesInFlight = 0;
  /// Copies of the device arenas (1 or 2, at most one per pass in
  /// flight); 0 takes the plan's.
  unsigned arenaCopies = 0;
  /// The host memory a run may hold (0: the machine's available memory).
  double hostMemoryGiB = 0;
  double initialLossScale = 0;
  /// sim: predict this many boxes training data-parallel (docs/multi-box.md).
  unsigned boxes = 1;
  std::string network = "25gbe", networkAlgorithm = "ring";
  /// --lr, --lr-schedule, --warmup-steps, --total-steps given: a resume
  /// takes the checkpoint's for those not given.
  bool lrGiven = false, lrScheduleGiven = false, warmupGiven = false,
       totalStepsGiven = false;
  /// --lr-schedule, --shuffle-seed (given: shuffle), --metrics.
  std::string lrSchedule = "constant", metricsPath;
  uint64_t shuffleSeed = 0;
  bool shuffle = false;
  /// --eval-dataset, --eval-every, --save-best (RunEval.cpp).
  std::string evalDataset, saveBest;
  unsigned evalEvery = 0;
};

/// --metrics: one JSON line per step (RunMetrics.cpp), written once the
/// step's loss and its update are both known; the update of step k may
/// come from the optimizer's thread, before or after step k+1's loss.
class MetricsLog {
public:
  static Expected<std::unique_ptr<MetricsLog>> open(const std::string &path,
                                                    bool sync);
  void loss(unsigned step, double loss, double lr, double tokensPerSecond);
  void update(const UpdateMetrics &u);
  /// An eval loss at the master weights after `updates` steps.
  void eval(unsigned updates, double loss);
  /// Writes the steps still waiting (a skipped f16 step has no update).
  void finish();

private:
  struct Entry {
    bool hasLoss = false, hasUpdate = false;
    double loss = 0, lr = 0, tokensPerSecond = 0, gradNorm = 0;
  };
  void write(unsigned step, const Entry &e);
  std::FILE *file = nullptr;
  bool sync = false;
  std::mutex mutex;
  std::map<unsigned, Entry> pending;
};

/// Prints `s` as rp-run's error and gives its exit code.
int fail(const Status &s);

/// --list-devices: DESIGN.md's one line per backend.
int listDevices(const RunOptions &o);
/// --describe=json|grid: the plan on stdout; runs nothing.
int describePlan(const RunOptions &o, const Plan &plan);
/// --backend sim: times the plan's steps on virtual devices.
int runSim(RunOptions &o, const Plan &plan);

/// What a computing run (training or forward) has made before its steps.
struct ComputeSetup {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<HostForward> fwd;
  /// A staged plan's trace (always kept; every span with --trace).
  std::unique_ptr<Trace> trace;
  /// --input and --labels arrays by input name.
  std::vector<std::pair<std::string, NpyArray>> given;
  std::chrono::steady_clock::time_point start;
  /// A staged training plan runs continuously: two passes in flight, each
  /// on its own slot of buffers (--step-barrier: one pass at a time).
  bool continuous = false;
};

/// Checks the flags of a computing run against the plan, opens the
/// backend, allocates and initializes the plan's buffers and reads the
/// given inputs; the exit code on failure (printed already).
int setUpCompute(const RunOptions &o, const Plan &plan, ComputeSetup &setup);
/// A training plan's steps.
int runTraining(RunOptions &o, const Plan &plan, ComputeSetup &setup);
/// --eval-dataset's token-weighted mean loss at the master weights of
/// the checkpoint folder `checkpoint` (RunEval.cpp); the buffers of the
/// plan's weights are left holding them.
Expected<double> evaluate(const RunOptions &o, const Plan &plan,
                          ComputeSetup &setup, ThreadPool &pool,
                          const std::string &checkpoint);
/// --save-best: the checkpoint folder `from` copied to `to`, whole or not.
Status copyCheckpoint(const std::string &from, const std::string &to);
/// A forward-only plan's steps.
int runForward(const RunOptions &o, const Plan &plan, ComputeSetup &setup);

/// Several processes: every rank's settings that change results (the
/// plan, weights, data, options, world) against every other's, before the
/// first step (RunAgree.cpp); a difference names the setting and ranks.
Status checkRanksAgree(const RunOptions &o, const Plan &plan,
                       const ComputeSetup &setup, Communicator &comm);

/// Refuses a run whose host buffers (`slots` of them) and trainer would
/// hold more than the machine's available memory or --host-memory-gib
/// (RunHostMemory.cpp).
Status checkHostMemory(const RunOptions &o, const Plan &plan, unsigned slots,
                       bool training);
/// What the run allocated in host memory, by part, on stderr.
void reportHostMemory(const HostForward &fwd, uint64_t trainer);

// After a staged run (RunReport.cpp).

/// The plan's device memory, on stderr: each device's arena, and what its
/// buffers would take one apiece.
void reportMemory(const Plan &plan, const HostForward &fwd);
/// Where a staged run's time went, on stderr: per device, then the host.
void reportTime(const Trace &trace, bool overlapped);
/// --trace and --profile; the trace is written even when the run failed,
/// as it shows where.
Status writeTraceFiles(const Trace &trace, const std::string &tracePath,
                       const std::string &profilePath,
                       const std::string &profileHw, bool ranOk);
/// The first output as f32, as --dump-outputs writes it.
Status dumpOutput(const HostForward &fwd, const std::string &path);
/// Refuses an output path that cannot be written (its folder does not exist,
/// or it is a FIFO, a device, a folder or a link: FileIO.h's rules), before
/// a run that would write it at the end.
Status checkOutputFolder(const char *flag, const std::string &path);

} // namespace rp::runtime::run

#endif // RP_RUNTIME_TOOLS_RUN_RUNMODES_H
