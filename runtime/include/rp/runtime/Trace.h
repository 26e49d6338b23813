//===- Trace.h - where a staged plan's time goes ----------------*- C++ -*-===//
//
// The executor's timeline: when enabled (PipelineOptions::trace), every job
// of every step gets its start and end, and the host its spans (the step,
// its prologue and epilogue, the optimizer). From it come three things
// rp-run offers:
//
//  * a Chrome trace (rp-run --trace): one track per device queue and one
//    for the host, every job a complete event named by its label;
//  * the busy summary rp-run prints after training: per device the share of
//    the steps' wall time its compute queue ran jobs (the rest is bubble),
//    and its copy queues' shares;
//  * measured per-layer times (rp-run --profile) in the format of
//    docs/hardware-profiles.md, "Measured profiles", with each kernel
//    call's median by op kind and shapes where the devices time calls.
//
// Recording costs two clock reads per job and no lock: each step's slots
// are allocated before its controllers start, each slot written by the one
// controller that runs the job, and read only once the step has ended (the
// executor's mutex orders both). Host spans are a few per step and take a
// mutex, since the async optimizer records its own from another thread.
//
// Times are nanoseconds since the Trace was made (std::chrono::steady_clock),
// written as microseconds in the files.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TRACE_H
#define RP_RUNTIME_TRACE_H

#include "rp/runtime/Device.h"
#include "rp/runtime/Plan.h"
#include "rp/timing/Measured.h"

#include <chrono>
#include <climits>
#include <deque>
#include <functional>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace rp::runtime {

/// One job's run in one step; end < 0: the job did not run (a failed step).
struct JobSpan {
  int64_t start = -1;
  int64_t end = -1;
  /// The device it ran on when the executor renamed the plan's devices
  /// (continuous execution); -1: the plan's.
  int32_t device = -1;
  bool ran() const { return end >= 0; }
  uint32_t deviceOf(const JobDesc &job) const {
    return device >= 0 ? uint32_t(device) : job.device;
  }
};

/// One step's jobs phase (PipelineExecutor::runJobs) and its jobs' spans,
/// indexed like Plan::jobs.
struct StepSpans {
  uint64_t step = 0; ///< the trainer's step number
  int64_t start = 0, end = 0;
  bool ok = true;
  std::vector<JobSpan> jobs;
};

/// A span on the host track: "step", "prologue", "epilogue" (the
/// executor) or "optimizer" (the trainer).
struct HostSpan {
  std::string name;
  uint64_t step = 0;
  int64_t start = 0, end = 0;
};

/// Busy nanoseconds of one device over the steps' jobs phases. h2d is the
/// union of its two upload queues (weights, activations): time its link
/// carried something, not the sum of both.
struct DeviceBusy {
  int64_t compute = 0, h2d = 0, d2h = 0;
};

struct BusySummary {
  uint64_t steps = 0;
  /// The jobs phases of those steps, together; overlapping steps
  /// (continuous execution) count their shared time once.
  int64_t wall = 0;
  int64_t coveredTo = INT64_MIN; ///< the latest step end counted
  std::vector<DeviceBusy> devices;

  /// 100 * busy / wall, 0 without steps.
  double percent(int64_t busy) const;
};

/// Adds `step`'s busy times to `summary` (sized to the plan's devices).
void addStepBusy(const Plan &plan, const StepSpans &step, BusySummary &summary);

/// "rp-run: device 0: compute 61% busy (bubble 39%), h2d 12%, d2h 8%",
/// one line per device, each ending in a newline.
std::string describeBusy(const BusySummary &summary);

class Trace {
public:
  /// `keepSteps`: keep every step's spans (for writeChromeTrace); without
  /// it only the summaries are kept, so a long run stays in constant
  /// memory.
  Trace(const Plan &plan, bool keepSteps);

  Trace(const Trace &) = delete;
  Trace &operator=(const Trace &) = delete;

  /// Nanoseconds since construction.
  int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now() - origin)
        .count();
  }

  /// The number the next step gets (the trainer's, after --resume); each
  /// takeStep() counts up from it.
  void setNextStep(uint64_t step) { nextStep = step; }
  uint64_t takeStep() { return nextStep++; }

  // The executor's side. beginStep returns the step's zeroed slots, one
  // per plan job; endStep folds the oldest step begun and not ended into
  // the summaries. Both are called by the thread running the steps, with
  // the controllers idle or busy with other steps only (continuous
  // execution keeps two steps open).
  JobSpan *beginStep(uint64_t step, int64_t start);
  void endStep(int64_t end, bool ok);

  /// Thread-safe. Kept with keepSteps; always summed per name.
  void addHostSpan(std::string name, uint64_t step, int64_t start, int64_t end);

  const Plan &getPlan() const { return plan; }
  bool keepsSteps() const { return keepSteps; }
  /// Every step's spans (keepSteps only), failed steps included.
  const std::deque<StepSpans> &getSteps() const { return steps; }
  std::vector<HostSpan> getHostSpans() const;
  /// Per host span name: total nanoseconds and how many spans.
  std::map<std::string, std::pair<int64_t, uint64_t>> getHostTotals() const;
  /// The steps that ended ok.
  const BusySummary &getBusy() const { return busy; }
  /// Per plan job, its mean duration in ms over the steps that ended ok,
  /// leaving out the first of them (warm-up: first touches of memory) when
  /// there are more; -1 for a job that never ran.
  std::vector<double> jobMeansMs() const;
  /// How many steps jobMeansMs averages.
  uint64_t meanSteps() const;

  /// Per-call times (rp-run --profile): the executor asks its compute
  /// queues to time every kernel call (Queue::timeCalls) and hands what
  /// they timed to addCallTimes before each endStep, which keeps them with
  /// that step (dropped with a failed one). Calls of other plans are left
  /// out.
  void enableCallTimes() { callTimes = true; }
  bool timesCalls() const { return callTimes; }
  void addCallTimes(const std::vector<CallTime> &calls);
  /// Per (program, call index) of the plan, every timed run in ms over the
  /// steps that ended ok, leaving out the first of them (warm-up) when
  /// there are more.
  using CallSamples =
      std::map<std::pair<uint32_t, uint32_t>, std::vector<double>>;
  CallSamples callTimesMs() const;

private:
  const Plan &plan;
  const bool keepSteps;
  const std::chrono::steady_clock::time_point origin;
  uint64_t nextStep = 0;
  std::deque<StepSpans> steps;
  /// The steps begun and not ended (kept or not), oldest first; a deque
  /// keeps each open step's slots in place.
  std::deque<StepSpans> open;
  BusySummary busy;
  /// Per job: total ns over ok steps, and over the first ok step.
  std::vector<int64_t> jobTotal, jobFirst;
  std::vector<uint64_t> jobRuns, jobFirstRuns;
  bool callTimes = false;
  /// Calls timed in the step not yet ended; those of the first ok step;
  /// those of the later ones.
  CallSamples callPending, callFirst, callRest;
  mutable std::mutex hostMutex;
  std::vector<HostSpan> host;
  std::map<std::string, std::pair<int64_t, uint64_t>> hostTotals;
};

/// Writes `trace` as Chrome trace event JSON (Perfetto, chrome://tracing)
/// to `path`, atomically (a temporary file renamed over it). Needs a trace
/// that kept its steps.
Status writeChromeTrace(const Trace &trace, const std::string &path);

/// The measured profile of `plan` (docs/hardware-profiles.md) from the
/// mean duration of each job (Trace::jobMeansMs; -1: not run), as JSON
/// text: {"hw", "note", "layers": [{"name", "forward_ms", "recompute_ms",
/// "backward_ms"}]}. `steps` is how many steps the means are over (for the
/// note).
Expected<std::string> measuredProfileJson(
    const Plan &plan, const std::vector<double> &jobMs, const std::string &hw,
    uint64_t steps,
    const std::map<std::string, timing::MeasuredOpTime> &ops = {});

/// The measured profile's "ops" (rp/timing/Measured.h) from `calls`
/// (Trace::callTimesMs): the calls grouped by op kind, element type,
/// operand shapes and the attributes that change their work
/// (timing::measuredOpAttrs; a reshape, which launches nothing, left out), each
/// group's median and count. measuredProfileJson writes them.
std::map<std::string, timing::MeasuredOpTime>
measuredOps(const Plan &plan, const Trace::CallSamples &calls);

/// measuredProfileJson written to `path` atomically, with the trace's
/// per-call times as its "ops" where it has them.
Status writeMeasuredProfile(const Trace &trace, const std::string &hw,
                            const std::string &path);

/// Writes what `write` streams to `path` with writeFileAtomic (FileIO.h), so
/// a reader sees the old file or the new one, never half of one. `what`
/// names the file in messages ("trace file").
Status writeFileAtomically(const std::string &path, const std::string &what,
                           const std::function<void(std::ostream &)> &write);

} // namespace rp::runtime

#endif // RP_RUNTIME_TRACE_H
