//===- TraceTest.cpp - the executor's timeline and what is made of it -----===//
//
// A traced step must show what the executor did: every job once, inside
// its step, the jobs of one queue one after another in plan order, and no
// job before the jobs whose events it waits for. The busy summary and the
// measured profile are checked on hand-made traces, whose right answers
// follow from the spans the test chose.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/Trace.h"

#include <gmock/gmock.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>

using namespace rp::runtime;
using namespace rp::runtime::test;
using ::testing::HasSubstr;

namespace {

nlohmann::json readJson(const std::string &path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

/// Runs `steps` traced steps of the two-stage plan.
struct TracedRun {
  std::unique_ptr<Plan> plan;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<HostForward> fwd;
  std::unique_ptr<Trace> trace;
};

TracedRun runTraced(const TwoStagePlan &t, unsigned steps, unsigned threads,
                    bool keepSteps) {
  TracedRun r;
  Expected<Plan> plan = writeAndLoad(t.b.plan, "traced.rpplan");
  EXPECT_TRUE(plan) << plan.getStatus().toString();
  if (!plan)
    return r;
  r.plan = std::make_unique<Plan>(std::move(*plan));
  auto backend =
      createBackend("host", backendOptions(r.plan->devices, threads));
  EXPECT_TRUE(backend) << backend.getStatus().toString();
  if (!backend)
    return r;
  r.backend = std::move(*backend);
  auto fwd = HostForward::create(*r.plan, *r.backend);
  EXPECT_TRUE(fwd);
  if (!fwd)
    return r;
  r.fwd = std::move(*fwd);
  EXPECT_TRUE(r.fwd->initParameters(5).isOk());
  r.trace = std::make_unique<Trace>(*r.plan, keepSteps);
  PipelineOptions options;
  options.trace = r.trace.get();
  auto exec = PipelineExecutor::create(*r.plan, *r.fwd, options);
  EXPECT_TRUE(exec) << exec.getStatus().toString();
  if (!exec)
    return r;
  ThreadPool hostPool(2);
  r.trace->setNextStep(7);
  for (unsigned step = 0; step < steps; ++step) {
    EXPECT_TRUE(
        r.fwd
            ->setInput(
                "x", randomArray({int64_t(t.M * t.rows), int64_t(t.dim)}, step))
            .isOk());
    Status s = (*exec)->step(hostPool);
    EXPECT_TRUE(s.isOk()) << s.toString();
  }
  return r;
}

TEST(TraceTest, EveryJobOnceInsideItsStepInQueueOrderAfterItsEvents) {
  TwoStagePlan t = makeTwoStagePlan(4, 4, 16);
  TracedRun r = runTraced(t, 3, 4, true);
  ASSERT_TRUE(r.trace);
  const Plan &plan = *r.plan;
  const std::deque<StepSpans> &steps = r.trace->getSteps();
  ASSERT_EQ(steps.size(), 3u);
  std::vector<size_t> recorder(plan.events, ~size_t(0));
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    for (uint32_t e : plan.jobs[i].records)
      recorder[e] = i;
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepSpans &step = steps[k];
    SCOPED_TRACE("step " + std::to_string(step.step));
    EXPECT_EQ(step.step, 7 + k);
    EXPECT_TRUE(step.ok);
    if (k > 0) {
      EXPECT_GE(step.start, steps[k - 1].end);
    }
    ASSERT_EQ(step.jobs.size(), plan.jobs.size());
    std::map<std::pair<uint32_t, int>, int64_t> queueFree;
    for (size_t i = 0; i < plan.jobs.size(); ++i) {
      const JobSpan &span = step.jobs[i];
      const JobDesc &job = plan.jobs[i];
      SCOPED_TRACE(describeJob(plan, i));
      ASSERT_TRUE(span.ran());
      EXPECT_LE(step.start, span.start);
      EXPECT_LE(span.start, span.end);
      EXPECT_LE(span.end, step.end);
      // Plan order within a queue, and no two jobs of it at once.
      auto [it, fresh] =
          queueFree.try_emplace({job.device, int(job.queue)}, span.end);
      if (!fresh) {
        EXPECT_LE(it->second, span.start);
        it->second = span.end;
      }
      for (uint32_t e : job.waits) {
        ASSERT_LT(recorder[e], plan.jobs.size());
        EXPECT_LE(step.jobs[recorder[e]].end, span.start)
            << "starts before " << describeJob(plan, recorder[e])
            << " recorded event " << e;
      }
    }
  }
  EXPECT_EQ(r.trace->getBusy().steps, 3u);
  // The host track: each step, its prologue and epilogue, inside it.
  std::map<std::string, unsigned> count;
  for (const HostSpan &h : r.trace->getHostSpans()) {
    ++count[h.name];
    const StepSpans &step = steps[h.step - 7];
    if (h.name == "prologue") {
      EXPECT_LE(h.end, step.start);
    }
    if (h.name == "epilogue") {
      EXPECT_GE(h.start, step.end);
    }
  }
  EXPECT_EQ(count["step"], 3u);
  EXPECT_EQ(count["prologue"], 3u);
  EXPECT_EQ(count["epilogue"], 3u);
}

TEST(TraceTest, ChromeTraceFileHasATrackPerQueueAndAnEventPerJobAndStep) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 8);
  TracedRun r = runTraced(t, 2, 2, true);
  ASSERT_TRUE(r.trace);
  const Plan &plan = *r.plan;
  std::string path = tempPath("trace.json");
  ASSERT_TRUE(writeChromeTrace(*r.trace, path).isOk());
  nlohmann::json doc = readJson(path);
  std::remove(path.c_str());
  ASSERT_FALSE(doc.is_discarded()) << "the trace is not valid JSON";
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::pair<uint64_t, size_t>, unsigned> jobEvents;
  std::map<std::string, unsigned> hostEvents;
  for (const auto &e : doc["traceEvents"]) {
    std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name")
      processes[e["pid"]] = e["args"]["name"];
    if (ph == "M" && e["name"] == "thread_name") {
      std::pair<int, int> track{e["pid"], e["tid"]};
      threads[track] = e["args"]["name"];
    }
    if (ph != "X")
      continue;
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["cat"] == "host") {
      ++hostEvents[e["name"].get<std::string>().substr(0, 4)];
      continue;
    }
    size_t job = e["args"]["job"];
    ASSERT_LT(job, plan.jobs.size());
    const JobDesc &j = plan.jobs[job];
    uint64_t step = e["args"]["step"];
    ++jobEvents[{step, job}];
    EXPECT_EQ(e["name"], j.label);
    EXPECT_EQ(e["args"]["stage"], j.stage);
    EXPECT_EQ(e["args"]["microbatch"], j.microbatch);
    EXPECT_EQ(processes[e["pid"]], "device " + std::to_string(j.device));
    std::pair<int, int> track{e["pid"], e["tid"]};
    EXPECT_EQ(threads[track], queueName(j.queue));
    if (j.kind == JobKind::copy) {
      uint64_t bytes = 0;
      for (const CopyDesc &c : j.copies)
        bytes += c.bytes;
      EXPECT_EQ(e["args"]["bytes"], bytes);
    } else {
      EXPECT_EQ(e["args"]["program"], plan.programs[j.program].name);
    }
  }
  EXPECT_EQ(jobEvents.size(), 2 * plan.jobs.size());
  for (auto &[key, n] : jobEvents)
    EXPECT_EQ(n, 1u) << "job " << key.second << " of step " << key.first;
  std::set<std::string> names;
  for (auto &[pid, name] : processes)
    names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"device 0", "device 1", "host"}));
  // Both devices use all four queues.
  EXPECT_EQ(threads.size(), 8u + 2u);
  EXPECT_EQ(hostEvents["step"], 2u);
  EXPECT_EQ(hostEvents["prol"], 2u);
  EXPECT_EQ(hostEvents["epil"], 2u);
}

TEST(TraceTest, FailedStepIsKeptButNotSummed) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  PlanBuilder &b = t.b;
  uint32_t x0 = b.plan.jobs[t.jIn[0]].copies[0].dst;
  uint32_t h0 = b.plan.jobs[t.jOut0[0]].copies[0].src;
  b.plan.jobs[t.jF0[1]].program =
      b.program("bad", {call(OpKind::unary_grad, {x0, x0}, {h0}, {99})});
  Expected<Plan> plan = writeAndLoad(b.plan, "trace-fail.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto backend = createBackend("host", backendOptions(plan->devices, 2));
  ASSERT_TRUE(backend) << backend.getStatus().toString();
  auto fwd = HostForward::create(*plan, **backend);
  ASSERT_TRUE(fwd);
  Trace trace(*plan, true);
  PipelineOptions options;
  options.trace = &trace;
  auto exec = PipelineExecutor::create(*plan, **fwd, options);
  ASSERT_TRUE(exec);
  ASSERT_TRUE((*fwd)->setInput("x", randomArray({4, 4}, 1)).isOk());
  ASSERT_TRUE((*exec)->runJobs().failed());
  ASSERT_EQ(trace.getSteps().size(), 1u);
  EXPECT_FALSE(trace.getSteps()[0].ok);
  EXPECT_TRUE(trace.getSteps()[0].jobs[t.jF0[1]].ran());
  EXPECT_FALSE(trace.getSteps()[0].jobs[t.jOut0[1]].ran());
  EXPECT_EQ(trace.getBusy().steps, 0u);
  EXPECT_EQ(trace.jobMeansMs()[t.jF0[0]], -1.0);
}

TEST(TraceTest, WithoutKeptStepsOnlySummariesRemain) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  TracedRun r = runTraced(t, 3, 2, false);
  ASSERT_TRUE(r.trace);
  EXPECT_TRUE(r.trace->getSteps().empty());
  EXPECT_TRUE(r.trace->getHostSpans().empty());
  EXPECT_EQ(r.trace->getBusy().steps, 3u);
  EXPECT_EQ(r.trace->getHostTotals()["step"].second, 3u);
  for (double ms : r.trace->jobMeansMs())
    EXPECT_GE(ms, 0.0);
  EXPECT_THAT(writeChromeTrace(*r.trace, tempPath("no.json")).getMessage(),
              HasSubstr("keepSteps"));
}

/// A plan of jobs only, for hand-made traces (never run).
Plan handPlan() {
  Plan plan;
  plan.devices = 2;
  plan.staged = true;
  auto job = [&](uint32_t device, QueueKind queue, const char *label) {
    JobDesc j;
    j.device = device;
    j.queue = queue;
    j.kind = queue == QueueKind::compute ? JobKind::run : JobKind::copy;
    j.label = label;
    plan.jobs.push_back(j);
  };
  job(0, QueueKind::compute, "F0 mb0");        // 0
  job(0, QueueKind::compute, "F0 mb1");        // 1
  job(0, QueueKind::weight_h2d, "UP s0");      // 2
  job(0, QueueKind::activation_h2d, "IN mb0"); // 3
  job(0, QueueKind::activation_h2d, "IN mb1"); // 4
  job(0, QueueKind::d2h, "OUT mb0");           // 5
  job(1, QueueKind::compute, "T1 mb0");        // 6
  return plan;
}

TEST(TraceTest, BusyIsComputeTimeOverStepTimeWithUploadsMerged) {
  Plan plan = handPlan();
  StepSpans step;
  step.start = 1000;
  step.end = 1200;           // 200 ns
  step.jobs = {{1000, 1050}, // compute 50
               {1100, 1130}, // compute 30
               {1000, 1040}, // weight upload 1000-1040
               {1020, 1060}, // activation upload overlaps: union 1000-1060
               {1150, 1160}, // and one apart: +10
               {1060, 1080}, // d2h 20
               {-1, -1}};    // device 1's job did not run
  BusySummary busy;
  addStepBusy(plan, step, busy);
  ASSERT_EQ(busy.devices.size(), 2u);
  EXPECT_EQ(busy.steps, 1u);
  EXPECT_EQ(busy.wall, 200);
  EXPECT_EQ(busy.devices[0].compute, 80);
  EXPECT_EQ(busy.devices[0].h2d, 70);
  EXPECT_EQ(busy.devices[0].d2h, 20);
  EXPECT_EQ(busy.devices[1].compute, 0);
  // A second step of 100 ns with device 1 busy for 60 of them.
  StepSpans second;
  second.start = 2000;
  second.end = 2100;
  second.jobs.assign(plan.jobs.size(), JobSpan());
  second.jobs[6] = {2010, 2070};
  addStepBusy(plan, second, busy);
  EXPECT_EQ(busy.wall, 300);
  EXPECT_DOUBLE_EQ(busy.percent(busy.devices[0].compute), 100.0 * 80 / 300);
  EXPECT_DOUBLE_EQ(busy.percent(busy.devices[1].compute), 20.0);
  std::string text = describeBusy(busy);
  EXPECT_THAT(text, HasSubstr("rp-run: device 0: compute 27% busy (bubble "
                              "73%), h2d 23%, d2h 7%\n"));
  EXPECT_THAT(text, HasSubstr("rp-run: device 1: compute 20% busy (bubble "
                              "80%), h2d 0%, d2h 0%\n"));
  EXPECT_EQ(BusySummary().percent(5), 0.0);
}

/// A training plan's compute jobs as the compiler names them: forward
/// layers prefix, h.0, h.1 (round-robin slots), a backward group, a
/// one-layer backward, the fused tail, and gradient accumulation.
Plan profilePlan() {
  Plan plan;
  plan.devices = 2;
  plan.staged = true;
  auto job = [&](const std::string &label, const std::string &program,
                 int32_t stage, uint32_t mb) {
    plan.programs.push_back({program, {}});
    JobDesc j;
    j.program = uint32_t(plan.programs.size() - 1);
    j.label = label;
    j.stage = stage;
    j.microbatch = mb;
    plan.jobs.push_back(j);
  };
  for (uint32_t mb = 0; mb < 2; ++mb) {
    std::string slot = " slot" + std::to_string(mb);
    std::string m = " mb" + std::to_string(mb);
    job("F0" + m, "prefix" + slot, 0, mb);
    job("F0" + m, "h.0" + slot, 0, mb);
    job("F1" + m, "h.1" + slot, 1, mb);
    job("T2" + m, "suffix" + slot, 2, mb);
    job("T2" + m, (mb ? "add-grads s2" : "start-grads s2"), 2, mb);
    job("B3" + m, "h.1.backward" + slot, 3, mb);
    job("B4" + m, "prefix..h.0.backward" + slot, 4, mb);
  }
  CopyDesc c;
  JobDesc copy;
  copy.kind = JobKind::copy;
  copy.queue = QueueKind::d2h;
  copy.label = "GRAD s3";
  copy.copies = {c};
  plan.jobs.push_back(copy);
  return plan;
}

TEST(TraceTest, ProfileSplitsBackwardsAndTailsAndRoundTrips) {
  Plan plan = profilePlan();
  // Per job, ns; microbatch 1 takes twice microbatch 0's time, so the
  // profile's numbers are means of both.
  std::vector<int64_t> ns = {1000, 3000, 4000, 9000, 100, 10000, 12000};
  Trace trace(plan, false);
  // The first step is warm-up: ten times slower, and left out.
  for (int step = 0; step < 3; ++step) {
    JobSpan *slots = trace.beginStep(step, step * 1000000);
    int64_t at = step * 1000000;
    for (size_t i = 0; i < plan.jobs.size(); ++i) {
      int64_t d =
          ns[i % ns.size()] * (i < ns.size() ? 1 : 2) * (step == 0 ? 10 : 1);
      slots[i] = {at, at + d};
      at += d;
    }
    trace.endStep(at, true);
  }
  EXPECT_EQ(trace.meanSteps(), 2u);
  std::string path = tempPath("profile.json");
  ASSERT_TRUE(writeMeasuredProfile(trace, "rtx4090", path).isOk());
  nlohmann::json doc = readJson(path);
  std::remove(path.c_str());
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["hw"], "rtx4090");
  EXPECT_THAT(doc["note"].get<std::string>(),
              HasSubstr("'prefix..h.0.backward' across 2 layers"));
  EXPECT_THAT(doc["note"].get<std::string>(), HasSubstr("fused tail"));
  std::vector<std::string> names;
  std::map<std::string, nlohmann::json> layer;
  for (const auto &l : doc["layers"]) {
    names.push_back(l["name"]);
    layer[l["name"]] = l;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"prefix", "h.0", "h.1", "suffix"}));
  auto mean = [&](size_t job) { return 1.5 * double(ns[job]) / 1e6; };
  auto near = [](const nlohmann::json &v, double want) {
    EXPECT_NEAR(v.get<double>(), want, 1e-6);
  };
  near(layer["prefix"]["forward_ms"], mean(0));
  near(layer["h.0"]["forward_ms"], mean(1));
  near(layer["h.1"]["forward_ms"], mean(2));
  // h.1.backward: recompute is h.1's forward, the rest backward.
  near(layer["h.1"]["recompute_ms"], mean(2));
  near(layer["h.1"]["backward_ms"], mean(5) - mean(2));
  // The group's time goes 1:3 to prefix and h.0, as their forwards.
  double group = mean(6);
  near(layer["prefix"]["recompute_ms"], mean(0));
  near(layer["prefix"]["backward_ms"], group * 0.25 - mean(0));
  near(layer["h.0"]["recompute_ms"], mean(1));
  near(layer["h.0"]["backward_ms"], group * 0.75 - mean(1));
  // The tail: a third forward, two thirds backward, no recompute.
  near(layer["suffix"]["forward_ms"], mean(3) / 3);
  near(layer["suffix"]["backward_ms"], mean(3) * 2 / 3);
  EXPECT_FALSE(layer["suffix"].contains("recompute_ms"));
}

TEST(TraceTest, ProfileWeighsAFusedTailByItsCalls) {
  // The tail "h.1..suffix" of a model whose blocks h.1 and h.2 both sit in
  // it: h.2 is named only by the scopes of its calls.
  PlanBuilder b(1, 1, true);
  uint32_t x = b.buffer("x", {4, 8}), w = b.buffer("w", {8, 8}),
           y = b.buffer("y", {4, 8}), y2 = b.buffer("y2", {4, 8}),
           y3 = b.buffer("y3", {4, 8}), w2 = b.buffer("w2", {8, 16}),
           logits = b.buffer("logits", {4, 16}),
           labels = b.buffer("labels", {4}, -1, DType::i64),
           loss = b.buffer("loss", {}), n = b.buffer("n", {}, -1, DType::i64),
           dlogits = b.buffer("dlogits", {4, 16}),
           gw2 = b.buffer("gw2", {8, 16}), dy = b.buffer("dy", {4, 8}),
           dx = b.buffer("dx", {4, 8});
  auto at = [](KernelCallDesc c, const char *loc) {
    c.loc = loc;
    return c;
  };
  uint32_t tailProgram = b.program(
      "h.1..suffix",
      {at(call(OpKind::matmul, {x, w}, {y}, {0, 0}), "/h.1/mlp/MatMul"),
       at(call(OpKind::matmul, {y, w}, {y2}, {0, 0}), "/h.2/mlp/MatMul"),
       at(call(OpKind::layer_norm, {y2}, {y3}), "/ln_f/LayerNormalization"),
       at(call(OpKind::matmul, {y3, w2}, {logits}, {0, 0}), "/lm_head/MatMul"),
       at(call(OpKind::cross_entropy, {logits, labels}, {loss, n}), "suffix"),
       at(call(OpKind::cross_entropy_grad, {logits, labels}, {dlogits}),
          "suffix"),
       at(call(OpKind::matmul, {y3, dlogits}, {gw2}, {1, 0}),
          "/lm_head/MatMul"),
       at(call(OpKind::matmul, {dy, w}, {dx}, {0, 1}), "/h.2/mlp/MatMul"),
       at(call(OpKind::matmul, {dy, w}, {dx}, {0, 1}), "/h.1/mlp/MatMul")});
  uint32_t forwardProgram = b.program("h.0", {});
  b.run(0, forwardProgram, {}, {}, "F0 mb0");
  b.run(0, tailProgram, {}, {}, "T1 mb0");
  Expected<std::string> text =
      measuredProfileJson(b.plan, {0.25, 2.146}, "host", 3);
  ASSERT_TRUE(text) << text.getStatus().toString();
  nlohmann::json doc = nlohmann::json::parse(*text);
  ASSERT_EQ(doc["layers"].size(), 4u);
  // Work per call: a matmul writes its output elements times the inner
  // dimension; other calls the elements they write. Forward is everything
  // up to the loss.
  double h1Fwd = 32 * 8, h2Fwd = 32 * 8,
         suffixFwd = 32 /*ln_f*/ + 64 * 8 /*lm_head*/ + 2 /*loss, count*/;
  double h1Bwd = 32 * 8, h2Bwd = 32 * 8,
         suffixBwd = 64 /*loss grad*/ + 128 * 4 /*lm_head grad*/;
  double total = h1Fwd + h2Fwd + suffixFwd + h1Bwd + h2Bwd + suffixBwd;
  struct Want {
    const char *name;
    double forward, backward;
  };
  std::vector<Want> want = {{"h.1", h1Fwd, h1Bwd},
                            {"h.2", h2Fwd, h2Bwd},
                            {"suffix", suffixFwd, suffixBwd}};
  EXPECT_EQ(doc["layers"][0]["name"], "h.0");
  EXPECT_NEAR(doc["layers"][0]["forward_ms"].get<double>(), 0.25, 1e-9);
  for (size_t k = 0; k < want.size(); ++k) {
    const nlohmann::json &l = doc["layers"][k + 1];
    EXPECT_EQ(l["name"], want[k].name);
    EXPECT_NEAR(l["forward_ms"].get<double>(), 2.146 * want[k].forward / total,
                1e-6)
        << want[k].name;
    EXPECT_NEAR(l["backward_ms"].get<double>(),
                2.146 * want[k].backward / total, 1e-6)
        << want[k].name;
  }
  EXPECT_THAT(doc["note"].get<std::string>(),
              HasSubstr("'h.1..suffix' (3 layer(s))"));
}

/// Calls of one op kind and shapes that differ in an attribute that
/// changes their work (here a transposed operand) are measured apart: a
/// profile's "ops" keep one entry each, with its own median.
TEST(TraceTest, ProfileOpsKeepCallsApartByTheirAttributes) {
  PlanBuilder b(1, 1, true);
  uint32_t x = b.buffer("x", {8, 8}), w = b.buffer("w", {8, 8}),
           y = b.buffer("y", {8, 8});
  uint32_t program =
      b.program("h.0", {call(OpKind::matmul, {x, w}, {y}, {0, 0}),
                        call(OpKind::matmul, {x, w}, {y}, {0, 1}),
                        call(OpKind::matmul, {x, w}, {y}, {0, 0})});
  Trace::CallSamples calls = {{{program, 0}, {1.0, 1.0}},
                              {{program, 1}, {5.0, 7.0}},
                              {{program, 2}, {1.0}}};
  std::map<std::string, rp::timing::MeasuredOpTime> ops =
      measuredOps(b.plan, calls);
  ASSERT_EQ(ops.size(), 2u);
  std::map<std::vector<int64_t>, rp::timing::MeasuredOpTime> byAttrs;
  for (const auto &[key, t] : ops)
    byAttrs[t.attrs] = t;
  const std::vector<int64_t> plain = {0, 0, 0}, transposed = {0, 1, 0};
  ASSERT_EQ(byAttrs.count(plain), 1u);
  ASSERT_EQ(byAttrs.count(transposed), 1u);
  EXPECT_EQ(byAttrs[plain].ms, 1.0);
  EXPECT_EQ(byAttrs[plain].calls, 3u);
  EXPECT_EQ(byAttrs[transposed].ms, 6.0);
  EXPECT_EQ(byAttrs[transposed].calls, 2u);
}

TEST(TraceTest, ProfileNamesWhatItCannotSplit) {
  Plan plan = profilePlan();
  // A backward of a layer no forward job names.
  plan.programs[plan.jobs[5].program].name = "h.7.backward slot0";
  plan.programs[plan.jobs[12].program].name = "h.7.backward slot1";
  std::vector<double> ms(plan.jobs.size(), 0.5);
  Expected<std::string> text = measuredProfileJson(plan, ms, "host", 4);
  ASSERT_TRUE(text) << text.getStatus().toString();
  nlohmann::json doc = nlohmann::json::parse(*text);
  EXPECT_THAT(doc["note"].get<std::string>(),
              HasSubstr("left out, so those layers keep the model's times: "
                        "backward program 'h.7.backward' (a layer it covers "
                        "has no forward job)"));
  EXPECT_EQ(doc["layers"].size(), 4u);
  // Nothing timed at all.
  std::vector<double> none(plan.jobs.size(), -1.0);
  EXPECT_THAT(
      measuredProfileJson(plan, none, "host", 0).getStatus().getMessage(),
      HasSubstr("no timed layer programs"));
  EXPECT_THAT(
      measuredProfileJson(plan, {1.0}, "host", 1).getStatus().getMessage(),
      HasSubstr("1 job times for 15 jobs"));
}

TEST(TraceTest, AtomicWriteLeavesNoTemporaryAndReportsAMissingFolder) {
  std::string path = tempPath("atomic.txt");
  ASSERT_TRUE(writeFileAtomically(path, "test file", [](std::ostream &out) {
                out << "one";
              }).isOk());
  ASSERT_TRUE(writeFileAtomically(path, "test file", [](std::ostream &out) {
                out << "two";
              }).isOk());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "two");
  std::remove(path.c_str());
  Status s = writeFileAtomically(tempPath("no-such-dir/x.json"), "trace file",
                                 [](std::ostream &) {});
  EXPECT_EQ(s.getCode(), StatusCode::NotFound);
  EXPECT_THAT(s.getMessage(),
              HasSubstr("the folder of trace file '" +
                        tempPath("no-such-dir/x.json") + "' does not exist"));
}

} // namespace
