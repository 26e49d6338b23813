//===- SteadyStateTest.cpp - steps run back to back, in the steady state --===//

#include "rp/Analysis/SteadyState.h"
#include "rp/Analysis/PlanPrediction.h"

#include <gtest/gtest.h>

#include <map>

using namespace mlir::rp;

namespace {

std::vector<LayerCost> uniform(unsigned n, double f = 1, double b = 2) {
  std::vector<LayerCost> layers(n);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = f;
    c.backwardMs = b;
    c.paramBytes = c.gradBytes = 1000;
    c.actInBytes = c.actOutBytes = 1000;
    c.trainableElements = 250;
  }
  return layers;
}

/// Transfers that take no time, and an optimizer of `optimizerMs`.
HardwareProfile freeLinks(double optimizerMs = 0) {
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = 1e12;
  // kOptimizerBytesPerParam per trainable parameter at optimizer_gbps.
  if (optimizerMs > 0)
    hw.optimizerGBps = 8 * 250 * kOptimizerBytesPerParam / (optimizerMs * 1e6);
  return hw;
}

Pipeline roundRobin(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                    unsigned g, unsigned m) {
  std::string error;
  auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, g, m, error);
  EXPECT_TRUE(mlir::succeeded(pl)) << error;
  return *pl;
}

} // namespace

/// With free transfers and no optimizer, the steady state has no fill and
/// no drain: its step is shorter than one step alone, and no shorter than
/// the work spread evenly over the devices.
TEST(ContinuousTest, SteadyStepDropsFillAndDrain) {
  std::vector<LayerCost> layers = uniform(8);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  for (unsigned g : {2u, 4u})
    for (unsigned m : {3u, 5u, 8u}) {
      Pipeline one = roundRobin(p, layers, g, m);
      Pipeline alone = one;
      insertTransfers(alone, layers, freeLinks());
      // As the plan runs it: the recompute split from the backward.
      std::optional<Timing> t =
          estimateTiming(recomputeSplit(alone.schedule, alone, layers));
      ASSERT_TRUE(t);
      std::optional<SteadyState> s = steadyState(one, layers, freeLinks());
      ASSERT_TRUE(s);
      double work = 0;
      for (double b : t->computeBusyMs)
        work += b;
      EXPECT_NEAR(s->busyMs, work, 1e-9);
      EXPECT_GE(s->stepMs, work / g - 1e-9) << "G=" << g << " M=" << m;
      EXPECT_LT(s->stepMs, t->iterationMs) << "G=" << g << " M=" << m;
      EXPECT_LT(s->bubble(), t->bubbleFraction());
      EXPECT_NEAR(s->firstStepMs, t->iterationMs, 1e-9);
    }
}

/// A step's weights wait for the optimizer of two steps back (async) or of
/// the step before (sync): an optimizer slower than the pipeline sets the
/// async period alone, and adds to the pipeline in sync mode.
TEST(ContinuousTest, OptimizerGatesTheWeights) {
  std::vector<LayerCost> layers = uniform(8);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  Pipeline one = roundRobin(p, layers, 4, 5);
  std::optional<SteadyState> fast = steadyState(one, layers, freeLinks());
  ASSERT_TRUE(fast);
  double opt = 3 * fast->stepMs;
  std::optional<SteadyState> async = steadyState(one, layers, freeLinks(opt));
  std::optional<SteadyState> sync =
      steadyState(one, layers, freeLinks(opt), /*syncOptimizer=*/true);
  ASSERT_TRUE(async && sync);
  EXPECT_NEAR(async->stepMs, opt, 1e-6 * opt);
  EXPECT_GT(sync->stepMs, opt + 0.5 * fast->stepMs);
}

/// When the job count is not a multiple of the device count one step
/// loads the devices unevenly; the rotation evens it out over the run.
TEST(ContinuousTest, RotationBalancesTheDevices) {
  std::vector<LayerCost> layers = uniform(4);
  Partition p = partitionFromSizes({3}, 1, {3}, 4); // S = 3 jobs, G = 2
  Pipeline one = roundRobin(p, layers, 2, 4);
  Pipeline alone = one;
  insertTransfers(alone, layers, freeLinks());
  std::optional<Timing> t = estimateTiming(alone.schedule);
  ASSERT_TRUE(t);
  double lo = std::min(t->computeBusyMs[0], t->computeBusyMs[1]);
  double hi = std::max(t->computeBusyMs[0], t->computeBusyMs[1]);
  EXPECT_GT(hi / lo, 1.5); // forward + backward on one, the tail on the other
  std::optional<SteadyState> s = steadyState(one, layers, freeLinks());
  ASSERT_TRUE(s);
  EXPECT_NEAR(s->busyRatio(), 1.0, 1e-9);
  // S = 4 jobs on 2 devices: every step lands the same way, and the
  // imbalance stays (forward 2 + tail 3 ms against forward 1 + backward 9
  // ms per microbatch).
  Partition even = partitionFromSizes({2, 1}, 1, {3}, 4);
  std::optional<SteadyState> stuck =
      steadyState(roundRobin(even, layers, 2, 4), layers, freeLinks());
  ASSERT_TRUE(stuck);
  EXPECT_NEAR(stuck->busyRatio(), 2.0, 1e-9);
}

/// The pass shift moves step k's jobs by k * shift devices (the timing
/// core's layout, contract/test/ContinuousTest.cpp); a shift
/// coprime to G evens out a job count that is a multiple of G, and
/// dispatch=rounds keeps the modulo shift unless another is faster.
TEST(ContinuousTest, PassShiftMovesTheSteps) {
  std::vector<LayerCost> layers = uniform(4);
  Partition even = partitionFromSizes({2, 1}, 1, {3}, 4); // S = 4, G = 2
  Pipeline one = roundRobin(even, layers, 2, 4);
  EXPECT_EQ(one.shiftPerPass(), 0u);
  one.passShift = 1;
  std::optional<SteadyState> shifted = steadyState(one, layers, freeLinks());
  ASSERT_TRUE(shifted);
  EXPECT_EQ(shifted->shift, 1u);
  EXPECT_NEAR(shifted->busyRatio(), 1.0, 1e-9);

  Pipeline modulo = roundRobin(even, layers, 2, 4);
  std::optional<SteadyState> m =
      dispatchPasses(modulo, layers, freeLinks(), Dispatch::modulo);
  ASSERT_TRUE(m);
  EXPECT_EQ(modulo.passShift, 0);
  Pipeline rounds = roundRobin(even, layers, 2, 4);
  std::optional<SteadyState> r =
      dispatchPasses(rounds, layers, freeLinks(), Dispatch::rounds);
  ASSERT_TRUE(r);
  EXPECT_LE(r->stepMs, m->stepMs);
  EXPECT_EQ(r->stepMs < m->stepMs ? 1 : 0, rounds.passShift);
  EXPECT_EQ(r->stepMs, std::min(m->stepMs, shifted->stepMs));
  EXPECT_EQ(symbolizeDispatch("rounds"), Dispatch::rounds);
  EXPECT_FALSE(symbolizeDispatch("sideways"));
}

/// A backward job's saved input is uploaded ahead of its activation
/// gradient, so the recompute's input is never queued behind the gradient.
TEST(ContinuousTest, SavedInputGoesAheadOfTheGradient) {
  std::vector<LayerCost> layers = uniform(8);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  Pipeline pl = roundRobin(p, layers, 4, 2);
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = 1;
  insertTransfers(pl, layers, hw);
  unsigned checked = 0;
  // Per backward job and microbatch, the positions of its two uploads.
  std::map<std::pair<int, int>, std::pair<int, int>> at;
  for (auto [i, c] : llvm::enumerate(pl.schedule.commands)) {
    if (c.kind == CommandKind::h2dActivation)
      at[{c.job, c.microbatch}].first = int(i);
    if (c.kind == CommandKind::h2dGradient)
      at[{c.job, c.microbatch}].second = int(i);
  }
  for (auto [key, pos] : at)
    if (pl.jobs[key.first].kind == CommandKind::backward && pos.second > 0 &&
        pl.jobs[key.first].range.begin > 0) {
      EXPECT_LT(pos.first, pos.second) << "job " << key.first;
      ++checked;
    }
  EXPECT_GT(checked, 0u);
}

/// A tail slower per microbatch than the backward stages paces them when it
/// is one job; as two jobs taking alternate microbatches (tailJobs = 2) it
/// does not: the same work (nothing is computed twice), a shorter period,
/// within a tenth of the work spread over the devices.
TEST(ContinuousTest, SplitTailStopsPacingTheBackwardStages) {
  std::vector<LayerCost> layers = uniform(8);
  // Tail: 3 layers x 3 ms = 9 ms per microbatch; backward stages 2 x 3 ms.
  Partition p = partitionFromSizes({3, 2}, 3, {2, 2, 1}, 8);
  for (unsigned m : {8u, 9u}) {
    std::optional<SteadyState> one =
        steadyState(roundRobin(p, layers, 4, m), layers, freeLinks());
    p.tailJobs = 2;
    std::optional<SteadyState> two =
        steadyState(roundRobin(p, layers, 4, m), layers, freeLinks());
    p.tailJobs = 1;
    ASSERT_TRUE(one && two);
    EXPECT_NEAR(two->busyMs, one->busyMs, 1e-9);
    double bound = one->busyMs / 4;
    EXPECT_GT(one->stepMs, 1.2 * bound) << "M=" << m;
    EXPECT_LT(two->stepMs, 1.1 * bound) << "M=" << m;
    EXPECT_GE(two->stepMs, bound - 1e-9) << "M=" << m;
  }
}

/// One compile times the same plan's whole run again and again (the grain
/// choice, the loss fusion's choice, rp-insert-transfers, rp-plan-memory):
/// a whole run timed before is read back, bit for bit, and any input that
/// changes (a layer's cost, the shift, the arena copies, the optimizer
/// mode) is timed afresh. The search's candidates (untilSteady) are kept
/// too: another search that lowers the same run reads it back.
TEST(ContinuousTest, WholeRunsTimedAgainAreReused) {
  // Costs no other test times, so that the first timing is a fresh one.
  std::vector<LayerCost> layers = uniform(8, 1.375, 2.625);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  Pipeline one = roundRobin(p, layers, 4, 5);
  HardwareProfile hw = freeLinks(/*optimizerMs=*/7);
  hw.h2dGBps = hw.d2hGBps = 0.5;
  unsigned before = steadyStatesReused();
  std::optional<SteadyState> first = steadyState(one, layers, hw);
  ASSERT_TRUE(first);
  EXPECT_EQ(steadyStatesReused(), before);
  std::optional<SteadyState> again = steadyState(one, layers, hw);
  ASSERT_TRUE(again);
  EXPECT_EQ(steadyStatesReused(), before + 1);
  EXPECT_EQ(again->stepMs, first->stepMs);
  EXPECT_EQ(again->firstStepMs, first->firstStepMs);
  EXPECT_EQ(again->busyMs, first->busyMs);
  EXPECT_EQ(again->deviceBusyMs, first->deviceBusyMs);

  // Each changed input is a timing of its own, with its own result.
  std::vector<LayerCost> slower = layers;
  slower[5].backwardMs *= 3;
  std::optional<SteadyState> other =
      steadyState(roundRobin(p, slower, 4, 5), slower, hw);
  ASSERT_TRUE(other);
  EXPECT_GT(other->stepMs, first->stepMs);
  Pipeline moved = one;
  moved.passShift = int(one.shiftPerPass() + 1) % 4;
  std::optional<SteadyState> shifted = steadyState(moved, layers, hw);
  std::optional<SteadyState> shared =
      steadyStateInMemory(one, 2, 1, layers, hw);
  std::optional<SteadyState> sync = steadyState(one, layers, hw, true);
  ASSERT_TRUE(shifted && shared && sync);
  EXPECT_EQ(shifted->shift, moved.shiftPerPass());
  EXPECT_NE(sync->stepMs, first->stepMs);
  EXPECT_EQ(steadyStatesReused(), before + 1);

  // The partitioner's timings (untilSteady): a candidate lowered again
  // (at the other grain, its backward stages one layer each) is read back,
  // the same bits. Costs of their own, so that the first is timed.
  std::vector<LayerCost> searched = uniform(8, 1.125, 2.375);
  Partition ones =
      partitionFromSizes({1, 1, 1, 1, 1, 1, 1}, 1, {1, 1, 1, 1, 1, 1, 1}, 8);
  std::optional<SteadyState> timed[2];
  for (bool layerGrain : {false, true}) {
    Partition q = ones;
    q.layerGrain = layerGrain;
    Pipeline candidate = roundRobin(q, searched, 4, 5);
    timed[layerGrain] = dispatchPasses(candidate, searched, hw,
                                       Dispatch::modulo, false, nullptr,
                                       /*untilSteady=*/true);
    ASSERT_TRUE(timed[layerGrain]);
  }
  EXPECT_EQ(steadyStatesReused(), before + 2);
  EXPECT_EQ(timed[1]->stepMs, timed[0]->stepMs);
  EXPECT_EQ(timed[1]->busyMs, timed[0]->busyMs);
}

/// predictPlan, where the pass shift is known without timing (dispatch's
/// modulo shift here), times the run on two copies of the arenas only
/// where the memory plan keeps two: where two do not fit the passes share
/// one and the two-copy run's step would be thrown away (a third of a
/// Qwen3-235B-A22B LoRA compile, session 23). Counted as asked, timed or
/// read back, so that an earlier timing of the same run does not hide it.
TEST(ContinuousTest, TwoCopyRunTimedOnlyWhereItRuns) {
  std::vector<LayerCost> layers = uniform(8, 1.125, 2.375);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw = freeLinks(/*optimizerMs=*/5);
  hw.h2dGBps = hw.d2hGBps = 0.25;
  std::string error;
  PlanTarget roomy{hw, ScheduleKind::roundRobin, 4, 5, Dispatch::modulo,
                   -1, int64_t(1) << 40};
  WholeRunStats before = wholeRunStats();
  mlir::FailureOr<PlanPrediction> two = predictPlan(p, layers, roomy, error);
  ASSERT_TRUE(mlir::succeeded(two)) << error;
  WholeRunStats mid = wholeRunStats();
  EXPECT_EQ(two->arenaCopies, 2u);
  EXPECT_EQ(mid.askedTwoCopies, before.askedTwoCopies + 1);
  EXPECT_EQ(mid.askedSharing, before.askedSharing);

  // One pass's peak fits, two copies of it do not.
  PlanTarget tight = roomy;
  tight.budget = two->peak * 3 / 2;
  mlir::FailureOr<PlanPrediction> one = predictPlan(p, layers, tight, error);
  ASSERT_TRUE(mlir::succeeded(one)) << error;
  ASSERT_EQ(one->arenaCopies, 1u);
  WholeRunStats after = wholeRunStats();
  EXPECT_EQ(after.askedTwoCopies, mid.askedTwoCopies);
  EXPECT_GT(after.askedSharing, mid.askedSharing);
  // Its step is the shared run's, which is not the two-copy run's.
  std::optional<SteadyState> shared =
      steadyStateInMemory(roundRobin(p, layers, 4, 5), 2, 1, layers, hw);
  ASSERT_TRUE(shared);
  EXPECT_EQ(one->stepMs, shared->stepMs);
  EXPECT_NE(one->stepMs, two->stepMs);
}

/// The memo's self-check: with it on, a whole run read back is timed
/// again and compared; a kept result that timing again does not give (as
/// a key missing a field the timing reads would return) is counted and
/// the fresh one returned. Last in this file: it spoils the kept results.
TEST(ContinuousTest, MemoSelfCheckCatchesAStaleResult) {
  std::vector<LayerCost> layers = uniform(8, 1.625, 2.875);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  Pipeline one = roundRobin(p, layers, 4, 5);
  HardwareProfile hw = freeLinks(/*optimizerMs=*/6);
  setSteadyMemoCheck(true);
  WholeRunStats before = wholeRunStats();
  ASSERT_TRUE(before.checking);
  std::optional<SteadyState> first = steadyState(one, layers, hw);
  std::optional<SteadyState> again = steadyState(one, layers, hw);
  ASSERT_TRUE(first && again);
  WholeRunStats mid = wholeRunStats();
  EXPECT_EQ(mid.checked, before.checked + 1);
  EXPECT_EQ(mid.differ, before.differ);
  EXPECT_EQ(again->stepMs, first->stepMs);

  staleSteadyMemoForTest();
  std::optional<SteadyState> stale = steadyState(one, layers, hw);
  ASSERT_TRUE(stale);
  WholeRunStats after = wholeRunStats();
  EXPECT_EQ(after.checked, mid.checked + 1);
  EXPECT_EQ(after.differ, mid.differ + 1);
  EXPECT_EQ(stale->stepMs, first->stepMs);

  // Off, the spoiled result is what comes back: what the check guards.
  setSteadyMemoCheck(false);
  std::optional<SteadyState> unchecked = steadyState(one, layers, hw);
  ASSERT_TRUE(unchecked);
  EXPECT_EQ(unchecked->stepMs, first->stepMs + 1);
  EXPECT_EQ(wholeRunStats().checked, after.checked);
}
