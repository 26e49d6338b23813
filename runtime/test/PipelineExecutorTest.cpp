//===- PipelineExecutorTest.cpp - the staged executor on host devices -----===//
//
// The executor runs the queues of two devices concurrently, yet its results
// must equal the sequential computation bit for bit (events order every
// buffer access); a failing job or a stalled queue must end the step with
// a message, never a hang. These tests also run under ThreadSanitizer
// (scripts/test.sh), which checks that the events really order the buffers.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/host/HostDevice.h"
#include "rp/runtime/host/Kernels.h"

#include <gmock/gmock.h>

#include <cstring>
#include <random>
#include <thread>

using namespace rp::runtime;
using namespace rp::runtime::test;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// A loaded two-stage plan with its buffers.
struct Loaded {
  std::unique_ptr<Plan> plan;
  /// The host devices, `threads` split over them; outlive the buffers.
  std::unique_ptr<host::HostBackend> backend;
  std::unique_ptr<HostForward> fwd;
};

Loaded load(const Plan &built, const std::string &name, unsigned threads = 2,
            uint64_t seed = 7) {
  Loaded l;
  Expected<Plan> plan = writeAndLoad(built, name);
  EXPECT_TRUE(plan) << plan.getStatus().toString();
  if (!plan)
    return l;
  l.plan = std::make_unique<Plan>(std::move(*plan));
  auto backend =
      host::HostBackend::create(backendOptions(l.plan->devices, threads));
  EXPECT_TRUE(backend) << backend.getStatus().toString();
  if (!backend)
    return l;
  l.backend = std::move(*backend);
  auto fwd = HostForward::create(*l.plan, *l.backend);
  EXPECT_TRUE(fwd) << fwd.getStatus().toString();
  if (!fwd)
    return l;
  l.fwd = std::move(*fwd);
  EXPECT_TRUE(l.fwd->initParameters(seed).isOk());
  return l;
}

/// Host buffers for a plan that validation would refuse: the plan is
/// loaded valid, then `breakIt` edits the in-memory copy.
template <typename Edit>
Loaded loadBroken(const Plan &built, const std::string &name, Edit breakIt,
                  unsigned threads = 2) {
  Loaded l = load(built, name, threads);
  if (!l.plan)
    return l;
  breakIt(*l.plan);
  l.fwd.reset();
  auto fwd = HostForward::create(*l.plan, *l.backend);
  EXPECT_TRUE(fwd) << fwd.getStatus().toString();
  if (fwd)
    l.fwd = std::move(*fwd);
  return l;
}

/// y and z of the two-stage plan, computed microbatch by microbatch with
/// the host kernels on one thread.
void reference(const TwoStagePlan &t, const HostForward &fwd,
               std::vector<float> &y, std::vector<float> &z,
               unsigned slot = 0) {
  ThreadPool pool(1);
  int64_t R = t.rows, D = t.dim;
  std::vector<float> w1x2(D * D), t0(R * D), h(R * D), t1(R * D);
  TensorRef w0 = fwd.buffer(t.W0, slot), w1 = fwd.buffer(t.W1, slot),
            x = fwd.buffer(t.X, slot);
  TensorRef w1x2Ref{w1x2.data(), DType::f32, {D, D}};
  ASSERT_TRUE(
      host::binary(pool, host::BinaryKind::add, w1, w1, w1x2Ref).isOk());
  y.assign(t.M * R * D, 0.0f);
  for (unsigned m = 0; m < t.M; ++m) {
    TensorRef xm{x.as<float>() + m * R * D, DType::f32, {R, D}};
    TensorRef t0Ref{t0.data(), DType::f32, {R, D}};
    TensorRef hRef{h.data(), DType::f32, {R, D}};
    TensorRef t1Ref{t1.data(), DType::f32, {R, D}};
    TensorRef ym{y.data() + m * R * D, DType::f32, {R, D}};
    ASSERT_TRUE(host::matmul(pool, xm, w0, false, false, t0Ref).isOk());
    ASSERT_TRUE(
        host::binary(pool, host::BinaryKind::add, t0Ref, xm, hRef).isOk());
    ASSERT_TRUE(host::matmul(pool, hRef, w1x2Ref, false, false, t1Ref).isOk());
    ASSERT_TRUE(host::unary(pool, host::UnaryKind::relu, t1Ref, ym).isOk());
  }
  z.assign(y.size(), 0.0f);
  TensorRef yRef{y.data(), DType::f32, {int64_t(t.M) * R, D}};
  TensorRef zRef{z.data(), DType::f32, yRef.shape};
  ASSERT_TRUE(
      host::binary(pool, host::BinaryKind::mul, yRef, yRef, zRef).isOk());
}

bool sameBits(const TensorRef &a, const std::vector<float> &b) {
  return a.bytes() == b.size() * sizeof(float) &&
         std::memcmp(a.data, b.data(), a.bytes()) == 0;
}

Expected<std::unique_ptr<PipelineExecutor>>
executor(Loaded &l,
         std::chrono::milliseconds window = std::chrono::milliseconds(60000)) {
  PipelineOptions options;
  options.progressWindow = window;
  return PipelineExecutor::create(*l.plan, *l.fwd, options);
}

TEST(PipelineTest, TwoDevicesEqualTheSequentialComputation) {
  TwoStagePlan t = makeTwoStagePlan(4, 8, 32);
  for (unsigned threads : {1u, 2u, 5u}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    Loaded l = load(t.b.plan, "equal.rpplan", threads);
    ASSERT_TRUE(l.fwd);
    auto exec = executor(l);
    ASSERT_TRUE(exec) << exec.getStatus().toString();
    EXPECT_EQ(l.backend->getThreadsPerDevice(), std::max(1u, threads / 2));
    // Two devices x (compute, weight_h2d, activation_h2d, d2h).
    EXPECT_EQ((*exec)->getNumQueues(), 8u);
    ThreadPool hostPool(threads);
    // A new input every step: nothing of one step may leak into the next.
    for (uint64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(l.fwd
                      ->setInput("x", randomArray({int64_t(t.M * t.rows),
                                                   int64_t(t.dim)},
                                                  100 + step))
                      .isOk());
      Status s = (*exec)->step(hostPool);
      ASSERT_TRUE(s.isOk()) << s.toString();
      std::vector<float> y, z;
      reference(t, *l.fwd, y, z);
      EXPECT_TRUE(sameBits(l.fwd->buffer(t.Y), y)) << "step " << step;
      EXPECT_TRUE(sameBits(l.fwd->buffer(t.Z), z)) << "step " << step;
    }
  }
}

TEST(PipelineTest, ManyShortSteps) {
  // Small jobs and many steps: the most interleavings of controllers, the
  // most chances for ThreadSanitizer to see an unordered access.
  TwoStagePlan t = makeTwoStagePlan(8, 2, 4);
  Loaded l = load(t.b.plan, "many.rpplan", 4);
  ASSERT_TRUE(l.fwd);
  auto exec = executor(l);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(2);
  for (uint64_t step = 0; step < 40; ++step) {
    ASSERT_TRUE(l.fwd->setInput("x", randomArray({16, 4}, step)).isOk());
    Status s = (*exec)->step(hostPool);
    ASSERT_TRUE(s.isOk()) << s.toString();
    std::vector<float> y, z;
    reference(t, *l.fwd, y, z);
    ASSERT_TRUE(sameBits(l.fwd->buffer(t.Z), z)) << "step " << step;
  }
}

/// Runs 12 passes of `t` continuously, two in flight with the devices
/// swapped every other pass, on `copies` copies of the device arenas, and
/// checks each pass's results bit for bit against its own inputs.
void runTwelvePasses(TwoStagePlan &t, const std::string &name, unsigned copies,
                     Trace *trace = nullptr) {
  Expected<Plan> plan = writeAndLoad(t.b.plan, name);
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto backend = host::HostBackend::create(backendOptions(2, 4));
  ASSERT_TRUE(backend) << backend.getStatus().toString();
  ForwardOptions fo;
  fo.slots = 2;
  fo.rotate = true;
  fo.arenaCopies = copies;
  auto fwd = HostForward::create(*plan, **backend, fo);
  ASSERT_TRUE(fwd) << fwd.getStatus().toString();
  ASSERT_TRUE((*fwd)->initParameters(7).isOk());
  EXPECT_TRUE((*fwd)->rotates()) << (*fwd)->getRotationBlocker();
  EXPECT_EQ((*fwd)->getArenaCopies(), copies);
  // The slots' host buffers are apart; their device buffers are apart
  // with a copy of the arenas each, the same bytes with one.
  EXPECT_NE((*fwd)->buffer(t.X, 0).data, (*fwd)->buffer(t.X, 1).data);
  for (uint32_t b = 0; b < plan->buffers.size(); ++b)
    if (!plan->buffers[b].onHost()) {
      EXPECT_EQ((*fwd)->buffer(b, 0).data == (*fwd)->buffer(b, 1).data,
                copies == 1)
          << plan->buffers[b].name;
    }
  PipelineOptions options;
  options.slots = 2;
  options.rotate = true;
  options.trace = trace;
  auto exec = PipelineExecutor::create(*plan, **fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  // Every device's four queues, whichever plan device lands on it.
  EXPECT_EQ((*exec)->getNumQueues(), 8u);
  ThreadPool hostPool(2);
  std::vector<uint64_t> number(12);
  auto check = [&](unsigned p) {
    ASSERT_TRUE((*exec)->waitPass(number[p]).isOk()) << "pass " << p;
    unsigned slot = unsigned(number[p] % 2);
    ASSERT_TRUE((*fwd)->runProgram(hostPool, plan->epilogue, slot).isOk());
    std::vector<float> y, z;
    reference(t, **fwd, y, z, slot);
    EXPECT_TRUE(sameBits((*fwd)->buffer(t.Z, slot), z)) << "pass " << p;
  };
  for (unsigned p = 0; p < number.size(); ++p) {
    if (p >= 2)
      check(p - 2);
    uint64_t next = (*exec)->nextStepNumber();
    unsigned slot = unsigned(next % 2);
    ASSERT_TRUE(
        (*fwd)
            ->setInput(
                "x",
                randomArray({int64_t(t.M * t.rows), int64_t(t.dim)}, 300 + p),
                slot)
            .isOk());
    if (plan->prologue >= 0) {
      ASSERT_TRUE((*fwd)->runProgram(hostPool, plan->prologue, slot).isOk());
    }
    number[p] = (*exec)->submitPass(p % 2, p);
    EXPECT_EQ(number[p], next);
  }
  check(number.size() - 2);
  check(number.size() - 1);
}

TEST(PipelineTest, PassesOverlapOnTwoSlotsWithTheDevicesRenamed) {
  // Continuous execution: two passes in flight, each on its own slot of
  // buffers, every other pass with the two devices swapped. Each pass's
  // results are its own inputs' computation, bit for bit.
  TwoStagePlan t = makeTwoStagePlan(4, 2, 4);
  runTwelvePasses(t, "passes.rpplan", 2);
}

TEST(PipelineTest, PassesOnOneCopyOfTheArenasWaitForTheirDevice) {
  // Two passes in flight on one copy of the device arenas: the results
  // are still each pass's own, and on every device no job of pass p+1
  // starts before the device's last job of pass p has ended (on the host
  // backend a job's span is its work). Pass p+1 still starts before pass
  // p has ended (device 1's part of it runs on while device 0 starts the
  // next pass), in at least one of the eleven pairs.
  TwoStagePlan t = makeTwoStagePlan(4, 2, 4);
  Trace trace(t.b.plan, /*keepSteps=*/true);
  runTwelvePasses(t, "shared.rpplan", 1, &trace);
  const std::deque<StepSpans> &steps = trace.getSteps();
  ASSERT_EQ(steps.size(), 12u);
  unsigned overlapped = 0, compared = 0;
  for (size_t p = 0; p + 1 < steps.size(); ++p) {
    int64_t end = 0, nextStart = INT64_MAX;
    for (uint32_t d = 0; d < 2; ++d) {
      int64_t last = -1, first = INT64_MAX;
      for (size_t j = 0; j < t.b.plan.jobs.size(); ++j) {
        const JobDesc &job = t.b.plan.jobs[j];
        const JobSpan &a = steps[p].jobs[j], &b = steps[p + 1].jobs[j];
        ASSERT_TRUE(a.ran() && b.ran());
        if (a.deviceOf(job) == d)
          last = std::max(last, a.end);
        if (b.deviceOf(job) == d)
          first = std::min(first, b.start);
        end = std::max(end, a.end);
        nextStart = std::min(nextStart, b.start);
      }
      if (last < 0 || first == INT64_MAX)
        continue;
      ++compared;
      EXPECT_GE(first, last) << "device " << d << " starts pass " << p + 1
                             << " before its part of pass " << p << " ends";
    }
    overlapped += nextStart < end;
  }
  EXPECT_EQ(compared, 22u);
  // More copies than slots is a caller's mistake, named.
  Expected<Plan> plan = writeAndLoad(t.b.plan, "copies.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto backend = host::HostBackend::create(backendOptions(2, 2));
  ASSERT_TRUE(backend) << backend.getStatus().toString();
  ForwardOptions two;
  two.arenaCopies = 2;
  auto refused = HostForward::create(*plan, **backend, two);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.getStatus().getMessage(),
              HasSubstr("2 copies of the device arenas for 1 buffer slot(s)"));
  // Whether the passes overlap at all depends on the OS's scheduling of
  // the device threads; the lit test shared-arenas.test retries for it.
  RecordProperty("overlapped", int(overlapped));
}

TEST(PipelineTest, WatchdogNamesAQueueWaitingForItsDevicesPreviousPass) {
  // One copy of the arenas, two passes in flight, pass 1 stalled on device
  // 1's last download (a gate the host never opens): device 1's other
  // queues, done with pass 1, wait for the device before pass 2, and the
  // stall message says so beside the gate; device 0, done with pass 1,
  // runs its part of pass 2 through.
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Expected<Plan> plan = writeAndLoad(t.b.plan, "shared-stall.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto backend = host::HostBackend::create(backendOptions(2, 2));
  ASSERT_TRUE(backend) << backend.getStatus().toString();
  ForwardOptions fo;
  fo.slots = 2;
  fo.arenaCopies = 1;
  auto fwd = HostForward::create(*plan, **backend, fo);
  ASSERT_TRUE(fwd) << fwd.getStatus().toString();
  PipelineOptions options;
  options.slots = 2;
  options.progressWindow = std::chrono::milliseconds(300);
  options.gates = 1;
  options.gatesOf.resize(plan->jobs.size());
  options.gatesOf[t.jOut1.back()] = {0};
  auto exec = PipelineExecutor::create(*plan, **fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  uint64_t first = (*exec)->submitPass(0, 0);
  uint64_t second = (*exec)->submitPass(0, 1);
  Status s = (*exec)->waitPass(first);
  ASSERT_EQ(s.getCode(), StatusCode::DeadlineExceeded) << s.toString();
  EXPECT_THAT(s.getMessage(),
              HasSubstr("device 1 d2h queue waits for the host to open gate 0 "
                        "before job #" +
                        std::to_string(t.jOut1.back())));
  EXPECT_THAT(s.getMessage(),
              HasSubstr("device 1 compute queue waits for the device's other "
                        "queues to finish pass 1 before taking up pass 2 (its "
                        "passes share one copy of the arenas)"));
  EXPECT_THAT(s.getMessage(), Not(HasSubstr("device 0")));
  EXPECT_EQ((*exec)->waitPass(second).getCode(), StatusCode::DeadlineExceeded);
}

TEST(PipelineTest, LandedJobsAreHandledWhileTheStepRuns) {
  // The downloads of y land one by one: when each is handled its slice of
  // y is final, each is handled once per step, and the step returns only
  // after all of them.
  TwoStagePlan t = makeTwoStagePlan(4, 2, 4);
  Loaded l = load(t.b.plan, "landed.rpplan", 2);
  ASSERT_TRUE(l.fwd);
  PipelineOptions options;
  options.landings = t.jOut1;
  size_t slice = size_t(t.rows) * t.dim;
  std::vector<float> seen(t.M * slice, 0.0f);
  std::vector<unsigned> calls(t.b.plan.jobs.size(), 0);
  options.onLanded = [&](size_t job, uint64_t) {
    ++calls[job];
    unsigned m = l.plan->jobs[job].microbatch;
    const float *y = l.fwd->buffer(t.Y).as<float>();
    std::copy(y + m * slice, y + (m + 1) * slice, seen.begin() + m * slice);
    return Status::ok();
  };
  auto exec = PipelineExecutor::create(*l.plan, *l.fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(2);
  for (uint64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(l.fwd->setInput("x", randomArray({8, 4}, 30 + step)).isOk());
    Status s = (*exec)->step(hostPool);
    ASSERT_TRUE(s.isOk()) << s.toString();
    EXPECT_TRUE(sameBits(l.fwd->buffer(t.Y), seen)) << "step " << step;
    for (size_t j = 0; j < calls.size(); ++j) {
      bool watched = std::count(t.jOut1.begin(), t.jOut1.end(), j);
      EXPECT_EQ(calls[j], watched ? step + 1 : 0) << "job " << j;
    }
  }
}

TEST(PipelineTest, AFailedLandingFailsTheStep) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Loaded l = load(t.b.plan, "landed-bad.rpplan", 2);
  ASSERT_TRUE(l.fwd);
  PipelineOptions options;
  options.landings = {t.jOut0[1]};
  options.onLanded = [](size_t, uint64_t) {
    return invalidArgument("no room");
  };
  auto exec = PipelineExecutor::create(*l.plan, *l.fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(2);
  ASSERT_TRUE(l.fwd->setInput("x", randomArray({6, 4}, 1)).isOk());
  Status s = (*exec)->step(hostPool);
  ASSERT_TRUE(s.failed());
  EXPECT_THAT(s.getMessage(), HasSubstr("after job #"));
  EXPECT_THAT(s.getMessage(), HasSubstr("'OUT0 mb1' landed: no room"));
  // The next step starts fresh and fails the same way, without a hang.
  EXPECT_TRUE((*exec)->step(hostPool).failed());
}

TEST(PipelineTest, GatedJobsWaitForTheHost) {
  // The weight uploads wait for gates: opened from another thread while
  // the step runs, the step finishes with the right results; never opened,
  // the watchdog names the gate.
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Loaded l = load(t.b.plan, "gated.rpplan", 2);
  ASSERT_TRUE(l.fwd);
  PipelineOptions options;
  options.progressWindow = std::chrono::milliseconds(300);
  options.gates = 2;
  options.gatesOf.resize(l.plan->jobs.size());
  options.gatesOf[t.jUp0] = {0};
  options.gatesOf[t.jUp1] = {1};
  auto exec = PipelineExecutor::create(*l.plan, *l.fwd, options);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(2);
  ASSERT_TRUE(l.fwd->setInput("x", randomArray({6, 4}, 3)).isOk());
  uint64_t next = (*exec)->nextStepNumber();
  (*exec)->openGate(0, next);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (*exec)->openGate(1, next);
  });
  Status s = (*exec)->step(hostPool);
  opener.join();
  ASSERT_TRUE(s.isOk()) << s.toString();
  std::vector<float> y, z;
  reference(t, *l.fwd, y, z);
  EXPECT_TRUE(sameBits(l.fwd->buffer(t.Z), z));
  // The next step: gate 1 is open only for the step before.
  (*exec)->openGate(0, (*exec)->nextStepNumber());
  s = (*exec)->step(hostPool);
  ASSERT_TRUE(s.failed());
  EXPECT_EQ(s.getCode(), StatusCode::DeadlineExceeded);
  EXPECT_THAT(s.getMessage(),
              HasSubstr("device 1 weight_h2d queue waits for the host to "
                        "open gate 1 before job #"));
}

TEST(PipelineTest, FailingJobStopsTheStep) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  // Microbatch 1 of stage 0 runs a kernel that fails when it runs (an
  // unknown unary gradient kind passes the loader).
  PlanBuilder &b = t.b;
  uint32_t x0 = b.plan.jobs[t.jIn[0]].copies[0].dst;
  uint32_t h0 = b.plan.jobs[t.jOut0[0]].copies[0].src;
  uint32_t bad =
      b.program("bad", {call(OpKind::unary_grad, {x0, x0}, {h0}, {99})});
  b.plan.jobs[t.jF0[1]].program = bad;
  Loaded l = load(b.plan, "failing.rpplan");
  ASSERT_TRUE(l.fwd);
  auto exec = executor(l);
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ThreadPool hostPool(1);
  ASSERT_TRUE(l.fwd->setInput("x", randomArray({6, 4}, 1)).isOk());
  // Device 1 waits for events microbatch 1 never records: cancellation,
  // not the (60 s) watchdog, must release it.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status s = (*exec)->step(hostPool);
    EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << s.toString();
    EXPECT_THAT(s.getMessage(),
                HasSubstr("job #" + std::to_string(t.jF0[1]) +
                          " 'F0 mb1' on the device 0 compute queue: program "
                          "'bad', call #0 (unary_grad)"));
    EXPECT_THAT(s.getMessage(), HasSubstr("unknown unary gradient kind"));
  }
}

TEST(PipelineTest, FailingPrologueStopsBeforeTheJobs) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.programs[uint32_t(t.b.plan.prologue)].calls[0] =
      call(OpKind::unary_grad, {t.W1, t.W1}, {t.Z}, {42});
  Loaded l = load(t.b.plan, "prologue.rpplan");
  ASSERT_TRUE(l.fwd);
  auto exec = executor(l);
  ASSERT_TRUE(exec);
  ThreadPool hostPool(1);
  Status s = (*exec)->step(hostPool);
  EXPECT_THAT(s.getMessage(), HasSubstr("the prologue: program 'prologue'"));
}

TEST(PipelineTest, WatchdogNamesTheQueueWaitingForAMissingRecord) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  uint32_t e = t.eOut0[1];
  size_t job = t.jOut0[1];
  Loaded l = loadBroken(t.b.plan, "stall.rpplan",
                        [&](Plan &p) { p.jobs[job].records.clear(); });
  ASSERT_TRUE(l.fwd);
  // The loader would have refused it.
  EXPECT_TRUE(checkPlanEvents(*l.plan).failed());
  auto exec = executor(l, std::chrono::milliseconds(200));
  ASSERT_TRUE(exec) << exec.getStatus().toString();
  ASSERT_TRUE(l.fwd->setInput("x", randomArray({6, 4}, 1)).isOk());
  // Twice: a stalled step leaves the executor ready for the next one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status s = (*exec)->runJobs();
    ASSERT_EQ(s.getCode(), StatusCode::DeadlineExceeded) << s.toString();
    EXPECT_EQ(exitCode(s), 2);
    const std::string &msg = s.getMessage();
    EXPECT_THAT(msg, HasSubstr("no progress for 200 ms"));
    EXPECT_THAT(msg,
                HasSubstr("device 1 activation_h2d queue waits for event " +
                          std::to_string(e) + " before job #" +
                          std::to_string(t.jIn1[1]) +
                          " 'IN1 mb1' (no job records event " +
                          std::to_string(e) + ")"));
    // Device 0's compute queue reuses h0 only after that download.
    EXPECT_THAT(msg, HasSubstr("device 0 compute queue waits for event " +
                               std::to_string(e) + " before job #" +
                               std::to_string(t.jF0[2]) + " 'F0 mb2'"));
  }
}

TEST(PipelineTest, WatchdogNamesTheRecorderOfACycle) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  uint32_t e = t.eF1[1];
  size_t up = t.jUp1;
  Loaded l = loadBroken(t.b.plan, "cycle.rpplan",
                        [&](Plan &p) { p.jobs[up].waits.push_back(e); });
  ASSERT_TRUE(l.fwd);
  auto exec = executor(l, std::chrono::milliseconds(200));
  ASSERT_TRUE(exec);
  Status s = (*exec)->runJobs();
  ASSERT_EQ(s.getCode(), StatusCode::DeadlineExceeded) << s.toString();
  EXPECT_THAT(s.getMessage(),
              HasSubstr("device 1 weight_h2d queue waits for event " +
                        std::to_string(e) + " before job #" +
                        std::to_string(up) +
                        " 'UP s1' (event recorded by job #" +
                        std::to_string(t.jF1[1]) + " 'F1 mb1', not run yet)"));
}

TEST(PipelineTest, WatchdogStopsAnUncheckedPlanFile) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.jobs[t.jF1[0]].records.clear();
  EXPECT_FALSE(writeAndLoad(t.b.plan, "unchecked.rpplan"));
  LoadOptions unchecked;
  unchecked.checkEvents = false;
  Expected<Plan> plan = writeAndLoad(t.b.plan, "unchecked.rpplan", unchecked);
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto fwd = HostForward::create(*plan);
  ASSERT_TRUE(fwd);
  PipelineOptions options;
  options.progressWindow = std::chrono::milliseconds(100);
  auto exec = PipelineExecutor::create(*plan, **fwd, options);
  ASSERT_TRUE(exec);
  ThreadPool hostPool(1);
  Status s = (*exec)->step(hostPool);
  EXPECT_EQ(s.getCode(), StatusCode::DeadlineExceeded) << s.toString();
  EXPECT_THAT(s.getMessage(),
              HasSubstr("device 1 d2h queue waits for event " +
                        std::to_string(t.eF1[0]) + " before job #" +
                        std::to_string(t.jOut1[0]) + " 'OUT1 mb0'"));
}

TEST(PipelineTest, RefusesWhatItCannotRun) {
  PlanBuilder b(1, 1, false);
  uint32_t x = b.buffer("x", {2});
  b.run(0, b.program("p", {call(OpKind::relu, {x}, {x})}), {}, {}, "");
  Loaded l = load(b.plan, "unstaged-exec.rpplan", 1);
  ASSERT_TRUE(l.fwd);
  auto exec = executor(l);
  ASSERT_FALSE(exec);
  EXPECT_THAT(exec.getStatus().getMessage(), HasSubstr("runs staged plans"));

  // A staged plan built without the loader gets the loader's job checks.
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  Loaded m = loadBroken(t.b.plan, "bad-exec.rpplan",
                        [&](Plan &p) { p.jobs[t.jIn[1]].records = {999}; });
  ASSERT_TRUE(m.fwd);
  auto bad = executor(m);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.getStatus().getMessage(),
              HasSubstr("'IN mb1' records event 999"));
}

} // namespace
