//===- ScheduleTimingTest.cpp - event-driven schedule timing --------------===//

#include "rp/Analysis/ScheduleTiming.h"

#include <gtest/gtest.h>

using namespace mlir::rp;

namespace {

double textbookBubble(unsigned p, unsigned m) {
  return double(p - 1) / double(m + p - 1);
}

TEST(ScheduleTimingTest, GPipeHasTheTextbookBubble) {
  for (unsigned p : {1u, 2u, 4u, 8u})
    for (unsigned m : {1u, 3u, 8u, 16u}) {
      std::optional<Timing> t = estimateTiming(gpipeSchedule(p, m, 1.0, 2.0));
      ASSERT_TRUE(t) << p << " stages, " << m << " microbatches";
      EXPECT_DOUBLE_EQ(t->iterationMs, (m + p - 1) * 3.0);
      EXPECT_NEAR(t->bubbleFraction(), textbookBubble(p, m), 1e-12);
    }
}

TEST(ScheduleTimingTest, OneFOneBHasTheTextbookBubble) {
  for (unsigned p : {1u, 2u, 4u, 8u})
    for (unsigned m : {1u, 4u, 8u, 16u}) {
      std::optional<Timing> t =
          estimateTiming(oneFOneBSchedule(p, m, 1.0, 2.0));
      ASSERT_TRUE(t) << p << " stages, " << m << " microbatches";
      EXPECT_DOUBLE_EQ(t->iterationMs, (m + p - 1) * 3.0);
      EXPECT_NEAR(t->bubbleFraction(), textbookBubble(p, m), 1e-12);
    }
}

TEST(ScheduleTimingTest, OneFOneBAlternatesAfterWarmUp) {
  // Stage 0 of 4 runs three warm-up forwards, then F3 and B0 alternate.
  Schedule s = oneFOneBSchedule(4, 6, 1.0, 2.0);
  std::vector<std::string> stage0;
  for (const Command &c : s.commands)
    if (c.device == 0)
      stage0.push_back(c.label);
  EXPECT_EQ(stage0,
            (std::vector<std::string>{"F0 mb0", "F0 mb1", "F0 mb2", "F0 mb3",
                                      "B0 mb0", "F0 mb4", "B0 mb1", "F0 mb5",
                                      "B0 mb2", "B0 mb3", "B0 mb4", "B0 mb5"}));
}

TEST(ScheduleTimingTest, QueuesOverlapAndWaitsOrder) {
  // An upload on the weight queue overlaps compute; the compute that needs
  // it waits. Times: up 0-5, c0 0-3, c1 5-7.
  Schedule s;
  unsigned up = s.add({0, Queue::weightH2D, 5, {}, "UP w1"});
  unsigned c0 = s.add({0, Queue::compute, 3, {}, "F0 mb0"});
  unsigned c1 = s.add({0, Queue::compute, 2, {up}, "F1 mb0"});
  std::optional<Timing> t = estimateTiming(s);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->start[up], 0);
  EXPECT_EQ(t->end[c0], 3);
  EXPECT_EQ(t->start[c1], 5);
  EXPECT_EQ(t->iterationMs, 7);
  EXPECT_DOUBLE_EQ(t->bubbleFraction(), 1 - 5.0 / 7.0);
}

TEST(ScheduleTimingTest, ACycleOfWaitsIsADeadlock) {
  // Two devices each wait, first in queue order, for the other's second
  // command.
  Schedule s;
  s.devices = 2;
  s.add({0, Queue::compute, 1, {3}, "A"});
  s.add({0, Queue::compute, 1, {}, "B"});
  s.add({1, Queue::compute, 1, {1}, "C"});
  s.add({1, Queue::compute, 1, {}, "D"});
  std::string stuck;
  EXPECT_FALSE(estimateTiming(s, &stuck));
  EXPECT_FALSE(stuck.empty());
}

TEST(ScheduleTimingTest, IsDeterministic) {
  Schedule s = oneFOneBSchedule(8, 9, 1.25, 2.5);
  std::optional<Timing> a = estimateTiming(s), b = estimateTiming(s);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->start, b->start);
  EXPECT_EQ(a->end, b->end);
}

Command copyOn(unsigned device, Queue queue, double ms) {
  Command c;
  c.device = device;
  c.queue = queue;
  c.ms = ms;
  c.kind = queue == Queue::d2h ? CommandKind::d2hActivation
                               : CommandKind::h2dActivation;
  return c;
}

TEST(ScheduleTimingTest, CopiesInOneDirectionShareTheLink) {
  // Weights and activations uploaded at once on one device: each gets half
  // the link, so both take twice as long; a download runs beside them at
  // full speed (PCIe is full duplex).
  Schedule s;
  s.add(copyOn(0, Queue::weightH2D, 10));
  s.add(copyOn(0, Queue::activationH2D, 10));
  s.add(copyOn(0, Queue::d2h, 10));
  std::optional<Timing> t = estimateTiming(s);
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->end[0], 20);
  EXPECT_DOUBLE_EQ(t->end[1], 20);
  EXPECT_DOUBLE_EQ(t->end[2], 10);

  // A shorter copy ends first; the longer one then has the link alone:
  // 4 ms shared (2 ms of work each), then 8 ms alone.
  Schedule u;
  u.add(copyOn(0, Queue::weightH2D, 10));
  u.add(copyOn(0, Queue::activationH2D, 2));
  t = estimateTiming(u);
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->end[1], 4);
  EXPECT_DOUBLE_EQ(t->end[0], 12);
}

TEST(ScheduleTimingTest, DevicesShareALinkOnlyWhenTheProfileSaysSo) {
  Schedule s;
  s.devices = 2;
  s.add(copyOn(0, Queue::weightH2D, 10));
  s.add(copyOn(1, Queue::weightH2D, 10));
  std::optional<Timing> own = estimateTiming(s);
  s.gpusPerLink = 2;
  std::optional<Timing> shared = estimateTiming(s);
  ASSERT_TRUE(own && shared);
  EXPECT_DOUBLE_EQ(own->iterationMs, 10);
  EXPECT_DOUBLE_EQ(shared->iterationMs, 20);
}

} // namespace
