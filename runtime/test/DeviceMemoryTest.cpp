//===- DeviceMemoryTest.cpp - packing device buffers by the plan's order --===//
//
// A one-device step small enough to know the answer: buffers the plan
// orders one after the other share bytes, those in use at once or read
// before written do not, and the step computes the same with the packed
// arena (which starts as NaNs) as with a buffer apiece.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/DeviceMemory.h"
#include "rp/runtime/Executor.h"
#include "rp/runtime/PipelineExecutor.h"

#include <gmock/gmock.h>

using namespace rp::runtime;
using namespace rp::runtime::test;
using ::testing::HasSubstr;

namespace {

struct ChainPlan {
  PlanBuilder b{1, 1, true};
  uint32_t hostX = 0, hostY = 0, hostQ = 0;
  uint32_t a = 0, bb = 0, c = 0, d = 0, e = 0, f = 0;
};

/// IN: a <- hostX; J1: bb = relu(a), c = neg(bb); J2: d = exp(c) + f;
/// OUT: hostY <- d; and on the weight queue, unordered with all of it,
/// e <- hostQ.
/// f is read and never written.
ChainPlan makeChainPlan() {
  ChainPlan t;
  PlanBuilder &b = t.b;
  t.hostX = b.buffer("x", {4, 4});
  t.hostY = b.buffer("y", {4, 4});
  t.hostQ = b.buffer("q", {4, 4});
  t.a = b.buffer("a", {4, 4}, 0);
  t.bb = b.buffer("b", {4, 4}, 0);
  t.c = b.buffer("c", {4, 4}, 0);
  t.d = b.buffer("d", {4, 4}, 0);
  t.e = b.buffer("e", {4, 4}, 0);
  t.f = b.buffer("f", {4, 4}, 0);
  b.input("x", t.hostX);
  b.output("y", t.hostY);
  uint32_t p1 = b.program("J1", {call(OpKind::relu, {t.a}, {t.bb}),
                                 call(OpKind::neg, {t.bb}, {t.c})});
  uint32_t p2 = b.program("J2", {call(OpKind::exp, {t.c}, {t.d}),
                                 call(OpKind::add, {t.d, t.f}, {t.d})});
  uint32_t in = b.event(), j2 = b.event();
  b.copy(0, QueueKind::activation_h2d, {b.whole(t.hostX, t.a)}, {}, {in}, "IN");
  b.run(0, p1, {in}, {}, "J1");
  b.run(0, p2, {}, {j2}, "J2");
  b.copy(0, QueueKind::d2h, {b.whole(t.d, t.hostY)}, {j2}, {}, "OUT");
  b.copy(0, QueueKind::weight_h2d, {b.whole(t.hostQ, t.e)}, {}, {}, "UP");
  return t;
}

TEST(DeviceMemory, BuffersThePlanOrdersShareBytes) {
  ChainPlan t = makeChainPlan();
  Expected<Plan> plan = writeAndLoad(t.b.plan, "chain.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  Expected<DeviceLayout> layout = planDeviceMemory(*plan);
  ASSERT_TRUE(layout) << layout.getStatus().toString();
  const std::vector<uint64_t> &at = layout->offset;
  // c is written after J1's first call, the last use of a.
  EXPECT_EQ(at[t.c], at[t.a]);
  // d is written by J2, after J1, bb's last user.
  EXPECT_EQ(at[t.d], at[t.bb]);
  EXPECT_NE(at[t.a], at[t.bb]);
  // e is copied while anything else may run; f is read before any write.
  for (uint32_t other : {t.a, t.bb, t.f})
    EXPECT_NE(at[t.e], at[other]);
  EXPECT_FALSE(layout->shared[t.e]);
  EXPECT_FALSE(layout->shared[t.f]);
  EXPECT_TRUE(layout->shared[t.c]);
  uint64_t slot = DeviceLayout::kAlignment;
  EXPECT_EQ(layout->unsharedBytes[0], 6 * slot);
  EXPECT_EQ(layout->arenaBytes[0], 4 * slot);
  EXPECT_TRUE(verifyDeviceLayout(*plan, *layout).isOk());
}

TEST(DeviceMemory, VerifyFindsBuffersInUseAtOnce) {
  ChainPlan t = makeChainPlan();
  Expected<Plan> plan = writeAndLoad(t.b.plan, "chain-bad.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  Expected<DeviceLayout> layout = planDeviceMemory(*plan);
  ASSERT_TRUE(layout);
  layout->offset[t.e] = layout->offset[t.bb];
  Status s = verifyDeviceLayout(*plan, *layout);
  ASSERT_TRUE(s.failed());
  EXPECT_THAT(s.getMessage(), HasSubstr("'b' and 'e' share bytes of device 0"));
}

/// An upload split over two copy jobs (a weight set over the chunk size)
/// writes its buffer whole: the buffer's value starts with the first chunk,
/// so it is packed like any other and its arena range is reused after its
/// last reader.
TEST(DeviceMemory, AnUploadInChunksWritesItsBufferWhole) {
  PlanBuilder b{1, 1, true};
  uint32_t q = b.buffer("q", {4, 4});
  uint32_t y = b.buffer("y", {4, 4});
  uint32_t w = b.buffer("w", {4, 4}, 0);
  uint32_t h = b.buffer("h", {4, 4}, 0);
  uint32_t g = b.buffer("g", {4, 4}, 0);
  b.output("y", y);
  uint32_t p1 = b.program("J1", {call(OpKind::neg, {w}, {h})});
  uint32_t p2 = b.program("J2", {call(OpKind::exp, {h}, {g})});
  uint32_t up = b.event(), done = b.event();
  uint64_t half = 8 * sizeof(float);
  b.copy(0, QueueKind::weight_h2d, {CopyDesc{q, 0, w, 0, half}}, {}, {},
         "UP c0");
  b.copy(0, QueueKind::weight_h2d, {CopyDesc{q, half, w, half, half}}, {}, {up},
         "UP c1");
  b.run(0, p1, {up}, {}, "J1");
  b.run(0, p2, {}, {done}, "J2");
  b.copy(0, QueueKind::d2h, {b.whole(g, y)}, {done}, {}, "OUT");
  Expected<Plan> plan = writeAndLoad(b.plan, "chunks.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  Expected<DeviceLayout> layout = planDeviceMemory(*plan);
  ASSERT_TRUE(layout) << layout.getStatus().toString();
  EXPECT_TRUE(layout->transient[w]);
  // g is written by J2, after J1, w's last reader.
  EXPECT_EQ(layout->offset[g], layout->offset[w]);
  EXPECT_TRUE(verifyDeviceLayout(*plan, *layout).isOk());
}

TEST(DeviceMemory, PackedStepComputesLikeABufferApiece) {
  ChainPlan t = makeChainPlan();
  Expected<Plan> plan = writeAndLoad(t.b.plan, "chain-run.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  NpyArray x = randomArray({4, 4}, 7);
  std::vector<float> results[2];
  for (bool share : {true, false}) {
    ForwardOptions options;
    options.shareDeviceMemory = share;
    auto backend = createBackend("host", backendOptions(1, 1));
    ASSERT_TRUE(backend);
    auto fwd = HostForward::create(*plan, **backend, options);
    ASSERT_TRUE(fwd) << fwd.getStatus().toString();
    EXPECT_EQ((*fwd)->getLayout().arenaBytes[0],
              (share ? 4 : 6) * DeviceLayout::kAlignment);
    ASSERT_TRUE((*fwd)->setInput("x", x).isOk());
    auto exec = PipelineExecutor::create(*plan, **fwd, PipelineOptions());
    ASSERT_TRUE(exec) << exec.getStatus().toString();
    ThreadPool pool(1);
    ASSERT_TRUE((*exec)->step(pool).isOk());
    TensorRef y = (*fwd)->buffer(t.hostY);
    results[share].assign(y.as<float>(), y.as<float>() + y.size());
  }
  const float *in = reinterpret_cast<const float *>(x.data.data());
  for (size_t i = 0; i < results[0].size(); ++i) {
    // f is never written: zeros in a buffer of its own either way.
    EXPECT_FLOAT_EQ(results[1][i], std::exp(-std::max(in[i], 0.0f)));
    EXPECT_EQ(results[0][i], results[1][i]);
  }
}

// The compiler's planned peak bounds one pass's arena per device, with the
// device's alignment padding as slack; a rotating layout sizes every arena
// as the largest and holds it to the largest peak. A plan without a peak is
// not checked.
TEST(DeviceMemory, ArenasAreCheckedAgainstThePlannedPeak) {
  Plan plan;
  plan.devices = 2;
  DeviceLayout layout;
  layout.arenaBytes = {1000, 400};
  layout.paddingBytes = {0, 10};
  EXPECT_FALSE(checkArenasWithinPlan(plan, layout).failed());
  plan.plannedPeakBytes = {1000, 500};
  EXPECT_FALSE(checkArenasWithinPlan(plan, layout).failed());
  EXPECT_FALSE(checkArenasWithinPlan(plan, layout, true).failed());
  layout.arenaBytes = {1001, 510};
  Status over = checkArenasWithinPlan(plan, layout);
  EXPECT_EQ(over.getCode(), StatusCode::ResourceExhausted);
  EXPECT_THAT(over.getMessage(),
              HasSubstr("device 0's buffers take 1001 bytes in one pass, "
                        "over the compiler's planned peak of 1000 bytes plus "
                        "0 bytes of alignment padding (1.001x the peak)"));
  EXPECT_THAT(over.getMessage(), HasSubstr("recompile it"));
  // Device 1 is within its peak and its padding.
  layout.arenaBytes[0] = 1000;
  EXPECT_FALSE(checkArenasWithinPlan(plan, layout).failed());
  layout.arenaBytes[1] = 511;
  EXPECT_THAT(checkArenasWithinPlan(plan, layout).getMessage(),
              HasSubstr("device 1's buffers take 511 bytes"));
  // Renamed devices: the largest arena against the largest peak and
  // padding (1000 + 10).
  layout.arenaBytes = {1010, 400};
  EXPECT_FALSE(checkArenasWithinPlan(plan, layout, true).failed());
  layout.arenaBytes = {1011, 400};
  EXPECT_THAT(checkArenasWithinPlan(plan, layout, true).getMessage(),
              HasSubstr("device 0's buffers take 1011 bytes in one pass "
                        "(every device sized as the largest"));
  // rp-run's margin: a tenth more of the peak (1000 + 10 + 100).
  layout.arenaBytes = {1110, 400};
  EXPECT_FALSE(checkArenasWithinPlan(plan, layout, true, 0.1).failed());
  layout.arenaBytes = {1111, 400};
  EXPECT_THAT(checkArenasWithinPlan(plan, layout, true, 0.1).getMessage(),
              HasSubstr("plus 110 bytes of margin and alignment padding"));
}

// What a run allocates per device, all slots together, against the plan's
// planned peak for its passes in flight: each slot's alignment padding is
// slack, nothing more. A plan older than passes_in_flight carries one
// pass's peak, counted once per slot (the largest when renamed); fewer
// slots than the plan's passes get their share, more are held to the
// plan's peak and told to leave --passes-in-flight out.
TEST(DeviceMemory, AllocationIsCheckedAgainstTheRunPeak) {
  Plan plan;
  plan.devices = 2;
  DeviceLayout layout;
  layout.paddingBytes = {4, 2};
  plan.plannedPeakBytes = {2000, 2000};
  plan.passesInFlight = 2;
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {2008, 2008}, 2, 2, true)
                   .failed());
  Status over =
      checkAllocationWithinPlan(plan, layout, {2009, 100}, 2, 2, true);
  EXPECT_EQ(over.getCode(), StatusCode::ResourceExhausted);
  EXPECT_THAT(over.getMessage(),
              HasSubstr("device 0 allocates 2009 bytes of buffers (2 passes "
                        "in flight, a copy of the arenas each, every device "
                        "sized as the largest since devices are renamed pass "
                        "by pass), over the compiler's planned peak of 2000 "
                        "bytes for its 2 passes in flight plus 8 bytes"));
  // One slot of a two-pass plan: half of it, one slot's padding.
  EXPECT_FALSE(
      checkAllocationWithinPlan(plan, layout, {1004, 1002}, 1, 1, false)
          .failed());
  EXPECT_THAT(
      checkAllocationWithinPlan(plan, layout, {1005, 0}, 1, 1, false)
          .getMessage(),
      HasSubstr("planned peak of 1000 bytes for 1 of its 2 passes in flight"));
  // A one-pass plan run with two slots: refused, and told why.
  plan.plannedPeakBytes = {1000, 600};
  plan.passesInFlight = 1;
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {1004, 602}, 1, 1, false)
                   .failed());
  EXPECT_THAT(checkAllocationWithinPlan(plan, layout, {2000, 1200}, 2, 2, true)
                  .getMessage(),
              HasSubstr("leave --passes-in-flight out"));
  // An older plan: one pass's peak, a copy per slot, the largest renamed.
  plan.passesInFlight = 0;
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {2008, 2008}, 2, 2, true)
                   .failed());
  EXPECT_TRUE(checkAllocationWithinPlan(plan, layout, {1000, 1205}, 2, 2, false)
                  .failed());
  EXPECT_EQ(plannedRunPeak(plan, 1, 2, true), 2000u);
  EXPECT_EQ(plannedRunPeak(plan, 1, 2, false), 1200u);
  // Two passes sharing one copy of an older plan's arenas: one pass's peak.
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {1004, 1004}, 2, 1, true)
                   .failed());
  EXPECT_EQ(plannedRunPeak(plan, 1, 1, true), 1000u);
}

// A plan with arena_copies carries that many copies' peak (the largest
// pass's when renamed): two passes in flight on one shared copy are held
// to one pass's peak and one copy's padding; two copies forced onto a plan
// planned for one are refused and told to leave --arena-copies out.
// Running one copy of a plan planned for two (arena_copies 2) gets half.
TEST(DeviceMemory, SharedArenasAreCheckedAsOneCopy) {
  Plan plan;
  plan.devices = 2;
  DeviceLayout layout;
  layout.paddingBytes = {4, 2};
  plan.plannedPeakBytes = {1000, 1000};
  plan.passesInFlight = 2;
  plan.arenaCopies = 1;
  EXPECT_EQ(plannedPassPeak(plan, 0), 1000u);
  EXPECT_EQ(plannedRunPeak(plan, 0, 1, true), 1000u);
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {1004, 1004}, 2, 1, true)
                   .failed());
  Status one =
      checkAllocationWithinPlan(plan, layout, {1005, 1004}, 2, 1, true);
  EXPECT_EQ(one.getCode(), StatusCode::ResourceExhausted);
  EXPECT_THAT(one.getMessage(),
              HasSubstr("device 0 allocates 1005 bytes of buffers (2 passes "
                        "in flight sharing one copy of the arenas, every "
                        "device sized as the largest since devices are "
                        "renamed pass by pass), over the compiler's planned "
                        "peak of 1000 bytes for its 2 passes in flight "
                        "sharing one copy of the arenas plus 4 bytes"));
  EXPECT_THAT(one.getMessage(), HasSubstr("recompile it"));
  // Two copies on a plan planned for one: refused, with what to do.
  Status two =
      checkAllocationWithinPlan(plan, layout, {2000, 2000}, 2, 2, true);
  EXPECT_EQ(two.getCode(), StatusCode::ResourceExhausted);
  EXPECT_THAT(two.getMessage(),
              HasSubstr("device 0 allocates 2000 bytes of buffers (2 passes "
                        "in flight, a copy of the arenas each"));
  EXPECT_THAT(two.getMessage(),
              HasSubstr("the plan shares one copy of the arenas between its "
                        "2 passes in flight because two copies do not fit "
                        "its devices: leave --arena-copies out"));
  // A plan planned for two copies, run on one: half its peak.
  plan.plannedPeakBytes = {2000, 2000};
  plan.arenaCopies = 2;
  EXPECT_EQ(plannedPassPeak(plan, 1), 1000u);
  EXPECT_EQ(plannedRunPeak(plan, 1, 1, true), 1000u);
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {1004, 1004}, 2, 1, true)
                   .failed());
  EXPECT_THAT(checkAllocationWithinPlan(plan, layout, {1005, 0}, 2, 1, false)
                  .getMessage(),
              HasSubstr("planned peak of 1000 bytes for 1 of its 2 copies of "
                        "the arenas"));
  // A one-pass plan (no arena_copies) with two passes forced: the hint
  // names both ways out.
  plan.arenaCopies = 0;
  plan.passesInFlight = 1;
  plan.plannedPeakBytes = {1000, 1000};
  EXPECT_THAT(checkAllocationWithinPlan(plan, layout, {2000, 2000}, 2, 2, true)
                  .getMessage(),
              HasSubstr("leave --passes-in-flight out, or keep two passes on "
                        "one copy of the arenas with --arena-copies 1"));
  EXPECT_FALSE(checkAllocationWithinPlan(plan, layout, {1004, 1004}, 2, 1, true)
                   .failed());
}

} // namespace
