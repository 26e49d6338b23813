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

} // namespace
