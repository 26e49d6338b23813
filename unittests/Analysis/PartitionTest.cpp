//===- PartitionTest.cpp - RoundPipe's partitioner ------------------------===//

#include "rp/Analysis/Partition.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir::rp;

namespace {

LayerCost layer(double f, double bwd, int64_t bytes, bool trainable = true) {
  LayerCost c;
  c.name = "l";
  c.forwardMs = c.recomputeMs = f;
  c.backwardMs = bwd;
  c.paramBytes = bytes;
  c.gradBytes = trainable ? bytes : 0;
  return c;
}

/// Every layer in [0, k) is in exactly one stage of `stages`.
void expectCover(const std::vector<StageRange> &stages, unsigned k) {
  std::vector<int> seen(k, 0);
  for (const StageRange &s : stages) {
    EXPECT_LT(s.begin, s.end);
    for (unsigned l = s.begin; l < s.end; ++l)
      ++seen[l];
  }
  for (unsigned l = 0; l < k; ++l)
    EXPECT_EQ(seen[l], 1) << "layer " << l;
}

TEST(PartitionTest, OneLayerIsTheTail) {
  Partition p = partitionRoundPipe({layer(1, 2, 10)}, 100, 8);
  EXPECT_EQ(p.tail, (StageRange{0, 1}));
  EXPECT_TRUE(p.forward.empty());
  EXPECT_TRUE(p.backward.empty());
  EXPECT_EQ(p.numStages(), 1u);
  EXPECT_DOUBLE_EQ(p.bottleneckMs, 3);
  EXPECT_DOUBLE_EQ(p.proxyCostMs, 8 * 3);
}

TEST(PartitionTest, ListsCoverEveryLayerOnceAndAreOrdered) {
  std::vector<LayerCost> layers;
  for (int i = 0; i < 40; ++i)
    layers.push_back(layer(1 + (i % 3), 2 + (i % 5), 100 + 10 * (i % 7)));
  layers.push_back(layer(10, 20, 500)); // a heavy head
  Partition p = partitionRoundPipe(layers, 2000, 8);
  unsigned k = p.tail.begin;
  EXPECT_EQ(p.tail.end, layers.size());
  expectCover(p.forward, k);
  expectCover(p.backward, k);
  for (size_t i = 1; i < p.forward.size(); ++i)
    EXPECT_EQ(p.forward[i].begin, p.forward[i - 1].end);
  for (size_t i = 1; i < p.backward.size(); ++i)
    EXPECT_EQ(p.backward[i].end, p.backward[i - 1].begin);
  // Backward stages carry recompute and backward: they hold fewer layers.
  EXPECT_GT(p.backward.size(), p.forward.size());
  // No stage is over the bottleneck or the byte cap.
  for (const StageRange &s : p.forward) {
    double t = 0;
    int64_t b = 0;
    for (unsigned l = s.begin; l < s.end; ++l) {
      t += layers[l].recomputeMs;
      b += layers[l].paramBytes;
    }
    EXPECT_LE(t, p.bottleneckMs);
    EXPECT_LE(b, p.stageBytes);
  }
  for (const StageRange &s : p.backward) {
    double t = 0;
    int64_t b = 0;
    for (unsigned l = s.begin; l < s.end; ++l) {
      t += layers[l].recomputeMs + layers[l].backwardMs;
      b += layers[l].paramBytes + layers[l].gradBytes;
    }
    EXPECT_LE(t, p.bottleneckMs);
    EXPECT_LE(b, p.stageBytes);
  }
}

TEST(PartitionTest, FrozenLayersNeedNoGradientBytes) {
  // Four layers of 60 bytes under a 100-byte cap: trainable ones need 120
  // bytes in backward, over the cap, which is raised; frozen ones do not.
  std::vector<LayerCost> frozen(4, layer(1, 1, 60, /*trainable=*/false));
  std::string raised;
  Partition p = partitionRoundPipe(frozen, 100, 1, &raised);
  EXPECT_TRUE(raised.empty());
  EXPECT_EQ(p.stageBytes, 100);
  std::vector<LayerCost> trainable(4, layer(1, 1, 60));
  Partition q = partitionRoundPipe(trainable, 100, 1, &raised);
  EXPECT_EQ(raised, "l");
  EXPECT_EQ(q.stageBytes, 120);
}

TEST(PartitionTest, IsDeterministic) {
  std::vector<LayerCost> layers;
  for (int i = 0; i < 64; ++i)
    layers.push_back(layer(0.7 + 0.01 * (i % 4), 1.5, 1000));
  Partition a = partitionRoundPipe(layers, 5000, 8);
  Partition b = partitionRoundPipe(layers, 5000, 8);
  EXPECT_EQ(a.forward, b.forward);
  EXPECT_EQ(a.backward, b.backward);
  EXPECT_EQ(a.tail, b.tail);
  EXPECT_EQ(a.proxyCostMs, b.proxyCostMs);
}

} // namespace

namespace {

TEST(PartitionTest, StagesRoundTripThroughTheirTextForm) {
  mlir::MLIRContext context;
  std::vector<std::string> errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    errors.push_back(d.str());
    return mlir::success();
  });
  auto emit = [&] { return mlir::emitError(mlir::UnknownLoc::get(&context)); };
  mlir::FailureOr<Partition> p = parseStages("fwd:3,4;bwd:2,1,2,4", 9, emit);
  ASSERT_TRUE(mlir::succeeded(p));
  EXPECT_EQ(p->forward, (std::vector<StageRange>{{0, 3}, {3, 7}}));
  EXPECT_EQ(p->tail, (StageRange{7, 9}));
  EXPECT_EQ(p->backward, (std::vector<StageRange>{{6, 7}, {4, 6}, {0, 4}}));
  EXPECT_EQ(formatStages(*p), "fwd:3,4;bwd:2,1,2,4");

  // A tail over every layer leaves the forward list empty.
  mlir::FailureOr<Partition> all = parseStages("fwd:;bwd:9", 9, emit);
  ASSERT_TRUE(mlir::succeeded(all));
  EXPECT_TRUE(all->forward.empty());
  EXPECT_EQ(formatStages(*all), "fwd:;bwd:9");

  EXPECT_TRUE(mlir::failed(parseStages("fwd:3,4;bwd:3,6", 9, emit)));
  EXPECT_TRUE(mlir::failed(parseStages("bwd:9;fwd:", 9, emit)));
  EXPECT_TRUE(mlir::failed(parseStages("fwd:;bwd:", 9, emit)));
  EXPECT_EQ(errors.size(), 3u);
}

} // namespace
