//===- PartitionHostBudgetTest.cpp - partitions held to the host budget ---===//
//
// rp's partitioner under a host budget (SearchTarget::hostStagedBytes,
// holdToHostBudget): the pinned staging buffers of the partition it
// returns fit what the budget leaves, the devices still fit, a budget the
// fastest partition meets changes nothing, and the search memo keeps the
// held partition apart from the unheld one. At layer grain the hold splits
// forward stages where at stage grain it merges. A partition of 24 stages
// or more joins repaired merges in one round.
//
//===----------------------------------------------------------------------===//

#include "PartitionFixture.h"

#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/ScheduleTiming.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace mlir::rp;

namespace {

/// 12 layers of varied times, 128 MiB of weights each, 16 MiB activations
/// a microbatch: every backward stage's input waits on the host for each
/// of the 5 microbatches (80 MiB a stage boundary).
std::vector<LayerCost> model() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  return fixture::twelveLayers(
      int64_t(1) << 28, int64_t(1) << 24, [&](unsigned) { return time(rng); },
      [&](unsigned, double forward) { return 2 * forward * time(rng); });
}

HardwareProfile box(double gib) { return fixture::device(gib); }

using fixture::staged;

TEST(PartitionHostBudgetTest, StagedBytesFitTheBudget) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  int64_t fastestStaged = staged(fastest, layers, unheld);
  ASSERT_TRUE(fitsDeviceMemory(fastest, layers, unheld));
  ASSERT_GT(fastest.backward.size(), 1u) << "nothing to merge";
  // Just under the fastest partition's, and about half of it.
  for (int64_t budget : {fastestStaged - 1, fastestStaged / 2}) {
    SCOPED_TRACE(std::to_string(budget) + " staged bytes");
    SearchTarget held = unheld;
    held.hostStagedBytes = budget;
    Partition p = partitionForStepTime(layers, held);
    EXPECT_LE(staged(p, layers, held), budget) << formatStages(p);
    EXPECT_TRUE(fitsDeviceMemory(p, layers, held));
    EXPECT_TRUE(fitsStageBytes(p, layers, p.stageBytes));
    // Held by merging the fastest partition's stages: at best as fast.
    EXPECT_GE(estimatedStepMs(p, layers, held),
              estimatedStepMs(fastest, layers, unheld) - 1e-9);
  }
}

TEST(PartitionHostBudgetTest, ABudgetTheFastestMeetsChangesNothing) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  SearchTarget held = unheld;
  held.hostStagedBytes = staged(fastest, layers, unheld);
  EXPECT_EQ(formatStages(partitionForStepTime(layers, held)),
            formatStages(fastest));
}

// Where no merge of the walk fits the devices, each merge is moved toward
// them a layer at a time (the repair) before the walk gives up. On 2.5 GiB
// devices the fastest partition, fwd:9;bwd:3,2,2,3,1,1, stages 400 MiB
// and every merge of two neighbouring stages is over the devices: the
// walk stopped there, and a budget a boundary or two under it was not met
// (the host budget's refusal) although fwd:9;bwd:3,2,3,3,1 and
// fwd:9;bwd:3,3,3,3 fit both. Llama-3.1-8B NF4 LoRA, --host-budget-gib 16,
// was refused so once the device arenas were packed largest first.
TEST(PartitionHostBudgetTest, MergesOverTheDevicesAreRepaired) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(2.5);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  ASSERT_TRUE(fitsDeviceMemory(fastest, layers, unheld));
  std::vector<unsigned> fwd, bwd;
  for (const StageRange &r : fastest.forward)
    fwd.push_back(r.size());
  for (const StageRange &r : fastest.backward)
    bwd.push_back(r.size());
  ASSERT_GT(bwd.size(), 2u);
  for (bool backward : {false, true})
    for (size_t i = 0; i + 1 < (backward ? bwd : fwd).size(); ++i) {
      std::vector<unsigned> f = fwd, b = bwd;
      std::vector<unsigned> &l = backward ? b : f;
      l[i] += l[i + 1];
      l.erase(l.begin() + i + 1);
      Partition q =
          partitionFromSizes(f, fastest.tail.size(), b, layers.size());
      EXPECT_TRUE(staged(q, layers, unheld) >=
                      staged(fastest, layers, unheld) ||
                  !fitsDeviceMemory(q, layers, unheld))
          << formatStages(q) << " fits and stages less: no repair needed";
    }
  int64_t boundary = int64_t(80) << 20;
  for (int k : {1, 2}) {
    SCOPED_TRACE(std::to_string(k) + " boundaries fewer");
    SearchTarget held = unheld;
    held.hostStagedBytes = staged(fastest, layers, unheld) - k * boundary;
    Partition p = partitionForStepTime(layers, held);
    EXPECT_LE(staged(p, layers, held), held.hostStagedBytes)
        << formatStages(fastest) << " -> " << formatStages(p);
    EXPECT_TRUE(fitsDeviceMemory(p, layers, held)) << formatStages(p);
    EXPECT_TRUE(fitsStageBytes(p, layers, p.stageBytes));
  }
}

// A budget no partition meets: the devices still fit, and the partition
// stages the least the merges reach (for the host budget's refusal).
TEST(PartitionHostBudgetTest, DevicesBeforeTheHost) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(3);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  ASSERT_TRUE(fitsDeviceMemory(fastest, layers, unheld));
  SearchTarget held = unheld;
  held.hostStagedBytes = 1;
  Partition p = partitionForStepTime(layers, held);
  EXPECT_TRUE(fitsDeviceMemory(p, layers, held)) << formatStages(p);
  EXPECT_LT(staged(p, layers, held), staged(fastest, layers, unheld));
  // One backward stage of 11 layers needs more than 3 GiB.
  EXPECT_GT(p.backward.size(), 1u);
}

// The memo returns a search's result for the same question only: a search
// under a host budget after one without it is searched (and held) again.
TEST(PartitionHostBudgetTest, TheMemoKeysTheBudget) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchMemo memo;
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  unheld.memo = &memo;
  Partition fastest = partitionForStepTime(layers, unheld);
  SearchTarget held = unheld;
  held.hostStagedBytes = staged(fastest, layers, unheld) - 1;
  Partition p = partitionForStepTime(layers, held);
  EXPECT_NE(formatStages(p), formatStages(fastest));
  EXPECT_LE(staged(p, layers, held), held.hostStagedBytes);
}

// At layer grain every layer's input outside the tail is staged whatever
// the stages, sent down with the forward that computes it in one download
// per forward job, held until its shallowest reader: no merge of two
// stages stages fewer bytes, but a forward stage split in two frees its
// deeper part once read. The hold's walk splits forward stages there, and
// meets both budgets with the fastest partition's tail (fwd:9;bwd:3,2,2,
// 3,2, 800 MiB staged, 90.38 ms: under 3/4 of it fwd:4,4,1;bwd:3,2,2,3,
// 1,1, 106.73 ms; a walk of merges, as at stage grain, met that budget
// only by growing the tail to 6 layers: fwd:6;bwd:6,6, 115.34 ms).
TEST(PartitionHostBudgetTest, LayerGrainIsHeldBySplits) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  unheld.layerGrain = true;
  Partition fastest = partitionForStepTime(layers, unheld);
  int64_t fastestStaged = staged(fastest, layers, unheld);
  ASSERT_GT(fastest.backward.size(), 1u) << "nothing to merge";
  auto merged = [&](const Partition &p, bool backward, size_t i) {
    std::vector<unsigned> fwd, bwd;
    for (const StageRange &r : p.forward)
      fwd.push_back(r.size());
    for (const StageRange &r : p.backward)
      bwd.push_back(r.size());
    std::vector<unsigned> &list = backward ? bwd : fwd;
    list[i] += list[i + 1];
    list.erase(list.begin() + i + 1);
    return partitionFromSizes(fwd, p.tail.size(), bwd, layers.size());
  };
  for (bool backward : {false, true}) {
    size_t count = backward ? fastest.backward.size() : fastest.forward.size();
    for (size_t i = 0; i + 1 < count; ++i)
      EXPECT_GE(staged(merged(fastest, backward, i), layers, unheld),
                fastestStaged)
          << (backward ? "backward " : "forward ") << i;
  }
  for (int64_t budget : {fastestStaged - 1, fastestStaged * 3 / 4}) {
    SCOPED_TRACE(std::to_string(budget) + " staged bytes");
    SearchTarget held = unheld;
    held.hostStagedBytes = budget;
    HoldStats before = holdStats();
    Partition p = partitionForStepTime(layers, held);
    HoldStats after = holdStats();
    EXPECT_EQ(after.holds, before.holds + 1);
    EXPECT_LE(staged(p, layers, held), budget)
        << formatStages(fastest) << " " << fastestStaged << " -> "
        << formatStages(p) << " " << staged(p, layers, held) << ", "
        << after.plans - before.plans << " memory plans";
    EXPECT_TRUE(fitsDeviceMemory(p, layers, held));
    EXPECT_TRUE(fitsStageBytes(p, layers, p.stageBytes));
    EXPECT_EQ(p.tail.size(), fastest.tail.size()) << formatStages(p);
  }
}

// The hold places a move's buffers only where the cheap answers leave it
// open: a move whose live-span bounds (liveBytesBounds) put a device over
// the budget or the staged bytes at the current partition's, or whose
// host pool alone stages no fewer bytes, is dropped unplaced. The same
// partition as placing every move (the walk reads no more than "fits and
// stages fewer"), with fewer memory plans: 12 layers, half the fastest
// partition's staged bytes on 2.75 GiB devices: 1 memory plan and one
// step-time estimate in the walk's first round (on 3 GiB devices, before
// the device arenas were packed largest first, 6 plans, 11 when every
// move was placed), 4 more of each in the repair after it.
TEST(PartitionHostBudgetTest, MovesThatCannotFitAreNotPlanned) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(2.75);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  SearchTarget held = unheld;
  held.hostStagedBytes = staged(fastest, layers, unheld) / 2;
  HoldStats before = holdStats();
  Partition p = partitionForStepTime(layers, held);
  uint64_t plans = holdStats().plans - before.plans;
  uint64_t timed = holdStats().timed - before.timed;
  uint64_t reused = holdStats().reused - before.reused;
  // A move's memory is planned before its step time is estimated: of
  // the first round's moves within the stage cap one fits and stages
  // fewer bytes, and only it is timed (1 plan, 1 estimate). From it,
  // fwd:9;bwd:3,2,2,3,2 (320 MiB), no merge fits the devices: the repair
  // moves each a layer at a time, its steps answered by the bounds, and
  // places and times only the 4 it brings within them.
  // Of those 5 step-time estimates asked, the repair's fits repeat the
  // first round's partition or each other: each hold times a partition
  // once (HoldMemo), so 2 are timed and the rest read back.
  EXPECT_LE(plans, 5u) << formatStages(p);
  EXPECT_EQ(timed, 2u) << formatStages(p);
  EXPECT_GE(reused, 3u) << formatStages(p);
  // None stages within the 200 MiB: the walk goes on from the fastest,
  // fwd:9;bwd:3,3,3,3 (240 MiB), where no merge fits even moved, and
  // stops there, the least staged for the refusal to name.
  EXPECT_EQ(formatStages(p), "fwd:9;bwd:3,3,3,3");
  // The bounds are under the placed peaks of every pool.
  std::string error;
  mlir::FailureOr<Pipeline> pl = lowerForTarget(fastest, layers, unheld, error);
  ASSERT_TRUE(mlir::succeeded(pl)) << error;
  insertTransfers(*pl, layers, hw);
  if (std::optional<Schedule> issued = inIssueOrder(pl->schedule))
    pl->schedule = std::move(*issued);
  MemoryPlan mp = planMemory(*pl, layers);
  std::vector<int64_t> bounds = liveBytesBounds(mp, pl->devices);
  ASSERT_EQ(bounds.size(), mp.peakBytes.size() + 1);
  for (size_t d = 0; d < mp.peakBytes.size(); ++d) {
    EXPECT_LE(bounds[d], mp.peakBytes[d]) << "device " << d;
    EXPECT_GT(bounds[d], 0) << "device " << d;
  }
  EXPECT_LE(bounds.back(), mp.stagedHostBytes);
  EXPECT_GT(bounds.back(), 0);
}

// Without a host budget, a slack (SearchTarget::hostSlack): the stages
// taken stage less than the fastest's, their step within the slack; with
// no slack, or a saving floor over what the fastest stages, the fastest.
// The memo keys the slack: a search after an unheld one is held again.
TEST(PartitionHostBudgetTest, SlackTakesStagesNearlyAsFastThatStageLess) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchMemo memo;
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  unheld.memo = &memo;
  Partition fastest = partitionForStepTime(layers, unheld);
  int64_t fastestStaged = staged(fastest, layers, unheld);
  double fastestMs = estimatedStepMs(fastest, layers, unheld);
  ASSERT_GT(fastest.backward.size(), 1u) << "nothing to merge";
  SearchTarget near = unheld;
  near.hostSlack = 0.1;
  // The fixture stages 80 MiB a boundary: a saving of one is worth it.
  near.hostSlackBytes = int64_t(80) << 20;
  size_t holdsBefore = slackHolds().size();
  Partition p = partitionForStepTime(layers, near);
  int64_t pStaged = staged(p, layers, near);
  double pMs = estimatedStepMs(p, layers, near);
  EXPECT_LE(pStaged, fastestStaged - near.hostSlackBytes)
      << formatStages(fastest) << " " << fastestStaged << " -> "
      << formatStages(p) << " " << pStaged;
  EXPECT_LE(pMs, fastestMs * (1 + near.hostSlack));
  EXPECT_GE(pMs, fastestMs - 1e-9);
  EXPECT_TRUE(fitsDeviceMemory(p, layers, near));
  EXPECT_TRUE(fitsStageBytes(p, layers, p.stageBytes));
  // The summary's record: these stages, their figures and the fastest's.
  std::vector<SlackHold> holds = slackHolds();
  ASSERT_EQ(holds.size(), holdsBefore + 1);
  const SlackHold &h = holds.back();
  EXPECT_EQ(
      formatStages(partitionFromSizes(h.fwd, h.tail, h.bwd, layers.size())),
      formatStages(p));
  EXPECT_EQ(h.stagedBytes, pStaged);
  EXPECT_EQ(h.fastestStagedBytes, fastestStaged);
  EXPECT_DOUBLE_EQ(h.fastestMs, fastestMs);
  EXPECT_DOUBLE_EQ(h.ms, pMs);
  // A wider slack walks on along the same path: within it, and staging
  // less than the fastest.
  SearchTarget wider = near;
  wider.hostSlack = 0.5;
  Partition w = partitionForStepTime(layers, wider);
  EXPECT_LE(staged(w, layers, wider), fastestStaged - near.hostSlackBytes);
  EXPECT_LE(estimatedStepMs(w, layers, wider), fastestMs * 1.5);
  // No slack, or a saving no partition can make: the fastest.
  SearchTarget none = near;
  none.hostSlack = 0;
  EXPECT_EQ(formatStages(partitionForStepTime(layers, none)),
            formatStages(fastest));
  SearchTarget floor = near;
  floor.hostSlackBytes = fastestStaged + 1;
  EXPECT_EQ(formatStages(partitionForStepTime(layers, floor)),
            formatStages(fastest));
  EXPECT_EQ(slackHolds().size(), holdsBefore + 2);
}

/// 29 layers of varied times, 16 MiB of weights, 64 MiB of intermediates
/// and 4 MiB activations each (20 MiB a backward boundary over 5
/// microbatches), on 0.5 GiB devices: a backward stage of two layers
/// fits, of three fits, of four (two merged) does not.
std::vector<LayerCost> manyStages() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  std::vector<LayerCost> layers(29);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = time(rng);
    c.backwardMs = 2 * c.forwardMs * time(rng);
    c.paramBytes = c.gradBytes = int64_t(1) << 24;
    c.workBytes = int64_t(1) << 26;
    c.actInBytes = c.actOutBytes = int64_t(1) << 22;
  }
  return layers;
}

// Where a repair round's fastest repaired merge misses the budget, a
// partition of 24 stages or more joins repaired merges that change
// different stages in one round (Hold::jump, one per 12 stages); under 24
// it takes one a round. From backward stages of two layers each, a merge
// is over the devices and is repaired (its layers spread over its neighbours);
// a budget two boundaries under the start's needs two merges. With 24
// stages the hold joins two in its one repair round (without the join it
// took two rounds); with 23 it repairs once a merge and joins none. Both
// meet the budget on the devices, and the join is the same on a second
// hold.
TEST(PartitionHostBudgetTest, ManyStagesJoinRepairedMerges) {
  std::vector<LayerCost> layers = manyStages();
  HardwareProfile hw = box(0.5);
  SearchTarget t{hw, 4, 5, int64_t(1) << 40};
  const std::vector<unsigned> bwd(14, 2);
  const int64_t boundary = int64_t(20) << 20;
  struct Held {
    std::string stages;
    HoldStats cost;
  };
  auto hold = [&](const std::vector<unsigned> &fwd) {
    Partition start = partitionFromSizes(fwd, 1, bwd, layers.size());
    EXPECT_EQ(fwd.size() + bwd.size(),
              start.forward.size() + start.backward.size());
    EXPECT_TRUE(fitsDeviceMemory(start, layers, t)) << formatStages(start);
    SearchTarget held = t;
    held.hostStagedBytes = staged(start, layers, t) - 2 * boundary;
    HoldStats before = holdStats();
    Partition p = holdToHostBudget(start, layers, held);
    HoldStats after = holdStats();
    EXPECT_LE(staged(p, layers, held), held.hostStagedBytes)
        << formatStages(start) << " -> " << formatStages(p);
    EXPECT_TRUE(fitsDeviceMemory(p, layers, held)) << formatStages(p);
    EXPECT_TRUE(fitsStageBytes(p, layers, p.stageBytes));
    return Held{formatStages(p),
                {after.holds - before.holds, after.plans - before.plans,
                 after.timed - before.timed, 0, after.reused - before.reused,
                 after.repairs - before.repairs, after.joins - before.joins,
                 after.joinedMerges - before.joinedMerges}};
  };
  // 24 stages: fwd:3,3,3,3,3,3,3,3,3,1;bwd:1,2,...,2 (the tail first).
  std::vector<unsigned> fwd24(10, 3);
  fwd24.back() = 1;
  Held joined = hold(fwd24);
  EXPECT_EQ(joined.cost.holds, 1u);
  EXPECT_EQ(joined.cost.repairs, 1u) << joined.stages;
  EXPECT_EQ(joined.cost.joins, 1u) << joined.stages;
  EXPECT_EQ(joined.cost.joinedMerges, 2u) << joined.stages;
  Held again = hold(fwd24);
  EXPECT_EQ(again.stages, joined.stages);
  EXPECT_EQ(again.cost.plans, joined.cost.plans);
  EXPECT_EQ(again.cost.timed, joined.cost.timed);
  EXPECT_EQ(again.cost.joinedMerges, joined.cost.joinedMerges);
  // 23 stages: fwd:3,3,3,3,3,3,3,3,4;bwd as before.
  std::vector<unsigned> fwd23(9, 3);
  fwd23.back() = 4;
  Held single = hold(fwd23);
  EXPECT_EQ(single.cost.repairs, 2u) << single.stages;
  EXPECT_EQ(single.cost.joins, 0u) << single.stages;
}

} // namespace

// The hold keeps what it learns of a partition's memory (PeakFacts) across
// the host limits it asks under, which fall every round: each limit's
// answer read back from them (peakUnder), learnt (learnPeak) and
// devicePeak's (one body with learnPeak) is the answer planMemory's placed
// plan and the live-span bounds give under that limit,
// field by field, whether the facts were learnt under a higher limit, a
// lower one or none, for partitions over the devices, over the host limit
// by their bounds, by their placed host pool, and within both.
TEST(PartitionHostBudgetTest, PeakFactsAnswerEveryLimitAsDevicePeak) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(2.75);
  SearchTarget t{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, t);
  std::vector<Partition> partitions{fastest};
  for (std::vector<unsigned> bwd :
       {std::vector<unsigned>{6, 6}, std::vector<unsigned>{3, 3, 3, 3},
        std::vector<unsigned>{12}, std::vector<unsigned>{1, 1, 2, 2, 3, 3}})
    partitions.push_back(partitionFromSizes({12}, 0, bwd, layers.size()));
  auto same = [](const DevicePeak &a, const DevicePeak &b) {
    return a.bytes == b.bytes && a.device == b.device && a.fits == b.fits &&
           a.hostBytes == b.hostBytes && a.planned == b.planned;
  };
  unsigned overDevices = 0, overHostBound = 0, overHostPlaced = 0, fits = 0;
  for (const Partition &p : partitions) {
    SCOPED_TRACE(formatStages(p));
    // The answers apart from devicePeak's code (which is learnPeak's):
    // planMemory's placed plan and the live-span bounds of the lowered
    // schedule, in issue order as rp-insert-transfers leaves it.
    std::string error;
    mlir::FailureOr<Pipeline> pl = lowerForTarget(p, layers, t, error);
    ASSERT_TRUE(mlir::succeeded(pl)) << error;
    insertTransfers(*pl, layers, hw);
    if (std::optional<Schedule> issued = inIssueOrder(pl->schedule))
      pl->schedule = std::move(*issued);
    MemoryPlan mp = planMemory(*pl, layers);
    std::vector<int64_t> bounds = liveBytesBounds(mp, pl->devices);
    const int64_t hostBound = bounds.back();
    bounds.pop_back();
    const int64_t deviceBound = *std::max_element(bounds.begin(), bounds.end());
    auto answer = [&](int64_t limit) {
      DevicePeak e;
      if (limit > 0) {
        e.bytes = deviceBound;
        e.hostBytes = hostBound;
        if (hostBound > limit || deviceBound > t.budget())
          return e;
        e.hostBytes = mp.stagedHostBytes;
        if (e.hostBytes > limit)
          return e;
      }
      FullestDevice fullest = fullestDevice(mp);
      return DevicePeak{fullest.peak, fullest.device,
                        fullest.peak <= t.budget(), mp.stagedHostBytes, true};
    };
    std::pair<Pipeline, MemoryPlan> handed;
    DevicePeak full = devicePeak(p, layers, t, 0, -1, &handed);
    EXPECT_TRUE(same(full, answer(0)));
    EXPECT_EQ(handed.second.peakBytes, mp.peakBytes);
    EXPECT_EQ(handed.second.stagedHostBytes, mp.stagedHostBytes);
    std::vector<int64_t> limits{full.hostBytes * 2, full.hostBytes,
                                full.hostBytes - 1, full.hostBytes / 2,
                                full.hostBytes / 8, 1};
    // Each order: falling (as the walk asks), rising, and each limit
    // first.
    std::vector<std::vector<int64_t>> orders{limits,
                                             {limits.rbegin(), limits.rend()}};
    for (int64_t first : limits) {
      std::vector<int64_t> order{first};
      order.insert(order.end(), limits.begin(), limits.end());
      orders.push_back(order);
    }
    for (const std::vector<int64_t> &order : orders) {
      PeakFacts facts;
      for (int64_t limit : order) {
        DevicePeak expected = answer(limit);
        EXPECT_TRUE(same(devicePeak(p, layers, t, limit), expected))
            << "limit " << limit;
        DevicePeak learnt = learnPeak(facts, p, layers, t, limit);
        EXPECT_TRUE(same(learnt, expected)) << "limit " << limit;
        std::optional<DevicePeak> read = peakUnder(facts, limit, t.budget());
        ASSERT_TRUE(read.has_value()) << "limit " << limit;
        EXPECT_TRUE(same(*read, expected)) << "limit " << limit;
        if (expected.planned)
          fits += expected.fits;
        else if (facts.deviceBound > t.budget())
          ++overDevices;
        else if (facts.hostBound > limit)
          ++overHostBound;
        else
          ++overHostPlaced;
      }
    }
  }
  // Every way devicePeak answers is checked.
  EXPECT_GT(overDevices, 0u);
  EXPECT_GT(overHostBound, 0u);
  EXPECT_GT(overHostPlaced, 0u);
  EXPECT_GT(fits, 0u);
}
