//===- PlanValidationTest.cpp - loading staged plans ----------------------===//
//
// loadPlan must refuse every staged plan the executor could not run to the
// end, naming the job (index and label) and, for the event rules, the
// queue and the event; and it must read every field of a good one.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <sstream>

using namespace rp::runtime;
using namespace rp::runtime::test;
using ::testing::HasSubstr;

namespace {

/// Loads `plan`, expecting the loader to refuse it; gives the message.
std::string refusal(const Plan &plan, const std::string &name) {
  Expected<Plan> loaded = writeAndLoad(plan, name + ".rpplan");
  EXPECT_FALSE(loaded) << name << " was accepted";
  if (loaded)
    return "";
  EXPECT_EQ(loaded.getStatus().getCode(), StatusCode::InvalidFormat);
  return loaded.getStatus().getMessage();
}

std::string num(uint64_t v) { return std::to_string(v); }

TEST(PlanValidationTest, StagedPlanRoundTrips) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Expected<Plan> plan = writeAndLoad(t.b.plan, "roundtrip.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  EXPECT_TRUE(plan->staged);
  EXPECT_EQ(plan->devices, 2u);
  EXPECT_EQ(plan->microbatches, 3u);
  EXPECT_EQ(plan->schedule, "test");
  EXPECT_EQ(plan->prologue, t.b.plan.prologue);
  EXPECT_EQ(plan->epilogue, t.b.plan.epilogue);
  EXPECT_EQ(plan->events, t.b.plan.events);
  ASSERT_EQ(plan->jobs.size(), t.b.plan.jobs.size());
  for (size_t i = 0; i < plan->jobs.size(); ++i) {
    const JobDesc &got = plan->jobs[i], &want = t.b.plan.jobs[i];
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.label, want.label);
    EXPECT_EQ(got.queue, want.queue);
    EXPECT_EQ(got.device, want.device);
    EXPECT_EQ(got.waits, want.waits);
    EXPECT_EQ(got.records, want.records);
    ASSERT_EQ(got.copies.size(), want.copies.size());
    for (size_t k = 0; k < got.copies.size(); ++k) {
      EXPECT_EQ(got.copies[k].src, want.copies[k].src);
      EXPECT_EQ(got.copies[k].srcOffset, want.copies[k].srcOffset);
      EXPECT_EQ(got.copies[k].dst, want.copies[k].dst);
      EXPECT_EQ(got.copies[k].dstOffset, want.copies[k].dstOffset);
      EXPECT_EQ(got.copies[k].bytes, want.copies[k].bytes);
    }
  }
  for (size_t i = 0; i < plan->buffers.size(); ++i)
    EXPECT_EQ(plan->buffers[i].device, t.b.plan.buffers[i].device);
}

TEST(PlanValidationTest, RefusesRemovedRecordAsDeadlock) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  // The download of microbatch 1 on device 0 no longer signals device 1.
  uint32_t e = t.eOut0[1];
  t.b.plan.jobs[t.jOut0[1]].records.clear();
  std::string msg = refusal(t.b.plan, "removed-record");
  EXPECT_THAT(msg, HasSubstr("deadlock"));
  // Both queues that read after that download are named.
  EXPECT_THAT(msg, HasSubstr("the device 0 compute queue stops before job #" +
                             num(t.jF0[2]) +
                             " 'F0 mb2', which waits for "
                             "event " +
                             num(e) + ", and no job records event " + num(e)));
  EXPECT_THAT(msg, HasSubstr("also stuck: "));
  EXPECT_THAT(msg,
              HasSubstr("the device 1 activation_h2d queue before job #" +
                        num(t.jIn1[1]) + " 'IN1 mb1' (event " + num(e) + ")"));
  EXPECT_THAT(msg, HasSubstr("removed-record.rpplan: "));
}

TEST(PlanValidationTest, RefusesCycleAsDeadlock) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  // Device 1's weight upload waits for its own last forward, which waits
  // for the upload.
  t.b.plan.jobs[t.jUp1].waits.push_back(t.eF1[1]);
  std::string msg = refusal(t.b.plan, "cycle");
  EXPECT_THAT(msg, HasSubstr("deadlock"));
  EXPECT_THAT(msg, HasSubstr("device 1 weight_h2d queue stops before job #" +
                             num(t.jUp1) + " 'UP s1', which waits for event " +
                             num(t.eF1[1]) + ", recorded by job #" +
                             num(t.jF1[1]) + " 'F1 mb1'"));
  EXPECT_THAT(msg, HasSubstr("a cycle"));
}

TEST(PlanValidationTest, RefusesQueueOrderThatDeadlocks) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  // A queue runs its jobs in plan order: a first job waiting for the second
  // one's event never starts.
  std::swap(t.b.plan.jobs[t.jF0[0]], t.b.plan.jobs[t.jF0[1]]);
  std::string msg = refusal(t.b.plan, "order");
  EXPECT_THAT(msg, HasSubstr("device 0 compute queue stops before job #" +
                             num(t.jF0[0]) + " 'F0 mb1'"));
}

TEST(PlanValidationTest, RefusesEventRecordedTwice) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.jobs[t.jF1[1]].records.push_back(t.eF0[0]);
  std::string msg = refusal(t.b.plan, "twice");
  EXPECT_THAT(msg,
              HasSubstr("event " + num(t.eF0[0]) + " is recorded by job #" +
                        num(t.jF0[0]) + " 'F0 mb0' and by job #" +
                        num(t.jF1[1]) + " 'F1 mb1'"));
}

TEST(PlanValidationTest, RefusesEventOutOfRange) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.jobs[t.jIn[1]].waits.push_back(t.b.plan.events + 3);
  std::string msg = refusal(t.b.plan, "event-range");
  EXPECT_THAT(msg, HasSubstr("job #" + num(t.jIn[1]) +
                             " 'IN mb1' waits for "
                             "event " +
                             num(t.b.plan.events + 3)));
}

TEST(PlanValidationTest, RefusesCopyOutOfRange) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  // The last microbatch's slice, one row too far.
  t.b.plan.jobs[t.jIn[1]].copies[0].srcOffset += 4 * sizeof(float);
  std::string msg = refusal(t.b.plan, "copy-src");
  EXPECT_THAT(msg, HasSubstr("job #" + num(t.jIn[1]) +
                             " 'IN mb1' copy #0 "
                             "reads bytes [48, 80) of buffer #" +
                             num(t.X) + " 'x', which holds 64 bytes"));

  TwoStagePlan u = makeTwoStagePlan(2, 2, 4);
  u.b.plan.jobs[u.jOut1[0]].copies[0].bytes += 1;
  msg = refusal(u.b.plan, "copy-dst");
  EXPECT_THAT(msg, HasSubstr("'OUT1 mb0' copy #0 reads bytes [0, 33)"));

  TwoStagePlan v = makeTwoStagePlan(2, 2, 4);
  v.b.plan.jobs[v.jOut1[1]].copies[0].dstOffset = ~uint64_t(0) - 8;
  msg = refusal(v.b.plan, "copy-overflow");
  EXPECT_THAT(msg, HasSubstr("'OUT1 mb1' copy #0 writes bytes"));
}

TEST(PlanValidationTest, RefusesWrongDeviceBuffers) {
  // A program on device 0 reading device 1's memory.
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.programs[t.f0Program].calls[1].inputs[1] =
      t.b.plan.jobs[t.jIn1[0]].copies[0].dst;
  std::string msg = refusal(t.b.plan, "run-device");
  EXPECT_THAT(msg, HasSubstr("job #" + num(t.jF0[0]) +
                             " 'F0 mb0' runs "
                             "program 'F0', whose call #1 (add) touches "));
  EXPECT_THAT(msg, HasSubstr("'h1' in the memory of device 1; it may only "
                             "touch the memory of device 0"));

  // A program touching host memory.
  TwoStagePlan u = makeTwoStagePlan(2, 2, 4);
  u.b.plan.programs[u.f0Program].calls[1].inputs[1] = u.X;
  msg = refusal(u.b.plan, "run-host");
  EXPECT_THAT(msg,
              HasSubstr("touches buffer #" + num(u.X) + " 'x' in host memory"));

  // Device 0's upload queue writing device 1's memory.
  TwoStagePlan v = makeTwoStagePlan(2, 2, 4);
  v.b.plan.jobs[v.jIn[0]].copies[0].dst =
      v.b.plan.jobs[v.jIn1[0]].copies[0].dst;
  msg = refusal(v.b.plan, "copy-device");
  EXPECT_THAT(msg, HasSubstr("job #" + num(v.jIn[0]) +
                             " 'IN mb0' copy #0 "
                             "touches buffer"));
  EXPECT_THAT(msg, HasSubstr("in the memory of device 1, but the job runs on "
                             "the device 0 activation_h2d queue"));

  // An upload into host memory.
  TwoStagePlan w = makeTwoStagePlan(2, 2, 4);
  w.b.plan.jobs[w.jIn[0]].copies[0].dst = w.Z;
  w.b.plan.jobs[w.jIn[0]].copies[0].bytes = 8;
  msg = refusal(w.b.plan, "copy-host");
  EXPECT_THAT(msg, HasSubstr("'IN mb0' copy #0 writes host buffer #" +
                             num(w.Z) + " 'z'"));

  // A download from host memory.
  TwoStagePlan x = makeTwoStagePlan(2, 2, 4);
  x.b.plan.jobs[x.jOut0[0]].copies[0].src = x.X;
  msg = refusal(x.b.plan, "d2h-host");
  EXPECT_THAT(msg, HasSubstr("'OUT0 mb0' copy #0 reads host buffer"));
}

TEST(PlanValidationTest, RefusesMisplacedBuffersAndBindings) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.buffers[t.W0].device = 2;
  EXPECT_THAT(refusal(t.b.plan, "buffer-device"),
              HasSubstr("buffer #" + num(t.W0) +
                        " 'w0' lives on device 2, "
                        "but the plan has 2 devices"));

  TwoStagePlan u = makeTwoStagePlan(2, 2, 4);
  u.b.plan.inputs.push_back({"h0", u.b.plan.jobs[u.jOut0[0]].copies[0].src, 0});
  EXPECT_THAT(refusal(u.b.plan, "input-device"),
              HasSubstr("input 'h0' is buffer"));

  TwoStagePlan v = makeTwoStagePlan(2, 2, 4);
  v.b.plan.programs[uint32_t(v.b.plan.prologue)].calls[0].outputs[0] =
      v.b.plan.jobs[v.jUp1].copies[0].dst;
  EXPECT_THAT(refusal(v.b.plan, "prologue-device"),
              HasSubstr("the prologue runs program 'prologue', whose call #0 "
                        "(add) touches buffer"));

  TwoStagePlan w = makeTwoStagePlan(2, 2, 4);
  w.b.plan.epilogue = 17;
  EXPECT_THAT(refusal(w.b.plan, "epilogue-index"),
              HasSubstr("the epilogue is program #17"));
}

TEST(PlanValidationTest, RefusesJobsOfTheWrongShape) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  t.b.plan.jobs[t.jIn[0]].queue = QueueKind::compute;
  EXPECT_THAT(refusal(t.b.plan, "copy-compute"),
              HasSubstr("job #" + num(t.jIn[0]) +
                        " 'IN mb0' copies on the "
                        "device 0 compute queue"));

  TwoStagePlan u = makeTwoStagePlan(2, 2, 4);
  u.b.plan.jobs[u.jF0[0]].queue = QueueKind::d2h;
  EXPECT_THAT(refusal(u.b.plan, "run-d2h"),
              HasSubstr("'F0 mb0' runs a program on the device 0 d2h queue"));

  TwoStagePlan v = makeTwoStagePlan(2, 2, 4);
  v.b.plan.jobs[v.jIn[0]].copies.clear();
  v.b.plan.jobs[v.jIn[0]].records.clear();
  EXPECT_THAT(refusal(v.b.plan, "no-copies"),
              HasSubstr("'IN mb0' is a copy job with nothing to copy and no "
                        "event to record"));

  TwoStagePlan w = makeTwoStagePlan(2, 2, 4);
  w.b.plan.jobs[w.jF1[0]].device = 5;
  EXPECT_THAT(refusal(w.b.plan, "job-device"),
              HasSubstr("'F1 mb0' runs on device 5 of 2"));

  TwoStagePlan x = makeTwoStagePlan(2, 2, 4);
  x.b.plan.jobs[x.jF1[1]].program = 99;
  EXPECT_THAT(refusal(x.b.plan, "job-program"),
              HasSubstr("'F1 mb1' runs program #99"));
}

TEST(PlanValidationTest, GridShowsEveryQueueInOrder) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Expected<Plan> plan = writeAndLoad(t.b.plan, "grid.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  std::string grid = describePlanGrid(*plan);
  EXPECT_THAT(grid, HasSubstr("staged: 2 device(s), 3 microbatches, schedule "
                              "test, " +
                              num(plan->jobs.size()) + " jobs, " +
                              num(plan->events) + " events"));
  EXPECT_THAT(grid, HasSubstr("prologue 'prologue', epilogue 'epilogue'"));
  std::map<std::string, std::string> lines;
  std::istringstream in(grid);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("device ", 0) == 0)
      lines[line.substr(0, 19)] = line;
  ASSERT_EQ(lines.size(), 8u) << grid;
  const std::string &compute = lines["device 0  compute  "];
  EXPECT_EQ(
      compute.rfind("device 0  compute   F0 mb0   | F0 mb1   | F0 mb2", 0), 0u)
      << grid;
  EXPECT_EQ(lines["device 1  d2h      "],
            "device 1  d2h       OUT1 mb0 | OUT1 mb1 | OUT1 mb2")
      << grid;
  EXPECT_EQ(lines["device 0  weight   "], "device 0  weight    UP s0") << grid;
  // Slot 1 starts in the same column on every queue that has one.
  size_t column = compute.find("F0 mb1");
  EXPECT_EQ(lines["device 1  act      "].find("IN1 mb1"), column) << grid;
  EXPECT_EQ(lines["device 0  d2h      "].find("OUT0 mb1"), column) << grid;
}

TEST(PlanValidationTest, UnstagedPlansKeepTheirChecksAndGrid) {
  PlanBuilder b(1, 2, false);
  uint32_t x = b.buffer("x", {2, 3}), y = b.buffer("y", {2, 3});
  uint32_t p = b.program("main", {call(OpKind::relu, {x}, {y})});
  b.run(0, p, {}, {}, "");
  b.input("x", x);
  b.output("y", y);
  Expected<Plan> plan = writeAndLoad(b.plan, "unstaged.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  EXPECT_FALSE(plan->staged);
  std::string grid = describePlanGrid(*plan);
  EXPECT_THAT(grid, HasSubstr("job  device  queue       mb  program"));
  EXPECT_THAT(grid, HasSubstr("main"));

  b.plan.jobs[0].program = 3;
  EXPECT_THAT(refusal(b.plan, "unstaged-program"),
              HasSubstr("job #0 runs program #3, but the plan has 1"));
}

// matmul's fused epilogue (kernels::MatmulEpilogue): a third integer and
// a third input; plans without them load as before.
TEST(PlanValidationTest, MatmulEpiloguesAreChecked) {
  PlanBuilder b(1, 2, false);
  uint32_t x = b.buffer("x", {4, 3}), w = b.buffer("w", {3, 5});
  uint32_t bias = b.buffer("b", {5}), y = b.buffer("y", {4, 5});
  uint32_t pre = b.buffer("pre", {4, 5}), narrow = b.buffer("n", {4});
  auto load = [&](KernelCallDesc c, const std::string &name) {
    b.plan.programs.clear();
    b.plan.jobs.clear();
    uint32_t p = b.program("main", {std::move(c)});
    b.run(0, p, {}, {}, "");
    return writeAndLoad(b.plan, name);
  };
  b.input("x", x);
  b.input("w", w);
  b.input("b", bias);
  b.output("y", y);
  for (auto c : {call(OpKind::matmul, {x, w}, {y}, {0, 0}),
                 call(OpKind::matmul, {x, w, bias}, {y}, {0, 0, 1}),
                 call(OpKind::matmul, {x, w, bias}, {y, pre}, {0, 0, 3}),
                 call(OpKind::matmul, {x, w, pre}, {y}, {0, 0, 5})}) {
    Expected<Plan> plan = load(c, "epilogue-ok.rpplan");
    EXPECT_TRUE(plan) << plan.getStatus().toString();
  }
  auto refused = [&](KernelCallDesc c) {
    Expected<Plan> plan = load(std::move(c), "epilogue-bad.rpplan");
    return plan ? std::string() : plan.getStatus().toString();
  };
  EXPECT_THAT(refused(call(OpKind::matmul, {x, w, bias}, {y}, {0, 0, 9})),
              HasSubstr("unknown epilogue 9"));
  EXPECT_THAT(refused(call(OpKind::matmul, {x, w}, {y}, {0, 0, 1})),
              HasSubstr("disagree with its epilogue"));
  EXPECT_THAT(refused(call(OpKind::matmul, {x, w, bias}, {y, pre}, {0, 0, 1})),
              HasSubstr("disagree with its epilogue"));
  EXPECT_THAT(refused(call(OpKind::matmul, {x, w, narrow}, {y}, {0, 0, 1})),
              HasSubstr("bias is not a vector"));
  EXPECT_THAT(refused(call(OpKind::matmul, {x, w, bias}, {y}, {0, 0, 4})),
              HasSubstr("pre-activation is not the result's shape"));
  EXPECT_THAT(refused(call(OpKind::matmul, {x, w}, {y}, {0})),
              HasSubstr("it takes 2 (the transposes) or 3"));
}

} // namespace
