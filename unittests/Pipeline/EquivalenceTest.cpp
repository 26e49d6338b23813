//===- EquivalenceTest.cpp - every schedule trains like one device --------===//
//
// DESIGN.md's equivalence contract, in one process: a GPT-style and a
// Llama-style model (exported by torch.onnx, under 1M parameters) compiled
// for G in {1, 2, 3, 4} devices, M in {1, G + 1, G + 3} microbatches and
// the round-robin, 1f1b and gpipe schedules, each trained for three AdamW
// steps in sync mode on the host device, give per-step losses and final
// weights bitwise equal to the one-device plan with the same M. Async mode
// follows the one-step-stale rule on any device count just the same, and so
// do interleaved-1f1b and bf16 plans.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/Target/PlanExport.h"
#include "rp/runtime/Device.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Trainer.h"

#include "TrainOutcome.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>

using namespace mlir;
namespace rt = ::rp::runtime;

namespace {

struct Config {
  std::string schedule;
  unsigned devices, microbatches;
  bool bf16 = false;
  bool f16 = false;
  /// A user partition (--stages) and layer-grain recompute.
  std::string stages;
  bool layerGrain = false;
  /// The fused tail's stage jobs (--tail-jobs).
  unsigned tailJobs = 1;
  /// Each backward stage's grain (--recompute-stages), when given.
  std::string grains;
  std::string name() const {
    return schedule + " G=" + std::to_string(devices) +
           " M=" + std::to_string(microbatches) + (bf16 ? " bf16" : "") +
           (f16 ? " f16" : "") + (stages.empty() ? "" : " " + stages) +
           (layerGrain ? " layer" : "") +
           (tailJobs != 1 ? " tail-jobs=" + std::to_string(tailJobs) : "") +
           (grains.empty() ? "" : " " + grains);
  }
};

using ::rp::test::Outcome;

std::string scratchDir() {
  SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("rp-equivalence", dir));
  return dir.str().str();
}

/// rp-compile's training path: import, the training pipeline, export.
std::string compile(const std::string &model, const Config &c,
                    const std::string &dir) {
  DialectRegistry registry;
  mlir::rp::registerAllDialects(registry);
  MLIRContext context(registry);
  mlir::rp::ONNXImportOptions import;
  import.weightsPath = dir + "/model.weights.bin";
  import.irDir = dir;
  OwningOpRef<ModuleOp> module =
      mlir::rp::importONNXModel(model, &context, import);
  if (module && failed(mlir::rp::runPreparePipeline(*module, import.weightsPath,
                                                    import.irDir)))
    module = nullptr;
  EXPECT_TRUE(module) << c.name();
  if (!module)
    return "";
  PassManager pm(&context);
  mlir::rp::TrainPipelineOptions options;
  options.devices = c.devices;
  options.microbatches = c.microbatches;
  options.schedule = *mlir::rp::symbolizeScheduleKind(c.schedule);
  if (c.bf16 || c.f16)
    options.dtype =
        c.bf16 ? mlir::rp::ComputeType::bf16 : mlir::rp::ComputeType::f16;
  options.stages = c.stages;
  options.recompute = c.layerGrain ? mlir::rp::RecomputeGrain::layer
                                   : mlir::rp::RecomputeGrain::stage;
  options.recomputeStages = c.grains;
  options.tailJobs = c.tailJobs;
  mlir::rp::buildTrainPipeline(pm, options);
  EXPECT_TRUE(succeeded(pm.run(*module))) << c.name();
  mlir::rp::PlanExportOptions out;
  out.irDir = dir;
  out.planDir = dir;
  std::string plan = dir + "/model.rpplan";
  EXPECT_TRUE(succeeded(mlir::rp::exportPlanToFile(*module, out, plan)))
      << c.name();
  return plan;
}

/// How the trainer runs the passes: a barrier after each (one buffer
/// slot), or continuously as rp-run does (two slots, devices renamed).
enum class Run { barrier, continuous };

Outcome train(const std::string &planPath, bool sync, const std::string &dir,
              const std::function<void(rt::TrainOptions &)> &tweak = {},
              Run run = Run::barrier) {
  Outcome o;
  auto plan = rt::loadPlan(planPath);
  EXPECT_TRUE(bool(plan)) << (plan ? "" : plan.getStatus().getMessage());
  if (!plan)
    return o;
  std::unique_ptr<rt::Backend> backend;
  rt::Expected<std::unique_ptr<rt::HostForward>> fwd =
      rt::HostForward::create(*plan);
  if (run == Run::continuous) {
    rt::BackendOptions devices;
    devices.devices = plan->devices;
    devices.threads = 2;
    auto created = rt::createBackend("host", devices);
    EXPECT_TRUE(bool(created));
    if (!created)
      return o;
    backend = std::move(*created);
    rt::ForwardOptions two;
    two.slots = 2;
    two.rotate = true;
    fwd = rt::HostForward::create(*plan, *backend, two);
  }
  EXPECT_TRUE(bool(fwd)) << (fwd ? "" : fwd.getStatus().getMessage());
  if (!fwd)
    return o;
  // Device buffers share bytes only where the plan orders their uses (and
  // the arenas start as NaNs, so a wrong share shows in the losses).
  const rt::DeviceLayout &layout = (*fwd)->getLayout();
  rt::Status packed = rt::verifyDeviceLayout(*plan, layout);
  EXPECT_FALSE(packed.failed()) << packed.getMessage();
  uint64_t arenas = 0, unshared = 0;
  for (size_t d = 0; d < layout.arenaBytes.size(); ++d) {
    EXPECT_LE(layout.arenaBytes[d], layout.unsharedBytes[d]) << planPath;
    arenas += layout.arenaBytes[d];
    unshared += layout.unsharedBytes[d];
  }
  EXPECT_LT(arenas, unshared) << planPath;
  // The plan carries the compiler's peak per device, and one pass's arenas
  // stay within it, up to each buffer's alignment padding (issue 20): what
  // rp-run checks before it runs a plan.
  EXPECT_EQ(plan->plannedPeakBytes.size(), size_t(plan->devices)) << planPath;
  rt::Status within =
      rt::checkArenasWithinPlan(*plan, layout, (*fwd)->rotates());
  EXPECT_FALSE(within.failed()) << planPath << ": " << within.getMessage();
  rt::ThreadPool pool(2);
  rt::TrainOptions options;
  options.steps = 3;
  options.sync = sync;
  options.seed = 5;
  options.save = dir + "/checkpoint";
  if (tweak)
    tweak(options);
  ::rp::test::trainInto(o, *plan, **fwd, pool, options);
  return o;
}

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

std::string modelPath(const char *name) {
  return std::string(RP_TEST_MODELS) + "/" + name;
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
