//===- ThreadPool.cpp - rp runtime thread pool ----------------------------===//
//
// One mutex guards both queues; chunks are claimed with an atomic counter so
// that a parallelFor costs one lock round trip per participating thread, not
// one per chunk. Jobs and tasks are reference counted because a worker may
// still hold one after its owner has returned.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>

namespace rp::runtime {

namespace detail {

/// One parallelFor call. `fn` points into the caller's frame; it is only
/// called for claimed chunks, and the caller waits for all of those.
struct ForJob {
  ForJob(int64_t numChunks, const std::function<void(int64_t)> &fn)
      : numChunks(numChunks), fn(&fn) {}

  const int64_t numChunks;
  const std::function<void(int64_t)> *const fn;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
};

/// One submitted task. Whoever moves it out of Pending runs it, which lets
/// TaskHandle::wait run a task that no worker has reached yet.
struct TaskState {
  enum : int { Pending, Running, Done };

  explicit TaskState(std::function<void()> fn) : fn(std::move(fn)) {}

  bool tryRun() noexcept {
    int expected = Pending;
    if (!state.compare_exchange_strong(expected, Running))
      return false;
    fn();
    // Release captures now: a handle may keep this state alive for long.
    fn = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      state.store(Done);
    }
    finished.notify_all();
    return true;
  }

  std::function<void()> fn;
  std::atomic<int> state{Pending};
  std::mutex mutex;
  std::condition_variable finished;
};

} // namespace detail

/// The pool whose worker the current thread is, if any. Lets parallelFor
/// detect nesting without any shared state.
static thread_local const ThreadPool *currentWorkerPool = nullptr;

void TaskHandle::wait() noexcept {
  if (!state || state->tryRun())
    return;
  std::unique_lock<std::mutex> lock(state->mutex);
  state->finished.wait(
      lock, [&] { return state->state.load() == detail::TaskState::Done; });
}

bool TaskHandle::isReady() const noexcept {
  return !state || state->state.load() == detail::TaskState::Done;
}

ThreadPool::ThreadPool(unsigned numThreads) noexcept {
  for (unsigned i = 1; i < numThreads; ++i)
    workers.emplace_back([this] { workerLoop(); });
}

ThreadPool::ThreadPool() noexcept
    : ThreadPool(std::thread::hardware_concurrency()) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  workAvailable.notify_all();
  for (std::thread &worker : workers)
    worker.join();
}

bool ThreadPool::isWorkerThread() const noexcept {
  return currentWorkerPool == this;
}

void ThreadPool::workerLoop() noexcept {
  currentWorkerPool = this;
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    workAvailable.wait(
        lock, [this] { return stopping || !jobs.empty() || !tasks.empty(); });
    // A parallelFor caller is blocked until its chunks finish, so jobs go
    // before tasks.
    if (!jobs.empty()) {
      std::shared_ptr<detail::ForJob> job = jobs.front();
      lock.unlock();
      runChunks(*job);
      lock.lock();
      retireJobLocked(job.get());
      continue;
    }
    if (!tasks.empty()) {
      std::shared_ptr<detail::TaskState> task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      task->tryRun();
      task.reset();
      lock.lock();
      continue;
    }
    // Stopping, and both queues are drained.
    return;
  }
}

void ThreadPool::runChunks(detail::ForJob &job) noexcept {
  for (;;) {
    int64_t chunk = job.next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.numChunks)
      return;
    (*job.fn)(chunk);
    // acq_rel: the chunk's writes must be visible to the caller once it sees
    // the final count.
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.numChunks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.finished.notify_all();
    }
  }
}

void ThreadPool::retireJobLocked(const detail::ForJob *job) noexcept {
  auto it = std::find_if(jobs.begin(), jobs.end(), [job](const auto &queued) {
    return queued.get() == job;
  });
  if (it != jobs.end())
    jobs.erase(it);
}

void ThreadPool::parallelFor(int64_t numChunks,
                             const std::function<void(int64_t)> &fn) noexcept {
  if (numChunks <= 0)
    return;
  if (workers.empty() || numChunks == 1 || isWorkerThread()) {
    for (int64_t chunk = 0; chunk < numChunks; ++chunk)
      fn(chunk);
    return;
  }

  auto job = std::make_shared<detail::ForJob>(numChunks, fn);
  {
    std::lock_guard<std::mutex> lock(mutex);
    jobs.push_back(job);
  }
  workAvailable.notify_all();
  runChunks(*job);
  {
    std::lock_guard<std::mutex> lock(mutex);
    retireJobLocked(job.get());
  }
  std::unique_lock<std::mutex> lock(job->mutex);
  job->finished.wait(lock, [&] {
    return job->done.load(std::memory_order_acquire) == numChunks;
  });
}

TaskHandle ThreadPool::submit(std::function<void()> fn) noexcept {
  auto task = std::make_shared<detail::TaskState>(std::move(fn));
  if (workers.empty()) {
    task->tryRun();
    return TaskHandle(std::move(task));
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    tasks.push_back(task);
  }
  workAvailable.notify_one();
  return TaskHandle(std::move(task));
}

ChunkPlan fixedChunks(int64_t n, int64_t grain) noexcept {
  ChunkPlan plan;
  plan.grain = grain < 1 ? 1 : grain;
  if (n <= 0)
    return plan;
  plan.size = n;
  plan.numChunks = n / plan.grain + (n % plan.grain != 0 ? 1 : 0);
  return plan;
}

float deterministicSum(ThreadPool &pool, const float *data, int64_t n,
                       int64_t grain) noexcept {
  // Each chunk adds left to right in float. This only holds as long as the
  // runtime is never built with -ffast-math, which would let the compiler
  // reassociate the loop per vector width.
  return deterministicReduce(
      pool, fixedChunks(n, grain), 0.0f,
      [data](int64_t begin, int64_t end) {
        float sum = 0.0f;
        for (int64_t i = begin; i < end; ++i)
          sum += data[i];
        return sum;
      },
      [](float a, float b) { return a + b; });
}

} // namespace rp::runtime
