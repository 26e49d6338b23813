//===- EquivalenceTest.cpp - every schedule trains like one device --------===//
//
// DESIGN.md's equivalence contract, in one process: a GPT-style and a
// Llama-style model (exported by torch.onnx, under 1M parameters) compiled
// for G in {1, 2, 3, 4} devices, M in {1, G + 1, G + 3} microbatches and
// the round-robin, 1f1b and gpipe schedules, each trained for three AdamW
// steps in sync mode on the host device, give per-step losses and final
// weights bitwise equal to the one-device plan with the same M. Async mode
// follows the one-step-stale rule on any device count just the same, and so
// do interleaved-1f1b and bf16 plans. The f16 plans (loss scaling) are in
// EquivalenceF16Test.cpp; the harness in EquivalenceHarness.h.
//
//===----------------------------------------------------------------------===//

#include "EquivalenceHarness.h"

#include "rp/runtime/Plan.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <map>
#include <set>

namespace rt = ::rp::runtime;

// In the harness's namespace, as its helpers are.
namespace rp::test {

namespace {

void checkModel(const std::string &model, bool sync) {
  unsigned plans = 0;
  for (unsigned m : {1u, 2u, 3u, 4u, 5u, 6u, 7u}) {
    std::vector<Config> configs;
    for (unsigned g = 1; g <= 4; ++g)
      if (m == 1 || m == g + 1 || m == g + 3)
        for (const char *s : {"round-robin", "1f1b", "gpipe"})
          configs.push_back({s, g, m});
    std::string refDir = scratchDir();
    Outcome reference =
        train(compile(model, {"round-robin", 1, m}, refDir), sync, refDir);
    ASSERT_EQ(reference.losses.size(), 3u) << "M=" << m;
    for (const Config &c : configs) {
      std::string dir = scratchDir();
      Outcome got = train(compile(model, c, dir), sync, dir);
      EXPECT_EQ(got.losses, reference.losses) << c.name();
      EXPECT_TRUE(got.weights == reference.weights)
          << c.name() << ": final weights differ from one device";
      llvm::sys::fs::remove_directories(dir);
      ++plans;
    }
    llvm::sys::fs::remove_directories(refDir);
  }
  // G in 1..4, each with three microbatch counts, three schedules.
  EXPECT_EQ(plans, 36u);
}

TEST(Equivalence, GptSyncOnEveryDeviceCountAndSchedule) {
  checkModel(modelPath("gpt_op17.onnx"), /*sync=*/true);
}

TEST(Equivalence, LlamaSyncOnEveryDeviceCountAndSchedule) {
  checkModel(modelPath("llama_op17.onnx"), /*sync=*/true);
}

TEST(Equivalence, InterleavedAndBf16PlansTrainLikeOneDevice) {
  for (const char *name : {"gpt_op17.onnx", "llama_op17.onnx"}) {
    std::string model = modelPath(name);
    for (auto [c, ref] :
         {std::pair<Config, Config>{{"interleaved-1f1b", 2, 4},
                                    {"round-robin", 1, 4}},
          {{"looped-bfs", 2, 3}, {"round-robin", 1, 3}},
          {{"round-robin", 3, 4, true}, {"round-robin", 1, 4, true}},
          {{"1f1b", 2, 3, true}, {"round-robin", 1, 3, true}}}) {
      std::string refDir = scratchDir(), dir = scratchDir();
      Outcome reference = train(compile(model, ref, refDir), true, refDir);
      Outcome got = train(compile(model, c, dir), true, dir);
      ASSERT_EQ(reference.losses.size(), 3u) << c.name();
      EXPECT_EQ(got.losses, reference.losses) << name << " " << c.name();
      EXPECT_TRUE(got.weights == reference.weights)
          << name << " " << c.name() << ": final weights differ";
      llvm::sys::fs::remove_directories(dir);
      llvm::sys::fs::remove_directories(refDir);
    }
  }
}

// Layer-grain recompute (a backward program per layer, each layer's input
// kept) gives the bits of stage grain (one backward recomputing the stage)
// and of one device, in sync mode, on one device and on several; the
// backward stage of three layers is where the grains differ.
TEST(Equivalence, LayerGrainPlansTrainLikeStageGrain) {
  for (const char *name : {"gpt_op17.onnx", "llama_op17.onnx"}) {
    std::string model = modelPath(name);
    for (auto [g, m] : {std::pair{1u, 2u}, {2u, 3u}, {3u, 4u}}) {
      Config stage{"round-robin", g, m};
      stage.stages = "fwd:3;bwd:1,3";
      Config layer = stage;
      layer.layerGrain = true;
      std::string refDir = scratchDir(), dir = scratchDir();
      Outcome reference =
          train(compile(model, {"round-robin", 1, m}, refDir), true, refDir);
      Outcome byStage = train(compile(model, stage, dir), true, dir);
      Outcome byLayer = train(compile(model, layer, dir), true, dir);
      ASSERT_EQ(reference.losses.size(), 3u) << layer.name();
      EXPECT_EQ(byStage.losses, reference.losses)
          << name << " " << stage.name();
      EXPECT_EQ(byLayer.losses, byStage.losses) << name << " " << layer.name();
      EXPECT_TRUE(byLayer.weights == byStage.weights)
          << name << " " << layer.name() << ": final weights differ";
      EXPECT_TRUE(byLayer.weights == reference.weights)
          << name << " " << layer.name() << ": final weights differ";
      llvm::sys::fs::remove_directories(dir);
      llvm::sys::fs::remove_directories(refDir);
    }
  }
}

// A mixed plan (each backward stage its own grain, as --recompute auto
// chooses them): the two-layer stage at layer grain beside a one-layer
// stage at stage grain, and the other way round, train with the bits of
// stage grain everywhere and of one device.
TEST(Equivalence, MixedGrainPlansTrainLikeStageGrain) {
  for (const char *name : {"gpt_op17.onnx", "llama_op17.onnx"}) {
    std::string model = modelPath(name);
    for (auto [g, m] : {std::pair{1u, 2u}, {2u, 3u}, {3u, 4u}}) {
      std::string refDir = scratchDir(), dir = scratchDir();
      Outcome reference =
          train(compile(model, {"round-robin", 1, m}, refDir), true, refDir);
      Config stage{"round-robin", g, m};
      stage.stages = "fwd:3;bwd:1,2,1";
      Outcome byStage = train(compile(model, stage, dir), true, dir);
      ASSERT_EQ(reference.losses.size(), 3u) << stage.name();
      EXPECT_EQ(byStage.losses, reference.losses)
          << name << " " << stage.name();
      for (const char *grains : {"layer,stage", "stage,layer"}) {
        Config mixed = stage;
        mixed.grains = grains;
        Outcome byMixed = train(compile(model, mixed, dir), true, dir);
        EXPECT_EQ(byMixed.losses, byStage.losses)
            << name << " " << mixed.name();
        EXPECT_TRUE(byMixed.weights == reference.weights)
            << name << " " << mixed.name() << ": final weights differ";
      }
      llvm::sys::fs::remove_directories(dir);
      llvm::sys::fs::remove_directories(refDir);
    }
  }
}

TEST(Equivalence, GptAsyncOnEveryDeviceCountAndSchedule) {
  checkModel(modelPath("gpt_op17.onnx"), /*sync=*/false);
}

TEST(Equivalence, LlamaAsyncOnEveryDeviceCountAndSchedule) {
  checkModel(modelPath("llama_op17.onnx"), /*sync=*/false);
}
} // namespace

TEST(Equivalence, SyncFencesGiveTheSerialOptimizersBits) {
  // Sync mode gates each upload on its parameter's update, which runs
  // beside the next step: the same bits as updating between the steps,
  // with the bf16 copies made per parameter and with clipping.
  std::string model = modelPath("gpt_op17.onnx");
  for (const Config &c :
       {Config{"round-robin", 3, 4}, Config{"1f1b", 2, 3, true}}) {
    std::string dir = scratchDir();
    std::string plan = compile(model, c, dir);
    for (double clip : {0.0, 0.5}) {
      auto run = [&](bool overlap) {
        return train(plan, true, dir, [&](rt::TrainOptions &o) {
          o.steps = 4;
          o.clipGradNorm = clip;
          o.overlapOptimizer = overlap;
        });
      };
      Outcome fenced = run(true), serial = run(false);
      ASSERT_EQ(serial.losses.size(), 4u);
      EXPECT_EQ(fenced.losses, serial.losses) << c.name() << " clip " << clip;
      EXPECT_TRUE(fenced.weights == serial.weights) << c.name();
    }
    llvm::sys::fs::remove_directories(dir);
  }
}

// The fused tail as two stage jobs taking alternate microbatches (tail-jobs
// 2): each tail parameter's gradient is the even microbatches' fold plus
// the odd ones' (docs/pipeline.md, "Accumulation: what is bitwise"), on
// every device count. So sync G devices give the bits of one device
// compiled the same way, async the one-step-stale reference's, with
// --accumulate 1 and 2 and a tail of two layers (M = 5: folds of three and
// two microbatches), and a resumed run the uninterrupted one's.
TEST(Equivalence, TailAsTwoJobsTrainsLikeOneDeviceSummingTheSameWay) {
  for (const char *name : {"gpt_op17.onnx", "llama_op17.onnx"}) {
    std::string model = modelPath(name);
    Config one{"round-robin", 1, 5};
    one.stages = "fwd:2;bwd:2,1,1";
    one.tailJobs = 2;
    std::string refDir = scratchDir();
    std::string ref = compile(model, one, refDir);
    // The plan really runs the tail as two jobs: its 'T' jobs are two
    // stages, the one on even microbatches first.
    auto plan = rt::loadPlan(ref);
    ASSERT_TRUE(bool(plan));
    std::map<int32_t, std::set<uint32_t>> tailMbs;
    for (const rt::JobDesc &j : plan->jobs)
      if (j.kind == rt::JobKind::run && !j.label.empty() && j.label[0] == 'T')
        tailMbs[j.stage].insert(j.microbatch);
    ASSERT_EQ(tailMbs.size(), 2u) << name;
    EXPECT_EQ(tailMbs.begin()->second, (std::set<uint32_t>{0, 2, 4}));
    EXPECT_EQ(std::next(tailMbs.begin())->second, (std::set<uint32_t>{1, 3}));
    for (unsigned k : {1u, 2u})
      for (bool sync : {true, false}) {
        auto steps = [&](rt::TrainOptions &o) {
          o.steps = 5;
          o.accumulate = k;
        };
        Outcome want = train(ref, sync, refDir, steps);
        ASSERT_EQ(want.losses.size(), 5u) << name;
        // Against one tail job: the same forward (step 0's loss, before
        // any update, is the same bits) and sums that differ by rounding
        // only, so no microbatch is lost, doubled or read from the wrong
        // slot.
        Config single = one;
        single.tailJobs = 1;
        std::string singleDir = scratchDir();
        Outcome folded =
            train(compile(model, single, singleDir), sync, singleDir, steps);
        ASSERT_EQ(folded.losses.size(), 5u) << name;
        EXPECT_EQ(folded.losses[0], want.losses[0]) << name;
        for (unsigned i = 0; i < 5; ++i)
          EXPECT_NEAR(std::stod(folded.losses[i]), std::stod(want.losses[i]),
                      1e-5 * std::fabs(std::stod(want.losses[i])))
              << name << " step " << i;
        llvm::sys::fs::remove_directories(singleDir);
        for (unsigned g : {2u, 3u, 4u}) {
          Config c = one;
          c.devices = g;
          std::string dir = scratchDir();
          std::string planPath = compile(model, c, dir);
          Outcome got = train(planPath, sync, dir, steps, Run::continuous);
          std::string what = std::string(name) + " " + c.name() +
                             " K=" + std::to_string(k) +
                             (sync ? " sync" : " async");
          EXPECT_EQ(got.losses, want.losses) << what;
          EXPECT_TRUE(got.weights == want.weights)
              << what << ": final weights differ from one device";
          if (g == 3) {
            // 2 + 3 steps = 5, bitwise.
            Outcome first = train(
                planPath, sync, dir,
                [&](rt::TrainOptions &o) {
                  steps(o);
                  o.steps = 2;
                  o.save = dir + "/half";
                },
                Run::continuous);
            Outcome second = train(
                planPath, sync, dir,
                [&](rt::TrainOptions &o) {
                  steps(o);
                  o.steps = 3;
                  o.resume = dir + "/half";
                  o.save = dir + "/half";
                },
                Run::continuous);
            std::vector<std::string> joined = first.losses;
            joined.insert(joined.end(), second.losses.begin(),
                          second.losses.end());
            EXPECT_EQ(joined, want.losses) << what << " resumed";
            EXPECT_TRUE(second.weights == want.weights) << what << " resumed";
          }
          llvm::sys::fs::remove_directories(dir);
        }
      }
    llvm::sys::fs::remove_directories(refDir);
  }
}

} // namespace rp::test
