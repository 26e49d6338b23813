//===- EquivalenceF16Test.cpp - f16 plans train like one device -----------===//
//
// The equivalence contract for f16 plans, whose loss is scaled (dynamic
// loss scaling: a step whose gradients overflow is skipped and the scale
// backs off): G devices give the bits of one device in sync and async
// mode, an overflowing step is skipped on every device alike, the
// pipeline stays full while steps are skipped, and a resumed run carries
// the scaler's state. The harness is EquivalenceHarness.h.
//
//===----------------------------------------------------------------------===//

#include "EquivalenceHarness.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>

namespace rt = ::rp::runtime;

// In the harness's namespace, as its helpers are.
namespace rp::test {

TEST(Equivalence, F16PlansScaleTheLossAndTrainLikeOneDevice) {
  std::string model = modelPath("gpt_op17.onnx");
  for (bool sync : {true, false})
    for (auto [c, ref] :
         {std::pair<Config, Config>{{"round-robin", 2, 3, false, true},
                                    {"round-robin", 1, 3, false, true}},
          {{"1f1b", 3, 4, false, true}, {"round-robin", 1, 4, false, true}}}) {
      std::string refDir = scratchDir(), dir = scratchDir();
      auto steps = [](rt::TrainOptions &o) { o.steps = 5; };
      Outcome reference =
          train(compile(model, ref, refDir), sync, refDir, steps);
      Outcome got = train(compile(model, c, dir), sync, dir, steps);
      ASSERT_EQ(reference.losses.size(), 5u) << c.name();
      EXPECT_EQ(got.losses, reference.losses) << c.name();
      EXPECT_TRUE(got.weights == reference.weights)
          << c.name() << ": final weights differ";
      llvm::sys::fs::remove_directories(dir);
      llvm::sys::fs::remove_directories(refDir);
    }
}

TEST(Equivalence, AnOverflowingF16StepIsSkippedAndTheScaleBacksOff) {
  // A scale of 2^60 overflows f16 in the loss gradient's seed itself: both
  // steps are skipped, the weights stay W_0, the scale halves once.
  std::string dir = scratchDir();
  std::string plan = compile(modelPath("gpt_op17.onnx"),
                             {"round-robin", 2, 3, false, true}, dir);
  Outcome start =
      train(plan, true, dir, [](rt::TrainOptions &o) { o.steps = 0; });
  std::vector<std::pair<unsigned, double>> skipped;
  Outcome got = train(plan, true, dir, [&](rt::TrainOptions &o) {
    o.steps = 2;
    o.lossScale.initial = std::ldexp(1.0, 60);
    o.onSkippedStep = [&](unsigned step, double scale) {
      skipped.emplace_back(step, scale);
    };
  });
  ASSERT_EQ(got.losses.size(), 2u);
  EXPECT_EQ(got.losses[0], got.losses[1]);
  EXPECT_TRUE(got.weights == start.weights);
  ASSERT_EQ(skipped.size(), 2u);
  // Step 1 ran at the scale step 0 overflowed at (one step stale): its
  // overflow backs the scale off no further.
  EXPECT_EQ(skipped[0], std::make_pair(0u, std::ldexp(1.0, 59)));
  EXPECT_EQ(skipped[1], std::make_pair(1u, std::ldexp(1.0, 59)));
  std::ifstream state(dir + "/checkpoint/state.json");
  std::string text((std::istreambuf_iterator<char>(state)), {});
  EXPECT_NE(text.find("\"updates\": 0"), std::string::npos) << text;
  // Without scaling the same steps apply: the weights move.
  Outcome plain = train(plan, true, dir, [](rt::TrainOptions &o) {
    o.steps = 2;
    o.lossScaling = false;
  });
  EXPECT_NE(plain.losses[0], plain.losses[1]);
  llvm::sys::fs::remove_directories(dir);
}

TEST(Equivalence, F16ResumesWithTheLossScalersState) {
  // 3 + 3 steps equal 6, bitwise, although the scale changes on the way
  // (an interval of 2 good steps doubles it every other step).
  std::string dir = scratchDir();
  std::string plan = compile(modelPath("gpt_op17.onnx"),
                             {"round-robin", 2, 3, false, true}, dir);
  auto scaler = [](rt::TrainOptions &o) {
    o.lossScale.initial = 1024;
    o.lossScale.interval = 2;
  };
  Outcome whole = train(plan, true, dir, [&](rt::TrainOptions &o) {
    scaler(o);
    o.steps = 6;
    o.save = dir + "/whole";
  });
  Outcome first = train(plan, true, dir, [&](rt::TrainOptions &o) {
    scaler(o);
    o.steps = 3;
    o.save = dir + "/half";
  });
  Outcome second = train(plan, true, dir, [&](rt::TrainOptions &o) {
    scaler(o);
    o.steps = 3;
    o.resume = dir + "/half";
    o.save = dir + "/half";
  });
  std::vector<std::string> joined = first.losses;
  joined.insert(joined.end(), second.losses.begin(), second.losses.end());
  EXPECT_EQ(joined, whole.losses);
  EXPECT_TRUE(second.weights == whole.weights);
  llvm::sys::fs::remove_directories(dir);
}

namespace {

/// An f16 run's losses, weights and skipped steps.
struct Scaled {
  Outcome outcome;
  std::vector<std::pair<unsigned, double>> skipped;
};

Scaled trainScaled(const std::string &plan, bool sync, const std::string &dir,
                   Run run,
                   const std::function<void(rt::TrainOptions &)> &more) {
  Scaled r;
  r.outcome = train(
      plan, sync, dir,
      [&](rt::TrainOptions &o) {
        // Overflows at first, then halves into range and grows back out of
        // it every other good step: skipped and applied steps interleave.
        o.lossScale.initial = 3e5;
        o.lossScale.interval = 2;
        o.steps = 10;
        o.onSkippedStep = [&](unsigned step, double scale) {
          r.skipped.emplace_back(step, scale);
        };
        if (more)
          more(o);
      },
      run);
  return r;
}

} // namespace

TEST(Equivalence, F16LossScalingKeepsThePipelineFullAndTrainsLikeOneDevice) {
  // The scale is one step stale (LossScale.h), so two passes fly and the
  // devices rotate with loss scaling on: sync on G devices gives one
  // device's bits, async the one-step-stale reference's, and both skip
  // exactly the steps the reference skips (the barrier run on one device).
  std::string model = modelPath("gpt_op17.onnx");
  std::string refDir = scratchDir();
  std::string ref = compile(model, {"round-robin", 1, 3, false, true}, refDir);
  for (bool sync : {true, false}) {
    Scaled want = trainScaled(ref, sync, refDir, Run::barrier, {});
    ASSERT_EQ(want.outcome.losses.size(), 10u);
    // Both kinds of step happen.
    EXPECT_GE(want.skipped.size(), 2u);
    EXPECT_LE(want.skipped.size(), 8u);
    for (const Config &c : {Config{"round-robin", 1, 3, false, true},
                            Config{"round-robin", 2, 3, false, true},
                            Config{"round-robin", 3, 3, false, true}}) {
      std::string dir = scratchDir();
      Scaled got =
          trainScaled(compile(model, c, dir), sync, dir, Run::continuous, {});
      EXPECT_EQ(got.outcome.losses, want.outcome.losses) << c.name();
      EXPECT_TRUE(got.outcome.weights == want.outcome.weights) << c.name();
      EXPECT_EQ(got.skipped, want.skipped) << c.name();
      llvm::sys::fs::remove_directories(dir);
    }
  }
  llvm::sys::fs::remove_directories(refDir);
}

TEST(Equivalence, F16ContinuousRunsResumeWithBothScales) {
  // Split anywhere, with the scale moving on the way: the checkpoint keeps
  // the scale its next step runs at (decided a step before) and the one
  // after, so 2 + 8 and 5 + 5 steps equal 10 in both modes.
  std::string dir = scratchDir();
  std::string plan = compile(modelPath("gpt_op17.onnx"),
                             {"round-robin", 2, 3, false, true}, dir);
  for (bool sync : {true, false}) {
    Scaled whole =
        trainScaled(plan, sync, dir, Run::continuous,
                    [&](rt::TrainOptions &o) { o.save = dir + "/whole"; });
    for (unsigned split : {2u, 5u}) {
      Scaled first = trainScaled(plan, sync, dir, Run::continuous,
                                 [&](rt::TrainOptions &o) {
                                   o.steps = split;
                                   o.save = dir + "/half";
                                 });
      Scaled second = trainScaled(plan, sync, dir, Run::continuous,
                                  [&](rt::TrainOptions &o) {
                                    o.steps = 10 - split;
                                    o.resume = dir + "/half";
                                    o.save = dir + "/half";
                                  });
      std::vector<std::string> joined = first.outcome.losses;
      joined.insert(joined.end(), second.outcome.losses.begin(),
                    second.outcome.losses.end());
      EXPECT_EQ(joined, whole.outcome.losses) << "split " << split;
      EXPECT_TRUE(second.outcome.weights == whole.outcome.weights)
          << "split " << split;
      first.skipped.insert(first.skipped.end(), second.skipped.begin(),
                           second.skipped.end());
      EXPECT_EQ(first.skipped, whole.skipped) << "split " << split;
      llvm::sys::fs::remove_directories(dir + "/half");
    }
  }
  llvm::sys::fs::remove_directories(dir);
}

} // namespace rp::test
