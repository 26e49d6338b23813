//===- PipelineTest.cpp - schedules lowered to devices, and transfers -----===//

#include "rp/Analysis/Pipeline.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace mlir::rp;

namespace {

std::vector<LayerCost> uniform(unsigned n, int64_t bytes, double f = 1,
                               double b = 2) {
  std::vector<LayerCost> layers(n);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = f;
    c.backwardMs = b;
    c.paramBytes = c.gradBytes = bytes;
    c.actInBytes = c.actOutBytes = 1000;
  }
  return layers;
}

HardwareProfile link(double gbps) {
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = gbps;
  return hw;
}

const ScheduleKind kAll[] = {ScheduleKind::roundRobin, ScheduleKind::gpipe,
                             ScheduleKind::oneFOneB, ScheduleKind::interleaved,
                             ScheduleKind::loopedBfs};

/// The partition each schedule runs: RoundPipe-like for round-robin, the
/// symmetric static one otherwise.
Partition partitionFor(ScheduleKind kind, llvm::ArrayRef<LayerCost> layers,
                       unsigned devices) {
  if (kind == ScheduleKind::roundRobin)
    return partitionRoundPipe(layers, int64_t(1) << 40, devices);
  return staticPartition(layers,
                         staticStageCount(kind, devices, layers.size()));
}

TEST(PipelineTest, ScheduleNamesRoundTrip) {
  for (ScheduleKind k : kAll)
    EXPECT_EQ(parseScheduleKind(scheduleKindName(k)), k);
  EXPECT_FALSE(parseScheduleKind("zero-bubble"));
}

// rp-partition and rp-print-partition take the default from one place: on
// one device there is nothing to overlap, else round-robin's job n+G needs
// device n free again.
TEST(PipelineTest, DefaultMicrobatches) {
  EXPECT_EQ(defaultMicrobatches(1), 1u);
  EXPECT_EQ(defaultMicrobatches(2), 3u);
  EXPECT_EQ(defaultMicrobatches(8), 9u);
}

TEST(PipelineTest, EveryJobRunsEveryMicrobatchOnceWithoutDeadlock) {
  std::vector<LayerCost> layers = uniform(8, 1000);
  for (ScheduleKind kind : kAll)
    for (unsigned g : {1u, 2u, 3u, 4u})
      for (unsigned m : {1u, 4u, 5u, 8u}) {
        std::string error;
        Partition p = partitionFor(kind, layers, g);
        auto pl = lowerSchedule(p, layers, kind, g, m, error);
        if (kind == ScheduleKind::interleaved && g > 1 && m % g) {
          EXPECT_TRUE(mlir::failed(pl));
          EXPECT_NE(error.find("multiple of the device count"),
                    std::string::npos);
          continue;
        }
        ASSERT_TRUE(mlir::succeeded(pl))
            << scheduleKindName(kind).str() << " G=" << g << " M=" << m << ": "
            << error;
        std::set<std::pair<int, int>> seen;
        for (const Command &c : pl->schedule.commands) {
          EXPECT_TRUE(isCompute(c.kind));
          EXPECT_EQ(c.device, pl->jobs[c.job].device);
          EXPECT_TRUE(seen.insert({c.job, c.microbatch}).second);
          // Issue order: what a command waits for comes before it.
          for (unsigned w : c.waits)
            EXPECT_LT(w, &c - pl->schedule.commands.data());
        }
        EXPECT_EQ(seen.size(), pl->jobs.size() * m);
        insertTransfers(*pl, layers, link(10));
        EXPECT_TRUE(estimateTiming(pl->schedule))
            << scheduleKindName(kind).str() << " G=" << g << " M=" << m;
      }
}

TEST(PipelineTest, StaticSchedulesBindStagesToDevices) {
  std::vector<LayerCost> layers = uniform(8, 1000);
  std::string error;
  Partition p = staticPartition(layers, 8); // interleaved on 4 devices
  auto pl = lowerSchedule(p, layers, ScheduleKind::interleaved, 4, 4, error);
  ASSERT_TRUE(mlir::succeeded(pl)) << error;
  // Jobs: F0..F6, tail (stage 7), B6..B0; stage s on device s mod 4.
  ASSERT_EQ(pl->jobs.size(), 15u);
  for (unsigned s = 0; s < 7; ++s) {
    EXPECT_EQ(pl->jobs[s].device, s % 4);
    EXPECT_EQ(pl->jobs[14 - s].device, s % 4);
    EXPECT_EQ(pl->jobs[14 - s].weightSet, pl->jobs[s].weightSet);
  }
  EXPECT_EQ(pl->jobs[7].kind, CommandKind::tail);
  EXPECT_EQ(pl->jobs[7].device, 3u);
}

/// Looped-BFS (RoundPipe's strongest static baseline): floor(L / G) stages
/// per device; each device runs every microbatch of its stages in turn,
/// then the backwards from its deepest stage down.
TEST(PipelineTest, LoopedBfsRunsStagesBreadthFirst) {
  std::vector<LayerCost> layers = uniform(12, 1000);
  EXPECT_EQ(staticStageCount(ScheduleKind::loopedBfs, 4, 12), 12u);
  EXPECT_EQ(staticStageCount(ScheduleKind::loopedBfs, 4, 6), 4u);
  std::string error;
  Partition p = staticPartition(layers, 12);
  auto pl = lowerSchedule(p, layers, ScheduleKind::loopedBfs, 4, 3, error);
  ASSERT_TRUE(mlir::succeeded(pl)) << error;
  // Device 1 holds stages 1, 5 and 9 (forward jobs 1, 5, 9; backward jobs
  // 22 - s): F1 x3, F5 x3, F9 x3, B13 x3 (stage 9), B17 (5), B21 (1).
  std::vector<std::pair<int, int>> order;
  for (const Command &c : pl->schedule.commands)
    if (c.device == 1)
      order.emplace_back(c.job, c.microbatch);
  std::vector<int> jobs;
  for (auto [job, mb] : order)
    if (jobs.empty() || jobs.back() != job)
      jobs.push_back(job);
  EXPECT_EQ(jobs, (std::vector<int>{1, 5, 9, 13, 17, 21}));
  EXPECT_EQ(order.size(), 18u);
  // The last stage (11, on device 3) is the fused tail, no backward job.
  EXPECT_EQ(pl->jobs[11].kind, CommandKind::tail);
  EXPECT_EQ(pl->jobs[11].device, 3u);
  insertTransfers(*pl, layers, link(10));
  EXPECT_TRUE(estimateTiming(pl->schedule));
}

TEST(PipelineTest, StaticSchedulesRefuseWhatTheyCannotRun) {
  std::vector<LayerCost> layers = uniform(6, 1000);
  std::string error;
  Partition rr = partitionRoundPipe(layers, int64_t(1) << 40, 2);
  EXPECT_TRUE(mlir::failed(
      lowerSchedule(rr, layers, ScheduleKind::oneFOneB, 2, 3, error)));
  EXPECT_NE(error.find("mirror"), std::string::npos) << error;
  Partition four = staticPartition(layers, 4);
  EXPECT_TRUE(mlir::failed(
      lowerSchedule(four, layers, ScheduleKind::gpipe, 2, 3, error)));
  EXPECT_NE(error.find("4 stages do not fit 2 devices"), std::string::npos)
      << error;
}

/// With free transfers and one layer per stage of f forward and b
/// backward, GPipe and 1F1B lowered through the pipeline give the textbook
/// bubble (p - 1) / (m + p - 1): weak baselines would flatter us.
TEST(PipelineTest, StaticBaselinesHaveTheTextbookBubble) {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::oneFOneB})
    for (unsigned p : {2u, 4u})
      for (unsigned m : {1u, 4u, 8u}) {
        // Every stage runs F = 1 ms (recompute) and B = 3 ms (recompute
        // and backward); the fused tail runs its 2 ms forward and 2 ms
        // backward as one 4 ms block, as 1F1B's last stage does.
        std::vector<LayerCost> layers = uniform(p, 0, 1, 2);
        layers.back().forwardMs = 2;
        std::string error;
        auto pl = lowerSchedule(staticPartition(layers, p), layers, kind, p, m,
                                error);
        ASSERT_TRUE(mlir::succeeded(pl)) << error;
        insertTransfers(*pl, layers, link(1e12));
        std::optional<Timing> t = estimateTiming(pl->schedule);
        ASSERT_TRUE(t);
        double bubble = double(p - 1) / (m + p - 1);
        EXPECT_NEAR(t->bubbleFraction(), bubble, 1e-6)
            << scheduleKindName(kind).str() << " p=" << p << " m=" << m;
      }
}

TEST(PipelineTest, WeightsUploadInChunksOncePerSet) {
  // 600 MB per layer: three chunks of at most 256 MB per one-layer stage.
  std::vector<LayerCost> layers = uniform(4, int64_t(600) << 20);
  std::string error;
  Partition p = partitionFromSizes({1, 1, 1}, 1, {1, 1, 1}, 4);
  auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, 2, 3, error);
  ASSERT_TRUE(mlir::succeeded(pl));
  insertTransfers(*pl, layers, link(25));
  std::map<int, int64_t> uploaded;
  std::map<int, int> chunks, gradDownloads;
  unsigned optimizer = 0;
  for (const Command &c : pl->schedule.commands) {
    if (c.kind == CommandKind::h2dWeights) {
      EXPECT_LE(c.bytes, kWeightChunkBytes);
      uploaded[c.job] += c.bytes;
      ++chunks[c.job];
    }
    if (c.kind == CommandKind::d2hWeightGrads)
      ++gradDownloads[c.job];
    if (c.kind == CommandKind::optimizer) {
      ++optimizer;
      EXPECT_EQ(c.waits.size(), 4u); // the tail and three backward jobs
    }
  }
  EXPECT_EQ(optimizer, 1u);
  ASSERT_EQ(uploaded.size(), 7u);
  for (auto [job, bytes] : uploaded) {
    EXPECT_EQ(bytes, int64_t(600) << 20);
    EXPECT_EQ(chunks[job], 3);
  }
  // Forward jobs have no gradients; the tail and backward jobs one each.
  EXPECT_EQ(gradDownloads.size(), 4u);
  for (auto [job, n] : gradDownloads) {
    EXPECT_GE(job, 3);
    EXPECT_EQ(n, 1);
  }
}

TEST(PipelineTest, RoundRobinKeepsTwoWeightSetsPerDevice) {
  // Slow uploads: each upload must still wait for the job two turns back
  // on its device to finish computing.
  std::vector<LayerCost> layers = uniform(6, int64_t(100) << 20);
  std::string error;
  Partition p = partitionFromSizes({1, 1, 1, 1, 1}, 1, {1, 1, 1, 1, 1}, 6);
  auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, 2, 3, error);
  ASSERT_TRUE(mlir::succeeded(pl));
  insertTransfers(*pl, layers, link(1));
  std::optional<Timing> t = estimateTiming(pl->schedule);
  ASSERT_TRUE(t);
  const auto &cmds = pl->schedule.commands;
  std::map<int, double> computeEnd, uploadStart;
  for (unsigned i = 0; i < cmds.size(); ++i) {
    if (isCompute(cmds[i].kind))
      computeEnd[cmds[i].job] = std::max(computeEnd[cmds[i].job], t->end[i]);
    if (cmds[i].kind == CommandKind::h2dWeights &&
        !uploadStart.count(cmds[i].job))
      uploadStart[cmds[i].job] = t->start[i];
  }
  for (auto [job, start] : uploadStart) {
    // Braces: EXPECT_GE is an if/else of its own (-Wdangling-else).
    if (job >= 4) {
      EXPECT_GE(start, computeEnd[job - 4]) << "job " << job;
    }
  }
}

TEST(PipelineTest, BackwardReadsSavedInputsFromTheForwardThatMadeThem) {
  // Forward [0, 4), tail [4, 6), backward [2, 4) and [0, 2): the backward
  // of [2, 4) needs the activation entering layer 2, inside the forward
  // job, which therefore downloads it for every microbatch.
  std::vector<LayerCost> layers = uniform(6, 0);
  Partition p = partitionFromSizes({4}, 2, {2, 2}, 6);
  std::string error;
  auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, 2, 2, error);
  ASSERT_TRUE(mlir::succeeded(pl));
  insertTransfers(*pl, layers, link(10));
  std::map<std::pair<int, int>, int> downloads; // (job, boundary) -> count
  for (const Command &c : pl->schedule.commands)
    if (c.kind == CommandKind::d2hActivation)
      ++downloads[{c.job, c.boundary}];
  EXPECT_EQ((downloads[{0, 2}]), 2); // saved input, both microbatches
  EXPECT_EQ((downloads[{0, 4}]), 2); // the tail's input
  EXPECT_EQ(downloads.size(), 2u);
}

TEST(PipelineTest, RecomputeAheadOfTheGradientFollowsTheGrain) {
  // Forward [0, 4), tail [4, 6), backward [2, 4) and [0, 2), layer l
  // recomputing in l + 1 ms. A split backward's recompute (the command
  // before it, gated on no gradient upload) is its stage's whole recompute
  // at stage grain, and only its deepest layer's at layer grain, which
  // recomputes and differentiates one layer at a time as the exporter
  // orders the programs.
  std::vector<LayerCost> layers = uniform(6, 0);
  for (auto [l, c] : llvm::enumerate(layers)) {
    c.recomputeMs = double(l + 1);
    c.backwardMs = 10;
  }
  for (bool layerGrain : {false, true}) {
    Partition p = partitionFromSizes({4}, 2, {2, 2}, 6);
    p.layerGrain = layerGrain;
    std::string error;
    auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, 4, 2, error);
    ASSERT_TRUE(mlir::succeeded(pl)) << error;
    insertTransfers(*pl, layers, link(10));
    Schedule split = recomputeSplit(pl->schedule, *pl, layers);
    unsigned seen = 0;
    for (auto [i, c] : llvm::enumerate(split.commands)) {
      if (c.label.find(" recompute") == std::string::npos)
        continue;
      ++seen;
      const Command &rest = split.commands[i + 1];
      const StageRange &r = pl->jobs[c.job].range;
      double whole = 0;
      for (unsigned l = r.begin; l < r.end; ++l)
        whole += layers[l].recomputeMs;
      double ahead = layerGrain ? layers[r.end - 1].recomputeMs : whole;
      EXPECT_DOUBLE_EQ(c.ms, ahead) << c.label;
      EXPECT_DOUBLE_EQ(rest.ms, whole + 20 - ahead) << rest.label;
      EXPECT_EQ(rest.job, c.job);
      for (unsigned w : c.waits)
        EXPECT_NE(split.commands[w].kind, CommandKind::h2dGradient);
      EXPECT_TRUE(llvm::any_of(rest.waits, [&](unsigned w) {
        return split.commands[w].kind == CommandKind::h2dGradient;
      }));
    }
    // Both backward stages take their gradient by upload, 2 microbatches.
    EXPECT_EQ(seen, 4u) << (layerGrain ? "layer grain" : "stage grain");
  }
}

} // namespace

// A layer-grain backward adds each layer's weight gradients into the job's
// accumulators right after that layer's backward (the exporter's
// start-grads / add-grads per layer), so its work holds the largest
// layer's gradients, not the stage's; a stage-grain backward and the tail
// are one program each and hold them all (issue 20).
TEST(PipelineTest, LayerGrainBackwardHoldsOneLayersGradients) {
  std::vector<LayerCost> layers = uniform(3, 0);
  for (auto [i, c] : llvm::enumerate(layers)) {
    c.gradBytes = 1000 * int64_t(i + 1);
    c.workBytes = 100;
    c.actInBytes = 10;
  }
  StageRange all{0, 3};
  // Saved inner inputs 20, two layers' intermediates 200 (less than the
  // stage's 300 plus one layer's 100).
  EXPECT_EQ(jobWorkBytes(CommandKind::backward, all, layers, true),
            3000 + 20 + 200);
  EXPECT_EQ(jobWorkBytes(CommandKind::backward, all, layers, false),
            6000 + 300 + 100);
  EXPECT_EQ(jobWorkBytes(CommandKind::tail, all, layers, true),
            6000 + 300 + 100);
  EXPECT_EQ(jobWorkBytes(CommandKind::forward, all, layers, true), 100);
}

// The same with the reverse sweep measured (BackwardLiveness): the body's
// bytes are the same whichever gradients are counted, and a layer-grain
// backward adds the largest layer's gradients to them, a stage-grain one
// and the tail the stage's.
TEST(PipelineTest, MeasuredLayerGrainBackwardHoldsOneLayersGradients) {
  std::vector<LayerCost> layers = uniform(3, 0);
  for (auto [i, c] : llvm::enumerate(layers)) {
    c.gradBytes = 1000 * int64_t(i + 1);
    c.workBytes = c.recomputePeakBytes = 100;
    c.keptBytes = 40;
    c.keptInputBytes = 10;
    c.backwardPeakBytes = 120;
    c.resultGradBytes = 10;
    c.actInBytes = 10;
    c.backwardMeasured = true;
  }
  StageRange all{0, 3};
  int64_t layerBody = jobWorkBytes(CommandKind::backward, all, layers, true);
  int64_t stageBody = jobWorkBytes(CommandKind::backward, all, layers, false);
  int64_t tailBody = jobWorkBytes(CommandKind::tail, all, layers, true);
  for (LayerCost &c : layers)
    c.gradBytes = 0;
  EXPECT_EQ(layerBody - jobWorkBytes(CommandKind::backward, all, layers, true),
            3000);
  EXPECT_EQ(stageBody - jobWorkBytes(CommandKind::backward, all, layers, false),
            6000);
  EXPECT_EQ(tailBody - jobWorkBytes(CommandKind::tail, all, layers, true),
            6000);
}

// Partition::tailJobs = 2 (the timing model's split tail, docs/pipeline.md):
// two tail jobs on consecutive devices take alternate microbatches, every
// stage's microbatch runs once, each command waits for the job of the
// stage before that ran its microbatch, and both tail sets upload their
// weights and download their gradients.
TEST(PipelineTest, SplitTailAlternatesMicrobatches) {
  std::vector<LayerCost> layers = uniform(6, 1000);
  Partition p = partitionFromSizes({2, 2}, 2, {2, 2}, 6);
  p.tailJobs = 2;
  std::string error;
  auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, 4, 5, error);
  ASSERT_TRUE(mlir::succeeded(pl)) << error;
  ASSERT_EQ(pl->jobs.size(), 6u); // F0 F1 T2 T3 B4 B5
  EXPECT_EQ(pl->jobs[2].kind, CommandKind::tail);
  EXPECT_EQ(pl->jobs[3].kind, CommandKind::tail);
  EXPECT_EQ(pl->jobs[2].device, 2u);
  EXPECT_EQ(pl->jobs[3].device, 3u);
  std::map<unsigned, std::set<int>> mbs; // job -> microbatches
  const auto &cmds = pl->schedule.commands;
  for (const Command &c : cmds) {
    EXPECT_TRUE(mbs[c.job].insert(c.microbatch).second);
    for (unsigned w : c.waits) {
      // Same microbatch, the stage before: F1 <- F0, T <- F1, B4 <- its T.
      EXPECT_EQ(cmds[w].microbatch, c.microbatch);
      // B4's gradient comes from the tail job that ran its microbatch (its
      // saved input from F0).
      if (c.job == 4 && cmds[w].kind == CommandKind::tail)
        EXPECT_EQ(cmds[w].job, 2 + c.microbatch % 2);
      if (c.job == 4 && cmds[w].kind != CommandKind::tail)
        EXPECT_EQ(cmds[w].job, 0);
    }
  }
  EXPECT_EQ(mbs[2], (std::set<int>{0, 2, 4}));
  EXPECT_EQ(mbs[3], (std::set<int>{1, 3}));
  for (unsigned j : {0u, 1u, 4u, 5u})
    EXPECT_EQ(mbs[j].size(), 5u);
  insertTransfers(*pl, layers, link(10));
  std::map<int, int> uploads, grads; // job -> count
  for (const Command &c : pl->schedule.commands) {
    if (c.kind == CommandKind::h2dWeights)
      ++uploads[c.job];
    if (c.kind == CommandKind::d2hWeightGrads)
      ++grads[c.job];
  }
  EXPECT_EQ(uploads[2], 1);
  EXPECT_EQ(uploads[3], 1);
  EXPECT_EQ(grads[2], 1);
  EXPECT_EQ(grads[3], 1);
  EXPECT_TRUE(estimateTiming(pl->schedule));
  // Static schedules and a single microbatch keep one tail job.
  auto one = lowerSchedule(p, layers, ScheduleKind::roundRobin, 4, 1, error);
  ASSERT_TRUE(mlir::succeeded(one));
  EXPECT_EQ(one->jobs.size(), 5u);
}

// Partition::tailPairAt (the timing model's tail split by layers): the
// shallow half's forward and backward jobs share a device and a weight
// set, its backward recomputes nothing and reads its forward's output on
// the device (no saved-input copy), one forward ahead of it in the queue;
// the job counter moves on one device less.
TEST(PipelineTest, TailPairSplitsTheTailByLayers) {
  std::vector<LayerCost> layers = uniform(6, 1000);
  Partition p = partitionFromSizes({2, 2}, 2, {2, 2}, 6);
  p.tailPairAt = 1;
  std::string error;
  auto pl = lowerSchedule(p, layers, ScheduleKind::roundRobin, 4, 3, error);
  ASSERT_TRUE(mlir::succeeded(pl)) << error;
  ASSERT_EQ(pl->jobs.size(), 7u); // F0 F1 A2 T3 A4 B5 B6
  EXPECT_EQ(pl->jobs[2].kind, CommandKind::forward);
  EXPECT_EQ(pl->jobs[3].kind, CommandKind::tail);
  EXPECT_EQ(pl->jobs[4].kind, CommandKind::backward);
  EXPECT_TRUE(pl->jobs[4].keepsForward);
  EXPECT_EQ(pl->jobs[4].device, pl->jobs[2].device);
  EXPECT_EQ(pl->jobs[4].weightSet, pl->jobs[2].weightSet);
  EXPECT_EQ(pl->jobs[5].device, 0u); // F0 d0, F1 d1, A d2, T d3, B5 d0
  EXPECT_EQ(pl->devicesPerStep(), 6u);
  EXPECT_EQ(pl->shiftPerPass(), 2u);
  std::vector<std::string> order; // the shared device's queue
  for (const Command &c : pl->schedule.commands) {
    if (c.job == 4)
      EXPECT_DOUBLE_EQ(c.ms, layers[4].backwardMs);
    if (c.device == pl->jobs[2].device && (c.job == 2 || c.job == 4))
      order.push_back(c.label);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"F2 mb0", "F2 mb1", "B4 mb0",
                                             "F2 mb2", "B4 mb1", "B4 mb2"}));
  insertTransfers(*pl, layers, link(10));
  int uploads = 0, savedInputs = 0;
  for (const Command &c : pl->schedule.commands) {
    uploads += c.kind == CommandKind::h2dWeights && c.job == 2;
    savedInputs += c.kind == CommandKind::h2dActivation && c.job == 4;
  }
  EXPECT_EQ(uploads, 1);
  EXPECT_EQ(savedInputs, 0);
  EXPECT_TRUE(estimateTiming(pl->schedule));
}
