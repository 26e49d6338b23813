//===- DeviceSpansTest.cpp - traces take job spans from the devices -------===//
//
// A queue that times its jobs itself (Queue::timeJobs; cuda does, with
// cudaEvents) gives the trace its jobs' spans: the executor reads them at
// the end of each traced pass, in the order the queue was given the jobs,
// and puts them on the trace's clock. A queue that does not keeps the
// host's enqueue spans. Checked with a host backend whose compute and
// upload queues pretend to time jobs: each job's span is made up (a
// length the test knows), and the queue refuses a read out of order.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/Trace.h"

#include <gmock/gmock.h>

#include <chrono>
#include <deque>
#include <mutex>

using namespace rp::runtime;
using namespace rp::runtime::test;

namespace {

/// A made-up device span length for job j, in nanoseconds.
int64_t madeUpLength(uint32_t job) { return 1000 + 7 * int64_t(job); }

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Forwards to a host queue; when timed, keeps the jobs begun in order and
/// hands each back once, in that order, with a made-up span.
class TimingQueue final : public Queue {
public:
  TimingQueue(Queue &inner, bool canTime) : inner(inner), canTime(canTime) {}
  uint32_t getDevice() const override { return inner.getDevice(); }
  QueueKind getKind() const override { return inner.getKind(); }
  int getPriority() const override { return inner.getPriority(); }
  Status copy(void *dst, const void *src, size_t bytes,
              CopyKind kind) override {
    return inner.copy(dst, src, bytes, kind);
  }
  Status launch(const Plan &plan, uint32_t program,
                const BufferAddresses &buffers) override {
    return inner.launch(plan, program, buffers);
  }
  Status record(Event &event) override { return inner.record(event); }
  Status wait(Event &event) override { return inner.wait(event); }
  Status synchronize() override { return inner.synchronize(); }
  void beginJob(uint32_t job) override {
    std::lock_guard<std::mutex> lock(mutex);
    if (timing)
      begun.emplace_back(job, steadyNs());
  }
  bool timeJobs() override {
    timing = canTime;
    return canTime;
  }
  bool takeJobTime(uint32_t job, bool wait, int64_t &startNs,
                   int64_t &endNs) override {
    std::lock_guard<std::mutex> lock(mutex);
    ++takes;
    waited += wait;
    if (begun.empty() || begun.front().first != job) {
      ++outOfOrder;
      return false;
    }
    startNs = begun.front().second;
    endNs = startNs + madeUpLength(job);
    begun.pop_front();
    return true;
  }

  std::mutex mutex;
  std::deque<std::pair<uint32_t, int64_t>> begun;
  int takes = 0, waited = 0, outOfOrder = 0;

private:
  Queue &inner;
  bool canTime, timing = false;
};

/// A host backend whose compute and h2d queues time jobs; d2h does not.
class TimingBackend final : public Backend {
public:
  explicit TimingBackend(std::unique_ptr<Backend> host)
      : inner(std::move(host)) {
    for (uint32_t d = 0; d < inner->getNumDevices(); ++d)
      devices.push_back(std::make_unique<TimingDevice>(inner->getDevice(d)));
  }
  const char *getName() const override { return inner->getName(); }
  std::string describe() const override { return inner->describe(); }
  uint32_t getNumDevices() const override { return inner->getNumDevices(); }
  Device &getDevice(uint32_t index) override { return *devices[index]; }
  Expected<void *> allocateHost(size_t bytes) override {
    return inner->allocateHost(bytes);
  }
  void deallocateHost(void *memory) override { inner->deallocateHost(memory); }

  TimingQueue &queue(uint32_t d, QueueKind kind) {
    return *devices[d]->queues[int(kind)];
  }

private:
  struct TimingDevice final : public Device {
    explicit TimingDevice(Device &inner) : inner(inner) {
      for (int k = 0; k < kNumQueueKinds; ++k) {
        QueueKind kind = static_cast<QueueKind>(k);
        queues.push_back(std::make_unique<TimingQueue>(inner.getQueue(kind),
                                                       kind != QueueKind::d2h));
      }
    }
    uint32_t getIndex() const override { return inner.getIndex(); }
    Expected<void *> allocate(size_t bytes) override {
      return inner.allocate(bytes);
    }
    void deallocate(void *memory) override { inner.deallocate(memory); }
    bool isHostAccessible() const override { return inner.isHostAccessible(); }
    Queue &getQueue(QueueKind kind) override { return *queues[int(kind)]; }
    Expected<std::unique_ptr<Event>> createEvent() override {
      return inner.createEvent();
    }
    Device &inner;
    std::vector<std::unique_ptr<TimingQueue>> queues;
  };
  std::unique_ptr<Backend> inner;
  std::vector<std::unique_ptr<TimingDevice>> devices;
};

struct Timed {
  std::unique_ptr<Plan> plan;
  std::unique_ptr<TimingBackend> backend;
  std::unique_ptr<HostForward> fwd;
};

Timed open(const TwoStagePlan &t, const char *file) {
  Timed r;
  Expected<Plan> plan = writeAndLoad(t.b.plan, file);
  EXPECT_TRUE(plan) << plan.getStatus().toString();
  if (!plan)
    return r;
  r.plan = std::make_unique<Plan>(std::move(*plan));
  auto host = createBackend("host", backendOptions(r.plan->devices, 2));
  EXPECT_TRUE(host) << host.getStatus().toString();
  if (!host)
    return r;
  r.backend = std::make_unique<TimingBackend>(std::move(*host));
  auto fwd = HostForward::create(*r.plan, *r.backend);
  EXPECT_TRUE(fwd) << fwd.getStatus().toString();
  if (fwd)
    r.fwd = std::move(*fwd);
  return r;
}

TEST(DeviceSpans, TimedQueuesGiveTheTraceTheirSpans) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Timed r = open(t, "device-spans.rpplan");
  ASSERT_TRUE(r.fwd);
  ASSERT_TRUE(r.fwd->initParameters(5).isOk());
  Trace trace(*r.plan, true);
  PipelineOptions options;
  options.trace = &trace;
  auto exec = PipelineExecutor::create(*r.plan, *r.fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(2);
  const unsigned steps = 3;
  for (unsigned step = 0; step < steps; ++step) {
    ASSERT_TRUE(
        r.fwd->setInput("x", randomArray({int64_t(t.M * t.rows), 4}, step))
            .isOk());
    Status s = (*exec)->step(hostPool);
    ASSERT_TRUE(s.isOk()) << s.toString();
  }
  ASSERT_EQ(trace.getSteps().size(), steps);
  int timedJobs = 0;
  for (const StepSpans &step : trace.getSteps())
    for (size_t i = 0; i < r.plan->jobs.size(); ++i) {
      const JobSpan &span = step.jobs[i];
      ASSERT_TRUE(span.ran()) << "job " << i;
      if (r.plan->jobs[i].queue == QueueKind::d2h) {
        // Not timed by its queue: the host's span, never a made-up one.
        EXPECT_GE(span.end, span.start);
        continue;
      }
      EXPECT_EQ(span.end - span.start, madeUpLength(uint32_t(i)))
          << "job " << i << " of step " << step.step;
      // On the trace's clock: inside the run, not at steady_clock's.
      EXPECT_GE(span.start, 0);
      EXPECT_LE(span.end, trace.now());
      ++timedJobs;
    }
  EXPECT_GT(timedJobs, 0);
  for (uint32_t d = 0; d < r.plan->devices; ++d)
    for (int k = 0; k < kNumQueueKinds; ++k) {
      TimingQueue &q = r.backend->queue(d, static_cast<QueueKind>(k));
      EXPECT_TRUE(q.begun.empty()) << "device " << d << " queue " << k;
      EXPECT_EQ(q.outOfOrder, 0);
      EXPECT_EQ(q.waited, q.takes);
      if (k == int(QueueKind::d2h))
        EXPECT_EQ(q.takes, 0);
    }
}

// Without a trace nothing is timed: the queues are never asked.
TEST(DeviceSpans, UntracedRunsTimeNothing) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  Timed r = open(t, "device-spans-untraced.rpplan");
  ASSERT_TRUE(r.fwd);
  ASSERT_TRUE(r.fwd->initParameters(5).isOk());
  auto exec = PipelineExecutor::create(*r.plan, *r.fwd, PipelineOptions());
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(2);
  ASSERT_TRUE(r.fwd->setInput("x", randomArray({4, 4}, 1)).isOk());
  ASSERT_TRUE((*exec)->step(hostPool).isOk());
  for (uint32_t d = 0; d < r.plan->devices; ++d)
    for (int k = 0; k < kNumQueueKinds; ++k) {
      TimingQueue &q = r.backend->queue(d, static_cast<QueueKind>(k));
      EXPECT_TRUE(q.begun.empty());
      EXPECT_EQ(q.takes, 0);
    }
}

// A failed pass is read without waiting (its jobs may never run on a
// device), every job it began, so the queues stay in step.
TEST(DeviceSpans, AFailedPassIsReadWithoutWaiting) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  PlanBuilder &b = t.b;
  uint32_t x0 = b.plan.jobs[t.jIn[0]].copies[0].dst;
  uint32_t h0 = b.plan.jobs[t.jOut0[0]].copies[0].src;
  b.plan.jobs[t.jF0[1]].program =
      b.program("bad", {call(OpKind::unary_grad, {x0, x0}, {h0}, {99})});
  Timed r = open(t, "device-spans-fail.rpplan");
  ASSERT_TRUE(r.fwd);
  Trace trace(*r.plan, true);
  PipelineOptions options;
  options.trace = &trace;
  auto exec = PipelineExecutor::create(*r.plan, *r.fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ASSERT_TRUE(r.fwd->setInput("x", randomArray({4, 4}, 1)).isOk());
  ASSERT_TRUE((*exec)->runJobs().failed());
  int takes = 0;
  for (uint32_t d = 0; d < r.plan->devices; ++d)
    for (int k = 0; k < kNumQueueKinds; ++k) {
      TimingQueue &q = r.backend->queue(d, static_cast<QueueKind>(k));
      EXPECT_TRUE(q.begun.empty()) << "device " << d << " queue " << k;
      EXPECT_EQ(q.outOfOrder, 0);
      EXPECT_EQ(q.waited, 0);
      takes += q.takes;
    }
  EXPECT_GT(takes, 0);
}

} // namespace
