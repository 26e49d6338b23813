//===- ThreadPoolTest.cpp - rp runtime thread pool tests ------------------===//
//
// The pool is exercised at thread counts 1, 2, 3 and 8 on purpose: 1 is the
// inline path, 3 does not divide typical chunk counts, and 8 oversubscribes
// the 2-core development machines, which shakes out ordering assumptions.
// All of these tests also run under ThreadSanitizer (RP_RUNTIME_TSAN).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

using namespace rp::runtime;

static const unsigned kThreadCounts[] = {1, 2, 3, 8};

/// Floats spread over many magnitudes, so that any change in summation order
/// changes the rounded result. A fixed LCG, not <random>, keeps the data the
/// same on every standard library.
static std::vector<float> makePseudoRandomFloats(size_t n) {
  std::vector<float> data(n);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (float &value : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    auto mantissa = static_cast<float>(state >> 40) / float(1 << 24);
    int exponent = static_cast<int>((state >> 20) % 16) - 8;
    value = std::ldexp(mantissa - 0.5f, exponent);
  }
  return data;
}

namespace {

TEST(ThreadPoolTest, NumThreadsCountsTheCaller) {
  EXPECT_EQ(ThreadPool(0).getNumThreads(), 1u);
  EXPECT_EQ(ThreadPool(1).getNumThreads(), 1u);
  EXPECT_EQ(ThreadPool(3).getNumThreads(), 3u);
  EXPECT_GE(ThreadPool().getNumThreads(), 1u);
}

TEST(ThreadPoolTest, ApiDoesNotThrow) {
  ThreadPool pool(2);
  std::function<void(int64_t)> chunkFn = [](int64_t) {};
  static_assert(noexcept(pool.parallelFor(1, chunkFn)));
  static_assert(noexcept(pool.submit(std::function<void()>())));
  static_assert(noexcept(std::declval<TaskHandle &>().wait()));
  static_assert(noexcept(fixedChunks(1, 1)));
}

TEST(ThreadPoolTest, FixedChunksDependOnlyOnSizeAndGrain) {
  EXPECT_EQ(fixedChunks(0, 4).numChunks, 0);
  EXPECT_EQ(fixedChunks(-5, 4).numChunks, 0);
  EXPECT_EQ(fixedChunks(1, 4).numChunks, 1);
  EXPECT_EQ(fixedChunks(8, 4).numChunks, 2);
  EXPECT_EQ(fixedChunks(9, 4).numChunks, 3);
  EXPECT_EQ(fixedChunks(5, 0).grain, 1);
  EXPECT_EQ(fixedChunks(5, -3).numChunks, 5);

  for (int64_t n : {1, 2, 7, 64, 1000, 4097}) {
    for (int64_t grain : {1, 3, 64, 5000}) {
      ChunkPlan plan = fixedChunks(n, grain);
      int64_t expectedBegin = 0;
      for (int64_t chunk = 0; chunk < plan.numChunks; ++chunk) {
        EXPECT_EQ(plan.begin(chunk), expectedBegin);
        EXPECT_GT(plan.end(chunk), plan.begin(chunk));
        EXPECT_LE(plan.end(chunk) - plan.begin(chunk), grain);
        expectedBegin = plan.end(chunk);
      }
      EXPECT_EQ(expectedBegin, n);
    }
  }
}

TEST(ThreadPoolTest, EveryChunkRunsExactlyOnce) {
  for (unsigned threads : kThreadCounts) {
    ThreadPool pool(threads);
    for (int64_t numChunks : {0, 1, 2, 3, 7, 64, 1000, 4097}) {
      std::vector<std::atomic<int>> hits(numChunks);
      pool.parallelFor(numChunks, [&](int64_t chunk) {
        hits[chunk].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t chunk = 0; chunk < numChunks; ++chunk)
        ASSERT_EQ(hits[chunk].load(), 1)
            << "chunk " << chunk << " of " << numChunks << " with " << threads
            << " threads";
    }
  }
}

TEST(ThreadPoolTest, ReductionIsBitwiseIdenticalAcrossThreadCounts) {
  const std::vector<float> data = makePseudoRandomFloats(1000000);
  const int64_t n = static_cast<int64_t>(data.size());
  const int64_t grain = 4096;

  // What every pool size must reproduce: per-chunk partials folded in chunk
  // order, computed here without any pool.
  ChunkPlan plan = fixedChunks(n, grain);
  float reference = 0.0f;
  for (int64_t chunk = 0; chunk < plan.numChunks; ++chunk) {
    float partial = 0.0f;
    for (int64_t i = plan.begin(chunk); i < plan.end(chunk); ++i)
      partial += data[i];
    reference += partial;
  }

  // The data is sensitive to summation order: another split rounds
  // differently, so a split that followed the thread count would be caught.
  ThreadPool serial(1);
  float otherGrain = deterministicSum(serial, data.data(), n, grain + 1);
  ASSERT_NE(std::memcmp(&otherGrain, &reference, sizeof(float)), 0);

  for (unsigned threads : kThreadCounts) {
    ThreadPool pool(threads);
    for (int repeat = 0; repeat < 3; ++repeat) {
      float sum = deterministicSum(pool, data.data(), n, grain);
      EXPECT_EQ(std::memcmp(&sum, &reference, sizeof(float)), 0)
          << "threads " << threads << ": " << sum << " vs " << reference;
    }
  }
}

TEST(ThreadPoolTest, DeterministicReduceCombinesInChunkOrder) {
  // A non-commutative combine exposes any out-of-order fold.
  ThreadPool pool(3);
  ChunkPlan plan = fixedChunks(100, 7);
  std::vector<int64_t> order = deterministicReduce(
      pool, plan, std::vector<int64_t>{},
      [](int64_t begin, int64_t) { return std::vector<int64_t>{begin}; },
      [](std::vector<int64_t> acc, const std::vector<int64_t> &part) {
        acc.insert(acc.end(), part.begin(), part.end());
        return acc;
      });
  ASSERT_EQ(static_cast<int64_t>(order.size()), plan.numChunks);
  for (int64_t chunk = 0; chunk < plan.numChunks; ++chunk)
    EXPECT_EQ(order[chunk], plan.begin(chunk));
}

TEST(ThreadPoolTest, NestedParallelForCompletes) {
  for (unsigned threads : kThreadCounts) {
    ThreadPool pool(threads);
    const int64_t outer = 16, inner = 16, innermost = 4;
    std::vector<int> hits(outer * inner * innermost, 0);
    pool.parallelFor(outer, [&](int64_t i) {
      pool.parallelFor(inner, [&](int64_t j) {
        pool.parallelFor(innermost, [&](int64_t k) {
          ++hits[(i * inner + j) * innermost + k];
        });
      });
    });
    for (int hit : hits)
      ASSERT_EQ(hit, 1) << "threads " << threads;
  }
}

TEST(ThreadPoolTest, ConcurrentParallelForFromFourThreads) {
  for (unsigned threads : kThreadCounts) {
    ThreadPool pool(threads);
    std::vector<std::thread> callers;
    std::vector<int> failures(4, 0);
    for (int caller = 0; caller < 4; ++caller) {
      callers.emplace_back([&pool, &failures, caller] {
        for (int round = 0; round < 20; ++round) {
          const int64_t numChunks = 97 + caller * 31 + round;
          std::vector<int> hits(numChunks, 0);
          pool.parallelFor(numChunks, [&](int64_t chunk) { ++hits[chunk]; });
          for (int hit : hits)
            failures[caller] += hit != 1;
        }
      });
    }
    for (std::thread &caller : callers)
      caller.join();
    for (int failed : failures)
      EXPECT_EQ(failed, 0) << "threads " << threads;
  }
}

TEST(ThreadPoolTest, SubmitAndWait) {
  for (unsigned threads : kThreadCounts) {
    ThreadPool pool(threads);
    std::atomic<int> ran{0};
    std::vector<TaskHandle> handles;
    for (int i = 0; i < 100; ++i)
      handles.push_back(pool.submit([&ran] { ran.fetch_add(1); }));
    for (TaskHandle &handle : handles) {
      ASSERT_TRUE(handle.isValid());
      handle.wait();
      EXPECT_TRUE(handle.isReady());
    }
    EXPECT_EQ(ran.load(), 100);
  }
  TaskHandle empty;
  EXPECT_FALSE(empty.isValid());
  EXPECT_TRUE(empty.isReady());
  empty.wait();
}

TEST(ThreadPoolTest, WaitInsideTaskDoesNotDeadlock) {
  // With one worker, the outer task occupies it; waiting on the inner task
  // only finishes because wait() runs a task no worker has started.
  ThreadPool pool(2);
  std::atomic<bool> started{false};
  bool onWorker = false;
  int innerRan = 0, nestedChunks = 0;
  TaskHandle outer = pool.submit([&] {
    started.store(true);
    onWorker = pool.isWorkerThread();
    TaskHandle inner = pool.submit([&] { ++innerRan; });
    inner.wait();
    // A worker's parallelFor runs inline, so a plain int is safe here.
    pool.parallelFor(8, [&](int64_t) { ++nestedChunks; });
  });
  // Otherwise outer.wait() below could run the outer task on this thread.
  while (!started.load())
    std::this_thread::yield();
  outer.wait();
  EXPECT_TRUE(onWorker);
  EXPECT_EQ(innerRan, 1);
  EXPECT_EQ(nestedChunks, 8);
}

TEST(ThreadPoolTest, DestructionWithPendingWorkJoins) {
  for (unsigned threads : kThreadCounts) {
    std::atomic<int> ran{0};
    std::vector<TaskHandle> handles;
    {
      ThreadPool pool(threads);
      for (int i = 0; i < 64; ++i)
        handles.push_back(pool.submit([&ran] {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          ran.fetch_add(1);
        }));
    }
    EXPECT_EQ(ran.load(), 64) << "threads " << threads;
    // Handles outlive the pool.
    for (TaskHandle &handle : handles) {
      EXPECT_TRUE(handle.isReady());
      handle.wait();
    }
  }
}

} // namespace
