//===- CudaJobTimer.h - the GPU's own time of each plan job -----*- C++ -*-===//
//
// A trace's job spans on cuda, measured on the GPU: a timing cudaEvent on
// the queue's stream before a job's first command (after its waits, so a
// span is the job's work, not its wait for another queue) and one after its
// last command (recorded when the next job begins, or when the span is
// read). Spans are read back in the order the jobs were enqueued, which is
// the executor's plan order per queue, and placed on the host's
// steady_clock: the first against an event recorded on the idle stream
// when timing starts, each later one against the end of the one before
// (short intervals, so cudaEventElapsedTime's float milliseconds keep
// their microsecond). Any CUDA failure turns timing off for good; the
// executor then keeps the host's enqueue spans. A command enqueued on the
// queue outside any job (none is, while the executor runs) would count in
// the span of the job before it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDAJOBTIMER_H
#define RP_LIB_CUDA_CUDAJOBTIMER_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace rp::runtime::cuda {

class JobTimer {
public:
  JobTimer(int gpu, cudaStream_t stream) : gpu(gpu), stream(stream) {}
  ~JobTimer();
  JobTimer(const JobTimer &) = delete;
  JobTimer &operator=(const JobTimer &) = delete;

  /// Starts timing; false (nothing timed) where CUDA refuses. Called once,
  /// with the stream idle.
  bool enable();
  /// Queue::beginJob: ends the open job's span, opens `job`'s.
  void begin(uint32_t job);
  /// Before each command of the open job: its start, the first time.
  void beforeWork();
  /// The span of the oldest job not yet taken, which must be `job`, in
  /// steady_clock nanoseconds; waits for its end on the GPU if `wait`, else
  /// drops it unless it has ended. False: not measured (a job without
  /// commands, not ended, a mismatch, or timing is off).
  bool take(uint32_t job, bool wait, int64_t &startNs, int64_t &endNs);

private:
  struct Entry {
    uint32_t job = 0;
    cudaEvent_t start = nullptr, end = nullptr;
  };
  cudaEvent_t event();
  void release(cudaEvent_t e);
  /// Ends the open entry's span (the back of `entries`).
  void close();
  /// Turns timing off after a CUDA failure and clears the error.
  void fail();

  int gpu;
  cudaStream_t stream;
  std::mutex mutex;
  bool on = false;
  /// Whether the back entry is still taking commands.
  bool open = false;
  std::deque<Entry> entries;
  std::vector<cudaEvent_t> spare;
  /// The last point placed on the host clock: an event and its time.
  cudaEvent_t placed = nullptr;
  int64_t placedNs = 0;
};

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAJOBTIMER_H
