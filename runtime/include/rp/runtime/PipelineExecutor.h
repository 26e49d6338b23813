//===- PipelineExecutor.h - a staged plan on devices ------------*- C++ -*-===//
//
// The executor of staged plans (plan.fbs): one training step is a set of
// ordered queues, four per device (compute, weight_h2d, activation_h2d,
// d2h), that synchronize only through events. Each (device, queue) that
// has jobs gets its own thread, a controller that walks its jobs in plan
// order and enqueues them on its device queue (Device.h): the copies of a
// copy job, the program of a compute job, then a record of each event the
// job records. On the host backend an enqueue runs the work on the
// controller's thread (compute on the device's thread pool), so copies
// overlap compute as a GPU's copy engines do; on cuda it returns at once.
//
// Synchronization has two levels (RoundPipe's, reference/roundpipe.md
// §2.6): per plan event, a host-side "recorded in step k" signal, set once
// the record has been enqueued, and a device event. A controller waits for
// the signal of every event its job waits for, then makes its device queue
// wait for the device event, then enqueues the job: a device wait is thus
// never issued before its record (where it would order nothing). Signals
// hold the number of the step that set them, so nothing is reset between
// steps and a waiter of step k cannot be satisfied by a record of step
// k-1. A controller ends its part of a step with a synchronize of its
// queue, so a finished step's results are in memory.
//
// A step never hangs. The first failing job stops the step: every other
// controller stops before its next job, its Status (job index and label
// added) is the step's. A watchdog ends a step that makes no progress: when
// no job has run or finished for a whole progress window and none is
// running, every queue is waiting for an event that cannot come; the step
// then ends with DeadlineExceeded naming each blocked queue, the job it
// waits before and the event. Validated plans (loadPlan simulates the
// queues) never get there; the watchdog guards the executor and plans built
// without the loader.
//
// Jobs listed in PipelineOptions::landings are watched: after such a job's
// records, its queue records one more event, and the executor's landing
// thread waits for it on the host and then calls onLanded(job) — while the
// rest of the step runs on. That is how the trainer adds each stage's
// weight gradients into the optimizer's sums as their download lands
// (reference/roundpipe.md §2.7), not after the step. A step returns only
// after every landing of the step has been handled.
//
// Host gates are the per-layer version fences of reference/roundpipe.md
// §2.6: a job may also wait for gates, which the host opens for a given
// step (openGate). The trainer's sync mode gives every upload of a
// parameter a gate and opens it once the optimizer has written that
// parameter's new weights, so the next step starts on the first layers
// while the optimizer is still on the last ones.
//
// Continuous execution (DESIGN.md): passes are numbered from 1 and run in
// order on every queue, with no barrier between them. submitPass starts a
// pass as soon as the one two before it has finished (a pass runs on buffer
// slot pass % 2, HostForward's slots), and waitPass waits for one; a queue
// takes up pass p+1's jobs once its part of pass p is done, so pass p+1's
// first jobs run while pass p drains. A pass may rename the plan's devices
// (`shift`: plan device k runs on device (k + shift) % G): the controllers
// are per device queue, each running the plan device's jobs that land on
// it. Events and gates come in one set per slot, so a record of pass p+1
// never satisfies a waiter of pass p. runJobs is one pass submitted and
// waited for.
//
// Two passes in flight may share one copy of the device arenas
// (ForwardOptions::arenaCopies = 1: the memory of one pass, where two
// copies do not fit the devices). Every device buffer is transient within
// a pass, and a device's queues touch only its own memory, so pass p+1 may
// reuse device X's arena once X's part of pass p is over: a controller on
// X takes up pass p+1 only when every controller on X is done with pass p
// (each ended it with a synchronize of its queue, so the device's work is
// complete). Pass p+1 still starts on the devices pass p has left while
// pass p drains on the others. The wait is the executor's, under its mutex
// like the others: cancellation ends it, and the watchdog counts a device
// that still makes progress on pass p as progress (its stall message names
// a queue that waits so).
//
// With PipelineOptions::trace set, every job's start and end go to the
// Trace's slots for the step (one per job, written by the controller that
// runs it, outside the lock), and step() adds the host spans of the step,
// its prologue and epilogue.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_PIPELINEEXECUTOR_H
#define RP_RUNTIME_PIPELINEEXECUTOR_H

#include "rp/runtime/Device.h"
#include "rp/runtime/Executor.h"
#include "rp/runtime/Trace.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rp::runtime {

struct PipelineOptions {
  /// How long a step may go without any job starting or finishing, while
  /// no job runs, before the watchdog ends it. A long kernel is progress;
  /// only queues that all wait are a stall.
  std::chrono::milliseconds progressWindow{60000};
  /// Where to record every job's and host program's span (Trace.h), if
  /// anywhere; must outlive the executor.
  Trace *trace = nullptr;
  /// Jobs whose completion the host acts on, and what it does: called on
  /// the landing thread, one job at a time, once per step for each listed
  /// job after its work has finished. A failure fails the step.
  std::vector<size_t> landings;
  /// `pass` is the pass number the job landed in (submitPass).
  std::function<Status(size_t job, uint64_t pass)> onLanded;
  /// Host gates: how many, and per plan job the gates it waits for (empty:
  /// none), besides its events.
  uint32_t gates = 0;
  std::vector<std::vector<uint32_t>> gatesOf;
  /// Buffer slots (1 or 2; fwd's): how many passes may be in flight.
  unsigned slots = 1;
  /// Passes may rename devices (needs fwd.rotates()): a controller for
  /// every device and queue kind any device has jobs on.
  bool rotate = false;
};

/// How many devices pass p + 1's jobs move on from pass p's: the plan's
/// pass_shift (decided at compile time, rp-compile --dispatch), or in
/// plans older than the field the stage jobs of one pass (S) when the plan
/// is round-robin (stage job n on device n mod G), else 0. Pass p runs job
/// n on device (device of n + p * shift) mod G (the trainer and the sim
/// device both rename with it).
uint32_t passShiftJobs(const Plan &plan);

/// The passes a continuous run of `plan` keeps in flight, each on its own
/// slot of buffers: the plan's decision (plan.fbs's passes_in_flight), 2
/// in plans older than it.
unsigned passesInFlight(const Plan &plan);

/// The copies of the device arenas a continuous run of `plan` with `slots`
/// passes in flight allocates: the plan's decision (plan.fbs's
/// arena_copies), one per pass in flight in plans older than it, never
/// more than `slots`.
unsigned arenaCopies(const Plan &plan, unsigned slots);

/// Whether a continuous run with `slots` passes in flight renames the
/// devices pass by pass (asks HostForward for rotating arenas): two passes
/// in flight whose pass shift moves the jobs. One pass in flight starts a
/// pass after the one before has finished, so the devices keep their own
/// arenas, no larger than their planned peak.
bool renamesDevices(const Plan &plan, unsigned slots);

class PipelineExecutor {
public:
  /// Starts the controllers of a staged `plan` over the buffers of `fwd`
  /// (which must be built from the same plan and outlive the executor), on
  /// fwd's backend, whose device count must be the plan's.
  /// Checks what execution needs (checkPlanJobs), not that the events can
  /// all be recorded (checkPlanEvents, run by loadPlan): tests hand it plans
  /// that fail that on purpose.
  static Expected<std::unique_ptr<PipelineExecutor>>
  create(const Plan &plan, HostForward &fwd, const PipelineOptions &options);
  /// Stops and joins the controllers. Not while runJobs runs.
  ~PipelineExecutor();

  PipelineExecutor(const PipelineExecutor &) = delete;
  PipelineExecutor &operator=(const PipelineExecutor &) = delete;

  /// Runs every job of the plan once (one step), concurrently on their
  /// queues; returns when all have run, or with the first failure or the
  /// watchdog's. After a failure the next call starts a fresh step. A
  /// traced step takes the trace's next step number.
  Status runJobs();
  /// One whole step: the prologue program on `hostPool` (unless
  /// `prologue` is false: the caller ran it), the jobs, then the epilogue
  /// program on `hostPool`.
  Status step(ThreadPool &hostPool, bool prologue = true);

  /// The number runJobs gives the next step it runs (runJobs, step).
  uint64_t nextStepNumber() const;
  /// Opens `gate` for the step numbered `step` (and every earlier one of
  /// its slot); any thread may call it, before or while that step runs.
  void openGate(uint32_t gate, uint64_t step);

  /// Continuous execution: starts pass nextStepNumber() on slot pass %
  /// slots, its devices renamed by `shift`, traced as step `label`. The
  /// pass `slots` before it must have been waited for. Returns its number.
  uint64_t submitPass(uint32_t shift, uint64_t label);
  /// Waits until pass `pass` has run (every queue done and every landing
  /// handled) or the run failed; the first failure of the passes in flight
  /// (a failure cancels them all, and the next submitPass starts afresh).
  Status waitPass(uint64_t pass);

  /// How many (device, queue) controllers run: the queues that have jobs.
  size_t getNumQueues() const { return queues.size(); }

private:
  struct Controller {
    uint32_t device = 0; ///< the device it enqueues on
    QueueKind kind = QueueKind::compute;
    Queue *queue = nullptr;  ///< the device queue it enqueues on
    bool timed = false;      ///< its queue times jobs itself (Queue::timeJobs)
    bool callsTimed = false; ///< its queue times each call (Queue::timeCalls)
    // Guarded by the executor's mutex.
    uint64_t pass = 0; ///< the last pass it took up
    /// Plan job indices of its current pass, in plan order.
    const std::vector<size_t> *jobs = nullptr;
    size_t next = 0;      ///< position in `jobs` of its current job
    bool running = false; ///< running (*jobs)[next] now
    bool done = true;     ///< finished or stopped its part of `pass`
    /// Shared arenas: pass + 1 is submitted, and it waits for its device's
    /// other queues to be done with `pass`.
    bool waitsForDevice = false;
    /// Its thread waits here: woken by a new pass, by a record or gate,
    /// by cancellation and shutdown.
    std::condition_variable wake;
    std::thread thread;
  };
  /// A pass in flight or the last one in its slot.
  struct PassState {
    uint64_t number = 0; ///< 0: none yet
    uint32_t shift = 0;
    uint64_t label = 0;
    JobSpan *traceSlots = nullptr;
    size_t activeQueues = 0;    ///< controllers not done with it
    size_t landingsPending = 0; ///< landings enqueued and not handled
    bool waited = true;         ///< waitPass returned for it
    bool finished() const { return activeQueues == 0 && landingsPending == 0; }
  };

  PipelineExecutor(const Plan &plan, HostForward &fwd,
                   const PipelineOptions &options);
  void controllerLoop(Controller &c);
  /// The landing thread: waits for each landed job's event, then calls
  /// onLanded.
  void landingLoop();
  /// Enqueues `job` of `pass` on c's device queue: waits, work, records.
  Status enqueueJob(Controller &c, size_t index, const PassState &pass);
  /// runJobs for the step the trace numbers `label`.
  Status runJobsOf(uint64_t label);
  /// True once every event and gate `job` waits for is set for `pass`.
  bool ready(size_t job, uint64_t pass) const;
  /// True once every controller on `device` is done with `pass` (or
  /// further): its arena is free for the next pass.
  bool deviceDoneWith(uint32_t device, uint64_t pass) const;
  /// The watchdog's message: every blocked queue, job and event.
  std::string stallMessage() const;
  /// A traced pass's job spans from the devices' own clocks, where their
  /// queues time jobs (cuda); the host's enqueue spans elsewhere.
  void takeDeviceSpans(JobSpan *slots);
  PassState &passOf(uint64_t pass) { return passes[pass % passes.size()]; }
  const PassState &passOf(uint64_t pass) const {
    return passes[pass % passes.size()];
  }
  /// Plan device `planDevice`'s jobs on queue `kind`, in plan order.
  const std::vector<size_t> &jobsOf(uint32_t planDevice, QueueKind kind) const {
    return jobLists[planDevice * kNumQueueKinds + int(kind)];
  }
  /// The event set of a slot and shift.
  std::vector<std::unique_ptr<Event>> &eventSet(uint64_t pass, uint32_t shift) {
    return events[(pass % passes.size()) * plan.devices +
                  (options.rotate ? shift : 0)];
  }

  const Plan &plan;
  HostForward &fwd;
  Backend &backend;
  const PipelineOptions options;
  std::vector<std::unique_ptr<Controller>> queues;
  /// Per device: its controllers.
  std::vector<std::vector<Controller *>> onDevice;
  /// The passes in flight share one copy of the device arenas (fwd has
  /// fewer than the slots): a device takes up a pass only once all its
  /// queues are done with the one before.
  bool sharedArenas = false;
  std::vector<std::vector<size_t>> jobLists;
  /// Per slot and shift (slot * devices + shift): the device event of each
  /// plan event, made on the device its recorder runs on.
  std::vector<std::vector<std::unique_ptr<Event>>> events;
  /// The job recording each event (the first, if a broken plan has more).
  std::vector<size_t> recorder;
  /// Per slot and shift like `events`: per job, the event marking its end
  /// for the landing thread (null: not watched).
  std::vector<std::vector<std::unique_ptr<Event>>> landingEvents;
  std::vector<bool> watched; ///< per job: a landing
  std::thread landingThread;
  /// Guarded by the mutex: watched jobs enqueued but not handled yet (job,
  /// pass), and whether the landing thread is handling one now.
  std::deque<std::pair<size_t, uint64_t>> landing;
  bool landingBusy = false;
  std::condition_variable landingWake;

  mutable std::mutex mutex;
  /// waitPass waits here; it reads progress when its watchdog window ends
  /// rather than being woken by every job.
  std::condition_variable queueDone;
  /// Wakes every controller and waitPass (a new pass, a record,
  /// cancellation, shutdown). Call with the mutex held or just after.
  void wakeAll();
  uint64_t stepNumber = 0;       ///< the last pass submitted
  std::vector<PassState> passes; ///< one per slot
  /// Per slot: per event the pass that recorded it last, per gate the pass
  /// it is open for (0: never).
  std::vector<std::vector<uint64_t>> recordedInStep, gateOpenFor;
  uint64_t progress = 0; ///< jobs started plus jobs finished
  unsigned running = 0;
  bool cancelled = false;
  bool shutdown = false;
  Status error;
};

} // namespace rp::runtime

#endif // RP_RUNTIME_PIPELINEEXECUTOR_H
