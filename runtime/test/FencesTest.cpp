//===- FencesTest.cpp - the order of the per-parameter updates ------------===//
//
// planParamFences orders the parameters by the stage job that reads them
// first: the plan lists the first stage jobs' weight-upload chunks
// interleaved (every device prefetches at once), and an update in that
// listing order would write the first job's last chunk near the end,
// holding back the step's first job (sync mode: the whole update).
//
//===----------------------------------------------------------------------===//

#include "../lib/exec/Fences.h"

#include <gtest/gtest.h>

using namespace rp::runtime;

namespace {

/// Parameters 0..3 in host buffers 0..3, each uploaded into a device
/// buffer by its own copy job: parameters 0 and 2 by stage 0's jobs,
/// 1 and 3 by stage 1's, listed as a plan interleaves two devices'
/// chunks (stage 0 chunk 0, stage 1 chunk 0, stage 0 chunk 1, ...).
Plan interleavedUploads(bool staged) {
  Plan plan;
  plan.staged = staged;
  plan.devices = 2;
  for (int i = 0; i < 8; ++i) {
    BufferDesc b;
    b.shape = {4};
    b.device = i < 4 ? -1 : (i - 4) % 2;
    plan.buffers.push_back(b);
  }
  for (uint32_t p = 0; p < 4; ++p) {
    JobDesc j;
    j.kind = JobKind::copy;
    j.queue = QueueKind::weight_h2d;
    j.device = p % 2;
    j.stage = staged ? int32_t(p % 2) : -1;
    j.copies.push_back(CopyDesc{p, 0, 4 + p, 0, 16});
    plan.jobs.push_back(j);
  }
  return plan;
}

TEST(Fences, UpdatesInTheOrderTheStageChainReadsThem) {
  std::optional<ParamFences> f =
      planParamFences(interleavedUploads(true), {0, 1, 2, 3});
  ASSERT_TRUE(f);
  // Stage 0's parameters (0, 2) first, then stage 1's (1, 3); the
  // listing order would give 0, 1, 2, 3.
  EXPECT_EQ(f->order, (std::vector<size_t>{0, 2, 1, 3}));
  // Each upload waits for its own parameter only.
  ASSERT_EQ(f->gatesOf.size(), 4u);
  for (uint32_t j = 0; j < 4; ++j)
    EXPECT_EQ(f->gatesOf[j], (std::vector<uint32_t>{j}));
}

TEST(Fences, UnstagedPlansUpdateInJobOrder) {
  std::optional<ParamFences> f =
      planParamFences(interleavedUploads(false), {0, 1, 2, 3});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->order, (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(Fences, AParameterNoJobReadsComesLast) {
  Plan plan = interleavedUploads(true);
  BufferDesc unread;
  unread.shape = {4};
  plan.buffers.push_back(unread);
  std::optional<ParamFences> f = planParamFences(plan, {8, 0, 1, 2, 3});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->order, (std::vector<size_t>{1, 3, 2, 4, 0}));
}

} // namespace
