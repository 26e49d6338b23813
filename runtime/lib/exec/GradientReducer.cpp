//===- GradientReducer.cpp - gradients summed across ranks ----------------===//

#include "GradientReducer.h"

using namespace rp::runtime;
using namespace rp::runtime::detail;

GradientReducer::GradientReducer(Communicator &comm, std::vector<size_t> order,
                                 unsigned first, Trace *trace, bool hold)
    : comm(comm), order(std::move(order)), trace(trace), hold(hold),
      next(first) {
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
  Status status = s.status;
  lossSum = s.loss;
  // With a window the reducer's thread still uses the step's state.
  if (!hold)
    steps.erase(step);
  return status;
}

Status GradientReducer::collective(unsigned step,
                                   const std::function<Status()> &fn) {
  Job job{&fn, Status(), false};
  std::unique_lock<std::mutex> lock(m);
  stateOf(step).jobs.push_back(&job);
  cv.notify_all();
  cv.wait(lock, [&] { return job.done; });
  return job.status;
}

void GradientReducer::release(unsigned step) {
  {
    std::lock_guard<std::mutex> lock(m);
    stateOf(step).released = true;
  }
  cv.notify_all();
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
    s.status = status;
    s.done = true;
    cv.notify_all();
    if (!hold)
      continue;
    // The step's window: its update's and checkpoint's collectives, in the
    // order they are posted, until it is released.
    for (;;) {
      cv.wait(lock, [&] {
        StepState &w = stateOf(next);
        return stop || !w.jobs.empty() || w.released;
      });
      if (stop)
        return;
      StepState &w = stateOf(next);
      if (w.jobs.empty())
        break;
      Job *job = w.jobs.front();
      w.jobs.erase(w.jobs.begin());
      lock.unlock();
      Status js = (*job->fn)();
      lock.lock();
      job->status = std::move(js);
      job->done = true;
      cv.notify_all();
    }
    steps.erase(next);
  }
}
