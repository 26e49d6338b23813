//===- ShareTableTest.cpp - fair shares kept between graphs ---------------===//
//
// resolve keeps each set of flows' fair shares in a per-thread table across
// graphs of one host model (lib/ShareTable.h): a kept answer must be the one
// computed, and a graph on another host model must not read another's.
//
//===----------------------------------------------------------------------===//

#include "../lib/ShareTable.h"

#include "rp/timing/Timeline.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

using namespace rp::timing;
using rp::timing::detail::ShareTable;

namespace {

/// Four GPUs behind two uplinks, host DRAM at `dram` GB/s: per GPU a chain
/// of uploads, kernels and downloads of unequal lengths, and the optimizer
/// streaming DRAM, so that flows of every kind start and end at many
/// moments and in many combinations.
Graph mixed(double dram) {
  Graph g;
  g.devices = 4;
  g.gpusPerLink = 2;
  g.host.h2dGBps = g.host.d2hGBps = 25;
  g.host.uplinkGBps = 32;
  g.host.dramGBps = dram;
  for (unsigned round = 0; round < 6; ++round)
    for (unsigned d = 0; d < 4; ++d) {
      unsigned up = unsigned(g.tasks.size());
      g.tasks.push_back({d, Lane::weightH2D, 3.0 + d + round % 3, {}});
      g.tasks.push_back({d, Lane::compute, 2.0 + (d * round) % 5, {up}});
      g.tasks.push_back({d, Lane::d2h, 1.5 + d % 2, {up + 1}});
    }
  g.tasks.push_back({4, Lane::host, 25, {}, 40});
  return g;
}

/// The times of `g` on a fresh thread: an empty table.
Times fresh(const Graph &g) {
  std::optional<Times> t;
  std::thread([&] { t = resolve(g); }).join();
  EXPECT_TRUE(t);
  return t ? *t : Times{};
}

void expectSameBits(const Times &a, const Times &b) {
  EXPECT_EQ(a.start, b.start);
  EXPECT_EQ(a.end, b.end);
  EXPECT_EQ(a.uplinkBusyMs, b.uplinkBusyMs);
  EXPECT_EQ(a.dramBusyMs, b.dramBusyMs);
}

} // namespace

/// A graph timed after others (its table full of their answers, its own
/// included) times bit for bit as on a fresh thread; and one on another
/// host model (here only DRAM differs) reads none of their answers.
TEST(ShareTableTest, KeptAnswersAreTheComputedOnes) {
  Graph a = mixed(60), b = mixed(45);
  ASSERT_TRUE(a.host.on());
  Times freshA = fresh(a), freshB = fresh(b);
  // The two host models time differently, so reading one's answers for
  // the other would show.
  EXPECT_NE(freshA.makespan, freshB.makespan);
  for (int i = 0; i < 3; ++i) {
    std::optional<Times> ta = resolve(a);
    ASSERT_TRUE(ta);
    expectSameBits(*ta, freshA);
    std::optional<Times> tb = resolve(b);
    ASSERT_TRUE(tb);
    expectSameBits(*tb, freshB);
  }
}

/// The table itself: answers found by their whole key, kept through growth,
/// dropped when the context changes.
TEST(ShareTableTest, FindsByWholeKeyAndContext) {
  HostModel host;
  host.h2dGBps = host.d2hGBps = 25;
  host.dramGBps = 100;
  ShareTable table;
  table.use(ShareTable::Context::of(host, 2));
  auto hashOf = [](const std::vector<uint64_t> &key) {
    uint64_t h = ShareTable::kHashStart;
    for (uint64_t w : key)
      h = ShareTable::hashWord(h, w);
    return h;
  };
  // Enough entries to grow the index several times.
  for (uint64_t k = 0; k < 5000; ++k) {
    std::vector<uint64_t> key{k, k % 7, k * 3};
    double slow[3] = {1.0 + k, 2.0, 3.0}, link[2] = {0.5, double(k)};
    table.insert(key, hashOf(key), slow, 3, link, 0.25 * k);
  }
  for (uint64_t k = 0; k < 5000; k += 499) {
    std::vector<uint64_t> key{k, k % 7, k * 3};
    ShareTable::Answer a;
    ASSERT_TRUE(table.find(key, hashOf(key), a));
    EXPECT_EQ(a.slow(0), 1.0 + k);
    EXPECT_EQ(a.slow(2), 3.0);
    EXPECT_EQ(a.linkUse(1), double(k));
    EXPECT_EQ(a.dramUse(2), 0.25 * k);
    // A key one word longer or with a word changed is another set.
    std::vector<uint64_t> longer = key;
    longer.push_back(0);
    EXPECT_FALSE(table.find(longer, hashOf(longer), a));
    std::vector<uint64_t> other = key;
    other[1] += 1;
    EXPECT_FALSE(table.find(other, hashOf(other), a));
  }
  // The same context keeps them; another drops them.
  table.use(ShareTable::Context::of(host, 2));
  std::vector<uint64_t> first{0, 0, 0};
  ShareTable::Answer a;
  EXPECT_TRUE(table.find(first, hashOf(first), a));
  host.dramGBps = 200;
  table.use(ShareTable::Context::of(host, 2));
  EXPECT_FALSE(table.find(first, hashOf(first), a));
}
