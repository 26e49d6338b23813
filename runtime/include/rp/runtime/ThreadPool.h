//===- ThreadPool.h - rp runtime thread pool --------------------*- C++ -*-===//
//
// The runtime's own thread pool. rp does not use OpenMP: ThreadSanitizer
// cannot see inside libgomp, and every runtime test runs under TSan. Kernels
// and the optimizer split their work with fixedChunks() so that results are
// bitwise identical for any thread count (DESIGN.md, "Determinism"): the pool
// decides only *who* runs a chunk, never where chunks begin or end or in
// which order their results are combined.
//
// No exception crosses this API; a callback that throws terminates.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_THREADPOOL_H
#define RP_RUNTIME_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace rp::runtime {

namespace detail {
struct ForJob;
struct TaskState;
} // namespace detail

/// A waitable handle to work given to ThreadPool::submit. Handles may outlive
/// the pool.
class TaskHandle {
public:
  TaskHandle() = default;

  /// Blocks until the task has run. A task nobody has started yet is run on
  /// the waiting thread instead: a pool worker waiting on a queued task
  /// would otherwise hold the very thread that task may need.
  void wait() noexcept;
  bool isReady() const noexcept;
  bool isValid() const noexcept { return state != nullptr; }

private:
  friend class ThreadPool;
  explicit TaskHandle(std::shared_ptr<detail::TaskState> state)
      : state(std::move(state)) {}
  std::shared_ptr<detail::TaskState> state;
};

class ThreadPool {
public:
  /// `numThreads` counts the caller: parallelFor runs on the caller plus
  /// numThreads - 1 workers, so `--threads N` means N busy cores. 0 and 1
  /// start no worker and run everything inline on the caller.
  explicit ThreadPool(unsigned numThreads) noexcept;
  /// One thread per hardware thread.
  ThreadPool() noexcept;
  /// Runs every task already submitted, then joins the workers. Must not be
  /// called from one of this pool's workers.
  ~ThreadPool();

  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// The parallelism of parallelFor, caller included (at least 1).
  unsigned getNumThreads() const noexcept {
    return static_cast<unsigned>(workers.size()) + 1;
  }

  /// Runs fn(c) exactly once for every c in [0, numChunks) and returns when
  /// all have run. The caller takes chunks too, so progress never depends on
  /// a worker being free. Safe to call from several threads at once. Called
  /// from one of this pool's workers it runs inline: a worker that blocked on
  /// a nested job could starve the pool it is part of.
  void parallelFor(int64_t numChunks,
                   const std::function<void(int64_t chunk)> &fn) noexcept;

  /// Queues fn to run on a worker; with no workers it runs before submit
  /// returns. Tasks must not throw.
  TaskHandle submit(std::function<void()> fn) noexcept;

  /// True on a worker thread of this pool.
  bool isWorkerThread() const noexcept;

private:
  void workerLoop() noexcept;
  /// Takes and runs chunks of `job` until none are left.
  void runChunks(detail::ForJob &job) noexcept;
  /// Drops an exhausted job from the queue; needs `mutex` held.
  void retireJobLocked(const detail::ForJob *job) noexcept;

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable workAvailable;
  std::deque<std::shared_ptr<detail::ForJob>> jobs;
  std::deque<std::shared_ptr<detail::TaskState>> tasks;
  bool stopping = false;
};

//===----------------------------------------------------------------------===//
// Deterministic chunking and reduction
//===----------------------------------------------------------------------===//

/// A split of [0, size) into chunks of `grain` elements, the last one
/// possibly shorter. It is a function of (size, grain) alone: a thread count
/// must never enter it, or a sum over the chunks would round differently on
/// machines with different core counts.
struct ChunkPlan {
  int64_t size = 0;
  int64_t grain = 1;
  int64_t numChunks = 0;

  int64_t begin(int64_t chunk) const { return chunk * grain; }
  int64_t end(int64_t chunk) const {
    int64_t e = begin(chunk) + grain;
    return e < size ? e : size;
  }
};

/// Splits [0, n) into chunks of `grain` (values below 1 count as 1; n <= 0
/// gives no chunks). The grain is part of a kernel's numerics: changing it
/// changes the rounding of its reductions.
ChunkPlan fixedChunks(int64_t n, int64_t grain) noexcept;

/// Reduces each chunk of `plan` to a partial with reduceChunk(begin, end) in
/// parallel, then folds the partials into `init` in chunk order on the
/// caller. Floating-point addition is not associative, so fixing both the
/// chunk boundaries and the order of the final fold is what makes the result
/// identical for every thread count.
template <typename T, typename ChunkFn, typename CombineFn>
T deterministicReduce(ThreadPool &pool, const ChunkPlan &plan, T init,
                      ChunkFn reduceChunk, CombineFn combine) {
  // vector<bool> packs bits, so chunks writing neighbouring partials race.
  static_assert(!std::is_same_v<T, bool>, "reduce to an integer instead");
  std::vector<T> partials(plan.numChunks, init);
  pool.parallelFor(plan.numChunks, [&](int64_t chunk) {
    partials[chunk] = reduceChunk(plan.begin(chunk), plan.end(chunk));
  });
  T result = init;
  for (const T &partial : partials)
    result = combine(result, partial);
  return result;
}

/// The default grain of deterministicSum: large enough that scheduling costs
/// vanish, small enough to balance 1e6-element tensors over 16 threads.
constexpr int64_t kDefaultReduceGrain = 1 << 14;

/// Sums data[0, n) in float, bitwise identical for any pool size.
float deterministicSum(ThreadPool &pool, const float *data, int64_t n,
                       int64_t grain = kDefaultReduceGrain) noexcept;

} // namespace rp::runtime

#endif // RP_RUNTIME_THREADPOOL_H
