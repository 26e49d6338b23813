//===- CudaJobTimer.cpp - the GPU's own time of each plan job -------------===//

#include "CudaJobTimer.h"

#include <chrono>

namespace rp::runtime::cuda {

namespace {

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Milliseconds from `from` to `to` as nanoseconds; false on a failure.
bool elapsedNs(cudaEvent_t from, cudaEvent_t to, int64_t &ns) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, from, to) != cudaSuccess)
    return false;
  ns = static_cast<int64_t>(double(ms) * 1e6);
  return true;
}

} // namespace

JobTimer::~JobTimer() {
  cudaSetDevice(gpu);
  for (const Entry &e : entries) {
    if (e.start)
      cudaEventDestroy(e.start);
    if (e.end)
      cudaEventDestroy(e.end);
  }
  for (cudaEvent_t e : spare)
    cudaEventDestroy(e);
  if (placed)
    cudaEventDestroy(placed);
}

bool JobTimer::enable() {
  std::lock_guard<std::mutex> lock(mutex);
  if (on)
    return true;
  cudaSetDevice(gpu);
  placed = event();
  // The stream is idle: the event completes at once, so the host's time
  // just after it is the GPU's time of the event, within microseconds.
  if (!placed || cudaEventRecord(placed, stream) != cudaSuccess ||
      cudaEventSynchronize(placed) != cudaSuccess) {
    fail();
    return false;
  }
  placedNs = steadyNs();
  on = true;
  return true;
}

cudaEvent_t JobTimer::event() {
  if (!spare.empty()) {
    cudaEvent_t e = spare.back();
    spare.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  return cudaEventCreate(&e) == cudaSuccess ? e : nullptr;
}

void JobTimer::release(cudaEvent_t e) {
  if (e)
    spare.push_back(e);
}

void JobTimer::fail() {
  on = false;
  open = false;
  cudaGetLastError();
}

void JobTimer::close() {
  if (!open)
    return;
  open = false;
  Entry &e = entries.back();
  if (!e.start)
    return;
  e.end = event();
  if (!e.end || cudaEventRecord(e.end, stream) != cudaSuccess)
    fail();
}

void JobTimer::begin(uint32_t job) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!on)
    return;
  cudaSetDevice(gpu);
  close();
  if (!on)
    return;
  entries.push_back(Entry{job, nullptr, nullptr});
  open = true;
}

void JobTimer::beforeWork() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!on || !open || entries.back().start)
    return;
  Entry &e = entries.back();
  e.start = event();
  if (!e.start || cudaEventRecord(e.start, stream) != cudaSuccess)
    fail();
}

bool JobTimer::take(uint32_t job, bool wait, int64_t &startNs, int64_t &endNs) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!on || entries.empty())
    return false;
  cudaSetDevice(gpu);
  // The executor reads a pass once every job of it is enqueued: an entry
  // still open is this queue's last job, and nothing follows it yet.
  if (entries.size() == 1)
    close();
  Entry e = entries.front();
  if (e.job != job) {
    // Out of step with the executor (not expected): start over, and let
    // the host's spans stand until the queue is read in step again.
    for (const Entry &x : entries) {
      release(x.start);
      release(x.end);
    }
    entries.clear();
    open = false;
    return false;
  }
  entries.pop_front();
  // A failed pass's job may never run (its queue stopped, or waits for an
  // event nobody records): it is dropped rather than waited for.
  if (!on || !e.start || !e.end ||
      (!wait && cudaEventQuery(e.end) != cudaSuccess)) {
    cudaGetLastError();
    release(e.start);
    release(e.end);
    return false;
  }
  int64_t toStart = 0, length = 0;
  if (cudaEventSynchronize(e.end) != cudaSuccess ||
      !elapsedNs(placed, e.start, toStart) ||
      !elapsedNs(e.start, e.end, length)) {
    fail();
    return false;
  }
  startNs = placedNs + toStart;
  endNs = startNs + length;
  // The next span is placed from this one's end.
  release(placed);
  release(e.start);
  placed = e.end;
  placedNs = endNs;
  return true;
}

} // namespace rp::runtime::cuda
