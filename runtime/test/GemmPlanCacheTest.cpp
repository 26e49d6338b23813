//===- GemmPlanCacheTest.cpp - the cuBLASLt plan cache without a GPU ------===//
//
// GemmPlanCache (lib/cuda/GemmPlanCache.h) behind a fake heuristic: one
// query per shape, the first reduction-free candidate within the
// workspace, and the first device's choice kept for every other device
// (whose heuristic is never asked), so G GPUs run one GPU's algorithms.
//
//===----------------------------------------------------------------------===//

#include "GemmPlanCache.h"

#include <gtest/gtest.h>

#include <thread>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

GemmAlgo algo(uint64_t id, size_t workspace = 0, bool reduces = false) {
  GemmAlgo a;
  a.data[0] = id;
  a.workspace = workspace;
  a.reduces = reduces;
  return a;
}

/// Offers `offer` for every key (its first word bumped by the key's m, so
/// shapes get different algorithms), counting the queries.
class FakeHeuristic : public GemmHeuristic {
public:
  explicit FakeHeuristic(std::vector<GemmAlgo> offer) : offer(offer) {}
  Expected<std::vector<GemmAlgo>> candidates(const GemmKey &key,
                                             size_t) override {
    ++calls;
    if (fail)
      return internalError("no heuristic");
    std::vector<GemmAlgo> out = offer;
    for (GemmAlgo &a : out)
      a.data[0] += uint64_t(key.m) << 32;
    return out;
  }
  std::vector<GemmAlgo> offer;
  int calls = 0;
  bool fail = false;
};

GemmKey key(int64_t m, int64_t n, int64_t k) {
  GemmKey g;
  g.m = m, g.n = n, g.k = k;
  g.lda = m, g.ldb = k, g.ldc = m;
  g.type = DType::bf16;
  return g;
}

TEST(GemmPlanCacheTest, OneQueryPerShape) {
  GemmPlanCache cache(32 << 20);
  FakeHeuristic h({algo(1), algo(2)});
  for (int i = 0; i < 3; ++i) {
    Expected<GemmChoice> c = cache.choose(key(64, 32, 16), h);
    ASSERT_TRUE(c.hasValue());
    EXPECT_TRUE(c->found);
    EXPECT_EQ(c->algo.data[0], (uint64_t(64) << 32) + 1);
  }
  EXPECT_EQ(h.calls, 1);
  ASSERT_TRUE(cache.choose(key(128, 32, 16), h).hasValue());
  EXPECT_EQ(h.calls, 2);
  EXPECT_EQ(cache.queries(), 2u);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(GemmPlanCacheTest, SkipsReductionsAndLargeWorkspaces) {
  GemmPlanCache cache(1 << 20);
  FakeHeuristic h({algo(1, 0, /*reduces=*/true), algo(2, 2 << 20),
                   algo(3, 1 << 20), algo(4)});
  Expected<GemmChoice> c = cache.choose(key(8, 8, 8), h);
  ASSERT_TRUE(c.hasValue());
  ASSERT_TRUE(c->found);
  EXPECT_EQ(c->algo.data[0] & 0xffffffffu, 3u);
  EXPECT_EQ(c->algo.workspace, size_t(1) << 20);
}

TEST(GemmPlanCacheTest, NoCandidateIsKeptAndSaid) {
  GemmPlanCache cache(1 << 20);
  FakeHeuristic h({algo(1, 0, true)});
  for (int i = 0; i < 2; ++i) {
    Expected<GemmChoice> c = cache.choose(key(8, 8, 8), h);
    ASSERT_TRUE(c.hasValue());
    EXPECT_FALSE(c->found);
    EXPECT_NE(c->why.find("no reduction-free algorithm within the 1 MiB "
                          "workspace for 8 x 8 x 8, bf16 (1 offered)"),
              std::string::npos)
        << c->why;
  }
  EXPECT_EQ(h.calls, 1);
  FakeHeuristic broken({algo(1)});
  broken.fail = true;
  Expected<GemmChoice> c = cache.choose(key(9, 8, 8), broken);
  ASSERT_TRUE(c.hasValue());
  EXPECT_FALSE(c->found);
  EXPECT_NE(c->why.find("heuristic failed"), std::string::npos);
}

// Device 1's heuristic would prefer another algorithm (another SM count):
// it is not asked, and device 1 runs device 0's choice.
TEST(GemmPlanCacheTest, FirstDevicesChoiceServesEveryDevice) {
  GemmPlanCache cache(32 << 20);
  FakeHeuristic device0({algo(7), algo(8)});
  FakeHeuristic device1({algo(8), algo(7)});
  Expected<GemmChoice> a = cache.choose(key(256, 512, 64), device0);
  Expected<GemmChoice> b = cache.choose(key(256, 512, 64), device1);
  ASSERT_TRUE(a.hasValue() && b.hasValue());
  EXPECT_EQ(a->algo.data, b->algo.data);
  EXPECT_EQ(device1.calls, 0);
}

TEST(GemmPlanCacheTest, EveryFieldIsPartOfTheKey) {
  GemmPlanCache cache(32 << 20);
  FakeHeuristic h({algo(1)});
  GemmKey base = key(16, 16, 16);
  std::vector<GemmKey> keys(12, base);
  keys[1].transA = true;
  keys[2].transB = true;
  keys[3].tf32 = true;
  keys[4].epilogue = GemmEpilogue::bias;
  keys[5].epilogue = GemmEpilogue::biasGelu;
  keys[6].type = DType::f16;
  keys[7].batch = 4, keys[7].strideA = 256;
  keys[8].ldc = 32;
  keys[9].alignB = 16;
  keys[10].epilogue = GemmEpilogue::dGelu;
  keys[11].epilogue = GemmEpilogue::dGeluBiasGrad;
  for (const GemmKey &k : keys)
    ASSERT_TRUE(cache.choose(k, h).hasValue());
  EXPECT_EQ(h.calls, 12);
  EXPECT_EQ(cache.size(), 12u);
  EXPECT_EQ(describeGemm(keys[5]), "16 x 16 x 16, bf16, bias+gelu");
  EXPECT_EQ(describeGemm(keys[10]), "16 x 16 x 16, bf16, gelu gradient");
  EXPECT_EQ(describeGemm(keys[11]),
            "16 x 16 x 16, bf16, gelu and bias gradients");
}

// A batch entry's alignment: what its offset from a 256-byte start allows.
TEST(GemmPlanCacheTest, AlignmentOfStrides) {
  EXPECT_EQ(gemmAlignment(0), 256u);
  EXPECT_EQ(gemmAlignment(64 * 96 * 2), 256u);
  EXPECT_EQ(gemmAlignment(5 * 70 * 4), 8u);
  EXPECT_EQ(gemmAlignment(7 * 2), 2u);
  EXPECT_EQ(gemmAlignment(3), 1u);
}

// Devices asking for the same new shape at once: one query, one answer.
TEST(GemmPlanCacheTest, ConcurrentDevicesAskOnce) {
  GemmPlanCache cache(32 << 20);
  FakeHeuristic h({algo(5)});
  std::vector<std::thread> threads;
  std::vector<uint64_t> got(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Expected<GemmChoice> c = cache.choose(key(32, 32, 32), h);
      got[t] = c.hasValue() ? c->algo.data[0] : 0;
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(h.calls, 1);
  for (uint64_t g : got)
    EXPECT_EQ(g, (uint64_t(32) << 32) + 5);
}

} // namespace
