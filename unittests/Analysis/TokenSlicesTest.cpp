//===- TokenSlicesTest.cpp - TeraPipe's slice program and its plan --------===//

#include "rp/Analysis/TokenSlices.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/timing/KernelCost.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

using namespace mlir::rp;
using mlir::FailureOr;

namespace {

/// A causal layer stack's slice time: a launch cost, a per-token cost and
/// the pairs of the slice's rows with every key before their end.
struct Causal {
  double launch, perToken, perPair;
  double operator()(int64_t o, int64_t s) const {
    return launch + perToken * s + perPair * s * (o + (s + 1) / 2.0);
  }
};

/// A working set of the slice's activations and the keys and values kept.
struct Memory {
  double perToken, perKept, limit;
  bool operator()(int64_t o, int64_t s) const {
    return perToken * s + perKept * o <= limit;
  }
};

} // namespace

TEST(TokenSlicesTest, ParsesTheFlag) {
  std::string error;
  auto a = parseTokenSlices("auto", error);
  ASSERT_TRUE(mlir::succeeded(a));
  EXPECT_EQ(a->kind, TokenSlicesSpec::Kind::automatic);
  auto k = parseTokenSlices("4", error);
  ASSERT_TRUE(mlir::succeeded(k));
  EXPECT_EQ(k->kind, TokenSlicesSpec::Kind::count);
  EXPECT_EQ(k->count, 4u);
  auto s = parseTokenSlices("512,256,256", error);
  ASSERT_TRUE(mlir::succeeded(s));
  EXPECT_EQ(s->kind, TokenSlicesSpec::Kind::sizes);
  EXPECT_EQ(s->sizes, (std::vector<int64_t>{512, 256, 256}));
  for (const char *bad : {"0", "-2", "", "4x", "1,,2", "a,b", "auto,2"})
    EXPECT_TRUE(mlir::failed(parseTokenSlices(bad, error))) << bad;
}

TEST(TokenSlicesTest, EqualSlicesCoverTheSequence) {
  EXPECT_EQ(equalSlices(10, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(equalSlices(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(sliceGrain(128), 1);
  EXPECT_EQ(sliceGrain(129), 2);
  EXPECT_EQ(sliceGrain(65536), 512);
}

/// The dynamic program finds the brute force's optimum on every small
/// case: costs with and without launch overhead, caps on memory, grains
/// that leave a short last unit.
TEST(TokenSlicesTest, DynamicProgramMatchesBruteForce) {
  std::mt19937 rng(35);
  std::uniform_real_distribution<double> u(0, 1);
  unsigned cases = 0, sliced = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int64_t grain = 1 + trial % 3;
    int64_t tokens = grain * (1 + trial % 11) + (trial % 5 == 0 ? 1 : 0);
    Causal ms{u(rng) < 0.3 ? 0.0 : u(rng), u(rng), u(rng) * 0.2};
    Memory mem{1 + u(rng), u(rng), 2 + u(rng) * double(tokens)};
    bool capped = trial % 2;
    SliceSearch search;
    search.tokens = tokens;
    search.grain = grain;
    search.jobs = 1 + trial % 9;
    search.ms = ms;
    if (capped)
      search.fits = mem;
    std::optional<SliceChoice> dp = chooseSlices(search);
    std::optional<SliceChoice> brute = bruteForceSlices(search);
    ASSERT_EQ(bool(dp), bool(brute)) << "trial " << trial;
    ++cases;
    if (!dp) {
      ++infeasible;
      continue;
    }
    EXPECT_NEAR(dp->latencyMs, brute->latencyMs,
                1e-9 * std::max(1.0, brute->latencyMs))
        << "trial " << trial;
    int64_t sum = 0;
    for (int64_t s : dp->sizes)
      sum += s;
    EXPECT_EQ(sum, tokens);
    sliced += dp->sizes.size() > 1;
    // The choice is priced as it claims.
    std::vector<double> times;
    int64_t o = 0;
    for (int64_t s : dp->sizes) {
      times.push_back(ms(o, s));
      if (capped)
        EXPECT_TRUE(mem(o, s));
      o += s;
    }
    EXPECT_NEAR(chainLatency(times, search.jobs), dp->latencyMs, 1e-9);
  }
  // Both kinds of answer, and a few cases with none, were exercised.
  EXPECT_GT(sliced, cases / 4);
  EXPECT_GT(cases - sliced - infeasible, 0u);
  EXPECT_GT(infeasible, 0u);
}

/// Later slices are shorter: they attend to more keys (TeraPipe's point).
TEST(TokenSlicesTest, LaterSlicesAreShorter) {
  Causal ms{0.01, 0.001, 1e-5};
  SliceSearch search;
  search.tokens = 4096;
  search.grain = 64;
  search.jobs = 8;
  search.ms = ms;
  std::optional<SliceChoice> c = chooseSlices(search);
  ASSERT_TRUE(c);
  ASSERT_GT(c->sizes.size(), 2u);
  EXPECT_GT(c->sizes.front(), c->sizes.back());
  // One job: nothing to pipeline, so one slice (launches cost).
  search.jobs = 1;
  c = chooseSlices(search);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sizes.size(), 1u);
}

namespace {

std::vector<LayerCost> layersOf(unsigned n, double scale) {
  std::vector<LayerCost> layers(n);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = 1 * scale;
    c.backwardMs = 2 * scale;
    c.paramBytes = c.gradBytes = 1 << 20;
    c.actInBytes = c.actOutBytes = int64_t(4096 * scale);
    c.workBytes = int64_t(8192 * scale);
    c.trainableElements = 1 << 18;
  }
  return layers;
}

} // namespace

/// One slice is the unsliced plan: the same step, bubble and peak.
TEST(TokenSlicesTest, OneSliceIsTheUnslicedPlan) {
  std::vector<LayerCost> layers = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw;
  SlicePairCosts pairs =
      fitPairCosts(layersOf(8, 4), layers, 8, std::vector<int64_t>(8, 64));
  for (unsigned g : {1u, 2u, 4u}) {
    PlanTarget target{hw, ScheduleKind::roundRobin, g, 1};
    target.budget = int64_t(1) << 34;
    std::string error;
    FailureOr<PlanPrediction> plain = predictPlan(p, layers, target, error);
    ASSERT_TRUE(mlir::succeeded(plain)) << error;
    std::vector<std::vector<LayerCost>> one{
        sliceLayerCosts(layers, pairs, 0, 16)};
    FailureOr<SlicedPrediction> sliced =
        predictSlicedPlan(p, one, {16}, layers, pairs, target, error);
    ASSERT_TRUE(mlir::succeeded(sliced)) << error;
    EXPECT_DOUBLE_EQ(sliced->plan.stepMs, plain->stepMs);
    EXPECT_DOUBLE_EQ(sliced->plan.bubble, plain->bubble);
    EXPECT_EQ(sliced->plan.peak, plain->peak);
    EXPECT_EQ(sliced->keptBytes, 0);
  }
}

/// On 4 devices one sequence in 4 slices keeps more devices busy than one
/// microbatch (layers linear in the tokens: the pairs' fit is 0).
TEST(TokenSlicesTest, SlicesFillThePipeline) {
  std::vector<LayerCost> whole = layersOf(8, 4), quarter = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw;
  PlanTarget target{hw, ScheduleKind::roundRobin, 4, 1};
  target.budget = int64_t(1) << 34;
  SlicePairCosts pairs =
      fitPairCosts(layersOf(8, 8), whole, 64, std::vector<int64_t>(8, 64));
  std::string error;
  FailureOr<PlanPrediction> plain = predictPlan(p, whole, target, error);
  ASSERT_TRUE(mlir::succeeded(plain)) << error;
  std::vector<std::vector<LayerCost>> slices;
  for (int64_t j = 0; j < 4; ++j)
    slices.push_back(sliceLayerCosts(quarter, pairs, 16 * j, 16));
  FailureOr<SlicedPrediction> sliced = predictSlicedPlan(
      p, slices, {16, 16, 16, 16}, quarter, pairs, target, error);
  ASSERT_TRUE(mlir::succeeded(sliced)) << error;
  EXPECT_LT(sliced->plan.stepMs, plain->stepMs);
  EXPECT_LT(sliced->plan.bubble, plain->bubble);
  // A backward job at the last slice: keys, values and their gradients of
  // 48 earlier tokens for its (at most 3) layers.
  EXPECT_EQ(sliced->keptBytes, 2 * 3 * 64 * 48);
}

/// The prediction times the kept keys' copies through host rows (the
/// schedule rp-insert-transfers writes): keys and values of many bytes per
/// token make the step longer, through the copies alone (the layers' own
/// times are the same), and the tail's forward sweep runs where the tail
/// keeps keys.
TEST(TokenSlicesTest, PredictionTimesTheKeptKeysCopies) {
  std::vector<LayerCost> whole = layersOf(8, 4), quarter = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = 25;
  std::string error;
  auto predict = [&](unsigned g, int64_t perToken) {
    PlanTarget target{hw, ScheduleKind::roundRobin, g, 1};
    target.budget = int64_t(1) << 40;
    SlicePairCosts pairs = fitPairCosts(layersOf(8, 8), whole, 64,
                                        std::vector<int64_t>(8, perToken));
    std::vector<std::vector<LayerCost>> slices;
    for (int64_t j = 0; j < 4; ++j)
      slices.push_back(sliceLayerCosts(quarter, pairs, 16 * j, 16));
    return predictSlicedPlan(p, slices, {16, 16, 16, 16}, quarter, pairs,
                             target, error);
  };
  for (unsigned g : {1u, 2u, 4u}) {
    FailureOr<SlicedPrediction> light = predict(g, 64);
    ASSERT_TRUE(mlir::succeeded(light)) << error;
    // 64 MiB per token: a prefix of 48 tokens is 3 GiB per layer.
    FailureOr<SlicedPrediction> heavy = predict(g, int64_t(64) << 20);
    ASSERT_TRUE(mlir::succeeded(heavy)) << error;
    EXPECT_GT(heavy->plan.stepMs, 2 * light->plan.stepMs) << g;
    // The prefixes come up into the computes' inputs and the gradients
    // sum in an accumulator: the peak holds a prefix of 48 tokens of a
    // job's layers at least.
    EXPECT_GE(heavy->plan.peak, int64_t(48) * (int64_t(64) << 20)) << g;
  }
}

TEST(TokenSlicesTest, RefusesWhatItDoesNotModel) {
  std::vector<LayerCost> layers = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw;
  SlicePairCosts pairs;
  std::string error;
  PlanTarget gpipe{hw, ScheduleKind::gpipe, 2, 2};
  std::vector<std::vector<LayerCost>> two{layers, layers};
  EXPECT_TRUE(mlir::failed(
      predictSlicedPlan(p, two, {8, 8}, layers, pairs, gpipe, error)));
  EXPECT_NE(error.find("round-robin"), std::string::npos);
  // Two tail jobs take alternate slices: refused where the tail (layer
  // 7) keeps keys, and with two sequences of an odd slice count.
  Partition twoTails = p;
  twoTails.tailJobs = 2;
  PlanTarget rr{hw, ScheduleKind::roundRobin, 2, 2};
  SlicePairCosts tailKeeps;
  tailKeeps.keyValueBytes.assign(8, 64);
  EXPECT_TRUE(mlir::failed(
      predictSlicedPlan(twoTails, two, {8, 8}, layers, tailKeeps, rr, error)));
  EXPECT_NE(error.find("--tail-jobs 1"), std::string::npos);
  std::vector<std::vector<LayerCost>> three{layers, layers, layers};
  EXPECT_TRUE(mlir::failed(
      predictSlicedPlan(twoTails, three, {4, 4, 8}, layers, pairs, rr, error)));
  EXPECT_NE(error.find("even slice count"), std::string::npos);
}

/// A head-only tail as two jobs: each runs alternate slices of each
/// sequence, last first (4 slices: 2, 0 and 3, 1), and every backward
/// slice waits for the tail job that ran it; one sequence of three slices
/// too (2, 0 and 1).
TEST(TokenSlicesTest, TwoTailJobsTakeAlternateSlicesLastFirst) {
  std::vector<LayerCost> layers = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  p.tailJobs = 2;
  llvm::SmallVector<bool> keeps(8, true);
  keeps[7] = false;
  for (auto [sequences, slices] :
       {std::pair{1u, 4u}, std::pair{2u, 4u}, std::pair{1u, 3u}}) {
    std::string error;
    FailureOr<Pipeline> pl =
        lowerSlicedSchedule(p, layers, ScheduleKind::roundRobin, 3, sequences,
                            slices, /*tailSweep=*/true, error, {}, keeps);
    ASSERT_TRUE(mlir::succeeded(pl)) << error;
    std::map<int, std::vector<int>> tails;
    for (const Command &c : pl->schedule.commands)
      if (c.kind == CommandKind::tail)
        tails[c.job].push_back(c.microbatch);
    ASSERT_EQ(tails.size(), 2u);
    for (auto [job, mbs] : tails) {
      std::vector<int> want;
      for (unsigned m = 0; m < sequences; ++m)
        for (int k = int(slices) - 1; k >= 0; --k)
          if (unsigned(k) % 2 == unsigned(job - 2))
            want.push_back(int(m * slices) + k);
      EXPECT_EQ(mbs, want) << sequences << " x " << slices;
    }
    for (const Command &c : pl->schedule.commands)
      if (c.kind == CommandKind::backward && c.job == 4) {
        bool waitsTail = false;
        for (unsigned w : c.waits)
          waitsTail = waitsTail ||
                      (pl->schedule.commands[w].kind == CommandKind::tail &&
                       pl->schedule.commands[w].microbatch == c.microbatch);
        EXPECT_TRUE(waitsTail) << c.label;
      }
  }
}

/// The kept keys and values travel through host rows: every compute of a
/// later slice uploads its layers' rows of the slices before it, after
/// the downloads that sent each of them; nothing else is changed, and
/// without the tail's forward sweep a tail's kept keys have no maker.
TEST(TokenSlicesTest, KeptKeysTravelThroughHostRows) {
  std::vector<LayerCost> layers = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw;
  // Layer 4 has no attention.
  std::vector<int64_t> perToken{64, 64, 64, 64, 0, 64, 64, 32};
  llvm::SmallVector<bool> keeps;
  for (int64_t b : perToken)
    keeps.push_back(b > 0);
  std::vector<int64_t> sizes{4, 4, 8};
  std::string error;
  for (unsigned g : {1u, 2u, 3u}) {
    FailureOr<Pipeline> pl =
        lowerSlicedSchedule(p, layers, ScheduleKind::roundRobin, g, 1, 3,
                            /*tailSweep=*/true, error, {}, keeps);
    ASSERT_TRUE(mlir::succeeded(pl)) << error;
    insertTransfers(*pl, layers, hw);
    size_t before = pl->schedule.commands.size();
    ASSERT_TRUE(insertKeptKeyTransfers(*pl, sizes, perToken, hw, error))
        << error;
    const std::vector<Command> &cmds = pl->schedule.commands;
    ASSERT_TRUE(inIssueOrder(pl->schedule)) << "deadlocks on " << g;
    auto rate = [&](const StageJob &j) {
      int64_t r = 0;
      for (unsigned l = j.range.begin; l < j.range.end; ++l)
        r += perToken[l];
      return r;
    };
    unsigned ups = 0, downs = 0, readers = 0, makers = 0;
    const int64_t offsets[] = {0, 4, 8};
    for (const Command &c : cmds) {
      if (isCompute(c.kind)) {
        // Every compute of slice 1 or 2 with keys reads the prefix; the
        // forwards of slices 0 and 1 (the tail's sweep too) send their own.
        bool keys = rate(pl->jobs[c.job]) > 0;
        readers += keys && c.microbatch > 0;
        makers += keys && c.kind == CommandKind::forward && c.microbatch < 2;
        continue;
      }
      if (c.kind == CommandKind::d2hKeys) {
        ++downs;
        EXPECT_EQ(c.bytes, rate(pl->jobs[c.job]) * sizes[c.microbatch]);
        continue;
      }
      if (c.kind != CommandKind::h2dKeys)
        continue;
      const StageJob &job = pl->jobs[c.job];
      // The whole prefix, or (a forward's, from slice 2) the slices
      // before the previous one and then that one's rows.
      int first = c.keptFirst < 0 ? 0 : c.keptFirst,
          end = c.keptFirst < 0 ? c.microbatch : c.keptEnd;
      EXPECT_EQ(c.keptFirst >= 0,
                c.kind == CommandKind::h2dKeys && c.microbatch >= 2 &&
                    llvm::any_of(cmds,
                                 [&](const Command &x) {
                                   return isCompute(x.kind) && x.job == c.job &&
                                          x.microbatch == c.microbatch &&
                                          x.kind == CommandKind::forward &&
                                          llvm::is_contained(
                                              x.waits, unsigned(&c - &cmds[0]));
                                 }))
          << c.label;
      ups += first == 0;
      EXPECT_EQ(c.bytes, rate(job) * (offsets[end - 1] + sizes[end - 1] -
                                      offsets[first]));
      // It waits for the download of each of its slices of each layer,
      // and a first part not for the rows its previous slice sends.
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        for (int mb = 0; mb < 3 && perToken[l] > 0; ++mb) {
          bool waits = llvm::any_of(c.waits, [&](unsigned w) {
            const Command &d = cmds[w];
            return d.kind == CommandKind::d2hKeys && d.microbatch == mb &&
                   pl->jobs[d.job].range.begin <= l &&
                   l < pl->jobs[d.job].range.end;
          });
          EXPECT_EQ(waits, first <= mb && mb < end)
              << c.label << " layer " << l << " slice " << mb;
        }
    }
    EXPECT_EQ(ups, readers);
    EXPECT_EQ(downs, makers);
    // The memory plan puts each prefix in its compute's input buffer.
    MemoryPlan mp = planMemory(*pl, layers);
    for (const Command &up : cmds) {
      if (up.kind != CommandKind::h2dKeys)
        continue;
      int64_t prefixBytes = up.bytes, inputBytes = 0;
      for (auto [i, c] : llvm::enumerate(cmds))
        if (isCompute(c.kind) && c.job == up.job &&
            c.microbatch == up.microbatch)
          inputBytes = mp.buffers[mp.commandBuffers[i][1]].bytes;
      EXPECT_GE(inputBytes, prefixBytes) << up.label;
    }
    EXPECT_GT(cmds.size(), before);
  }
  // No sweep: the tail's slice 2 reads keys of layer 7 nothing made.
  FailureOr<Pipeline> unswept =
      lowerSlicedSchedule(p, layers, ScheduleKind::roundRobin, 2, 1, 3,
                          /*tailSweep=*/false, error, {}, keeps);
  ASSERT_TRUE(mlir::succeeded(unswept)) << error;
  insertTransfers(*unswept, layers, hw);
  EXPECT_FALSE(insertKeptKeyTransfers(*unswept, sizes, perToken, hw, error));
  EXPECT_NE(error.find("keys of layer 7"), std::string::npos) << error;
}

// rp-plan-memory on a sliced schedule: each compute's input holds exactly
// the uploads it waits for (the tail's sweep and its fused command of a
// slice bring their own, so they have inputs of their own), and each tail
// or backward job whose layers keep keys sums their gradients in one
// accumulator of the last slice's prefix (rows [0, 8)), live across its
// computes.
TEST(TokenSlicesTest, MemoryPlanHoldsEachPrefixAndTheKeyGradients) {
  std::vector<LayerCost> layers = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  HardwareProfile hw;
  std::vector<int64_t> perToken{64, 64, 64, 64, 0, 64, 64, 32};
  llvm::SmallVector<bool> keeps;
  for (int64_t b : perToken)
    keeps.push_back(b > 0);
  std::vector<int64_t> sizes{4, 4, 8};
  std::string error;
  for (unsigned g : {1u, 2u, 3u}) {
    FailureOr<Pipeline> pl =
        lowerSlicedSchedule(p, layers, ScheduleKind::roundRobin, g, 1, 3,
                            /*tailSweep=*/true, error, {}, keeps);
    ASSERT_TRUE(mlir::succeeded(pl)) << error;
    insertTransfers(*pl, layers, hw);
    ASSERT_TRUE(insertKeptKeyTransfers(*pl, sizes, perToken, hw, error))
        << error;
    std::optional<Schedule> issued = inIssueOrder(pl->schedule);
    ASSERT_TRUE(issued);
    pl->schedule = std::move(*issued);
    const std::vector<Command> &cmds = pl->schedule.commands;
    MemoryPlan mp = planMemory(*pl, layers);
    std::set<int> inputs;
    unsigned computes = 0;
    for (auto [i, c] : llvm::enumerate(cmds)) {
      if (!isCompute(c.kind))
        continue;
      ++computes;
      int64_t uploaded = 0;
      for (unsigned w : c.waits)
        if ((cmds[w].kind == CommandKind::h2dActivation ||
             cmds[w].kind == CommandKind::h2dGradient ||
             cmds[w].kind == CommandKind::h2dKeys) &&
            cmds[w].job == c.job && cmds[w].microbatch == c.microbatch)
          uploaded += cmds[w].bytes;
      int in = mp.commandBuffers[i][1];
      ASSERT_GE(in, 0);
      EXPECT_EQ(mp.buffers[in].bytes, uploaded) << c.label << " on " << g;
      inputs.insert(in);
      // The fifth slot (rp.compute's fifth offset) is the job's key and
      // value gradient accumulator: a fused or backward compute's, never a
      // forward's (the tail's sweep included).
      int acc = mp.commandBuffers[i][4];
      if (c.kind == CommandKind::forward) {
        EXPECT_EQ(acc, -1) << c.label << " on " << g;
        continue;
      }
      ASSERT_GE(acc, 0) << c.label << " on " << g;
      EXPECT_EQ(mp.buffers[acc].role, BufferRole::keyGrads) << c.label;
      EXPECT_TRUE(llvm::is_contained(mp.buffers[acc].users, unsigned(i)))
          << c.label;
      EXPECT_EQ(cmds[mp.buffers[acc].users.front()].job, c.job) << c.label;
    }
    EXPECT_EQ(inputs.size(), computes) << g;
    unsigned accumulators = 0;
    for (const PlannedBuffer &b : mp.buffers) {
      if (b.role != BufferRole::keyGrads)
        continue;
      ++accumulators;
      const Command &first = cmds[b.users.front()];
      const StageJob &job = pl->jobs[first.job];
      int64_t rate = 0;
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        rate += perToken[l];
      EXPECT_EQ(b.bytes, rate * 8) << b.what;
      EXPECT_EQ(b.device, job.device) << b.what;
      // Every fused or backward compute of the job reads and adds to it.
      unsigned users = 0;
      for (const Command &c : cmds)
        users += isCompute(c.kind) && c.kind != CommandKind::forward &&
                 c.job == first.job;
      EXPECT_EQ(b.users.size(), users) << b.what;
    }
    // The tail and the three backward jobs all hold attention layers.
    EXPECT_EQ(accumulators, 4u) << g;
  }
}

/// The pairs are fitted on the attention kernels alone: layers whose whole
/// time grows faster than the tokens for another reason (matmuls more
/// efficient when larger: here 10 % under twice the half-length's) give no
/// pairs beyond their attention's, and the attention's quadratic part is
/// priced exactly (c2 h^2 at 2h against 2 x h: 4 - 2 x 1 per h^2 unit).
TEST(TokenSlicesTest, PairsAreTheAttentionKernels) {
  std::vector<LayerCost> half = layersOf(2, 1), big = layersOf(2, 1.8);
  for (LayerCost &c : half) {
    c.attentionForwardMs = 0.5;
    c.attentionBackwardMs = 1.25;
  }
  for (LayerCost &c : big) {
    c.attentionForwardMs = 2;
    c.attentionBackwardMs = 5;
  }
  half[1].attentionForwardMs = half[1].attentionBackwardMs = 0;
  big[1].attentionForwardMs = big[1].attentionBackwardMs = 0;
  SlicePairCosts pairs = fitPairCosts(big, half, 10, {64, 64});
  ASSERT_EQ(pairs.forwardMs.size(), 2u);
  EXPECT_DOUBLE_EQ(pairs.forwardMs[0], 1.0 / 100);
  EXPECT_DOUBLE_EQ(pairs.recomputeMs[0], 1.0 / 100);
  EXPECT_DOUBLE_EQ(pairs.backwardMs[0], 2.5 / 100);
  // No attention: no pairs, though the layer's time at 2h is not twice h's.
  EXPECT_EQ(pairs.forwardMs[1], 0);
  EXPECT_EQ(pairs.backwardMs[1], 0);
  // A slice at offset 20 of 10 tokens: 200 pairs more than its own.
  std::vector<LayerCost> slice = sliceLayerCosts(half, pairs, 20, 10);
  EXPECT_DOUBLE_EQ(slice[0].forwardMs, half[0].forwardMs + 2);
  EXPECT_DOUBLE_EQ(slice[0].backwardMs, half[0].backwardMs + 5);
  EXPECT_DOUBLE_EQ(slice[1].forwardMs, half[1].forwardMs);
}

/// The kernels a slice adds beyond its layers and pairs (the prefix's
/// concat, the key-gradient slices and adds): none for one slice or for a
/// layer without attention; a forward at a later slice runs one concat per
/// kept key or value, the plan's; the tail and a backward add the
/// key-gradient kernels on top, and a later slice costs more (a longer
/// prefix). The prediction charges them: the step grows.
TEST(TokenSlicesTest, SliceKernelsAreCounted) {
  HardwareProfile hw;
  hw.memoryGBps = 100;
  hw.launchUs = 4;
  hw.tflops["f32"] = 10;
  SlicePairCosts::Kept t;
  t.batch = 1;
  t.heads = 2;
  t.dim = 64;
  SlicePairCosts pairs = fitPairCosts(layersOf(8, 8), layersOf(8, 4), 64,
                                      std::vector<int64_t>(8, 2 * 2 * 64 * 4));
  pairs.kept.assign(8, {t, t});
  pairs.kept[1].clear(); // no attention
  std::vector<int64_t> sizes{256, 256, 256, 256};
  StageJob forward{CommandKind::forward, {0, 2}};
  StageJob tail{CommandKind::tail, {0, 2}};
  StageJob backward{CommandKind::backward, {0, 2}};
  EXPECT_EQ(sliceKernelsMs(tail, false, pairs, {1024}, 0, hw), 0);
  EXPECT_EQ(sliceKernelsMs(forward, false, pairs, sizes, 0, hw), 0);
  ::rp::timing::Operand prefix{{1, 2, 512, 64}, 4}, own{{1, 2, 256, 64}, 4},
      both{{1, 2, 768, 64}, 4};
  double concat =
      ::rp::timing::callMs(hw, uint16_t(::rp::timing::kernelOpIndex("concat")),
                           {{prefix, own}, {both}, "f32"}, {2});
  EXPECT_GT(concat, hw.launchUs * 1e-3);
  EXPECT_DOUBLE_EQ(sliceKernelsMs(forward, false, pairs, sizes, 2, hw),
                   2 * concat);
  EXPECT_DOUBLE_EQ(sliceKernelsMs(forward, true, pairs, sizes, 2, hw),
                   2 * concat);
  EXPECT_GT(sliceKernelsMs(tail, false, pairs, sizes, 2, hw), 2 * concat);
  EXPECT_GT(sliceKernelsMs(backward, false, pairs, sizes, 2, hw),
            sliceKernelsMs(backward, false, pairs, sizes, 1, hw));
  // A tail or backward at slice 0 reads its own rows' gradients from the
  // accumulator and adds them: no concat, but kernels.
  EXPECT_GT(sliceKernelsMs(backward, false, pairs, sizes, 0, hw), 0);

  std::vector<LayerCost> quarter = layersOf(8, 1);
  Partition p = partitionFromSizes({4, 3}, 1, {3, 2, 2}, 8);
  PlanTarget target{hw, ScheduleKind::roundRobin, 2, 1};
  target.budget = int64_t(1) << 40;
  std::vector<std::vector<LayerCost>> slices;
  for (int64_t j = 0; j < 4; ++j)
    slices.push_back(sliceLayerCosts(quarter, pairs, 256 * j, 256));
  std::string error;
  FailureOr<SlicedPrediction> counted =
      predictSlicedPlan(p, slices, sizes, quarter, pairs, target, error);
  ASSERT_TRUE(mlir::succeeded(counted)) << error;
  pairs.kept.clear();
  FailureOr<SlicedPrediction> without =
      predictSlicedPlan(p, slices, sizes, quarter, pairs, target, error);
  ASSERT_TRUE(mlir::succeeded(without)) << error;
  EXPECT_GT(counted->plan.stepMs, without->plan.stepMs);
}
