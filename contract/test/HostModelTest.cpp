//===- HostModelTest.cpp - the host side of the timing core ---------------===//
//
// The host model (Timeline.h, docs/sim.md): copies share each GPU's link,
// the uplink of the GPUs behind one switch, and host DRAM with the
// optimizer; kernel-aware profiles (Hardware.h "kernels").
//
//===----------------------------------------------------------------------===//

#include "rp/timing/Assumptions.h"
#include "rp/timing/Continuous.h"
#include "rp/timing/Hardware.h"
#include "rp/timing/Measured.h"

#include <gtest/gtest.h>

using namespace rp::timing;

namespace {

/// `devices` GPUs, each one upload of 10 ms alone on its 25 GB/s link
/// (250 MB), behind uplinks of `perUplink` GPUs at `uplink` GB/s, host
/// DRAM at `dram` GB/s (0: unlimited).
Graph uploads(unsigned devices, unsigned perUplink, double uplink,
              double dram) {
  Graph g;
  g.devices = devices;
  g.gpusPerLink = perUplink;
  g.host.h2dGBps = g.host.d2hGBps = 25;
  g.host.uplinkGBps = uplink;
  g.host.dramGBps = dram;
  for (unsigned d = 0; d < devices; ++d)
    g.tasks.push_back({d, Lane::weightH2D, 10, {}});
  return g;
}

double lastEnd(const Times &t) { return t.makespan; }

} // namespace

/// Two GPUs behind one 25 GB/s uplink: their two copies take twice as long
/// as one alone; behind two uplinks, as long as alone.
TEST(HostModelTest, TwoCopiesOnOneUplinkTakeTwiceAsLong) {
  std::optional<Times> shared = resolve(uploads(2, 2, 25, 0));
  ASSERT_TRUE(shared);
  EXPECT_NEAR(lastEnd(*shared), 20, 1e-9);
  std::optional<Times> apart = resolve(uploads(2, 1, 25, 0));
  ASSERT_TRUE(apart);
  EXPECT_NEAR(lastEnd(*apart), 10, 1e-9);
  // A 32 GB/s uplink behind two 25 GB/s links: 500 MB at 32 GB/s.
  Graph g = uploads(2, 2, 32, 0);
  EXPECT_TRUE(g.host.on());
  std::optional<Times> wider = resolve(g);
  ASSERT_TRUE(wider);
  EXPECT_NEAR(lastEnd(*wider), 500.0 / 32, 1e-9);
  // The uplink's busy share: full while both copies run.
  EXPECT_NEAR(wider->uplinkBusyMs[1], 500.0 / 32, 1e-9);
}

/// The old model (GPUs sharing one link, no DRAM limit) is unchanged: the
/// host model is off and copies share the link equally.
TEST(HostModelTest, WithoutTheHostTheOldShares) {
  Graph g = uploads(4, 2, 0, 0);
  EXPECT_FALSE(g.host.on());
  std::optional<Times> t = resolve(g);
  ASSERT_TRUE(t);
  EXPECT_NEAR(lastEnd(*t), 20, 1e-9);
}

/// Host DRAM shared by every copy: eight GPUs' 25 GB/s uploads on their own
/// links need 200 GB/s; at 100 GB/s they take twice as long.
TEST(HostModelTest, DramLimitsCopiesOnSeparateLinks) {
  std::optional<Times> t = resolve(uploads(8, 1, 0, 100));
  ASSERT_TRUE(t);
  EXPECT_NEAR(lastEnd(*t), 20, 1e-9);
  EXPECT_NEAR(t->dramBusyMs, 20, 1e-9);
  std::optional<Times> fast = resolve(uploads(8, 1, 0, 300));
  ASSERT_TRUE(fast);
  EXPECT_NEAR(lastEnd(*fast), 10, 1e-9);
}

/// The optimizer streams host memory too: with DRAM at 50 GB/s, a 20 ms
/// update streaming at 50 GB/s alone and two uploads of 25 GB/s share it
/// max-min fairly, so the copies run at half speed while it runs.
TEST(HostModelTest, TheOptimizerSlowsCopiesWhenDramIsSaturated) {
  Graph g = uploads(2, 1, 0, 50);
  Task opt{2, Lane::host, 20, {}, 50};
  g.tasks.push_back(opt);
  std::optional<Times> t = resolve(g);
  ASSERT_TRUE(t);
  // Each of the three flows at the same share s of its speed alone:
  // 25 s + 25 s + 50 s = 50, s = 1/2, so the copies end at 20 ms.
  EXPECT_NEAR(t->end[0], 20, 1e-9);
  EXPECT_NEAR(t->end[1], 20, 1e-9);
  // At 20 ms the update has done 10 of its 20 ms; alone it does the rest.
  EXPECT_NEAR(t->end[2], 30, 1e-9);
  // Without the DRAM limit neither waits for the other.
  Graph free = g;
  free.host.dramGBps = 0;
  std::optional<Times> u = resolve(free);
  ASSERT_TRUE(u);
  EXPECT_NEAR(u->end[0], 10, 1e-9);
  EXPECT_NEAR(u->end[2], 20, 1e-9);
}

/// The continuous layout's optimizer is a DRAM flow (RunLayout::hostGBps):
/// a run whose update overlaps its uploads gets slower with less DRAM.
TEST(HostModelTest, TheLayoutsOptimizerSharesDram) {
  Graph g = uploads(2, 1, 0, 0);
  g.tasks.push_back({0, Lane::compute, 10, {0}});
  g.tasks.push_back({1, Lane::compute, 10, {1}});
  RunLayout o;
  o.optimizerMs = 15;
  o.hostGBps = 50;
  std::optional<ContinuousRun> unlimited = layOutRun(g, o);
  ASSERT_TRUE(unlimited);
  g.host.dramGBps = 50;
  std::optional<ContinuousRun> limited = layOutRun(g, o);
  ASSERT_TRUE(limited);
  EXPECT_GT(limited->stepMs, unlimited->stepMs + 1);
}

/// Pageable copies run at pageable_gbps and cost DRAM three times.
TEST(HostModelTest, PageableCopies) {
  std::string error;
  std::optional<HardwareModel> hw = parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25, "pinned": false, "pageable_gbps": 10,
          "host_dram_gbps": 100, "uplink_gbps": 32, "job_us": 30})",
      "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_NEAR(hw->copyMs(1e9, true), 100, 1e-9);
  HostModel h = hw->hostModel();
  EXPECT_EQ(h.h2dGBps, 10);
  EXPECT_EQ(h.copyDramFactor, 3);
  EXPECT_EQ(h.uplinkGBps, 32);
  EXPECT_EQ(hw->jobUs, 30);
  EXPECT_FALSE(parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 1,
          "d2h_gbps": 1, "pinned": 1})",
      "t.json", error));
}

/// The optimizer's bytes per parameter: AdamW's 28 and the two
/// conversions around it.
TEST(HostModelTest, OptimizerBytes) {
  HardwareModel hw;
  hw.optimizerGBps = 40;
  EXPECT_EQ(kOptimizerBytesPerParam, 40);
  EXPECT_NEAR(hw.optimizerMs(1e9), 1000, 1e-9);
}

/// A kernel-aware profile changes exactly the op kinds it names: the
/// as-built rtx4090 (its "as_built_kernels") times attention at its
/// CUDA-core rate and every other op as the library profile does.
TEST(HostModelTest, KernelAwareProfileChangesOnlyTheOpsItNames) {
  std::string error;
  std::optional<HardwareModel> library = loadHardwareModel("rtx4090", error);
  ASSERT_TRUE(library) << error;
  std::optional<HardwareModel> built =
      loadHardwareModel("rtx4090:as-built", error);
  ASSERT_TRUE(built) << error;
  EXPECT_EQ(built->name, "rtx4090:as-built");
  EXPECT_TRUE(library->kernels.empty());
  KernelWork work{1e12, 1e6, true, 1};
  int changed = 0;
  for (uint16_t op = 0; op < kNumKernelOps; ++op) {
    double a = library->kernelMs(op, work, "f16");
    double b = built->kernelMs(op, work, "f16");
    if (built->kernels.count(kernelOpName(op))) {
      ++changed;
      EXPECT_NEAR(b,
                  1e12 / (built->kernels.at(kernelOpName(op)).tflops * 1e12) *
                          1e3 +
                      built->launchUs * 1e-3,
                  1e-9)
          << kernelOpName(op);
      EXPECT_GT(b, a) << kernelOpName(op);
    } else {
      EXPECT_EQ(a, b) << kernelOpName(op);
    }
  }
  EXPECT_EQ(changed, 2);
  EXPECT_FALSE(loadHardwareModel("host:as-built", error));
  EXPECT_NE(error.find("as_built_kernels"), std::string::npos) << error;
}

// Every shipped profile states its host (docs/hardware-profiles.md,
// "Sources"): host DRAM, and for the GPUs the uplink their links share, so
// a prediction on a shipped name times the box and not unlimited memory.
TEST(HostModelTest, EveryShippedProfileStatesItsHost) {
  for (const std::string &name : shippedHardwareNames()) {
    std::string error;
    std::optional<HardwareModel> hw = loadHardwareModel(name, error);
    ASSERT_TRUE(hw) << name << ": " << error;
    EXPECT_GT(hw->hostDramGBps, 0) << name;
    if (name == "host")
      continue;
    EXPECT_GT(hw->uplinkGBps, 0) << name;
    EXPECT_LE(hw->uplinkGBps, hw->gpusPerLink * hw->h2dGBps) << name;
    // Eight GPUs' copies in both directions could take more than the
    // DRAM gives: the host model is on for every shipped GPU profile.
    EXPECT_TRUE(hw->hostModel().on()) << name;
  }
}

/// moe_host_us: the host's expert loop per MoE routing, charged on a
/// moe_route and a moe_route_grad call and on nothing else; absent, 0.
TEST(HostModelTest, MoeHostDispatch) {
  std::string error;
  std::optional<HardwareModel> hw = parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25, "moe_host_us": 1500})",
      "t.json", error);
  ASSERT_TRUE(hw) << error;
  auto op = [](const char *name) { return uint16_t(kernelOpIndex(name)); };
  EXPECT_NEAR(hw->hostDispatchMs(op("moe_route")), 1.5, 1e-12);
  EXPECT_NEAR(hw->hostDispatchMs(op("moe_route_grad")), 1.5, 1e-12);
  EXPECT_EQ(hw->hostDispatchMs(op("moe_grouped_matmul")), 0);
  EXPECT_EQ(hw->hostDispatchMs(op("matmul")), 0);
  std::optional<HardwareModel> none = parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25})",
      "t.json", error);
  ASSERT_TRUE(none) << error;
  EXPECT_EQ(none->hostDispatchMs(op("moe_route")), 0);
  EXPECT_FALSE(parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 1,
          "d2h_gbps": 1, "moe_host_us": -1})",
      "t.json", error));
}

/// job_us is the host's hand-off (Graph::handoffMs): a task waiting on a
/// task of another lane starts that long after it ends; the next task on a
/// lane starts when the one before ends (bench/launch_cost.py: 43 us
/// against 0.06 us back to back on the host backend).
TEST(HostModelTest, HandoffOnlyAcrossLanes) {
  Graph g;
  g.devices = 2;
  g.handoffMs = 0.5;
  g.tasks.push_back({0, Lane::compute, 1, {}});
  g.tasks.push_back({0, Lane::compute, 1, {}});     // back to back
  g.tasks.push_back({1, Lane::compute, 1, {0}});    // another device's
  g.tasks.push_back({0, Lane::d2h, 1, {1}});        // another queue's
  g.tasks.push_back({1, Lane::compute, 1, {2, 0}}); // long past
  std::optional<Times> t = resolve(g);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->start[1], 1, 1e-12);
  EXPECT_NEAR(t->start[2], 1.5, 1e-12);
  EXPECT_NEAR(t->start[3], 2.5, 1e-12);
  EXPECT_NEAR(t->start[4], 2.5, 1e-12);
  g.handoffMs = 0;
  t = resolve(g);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->start[2], 1, 1e-12);
}

/// host_interpreters: a task's dispatch work (Task::dispatchMs) shares the
/// host's interpreters with every other device's, the rest of the task runs
/// alone after it. One interpreter (RoundPipe's GIL): two devices' 1.5 ms
/// of dispatch at once take 3 ms, then each task's 0.5 ms of kernels; none
/// (rp's executor, a thread per device): both end at 2 ms, as before.
TEST(HostModelTest, DispatchSharesTheInterpreter) {
  for (bool hostModel : {false, true}) {
    Graph g;
    g.devices = 3;
    if (hostModel)
      g.host.dramGBps = 100; // the fluid model's path
    for (unsigned d = 0; d < 2; ++d) {
      Task task{d, Lane::compute, 2, {}};
      task.dispatchMs = 1.5;
      g.tasks.push_back(task);
    }
    g.tasks.push_back({2, Lane::compute, 2, {}}); // no dispatch work
    std::optional<Times> t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 2, 1e-9);
    EXPECT_NEAR(t->end[1], 2, 1e-9);
    EXPECT_EQ(t->interpreterBusyMs, 0);

    g.host.interpreters = 1;
    t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 3.5, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[1], 3.5, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[2], 2, 1e-9) << hostModel;
    EXPECT_NEAR(t->interpreterBusyMs, 3, 1e-9);
    EXPECT_NEAR(t->computeBusyMs[0], 2, 1e-9); // the task's own time

    // Two interpreters: each device's dispatch alone again.
    g.host.interpreters = 2;
    t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 2, 1e-9) << hostModel;

    // One after the other on one device: the second's dispatch waits for
    // nothing but its lane; with a third device dispatching beside it, the
    // interpreter is shared for as long as both dispatch.
    g.host.interpreters = 1;
    g.tasks.resize(1);
    Task next{0, Lane::compute, 2, {}};
    next.dispatchMs = 1;
    g.tasks.push_back(next);
    Task other{1, Lane::compute, 1, {}};
    other.dispatchMs = 1;
    g.tasks.push_back(other);
    t = resolve(g);
    ASSERT_TRUE(t);
    // 0-2: tasks 0 and 2 share it (1 ms of each done), task 2 ends at 2;
    // task 0 dispatches alone to 2.5, then its 0.5 ms of kernels; task 1
    // dispatches from 3 to 4, then 1 ms of kernels.
    EXPECT_NEAR(t->end[2], 2, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[0], 2.5 + 0.5, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[1], 5, 1e-9) << hostModel;
  }
}

/// The profile's host_interpreters reaches the timing core; a fraction is
/// an error.
TEST(HostModelTest, HostInterpretersField) {
  std::string error;
  std::optional<HardwareModel> hw = parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25, "moe_host_us": 100, "host_interpreters": 1})",
      "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_EQ(hw->hostModel().interpreters, 1u);
  EXPECT_FALSE(parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25, "host_interpreters": 1.5})",
      "t.json", error));
  EXPECT_NE(error.find("whole number"), std::string::npos) << error;
}

/// kernel_host_us: the host's work issuing each kernel call, beside the
/// kernels. A program takes its dispatch work, then the larger of its
/// kernels and its calls' issue work; absent, 0 and the sum as before; a
/// negative cost is an error; it may be an unknown with a range.
TEST(HostModelTest, KernelHostField) {
  std::string error;
  const char *text = R"({"tflops": {"f32": 1}, "memory_gbps": 1,
      "h2d_gbps": 25, "d2h_gbps": 25, "kernel_host_us": 10,
      "unknown": {"kernel_host_us": [5, 40]}})";
  std::optional<HardwareModel> hw = parseHardwareModel(text, "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_NEAR(hw->issueMs(100), 1, 1e-12);
  EXPECT_NEAR(hw->programMs(2, 0.5, 100), 2.5, 1e-12);   // kernels longer
  EXPECT_NEAR(hw->programMs(0.4, 0.5, 100), 1.5, 1e-12); // host-bound
  std::optional<std::vector<UnknownInput>> unknown =
      parseUnknownInputs(text, "t.json", *hw, error);
  ASSERT_TRUE(unknown) << error;
  EXPECT_NEAR(atEnd(*hw, *unknown, true).issueMs(100), 4, 1e-12);
  EXPECT_NEAR(atEnd(*hw, *unknown, false).issueMs(100), 0.5, 1e-12);
  EXPECT_NE(describeUnknown(*unknown).find("5-40 us of host work issuing a "
                                           "kernel"),
            std::string::npos);
  EXPECT_NE(describeAssumed(*hw).find("10 us of host work issuing each "
                                      "kernel, beside it on each GPU's own "
                                      "thread"),
            std::string::npos)
      << describeAssumed(*hw);

  std::optional<HardwareModel> none = parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25})",
      "t.json", error);
  ASSERT_TRUE(none) << error;
  EXPECT_EQ(none->issueMs(100), 0);
  EXPECT_EQ(none->programMs(0.4, 0.5, 100), 0.4 + 0.5);
  EXPECT_EQ(describeAssumed(*none).find("issuing"), std::string::npos);
  EXPECT_FALSE(parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 1,
          "d2h_gbps": 1, "kernel_host_us": -1})",
      "t.json", error));
  EXPECT_NE(error.find("kernel_host_us"), std::string::npos) << error;
}

/// Task::issueMs on shared interpreters: each task's issue work is a flow
/// on them beside its kernels, and the task ends when both have. Without
/// interpreters the caller's `ms` (HardwareModel::programMs) says it all.
TEST(HostModelTest, IssueWorkBesideTheKernels) {
  for (bool hostModel : {false, true}) {
    // Three devices, each 2 ms of kernels issued by 1 ms of host work.
    Graph g;
    g.devices = 3;
    if (hostModel)
      g.host.dramGBps = 100; // the fluid model's path
    for (unsigned d = 0; d < 3; ++d) {
      Task task{d, Lane::compute, 2, {}};
      task.issueMs = 1;
      g.tasks.push_back(task);
    }
    std::optional<Times> t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 2, 1e-9); // each its own thread: hidden
    EXPECT_EQ(t->interpreterBusyMs, 0);

    // One interpreter: the three issue flows share it, 3 ms for all,
    // past the kernels' 2 ms: the devices wait for their host.
    g.host.interpreters = 1;
    t = resolve(g);
    ASSERT_TRUE(t);
    for (unsigned i = 0; i < 3; ++i)
      EXPECT_NEAR(t->end[i], 3, 1e-9) << hostModel << " task " << i;
    EXPECT_NEAR(t->interpreterBusyMs, 3, 1e-9);
    EXPECT_NEAR(t->computeBusyMs[0], 2, 1e-9); // the kernels' time

    // Two devices issuing 0.8 ms each on one interpreter: 1.6 ms, below
    // the kernels' 2: hidden (as bench/layer_host.py argues for
    // RoundPipe's dense layers, its interpreter under 100 % busy).
    g.tasks.resize(2);
    g.tasks[0].issueMs = g.tasks[1].issueMs = 0.8;
    t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 2, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[1], 2, 1e-9) << hostModel;

    // Dispatch work first, then the kernels and their issue work beside
    // them; the next task on the lane waits for both parts. Two devices:
    // 1 ms of dispatch each shared, 0-2; then 2 ms of kernels (to 4) and
    // 1.5 ms of issue each shared (to 5); ms = 1 + max(2, 1.5).
    for (Task &task : g.tasks) {
      task.ms = 3;
      task.dispatchMs = 1;
      task.issueMs = 1.5;
    }
    g.tasks.push_back({0, Lane::compute, 1, {}});
    t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 5, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[1], 5, 1e-9) << hostModel;
    EXPECT_NEAR(t->start[2], 5, 1e-9) << hostModel;
    EXPECT_NEAR(t->end[2], 6, 1e-9) << hostModel;
    EXPECT_NEAR(t->interpreterBusyMs, 2 + 3, 1e-9);

    // Issue work alone, no dispatch, shorter than the kernels on a free
    // interpreter: the kernels' time, exactly as without it.
    g.tasks.assign(1, {0, Lane::compute, 2, {}});
    g.tasks[0].issueMs = 0.5;
    t = resolve(g);
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->end[0], 2, 1e-12) << hostModel;
    EXPECT_NEAR(t->interpreterBusyMs, 0.5, 1e-12);
  }
}

/// The launches the host issues per call, as the cuda device makes them:
/// what kernel_host_us is charged on. A reshape is counted as a view
/// (none); a MoE call launches its helpers beside its main kernel.
TEST(HostModelTest, IssueWorkCountsTheCudaDevicesLaunches) {
  auto launches = [](const char *op, const std::vector<int64_t> &ints = {}) {
    int index = kernelOpIndex(op);
    EXPECT_GE(index, 0) << op;
    return kernelLaunches(uint16_t(index), ints);
  };
  EXPECT_EQ(launches("reshape"), 0u);
  EXPECT_EQ(launches("matmul", {0, 1}), 1u);
  EXPECT_EQ(launches("moe_route", {2, 0, 1}), 1u);
  EXPECT_EQ(launches("moe_route_grad", {0, 1}), 1u);
  EXPECT_EQ(launches("moe_dispatch"), 4u);
  EXPECT_EQ(launches("moe_grouped_matmul", {1}), 4u);
  EXPECT_EQ(launches("moe_grouped_matmul_wgrad", {0}), 4u);
  EXPECT_EQ(launches("moe_combine", {1}), 1u);
  EXPECT_EQ(launches("moe_combine_grad", {0}), 4u);
  EXPECT_EQ(launches("moe_combine_grad", {1}), 5u);
  // Each costs the host its issue work.
  std::string error;
  std::optional<HardwareModel> hw = parseHardwareModel(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "h2d_gbps": 25,
          "d2h_gbps": 25, "kernel_host_us": 10})",
      "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_NEAR(hw->issueMs(launches("moe_dispatch")), 0.04, 1e-12);
}

/// host_cores: every device's compute and the host's work share the host's
/// cores, one core at most each. Two host devices' 10 ms on one core take
/// 20 ms; on two cores, or with the cores unset, 10 ms.
TEST(HostModelTest, TwoDevicesOnOneCoreTakeTwiceAsLong) {
  Graph g;
  g.devices = 2;
  g.tasks.push_back({0, Lane::compute, 10, {}});
  g.tasks.push_back({1, Lane::compute, 10, {}});
  for (double cores : {0.0, 1.0, 2.0, 3.0, 0.5}) {
    g.host.cores = cores;
    std::optional<Times> t = resolve(g);
    ASSERT_TRUE(t);
    double alone = cores == 1 ? 20 : cores == 0.5 ? 40 : 10;
    EXPECT_NEAR(t->end[0], alone, 1e-9) << cores;
    EXPECT_NEAR(t->end[1], alone, 1e-9) << cores;
    // Busy is the work, not the time it was stretched to.
    EXPECT_NEAR(t->computeBusyMs[0], 10, 1e-9) << cores;
  }
  // The optimizer streaming DRAM shares the core too: with a device's
  // 10 ms beside its 10 ms, both take 20 ms; with DRAM its only limit
  // (two cores), 10 ms.
  Graph o;
  o.devices = 1;
  o.host.dramGBps = 100;
  o.tasks.push_back({0, Lane::compute, 10, {}});
  Task update{1, Lane::host, 10, {}};
  update.hostGBps = 50;
  o.tasks.push_back(update);
  o.host.cores = 1;
  std::optional<Times> t = resolve(o);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->end[0], 20, 1e-9);
  EXPECT_NEAR(t->end[1], 20, 1e-9);
  o.host.cores = 2;
  t = resolve(o);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->end[1], 10, 1e-9);
}

/// With as many cores as the devices and the host's threads, nothing
/// changes: a graph of compute, copies, hand-offs and the optimizer ends
/// every task where it does with the cores unset.
TEST(HostModelTest, EnoughCoresChangeNothing) {
  Graph g = uploads(2, 1, 25, 40);
  g.handoffMs = 0.03;
  g.tasks.push_back({0, Lane::compute, 7, {0}});
  g.tasks.push_back({1, Lane::compute, 5, {1}});
  g.tasks.push_back({1, Lane::compute, 3, {2}});
  g.tasks.push_back({0, Lane::d2h, 4, {4}});
  Task update{2, Lane::host, 6, {5}};
  update.hostGBps = 30;
  g.tasks.push_back(update);
  std::optional<Times> before = resolve(g);
  ASSERT_TRUE(before);
  g.host.cores = 3; // two devices and the optimizer's thread
  std::optional<Times> after = resolve(g);
  ASSERT_TRUE(after);
  for (size_t i = 0; i < g.tasks.size(); ++i)
    EXPECT_NEAR(after->end[i], before->end[i], 1e-9) << i;
  g.host.cores = 1; // and fewer do
  std::optional<Times> one = resolve(g);
  ASSERT_TRUE(one);
  EXPECT_GT(one->makespan, before->makespan + 1);
}

/// The profile's host_cores: a number or "machine" (this machine's CPUs);
/// the shipped profiles leave it unset, so their predictions are as
/// before; the prediction says it assumes them.
TEST(HostModelTest, HostCoresField) {
  std::string error;
  const char *base = R"({"tflops": {"f32": 1}, "memory_gbps": 1,
                         "h2d_gbps": 25, "d2h_gbps": 25, "host_cores": )";
  std::optional<HardwareModel> hw =
      parseHardwareModel(std::string(base) + "2}", "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_EQ(hw->hostModel().cores, 2);
  EXPECT_TRUE(hw->hostModel().on());
  EXPECT_NE(describeAssumed(*hw).find("sharing 2 CPU core(s)"),
            std::string::npos);
  EXPECT_EQ(modelLeavesOut(*hw).find("CPU cores"), std::string::npos);
  hw = parseHardwareModel(std::string(base) + "\"machine\"}", "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_EQ(hw->hostCores, machineCores());
  EXPECT_GE(machineCores(), 1u);
  // Half a machine's core: a run beside other work.
  hw = parseHardwareModel(std::string(base) + "0.5}", "t.json", error);
  ASSERT_TRUE(hw) << error;
  EXPECT_EQ(hw->hostModel().cores, 0.5);
  for (const char *bad : {"-1}", "\"all\"}", "true}"}) {
    EXPECT_FALSE(parseHardwareModel(std::string(base) + bad, "t.json", error))
        << bad;
    EXPECT_NE(error.find("host_cores"), std::string::npos) << error;
  }
  // No shipped profile sets it yet: the host profile's plans (every
  // test's default) would depend on the machine's cores (a 4-device host
  // plan on 2 cores no longer gains from token slices).
  for (const std::string &name : shippedHardwareNames()) {
    std::optional<HardwareModel> shipped = loadHardwareModel(name, error);
    ASSERT_TRUE(shipped) << name << ": " << error;
    EXPECT_EQ(shipped->hostCores, 0) << name;
    EXPECT_EQ(modelLeavesOut(*shipped), kModelLeavesOut) << name;
  }
}
