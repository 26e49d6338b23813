//===- MemoryPlanTest.cpp - placing a pool's buffers ----------------------===//
//
// placePool: first fit in issue order, and on the devices also largest
// first where issue order peaks over the bytes live at once, the lower
// peak kept. Buffers live together never share bytes either way.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/MemoryPlan.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir::rp;

namespace {

/// `n` commands of device 0 on the compute queue, in issue order: each
/// happens before the next.
Schedule inOrder(unsigned n) {
  Schedule s;
  for (unsigned i = 0; i < n; ++i)
    s.add(Command{});
  return s;
}

PlannedBuffer buffer(int64_t bytes, std::vector<unsigned> users) {
  PlannedBuffer b{BufferRole::work, 0, bytes, 0, std::move(users), ""};
  b.what = "buffer of " + std::to_string(bytes);
  return b;
}

int64_t top(const MemoryPlan &mp) {
  int64_t peak = 0;
  for (const PlannedBuffer &b : mp.buffers)
    peak = std::max(peak, b.offset + b.bytes);
  return peak;
}

/// Every two buffers that may be live at once lie apart.
void expectApart(const MemoryPlan &mp, const HappensBefore &hb) {
  for (size_t i = 0; i < mp.buffers.size(); ++i)
    for (size_t j = i + 1; j < mp.buffers.size(); ++j) {
      const PlannedBuffer &x = mp.buffers[i], &y = mp.buffers[j];
      bool overlap =
          x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      EXPECT_FALSE(overlap && !disjointInTime(x, y, hb))
          << x.what << " at " << x.offset << ", " << y.what << " at "
          << y.offset;
    }
}

} // namespace

// Two 4-byte buffers, then two 5-byte ones, each live with the next (the
// pattern of Qwen3-235B LoRA's forward weight sets and its larger backward
// ones): in issue order the third finds only the first's 4 bytes free and
// goes on top, 13 bytes; at most 10 are live at once, which largest first
// reaches. Without largest first (the host's pool) issue order stays.
TEST(MemoryPlanTest, LargestFirstWhereIssueOrderLeavesHoles) {
  Schedule s = inOrder(5);
  HappensBefore hb(s);
  MemoryPlan mp;
  mp.buffers = {buffer(4, {0, 1}), buffer(4, {1, 2}), buffer(5, {2, 3}),
                buffer(5, {3, 4})};
  EXPECT_EQ(placePool(mp, hb, 0, /*largestFirstToo=*/false), 13);
  EXPECT_EQ(mp.buffers[2].offset, 8);
  expectApart(mp, hb);
  EXPECT_EQ(placePool(mp, hb, 0, /*largestFirstToo=*/true), 10);
  EXPECT_EQ(top(mp), 10);
  EXPECT_EQ(liveBytesBounds(mp, 1).front(), 10);
  expectApart(mp, hb);
}

// Random pools on two queues with random waits: both ways keep buffers
// live together apart and return the pool's top; largest first never
// peaks higher than issue order alone, nor under the live bytes, and where
// issue order is the lower the offsets are issue order's.
TEST(MemoryPlanTest, NeverAboveIssueOrderNorUnderTheLiveBytes) {
  std::mt19937 rng(11);
  unsigned lower = 0, kept = 0;
  for (int round = 0; round < 200; ++round) {
    Schedule s;
    unsigned n = 8 + rng() % 24;
    for (unsigned i = 0; i < n; ++i) {
      Command c;
      c.queue = rng() % 2 ? Queue::compute : Queue::weightH2D;
      if (i > 0 && rng() % 3 == 0)
        c.waits.push_back(rng() % i);
      s.add(c);
    }
    HappensBefore hb(s);
    MemoryPlan mp;
    for (unsigned b = 0, count = 4 + rng() % 12; b < count; ++b) {
      unsigned first = rng() % n, span = 1 + rng() % 4;
      std::vector<unsigned> users;
      for (unsigned u = first; u < std::min(n, first + span); ++u)
        users.push_back(u);
      mp.buffers.push_back(buffer(1 + int64_t(rng() % 9), users));
    }
    int64_t issue = placePool(mp, hb, 0, false);
    std::vector<int64_t> issueOffsets;
    for (const PlannedBuffer &b : mp.buffers)
      issueOffsets.push_back(b.offset);
    int64_t best = placePool(mp, hb, 0, true);
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(best, top(mp));
    EXPECT_LE(best, issue);
    EXPECT_GE(best, liveBytesBounds(mp, 1).front());
    expectApart(mp, hb);
    if (best < issue) {
      ++lower;
    } else {
      ++kept;
      for (size_t b = 0; b < mp.buffers.size(); ++b)
        EXPECT_EQ(mp.buffers[b].offset, issueOffsets[b]);
    }
  }
  // Both outcomes are met.
  EXPECT_GT(lower, 0u);
  EXPECT_GT(kept, 0u);
}

namespace {

/// placePool as written before the horizons (MemoryPlan.cpp's Span): each
/// buffer tested against every buffer placed before it.
int64_t allPairsFirstFit(std::vector<PlannedBuffer *> order,
                         const HappensBefore &hb) {
  int64_t peak = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    std::vector<const PlannedBuffer *> live;
    for (size_t k = 0; k < i; ++k)
      if (!disjointInTime(*order[k], *order[i], hb))
        live.push_back(order[k]);
    llvm::sort(live, [](const PlannedBuffer *x, const PlannedBuffer *y) {
      return x->offset < y->offset;
    });
    int64_t at = 0, bytes = order[i]->bytes;
    for (const PlannedBuffer *p : live)
      if (p->offset < at + bytes && p->offset + p->bytes > at)
        at = std::max(at, p->offset + p->bytes);
    order[i]->offset = at;
    peak = std::max(peak, at + bytes);
  }
  return peak;
}

} // namespace

// The horizons skip only buffers apart in time: on random pools of four
// queues with random waits on earlier commands, issue order
// and largest first give every buffer the offset that testing every
// placed buffer gives.
TEST(MemoryPlanTest, HorizonsGiveTheOffsetsOfAllPairs) {
  std::mt19937 rng(29);
  unsigned lower = 0;
  const Queue queues[] = {Queue::compute, Queue::weightH2D,
                          Queue::activationH2D, Queue::d2h};
  for (int round = 0; round < 300; ++round) {
    Schedule s;
    unsigned n = 16 + rng() % 80;
    for (unsigned i = 0; i < n; ++i) {
      Command c;
      c.queue = queues[rng() % 4];
      for (unsigned w = rng() % 3; w > 0 && i > 0; --w)
        c.waits.push_back(rng() % i);
      s.add(c);
    }
    HappensBefore hb(s);
    MemoryPlan mp;
    for (unsigned b = 0, count = 8 + rng() % 40; b < count; ++b) {
      std::vector<unsigned> users;
      for (unsigned u = 1 + rng() % 4; u > 0; --u)
        users.push_back(rng() % n);
      mp.buffers.push_back(buffer(1 + int64_t(rng() % 9), users));
    }
    // The references, each on its own copy of the pool.
    auto reference = [&](bool largestFirst, int64_t &peak) {
      MemoryPlan ref = mp;
      std::vector<PlannedBuffer *> order;
      for (PlannedBuffer &b : ref.buffers)
        order.push_back(&b);
      auto firstUser = [](const PlannedBuffer *b) {
        return *std::min_element(b->users.begin(), b->users.end());
      };
      std::stable_sort(order.begin(), order.end(), [&](auto *x, auto *y) {
        return firstUser(x) < firstUser(y);
      });
      if (largestFirst)
        std::stable_sort(order.begin(), order.end(),
                         [](auto *x, auto *y) { return x->bytes > y->bytes; });
      peak = allPairsFirstFit(order, hb);
      std::vector<int64_t> offsets;
      for (const PlannedBuffer &b : ref.buffers)
        offsets.push_back(b.offset);
      return offsets;
    };
    auto offsetsOf = [](const MemoryPlan &m) {
      std::vector<int64_t> offsets;
      for (const PlannedBuffer &b : m.buffers)
        offsets.push_back(b.offset);
      return offsets;
    };
    int64_t issuePeak, largestPeak;
    std::vector<int64_t> issue = reference(false, issuePeak);
    std::vector<int64_t> largest = reference(true, largestPeak);
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(placePool(mp, hb, 0, false), issuePeak);
    EXPECT_EQ(offsetsOf(mp), issue);
    int64_t got = placePool(mp, hb, 0, true);
    if (got < issuePeak) {
      ++lower;
      EXPECT_EQ(got, largestPeak);
      EXPECT_EQ(offsetsOf(mp), largest);
    } else {
      EXPECT_EQ(got, issuePeak);
      EXPECT_EQ(offsetsOf(mp), issue);
    }
  }
  // Largest first is taken in some rounds.
  EXPECT_GT(lower, 0u);
}

// Schedules of one shape share their reach rows (HappensBefore keeps the
// last few): one that differs from a kept one only in a wait, or only in
// a queue, gets its own, with its own answers and horizons.
TEST(MemoryPlanTest, ReachRowsSharedOnlyByTheSameShape) {
  // Commands 0 and 1 on the copy queue, 2 on compute waiting for 0.
  Schedule a;
  Command copy;
  copy.queue = Queue::weightH2D;
  a.add(copy);
  a.add(copy);
  Command compute;
  compute.waits = {0};
  a.add(compute);
  HappensBefore hbA(a);
  EXPECT_TRUE(hbA(0, 2));
  EXPECT_FALSE(hbA(1, 2));
  // The same shape: the same answers.
  HappensBefore again(a);
  EXPECT_TRUE(again(0, 2));
  EXPECT_FALSE(again(1, 2));
  // Waiting for 1 instead: 0 comes before 1 on its queue, so both.
  Schedule b = a;
  b.commands[2].waits = {1};
  HappensBefore hbB(b);
  EXPECT_TRUE(hbB(0, 2));
  EXPECT_TRUE(hbB(1, 2));
  // Command 1 on the compute queue: 2 follows it there, 0 by its wait.
  Schedule c = a;
  c.commands[1].queue = Queue::compute;
  HappensBefore hbC(c);
  EXPECT_TRUE(hbC(1, 2));
  EXPECT_TRUE(hbC(0, 2));
  // And `a` again, after other shapes: its own answers still.
  HappensBefore hbA2(a);
  EXPECT_FALSE(hbA2(1, 2));
  // Horizons asked of shared rows are the pool's own.
  std::vector<unsigned> pool{0, 2};
  EXPECT_EQ(hbA.horizons(pool), hbA2.horizons(pool));
  EXPECT_EQ(hbA.horizons(pool), again.horizons(pool));
}
