//===- ProgramGraphCacheTest.cpp - CUDA graph reuse without a GPU ---------===//
//
// ProgramGraphCache (lib/cuda/ProgramGraphCache.h) behind a fake backend
// that records what ran: a program is captured once per buffer set and
// replayed after (its calls not enqueued again), a program whose capture is
// invalidated runs call by call from then on, a call's failure under
// capture is returned and nothing is kept, and the cache is bounded.
//
//===----------------------------------------------------------------------===//

#include "ProgramGraphCache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

/// A graph is the log of what its capture enqueued; replay appends it.
class FakeBackend : public GraphBackend {
public:
  Status capture(const std::function<Status()> &run, void *&graph,
                 bool &captured) override {
    capturing = true;
    pending.clear();
    invalidated = false;
    Status s = run();
    capturing = false;
    captured = false;
    if (invalidated)
      return Status::ok();
    if (s.failed())
      return s;
    graphs.push_back(pending);
    graph = reinterpret_cast<void *>(uintptr_t(graphs.size()));
    captured = true;
    return Status::ok();
  }
  Status replay(void *graph) override {
    const auto &calls = graphs[reinterpret_cast<uintptr_t>(graph) - 1];
    ran.insert(ran.end(), calls.begin(), calls.end());
    return Status::ok();
  }
  void destroy(void *) override { ++destroyed; }

  /// What a program's call does: enqueued (captured or run).
  void call(const std::string &what) {
    (capturing ? pending : ran).push_back(what);
  }
  /// A call that waits for the stream: invalidates a capture.
  Status waitingCall(const std::string &what) {
    if (capturing) {
      invalidated = true;
      return internalError("operation not permitted when stream is capturing");
    }
    ran.push_back(what);
    return Status::ok();
  }

  std::vector<std::string> ran, pending;
  std::vector<std::vector<std::string>> graphs;
  bool capturing = false, invalidated = false;
  int destroyed = 0;
};

/// Programs 0..5 of one matmul call each, program i's first attribute i.
Plan planOf() {
  Plan plan;
  plan.buffers.resize(3);
  for (BufferDesc &b : plan.buffers)
    b.shape = {4, 4};
  for (int64_t i = 0; i < 6; ++i) {
    ProgramDesc p;
    KernelCallDesc call;
    call.op = OpKind::matmul;
    call.inputs = {0, 1};
    call.outputs = {2};
    call.ints = {i, 0};
    p.calls.push_back(call);
    plan.programs.push_back(p);
  }
  return plan;
}

/// The plan's three buffers at base, base + 256 and base + 512.
BufferAddresses buffers(uintptr_t base) {
  return {reinterpret_cast<uint8_t *>(base),
          reinterpret_cast<uint8_t *>(base + 256),
          reinterpret_cast<uint8_t *>(base + 512)};
}

TEST(ProgramGraphCache, CapturedOncePerBufferSetThenReplayed) {
  FakeBackend backend;
  {
    ProgramGraphCache cache(backend);
    int enqueued = 0;
    auto program = [&] {
      ++enqueued;
      backend.call("gemm");
      backend.call("softmax");
      return Status::ok();
    };
    const Plan plan = planOf();
    for (int step = 0; step < 3; ++step)
      for (uintptr_t slot : {0x1000, 0x2000})
        ASSERT_TRUE(cache.launch(plan, 4, buffers(slot), program).isOk());
    // Two microbatch slots: two captures; every run's calls in order.
    EXPECT_EQ(enqueued, 2);
    EXPECT_EQ(cache.captures(), 2u);
    EXPECT_EQ(cache.replays(), 6u);
    EXPECT_EQ(cache.direct(), 0u);
    EXPECT_EQ(backend.ran.size(), 12u);
    for (size_t i = 0; i < backend.ran.size(); i += 2) {
      EXPECT_EQ(backend.ran[i], "gemm");
      EXPECT_EQ(backend.ran[i + 1], "softmax");
    }
    // Another program of the same plan is another graph.
    ASSERT_TRUE(cache.launch(plan, 5, buffers(0x1000), program).isOk());
    EXPECT_EQ(cache.graphCount(), 3u);
  }
  EXPECT_EQ(backend.destroyed, 3);
}

TEST(ProgramGraphCache, AProgramThatWaitsRunsCallByCall) {
  FakeBackend backend;
  ProgramGraphCache cache(backend);
  int enqueued = 0;
  auto program = [&] {
    ++enqueued;
    backend.call("dispatch");
    return backend.waitingCall("wgrad (counts to the host)");
  };
  const Plan plan = planOf();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(cache.launch(plan, 1, buffers(0x1000), program).isOk());
  // The capture, then three direct runs (the first one again after it).
  EXPECT_EQ(enqueued, 4);
  EXPECT_EQ(cache.graphCount(), 0u);
  EXPECT_EQ(cache.direct(), 3u);
  EXPECT_EQ(backend.ran, (std::vector<std::string>{
                             "dispatch", "wgrad (counts to the host)",
                             "dispatch", "wgrad (counts to the host)",
                             "dispatch", "wgrad (counts to the host)"}));
}

TEST(ProgramGraphCache, AFailedCallIsReturnedAndNothingKept) {
  FakeBackend backend;
  ProgramGraphCache cache(backend);
  const Plan plan = planOf();
  Status s = cache.launch(plan, 0, buffers(0x1000), [&] {
    backend.call("add");
    return invalidArgument("add: shapes differ");
  });
  EXPECT_TRUE(s.failed());
  EXPECT_EQ(cache.graphCount(), 0u);
  EXPECT_TRUE(backend.ran.empty());
}

TEST(ProgramGraphCache, BoundedThenCallByCall) {
  FakeBackend backend;
  ProgramGraphCache cache(backend);
  const Plan plan = planOf();
  auto program = [&] {
    backend.call("x");
    return Status::ok();
  };
  for (size_t i = 0; i <= ProgramGraphCache::kMaxGraphs; ++i)
    ASSERT_TRUE(
        cache.launch(plan, 0, buffers(0x1000 + 0x1000 * i), program).isOk());
  EXPECT_EQ(cache.graphCount(), ProgramGraphCache::kMaxGraphs);
  EXPECT_EQ(cache.direct(), 1u);
}

// Another plan at the same address (a test's plans, one after the other
// on the stack) is not replayed from the first one's graph.
TEST(ProgramGraphCache, AnotherProgramAtTheSameAddressIsCapturedAgain) {
  FakeBackend backend;
  ProgramGraphCache cache(backend);
  Plan plan = planOf();
  std::string what = "first";
  auto program = [&] {
    backend.call(what);
    return Status::ok();
  };
  ASSERT_TRUE(cache.launch(plan, 0, buffers(0x1000), program).isOk());
  plan.programs[0].calls[0].ints = {0, 1}; // A transposed operand.
  what = "second";
  ASSERT_TRUE(cache.launch(plan, 0, buffers(0x1000), program).isOk());
  plan.buffers[2].dtype = DType::bf16;
  what = "third";
  ASSERT_TRUE(cache.launch(plan, 0, buffers(0x1000), program).isOk());
  EXPECT_EQ(cache.captures(), 3u);
  EXPECT_EQ(backend.ran,
            (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_NE(programFingerprint(plan, 0), programFingerprint(plan, 1));
}

// A buffer the program does not name may move: the graph still serves.
TEST(ProgramGraphCache, OnlyTheProgramsBuffersAreItsKey) {
  FakeBackend backend;
  ProgramGraphCache cache(backend);
  Plan plan = planOf();
  plan.buffers.resize(4);
  auto program = [&] {
    backend.call("matmul");
    return Status::ok();
  };
  BufferAddresses at = buffers(0x1000);
  at.push_back(reinterpret_cast<uint8_t *>(0x9000));
  ASSERT_TRUE(cache.launch(plan, 0, at, program).isOk());
  at[3] = reinterpret_cast<uint8_t *>(0xa000);
  ASSERT_TRUE(cache.launch(plan, 0, at, program).isOk());
  at[2] = reinterpret_cast<uint8_t *>(0xb000); // The matmul's output.
  ASSERT_TRUE(cache.launch(plan, 0, at, program).isOk());
  EXPECT_EQ(cache.captures(), 2u);
  EXPECT_EQ(cache.replays(), 3u);
}

TEST(ProgramGraphCache, AskedForByTheEnvironment) {
  EXPECT_TRUE(graphsRequested("on"));
  EXPECT_TRUE(graphsRequested("1"));
  EXPECT_FALSE(graphsRequested(nullptr));
  EXPECT_FALSE(graphsRequested("off"));
  EXPECT_FALSE(graphsRequested(""));
}

} // namespace
