//===- LossScaleTest.cpp - the one-step-stale loss scaler -----------------===//
//
// LossScale.h's rule: step k runs at the scale the verdicts of steps up to
// k-2 give; an overflow sets the scale to at most the overflowing step's
// own scale times the backoff, so a stale step overflowing at a scale that
// was already backed off backs it off no further.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/LossScale.h"

#include <gtest/gtest.h>

using namespace rp::runtime;

namespace {

LossScaleConfig config(double initial, unsigned interval) {
  LossScaleConfig c;
  c.initial = initial;
  c.interval = interval;
  return c;
}

} // namespace

TEST(LossScaleTest, AStepRunsAtTheScaleOfTwoVerdictsBefore) {
  LossScaler s(config(1024, 2));
  // Steps 0 and 1 run at the initial scale, whatever step 0's verdict.
  EXPECT_EQ(s.scaleFor(0), 1024);
  EXPECT_EQ(s.scaleFor(1), 1024);
  EXPECT_LT(s.scaleFor(2), 0) << "step 0's verdict is not in";
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scaleFor(1), 1024);
  EXPECT_EQ(s.scaleFor(2), 1024);
  EXPECT_LT(s.scaleFor(0), 0) << "step 0 is decided";
  // The second good step in a row doubles the scale: step 3 runs at it,
  // step 2 (staged before) at the old one.
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scaleFor(2), 1024);
  EXPECT_EQ(s.scaleFor(3), 2048);
  EXPECT_EQ(s.decided(), 2u);
}

TEST(LossScaleTest, TwoOverflowsAtOneScaleBackOffOnce) {
  LossScaler s(config(1 << 20, 2000));
  // Step 0 overflows at 2^20; step 1 ran at 2^20 too.
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.getScale(), 1 << 19);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.getScale(), 1 << 19);
  // Step 2 ran at 2^19: its overflow halves again.
  EXPECT_EQ(s.getPreviousScale(), 1 << 19);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.getScale(), 1 << 18);
  // A good step (3, at 2^19) keeps it; step 4 overflowing at 2^18 halves.
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.getScale(), 1 << 18);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.getScale(), 1 << 17);
  EXPECT_EQ(s.getGoodSteps(), 0u);
}

TEST(LossScaleTest, AnOverflowAfterGrowthBacksOffFromItsOwnScale) {
  LossScaler s(config(100, 1));
  EXPECT_TRUE(s.update(true)); // step 0 at 100: grows to 200
  EXPECT_EQ(s.getScale(), 200);
  // Step 1 ran at 100 and overflows: half of 100, below the grown 200.
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.getScale(), 50);
}

TEST(LossScaleTest, RestoreContinuesAsIfUninterrupted) {
  LossScaler whole(config(64, 1)), resumed(config(64, 1));
  bool verdicts[] = {true, false, true, true, false, true};
  for (unsigned k = 0; k < 3; ++k)
    whole.update(verdicts[k]);
  resumed.restore(3, whole.getScale(), whole.getPreviousScale(),
                  whole.getGoodSteps());
  for (unsigned k = 3; k < 6; ++k) {
    EXPECT_EQ(resumed.scaleFor(k), whole.scaleFor(k)) << k;
    EXPECT_EQ(resumed.update(verdicts[k]), whole.update(verdicts[k]));
    EXPECT_EQ(resumed.scaleFor(k + 1), whole.scaleFor(k + 1)) << k;
  }
  EXPECT_EQ(resumed.getScale(), whole.getScale());
}
