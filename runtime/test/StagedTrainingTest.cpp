//===- StagedTrainingTest.cpp - training through the staged executor ------===//
//
// DESIGN.md's equivalence contract at runtime scale: the same two-layer
// classifier, logits = (x @ W0) @ W1 with a cross-entropy loss, as an
// unstaged one-device plan (the trainer runs it once per microbatch) and as
// a staged two-device plan (stage 0 on device 0, the fused tail on device
// 1, per-microbatch gradients summed by the epilogue in microbatch order).
// Sync and async training must give the same losses and weights bit for
// bit, checkpoints included.
//
//===----------------------------------------------------------------------===//

#include "ClassifierPlans.h"

#include "rp/runtime/Comm.h"
#include "rp/runtime/Trainer.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace rp::runtime;
using namespace rp::runtime::test;
using namespace rp::runtime::test::classifier;

namespace {

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<uint8_t>> weights; ///< w0, w1 after training
};

Outcome trainPlan(const Plan &built, const std::string &name,
                  TrainOptions options, unsigned threads,
                  const std::function<void(unsigned)> &after = {},
                  const char *backendName = "host",
                  const ForwardOptions &forward = ForwardOptions()) {
  Outcome run;
  Expected<Plan> plan = writeAndLoad(built, name);
  EXPECT_TRUE(plan) << plan.getStatus().toString();
  if (!plan)
    return run;
  // The devices get the same thread budget as the host.
  auto backend =
      createBackend(backendName, backendOptions(plan->devices, threads));
  EXPECT_TRUE(backend) << backend.getStatus().toString();
  if (!backend)
    return run;
  auto fwd = HostForward::create(*plan, **backend, forward);
  EXPECT_TRUE(fwd);
  if (!fwd)
    return run;
  EXPECT_TRUE((*fwd)->initParameters(options.seed).isOk());
  EXPECT_EQ((*fwd)->rotates(), forward.rotate) << (*fwd)->getRotationBlocker();
  ThreadPool pool(threads);
  Status s = rp::runtime::train(*plan, **fwd, pool, options,
                                [&](unsigned step, double loss) {
                                  run.losses.push_back(loss);
                                  if (after)
                                    after(step);
                                });
  EXPECT_TRUE(s.isOk()) << s.toString();
  for (const char *param : {"w0", "w1"})
    for (uint32_t b = 0; b < plan->buffers.size(); ++b)
      if (plan->buffers[b].weight && plan->buffers[b].weight->param == param) {
        TensorRef t = (*fwd)->buffer(b);
        const uint8_t *p = static_cast<const uint8_t *>(t.data);
        run.weights.emplace_back(p, p + t.bytes());
      }
  return run;
}

TEST(StagedTrainingTest, EqualsTheUnstagedPlan) {
  for (unsigned M : {1u, 3u})
    for (bool sync : {true, false}) {
      SCOPED_TRACE("M " + std::to_string(M) + (sync ? " sync" : " async"));
      TrainOptions options;
      options.steps = 4;
      options.sync = sync;
      options.seed = 3;
      options.adamw.lr = 0.05;
      options.inputs["labels"] = labelsArray(M);
      Outcome want = trainPlan(unstagedPlan(M), "ref.rpplan", options, 2);
      Outcome got = trainPlan(stagedPlan(M), "staged.rpplan", options, 3);
      ASSERT_EQ(want.losses.size(), 4u);
      EXPECT_EQ(got.losses, want.losses);
      // Training moved the loss at all.
      EXPECT_NE(want.losses.front(), want.losses.back());
      EXPECT_EQ(got.weights, want.weights);
    }
}

TEST(StagedTrainingTest, ContinuousPassesEqualTheBarrierOnes) {
  // Two passes in flight on two buffer slots, the devices renamed every
  // pass, with and without gradient accumulation, on a copy of the device
  // arenas per pass or on one shared copy: the losses and final weights of
  // a barrier after every pass, bit for bit. K passes of M microbatches
  // take K global batches.
  ForwardOptions continuous;
  continuous.slots = 2;
  continuous.rotate = true;
  for (unsigned copies : {2u, 1u})
    for (unsigned K : {1u, 2u})
      for (bool sync : {true, false}) {
        continuous.arenaCopies = copies;
        SCOPED_TRACE("K " + std::to_string(K) + (sync ? " sync" : " async") +
                     " arena copies " + std::to_string(copies));
        TrainOptions options;
        options.steps = 5;
        options.sync = sync;
        options.seed = 4;
        options.adamw.lr = 0.05;
        options.accumulate = K;
        NpyArray labels = labelsArray(2 * K);
        options.inputs["labels"] = labels;
        options.continuous = false;
        Outcome want = trainPlan(stagedPlan(2), "barrier.rpplan", options, 3);
        options.continuous = true;
        Outcome got = trainPlan(stagedPlan(2), "continuous.rpplan", options, 3,
                                {}, "host", continuous);
        ASSERT_EQ(want.losses.size(), 5u);
        EXPECT_EQ(got.losses, want.losses);
        EXPECT_EQ(got.weights, want.weights);
        EXPECT_NE(want.losses.front(), want.losses.back());
      }
}

TEST(StagedTrainingTest, ContinuousPassesShareTheFrozenWeights) {
  // W1 frozen (no grad:w1 output, as a LoRA base): the second pass in
  // flight reads slot 0's copy of it (one base in host memory, as
  // rp-compile counts it), while the trained W0, the staged activations
  // and the inputs get a copy per slot; training is bitwise the barrier's.
  Plan built = stagedPlan(2);
  built.outputs.erase(
      std::remove_if(built.outputs.begin(), built.outputs.end(),
                     [](const BindingDesc &o) { return o.name == "grad:w1"; }),
      built.outputs.end());
  Expected<Plan> plan = writeAndLoad(built, "frozen-w1.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto backend = createBackend("host", backendOptions(plan->devices, 2));
  ASSERT_TRUE(backend);
  ForwardOptions continuous;
  continuous.slots = 2;
  auto fwd = HostForward::create(*plan, **backend, continuous);
  ASSERT_TRUE(fwd) << fwd.getStatus().toString();
  auto index = [&](const std::string &name) {
    for (uint32_t b = 0; b < plan->buffers.size(); ++b)
      if (plan->buffers[b].name == name)
        return b;
    ADD_FAILURE() << "no buffer " << name;
    return uint32_t(0);
  };
  auto shared = [&](const std::string &name) {
    return (*fwd)->buffer(index(name), 0).data ==
           (*fwd)->buffer(index(name), 1).data;
  };
  EXPECT_TRUE(shared("w1"));
  EXPECT_FALSE(shared("w0"));
  EXPECT_FALSE(shared("h.host"));
  EXPECT_FALSE(shared("x"));
  for (unsigned copies : {2u, 1u}) {
    SCOPED_TRACE("arena copies " + std::to_string(copies));
    continuous.arenaCopies = copies;
    TrainOptions options;
    options.steps = 4;
    options.seed = 5;
    options.adamw.lr = 0.05;
    options.inputs["labels"] = labelsArray(2);
    options.continuous = false;
    Outcome want = trainPlan(built, "frozen-barrier.rpplan", options, 3);
    options.continuous = true;
    Outcome got = trainPlan(built, "frozen-continuous.rpplan", options, 3, {},
                            "host", continuous);
    ASSERT_EQ(want.losses.size(), 4u);
    EXPECT_EQ(got.losses, want.losses);
    EXPECT_EQ(got.weights, want.weights);
    EXPECT_NE(want.losses.front(), want.losses.back());
  }
}

TEST(StagedTrainingTest, AccumulatedPassesOfOneMicrobatchEqualOnePassOfTwo) {
  // Two passes of one microbatch add the same two gradients onto zero as
  // one pass of two: the same bits (runtime/README.md says what is bitwise).
  for (bool sync : {true, false}) {
    SCOPED_TRACE(sync ? "sync" : "async");
    TrainOptions options;
    options.steps = 4;
    options.sync = sync;
    options.seed = 6;
    options.adamw.lr = 0.05;
    options.inputs["labels"] = labelsArray(2);
    Outcome whole = trainPlan(stagedPlan(2), "two.rpplan", options, 3);
    options.accumulate = 2;
    Outcome passes = trainPlan(stagedPlan(1), "one.rpplan", options, 3);
    ASSERT_EQ(whole.losses.size(), 4u);
    EXPECT_EQ(passes.losses, whole.losses);
    EXPECT_EQ(passes.weights, whole.weights);
  }
}

TEST(StagedTrainingTest, ResumesBitwise) {
  namespace fs = std::filesystem;
  std::string dir = tempPath("staged-ckpt");
  fs::remove_all(dir);
  TrainOptions options;
  options.seed = 11;
  options.sgd = true;
  options.sgdConfig.lr = 0.1;
  options.sgdConfig.momentum = 0.9;
  options.steps = 3;
  Outcome whole = trainPlan(stagedPlan(2), "whole.rpplan", options, 2);
  options.steps = 2;
  options.save = dir;
  Outcome first = trainPlan(stagedPlan(2), "first.rpplan", options, 2);
  options.steps = 1;
  options.save.clear();
  options.resume = dir;
  Outcome rest = trainPlan(stagedPlan(2), "rest.rpplan", options, 2);
  ASSERT_EQ(whole.losses.size(), 3u);
  ASSERT_EQ(first.losses.size(), 2u);
  ASSERT_EQ(rest.losses.size(), 1u);
  EXPECT_EQ(first.losses[0], whole.losses[0]);
  EXPECT_EQ(first.losses[1], whole.losses[1]);
  EXPECT_EQ(rest.losses[0], whole.losses[2]);
  EXPECT_EQ(rest.weights, whole.weights);
  fs::remove_all(dir);
}

std::vector<uint8_t> fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Async mode runs step k's optimizer beside step k+1: the same updates on
// the same gradients, so the same bits as running it between the steps,
// master weights and optimizer state included (a checkpoint holds them).
TEST(StagedTrainingTest, OverlappedOptimizerEqualsTheSerialOne) {
  namespace fs = std::filesystem;
  for (bool staged : {true, false})
    for (bool sgd : {false, true})
      for (unsigned threads : {1u, 3u}) {
        SCOPED_TRACE(std::string(staged ? "staged" : "unstaged") +
                     (sgd ? " sgd" : " adamw") + " threads " +
                     std::to_string(threads));
        TrainOptions options;
        options.steps = 5;
        options.seed = 4;
        options.sgd = sgd;
        options.sgdConfig.lr = 0.1;
        options.sgdConfig.momentum = 0.9;
        options.adamw.lr = 0.05;
        // Clipping reads every gradient of the step before any update.
        options.clipGradNorm = 0.5;
        options.inputs["labels"] = labelsArray(3);
        Plan plan = staged ? stagedPlan(3) : unstagedPlan(3);
        std::vector<Outcome> runs;
        std::vector<std::string> dirs;
        for (bool overlap : {false, true}) {
          options.overlapOptimizer = overlap;
          options.save = tempPath(overlap ? "overlap-ckpt" : "serial-ckpt");
          fs::remove_all(options.save);
          dirs.push_back(options.save);
          Plan copy = plan;
          Trace trace(copy, true);
          options.trace = &trace;
          runs.push_back(trainPlan(copy, "overlap.rpplan", options, threads));
          // One optimizer span per step, numbered as the steps.
          std::vector<uint64_t> steps;
          for (const HostSpan &h : trace.getHostSpans())
            if (h.name == "optimizer")
              steps.push_back(h.step);
          std::sort(steps.begin(), steps.end());
          EXPECT_EQ(steps, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
          EXPECT_EQ(trace.getBusy().steps, staged ? 5u : 0u);
        }
        ASSERT_EQ(runs[0].losses.size(), 5u);
        EXPECT_NE(runs[0].losses.front(), runs[0].losses.back());
        EXPECT_EQ(runs[1].losses, runs[0].losses);
        EXPECT_EQ(runs[1].weights, runs[0].weights);
        for (const char *file : {"weights.safetensors", "compute.safetensors",
                                 "optimizer.safetensors"}) {
          std::vector<uint8_t> serial = fileBytes(dirs[0] + "/" + file);
          EXPECT_FALSE(serial.empty()) << file;
          EXPECT_EQ(fileBytes(dirs[1] + "/" + file), serial) << file;
        }
        for (const std::string &d : dirs)
          fs::remove_all(d);
      }
}

// --save-every writes while an update may still run: the checkpoint must
// wait for it, or a resumed run would not continue bit for bit.
TEST(StagedTrainingTest,
     WritesCheckpointsAlongTheWayWhileTheOptimizerOverlaps) {
  namespace fs = std::filesystem;
  std::string dir = tempPath("every-ckpt"), kept = tempPath("every-kept");
  fs::remove_all(dir);
  fs::remove_all(kept);
  TrainOptions options;
  options.seed = 9;
  options.adamw.lr = 0.05;
  options.steps = 4;
  Outcome whole = trainPlan(stagedPlan(2), "whole.rpplan", options, 3);
  options.save = dir;
  options.saveEvery = 2;
  // The callback of step 2 runs after the checkpoint of 2 steps was made
  // and before the one at the end: keep a copy of it.
  Outcome saving =
      trainPlan(stagedPlan(2), "saving.rpplan", options, 3, [&](unsigned k) {
        if (k == 2)
          fs::copy(dir, kept, fs::copy_options::recursive);
      });
  EXPECT_EQ(saving.losses, whole.losses);
  options.steps = 2;
  options.save.clear();
  options.saveEvery = 0;
  options.resume = kept;
  Outcome rest = trainPlan(stagedPlan(2), "rest.rpplan", options, 3);
  ASSERT_EQ(whole.losses.size(), 4u);
  ASSERT_EQ(rest.losses.size(), 2u);
  EXPECT_EQ(rest.losses[0], whole.losses[2]);
  EXPECT_EQ(rest.losses[1], whole.losses[3]);
  EXPECT_EQ(rest.weights, whole.weights);
  fs::remove_all(dir);
  fs::remove_all(kept);
}

/// The two-device plan trained on each backend against the host backend:
/// bitwise on the host itself, within f32 rounding on a GPU (whose exp and
/// GEMM round differently), for losses and final weights; with the plain
/// cross-entropy and with the fused LM-head loss.
class StagedTrainingOnBackend : public ::testing::TestWithParam<const char *> {
};

TEST_P(StagedTrainingOnBackend, TrainsLikeTheHostBackend) {
  {
    auto probe = createBackend(GetParam(), backendOptions(2, 2));
    if (!probe && probe.getStatus().getCode() == StatusCode::Unavailable)
      GTEST_SKIP() << "backend '" << GetParam()
                   << "' not run: " << probe.getStatus().getMessage();
  }
  const bool exact = std::string(GetParam()) == "host";
  for (int run = 0; run < 4; ++run) {
    // Sync and async, with the plain loss and with the fused LM-head loss.
    const bool sync = run % 2 == 0, fused = run >= 2;
    SCOPED_TRACE(std::string(sync ? "sync" : "async") +
                 (fused ? ", fused loss" : ""));
    TrainOptions options;
    options.steps = 4;
    options.sync = sync;
    options.seed = 5;
    options.adamw.lr = 0.05;
    options.inputs["labels"] = labelsArray(3);
    Outcome want =
        trainPlan(stagedPlan(3, fused), "on-host.rpplan", options, 2);
    Outcome got = trainPlan(stagedPlan(3, fused), "on-backend.rpplan", options,
                            2, {}, GetParam());
    if (fused) {
      // The fused loss trains like the plain one on the host (the head's
      // GEMMs may sum in other orders: within f32 rounding).
      Outcome plain = trainPlan(stagedPlan(3), "plain.rpplan", options, 2);
      ASSERT_EQ(plain.losses.size(), want.losses.size());
      for (size_t k = 0; k < want.losses.size(); ++k)
        EXPECT_NEAR(want.losses[k], plain.losses[k],
                    1e-6 * std::max(1.0, std::fabs(plain.losses[k])))
            << "step " << k;
    }
    ASSERT_EQ(got.losses.size(), want.losses.size());
    ASSERT_EQ(got.weights.size(), want.weights.size());
    EXPECT_NE(want.losses.front(), want.losses.back());
    if (exact) {
      EXPECT_EQ(got.losses, want.losses);
      EXPECT_EQ(got.weights, want.weights);
      continue;
    }
    for (size_t k = 0; k < want.losses.size(); ++k)
      EXPECT_NEAR(got.losses[k], want.losses[k],
                  1e-5 * std::max(1.0, std::fabs(want.losses[k])))
          << "step " << k;
    for (size_t w = 0; w < want.weights.size(); ++w) {
      ASSERT_EQ(got.weights[w].size(), want.weights[w].size());
      const float *g = reinterpret_cast<const float *>(got.weights[w].data());
      const float *r = reinterpret_cast<const float *>(want.weights[w].data());
      double maxRef = 0, maxDiff = 0;
      for (size_t i = 0; i < want.weights[w].size() / sizeof(float); ++i) {
        maxRef = std::max(maxRef, std::fabs(double(r[i])));
        maxDiff = std::max(maxDiff, std::fabs(double(g[i]) - double(r[i])));
      }
      EXPECT_LE(maxDiff, 1e-4 * maxRef) << "weight " << w;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StagedTrainingOnBackend,
                         ::testing::Values("host", "cuda"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

TEST(StagedTrainingTest, RefusesALossSumThatIsNotPerMicrobatch) {
  Plan plan = stagedPlan(2);
  for (BindingDesc &o : plan.outputs)
    if (o.name == "loss_sum")
      o.buffer = plan.inputs[2].buffer; // loss_scale: one value
  Expected<Plan> loaded = writeAndLoad(plan, "loss-shape.rpplan");
  ASSERT_TRUE(loaded) << loaded.getStatus().toString();
  auto fwd = HostForward::create(*loaded);
  ASSERT_TRUE(fwd);
  ThreadPool pool(1);
  Status s = rp::runtime::train(*loaded, **fwd, pool, TrainOptions(),
                                [](unsigned, double) {});
  EXPECT_THAT(s.getMessage(),
              ::testing::HasSubstr("holds one value per microbatch (2)"));
}

TEST(StagedTrainingTest, RanksEqualOneProcessOfTheirPasses) {
  // Two ranks (threads, Gloo on loopback), each on its half of the global
  // batch, continuous passes: the losses and weights of one process running
  // the global batch as 2 passes, bit for bit, with the optimizer state
  // sharded (ZeRO-1) or not (docs/multi-box.md). Async runs without
  // clipping: sharded, they reduce-scatter the gradients.
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  ForwardOptions continuous;
  continuous.slots = 2;
  continuous.rotate = true;
  for (bool sync : {true, false})
    for (bool shard : {false, true}) {
      SCOPED_TRACE(std::string(sync ? "sync" : "async") +
                   (shard ? " sharded" : ""));
      TrainOptions options;
      options.steps = 4;
      options.sync = sync;
      options.seed = 8;
      options.adamw.lr = 0.05;
      options.clipGradNorm = sync ? 0.5 : 0.0;
      options.inputs["labels"] = labelsArray(4);
      options.accumulate = 2;
      Outcome want = trainPlan(stagedPlan(2), "dp-ref.rpplan", options, 2, {},
                               "host", continuous);
      options.accumulate = 1;
      options.shardOptimizer = shard;
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t n = sizeof(a);
      ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), n), 0);
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n);
      ::close(fd);
      Outcome got[2];
      std::vector<std::thread> ranks;
      for (int r = 0; r < 2; ++r)
        ranks.emplace_back([&, r] {
          Rendezvous info;
          info.rank = r;
          info.worldSize = 2;
          info.masterPort = ntohs(a.sin_port);
          CommTimeouts t;
          t.rendezvous = t.collective = std::chrono::milliseconds(20000);
          auto comm = createGlooCommunicator(info, t);
          ASSERT_TRUE(comm) << comm.getStatus().toString();
          TrainOptions mine = options;
          mine.comm = comm->get();
          got[r] =
              trainPlan(stagedPlan(2), "dp" + std::to_string(r) + ".rpplan",
                        mine, 2, {}, "host", continuous);
          (*comm)->leave();
        });
      for (std::thread &t : ranks)
        t.join();
      ASSERT_EQ(want.losses.size(), 4u);
      // Bit for bit: each rank's gradient is one pass's sum, added across
      // the ranks in rank order as one process adds its passes, and the
      // tied parameter's uses are summed across the ranks before the
      // epilogue, as one process sums each use over its passes first.
      EXPECT_EQ(got[0].losses, got[1].losses);
      EXPECT_EQ(got[0].weights, got[1].weights);
      EXPECT_EQ(got[0].losses, want.losses);
      EXPECT_EQ(got[0].weights, want.weights);
    }
}

} // namespace
