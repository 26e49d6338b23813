//===- GradientReducer.cpp - gradients summed across ranks ----------------===//

#include "GradientReducer.h"

using namespace rp::runtime;
using namespace rp::runtime::detail;

GradientReducer::GradientReducer(Communicator &comm, std::vector<size_t> order,
                                 unsigned first, Trace *trace)
    : comm(comm), order(std::move(order)), trace(trace), next(first) {
  worker = std::thread([this] { run(); });
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard<std::mutex> lock(m);
    stop = true;
  }
  cv.notify_all();
  // A sum in flight ends by itself: done, failed, or timed out.
  worker.join();
}

GradientReducer::StepState &GradientReducer::stateOf(unsigned step) {
  StepState &s = steps[step];
  if (s.isReady.empty()) {
    s.isReady.assign(order.size(), 0);
    s.grads.assign(order.size(), {nullptr, 0});
  }
  return s;
}

void GradientReducer::ready(unsigned step, size_t i, float *data, size_t n) {
  {
    std::lock_guard<std::mutex> lock(m);
    StepState &s = stateOf(step);
    s.grads[i] = {data, n};
    s.isReady[i] = 1;
  }
  cv.notify_all();
}

Status GradientReducer::finishStep(unsigned step, double &lossSum) {
  std::unique_lock<std::mutex> lock(m);
  StepState &s = stateOf(step);
  s.loss = lossSum;
  s.lossPosted = true;
  cv.notify_all();
  cv.wait(lock, [&] { return s.done; });
  Status status = std::move(s.status);
  lossSum = s.loss;
  steps.erase(step);
  return status;
}

void GradientReducer::run() {
  std::unique_lock<std::mutex> lock(m);
  for (;; ++next) {
    Status status;
    int64_t start = 0;
    for (size_t i : order) {
      cv.wait(lock, [&] { return stop || stateOf(next).isReady[i]; });
      if (stop)
        return;
      auto [data, n] = stateOf(next).grads[i];
      lock.unlock();
      if (trace && !start)
        start = trace->now();
      // After a failure the other sums are skipped: the step fails.
      if (status.isOk())
        status = comm.sum(data, n);
      lock.lock();
    }
    cv.wait(lock, [&] { return stop || stateOf(next).lossPosted; });
    if (stop)
      return;
    double loss = stateOf(next).loss;
    lock.unlock();
    if (status.isOk())
      status = comm.sum(&loss, 1);
    if (trace)
      trace->addHostSpan("all-reduce", next, start ? start : trace->now(),
                         trace->now());
    lock.lock();
    StepState &s = stateOf(next);
    s.loss = loss;
    s.status = std::move(status);
    s.done = true;
    cv.notify_all();
  }
}
