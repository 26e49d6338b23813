//===- GradientReducer.cpp - gradients summed across ranks ----------------===//

#include "GradientReducer.h"

#include <algorithm>

using namespace rp::runtime;
using namespace rp::runtime::detail;

GradientReducer::GradientReducer(Communicator &comm, std::vector<size_t> order,
                                 unsigned first, Trace *trace, bool hold,
                                 size_t firstUse, Bucketing bucketing,
                                 std::function<bool(unsigned)> scatter)
    : comm(comm), order(std::move(order)), firstUse(firstUse),
      bucketing(bucketing), scatterStep(std::move(scatter)), trace(trace),
      hold(hold), next(first) {
  for (size_t i : this->order)
    items = std::max(items, i + 1);
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
    s.isReady.assign(items, 0);
    s.isSummed.assign(items, 0);
    s.grads.assign(items, {nullptr, 0});
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

Status GradientReducer::waitSummed(unsigned step, size_t i) {
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] {
    StepState &s = stateOf(step);
    return s.isSummed[i] || s.status.failed();
  });
  return stateOf(step).status;
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

Status
GradientReducer::sumParts(const std::vector<std::pair<float *, size_t>> &parts,
                          bool scatter) {
  ++collectives;
  if (scatter) {
    // Rank-major: segment r holds every part's chunk r (setShard's, the
    // last rank's padded), so each rank's segment is its shards.
    ++scatters;
    size_t world = size_t(comm.size()), rank = size_t(comm.rank()), seg = 0;
    for (auto [data, n] : parts)
      seg += (n + world - 1) / world;
    bucket.assign(seg * world, 0.0f);
    for (size_t r = 0, at = 0; r < world; ++r)
      for (auto [data, n] : parts) {
        size_t chunk = (n + world - 1) / world;
        size_t b = std::min(r * chunk, n), e = std::min(b + chunk, n);
        std::copy(data + b, data + e, bucket.begin() + at);
        at += chunk;
      }
    if (Status s = comm.reduceScatter(bucket.data(), seg); s.failed())
      return s;
    const float *from = bucket.data() + rank * seg;
    for (auto [data, n] : parts) {
      size_t chunk = (n + world - 1) / world;
      size_t b = std::min(rank * chunk, n), e = std::min(b + chunk, n);
      std::copy(from, from + (e - b), data + b);
      from += chunk;
    }
    return Status::ok();
  }
  if (parts.size() == 1)
    return comm.sum(parts[0].first, parts[0].second);
  size_t total = 0;
  for (auto [data, n] : parts)
    total += n;
  bucket.resize(total);
  float *at = bucket.data();
  for (auto [data, n] : parts)
    at = std::copy(data, data + n, at);
  if (Status s = comm.sum(bucket.data(), total); s.failed())
    return s;
  const float *from = bucket.data();
  for (auto [data, n] : parts) {
    std::copy(from, from + n, data);
    from += n;
  }
  return Status::ok();
}

void GradientReducer::run() {
  std::unique_lock<std::mutex> lock(m);
  for (;; ++next) {
    Status status;
    int64_t start = 0;
    bool scatter = scatterStep && scatterStep(next);
    for (size_t k = 0; k < order.size();) {
      // Small items go in buckets of consecutive items, one collective
      // each: which items share one depends on their sizes alone, the same
      // on every rank, and a sum is elementwise, so the bits are those of
      // one collective per item. A bucket never mixes the epilogue's uses
      // with parameters: the parameters after them wait for the epilogue.
      std::vector<size_t> members;
      size_t total = 0;
      for (; k < order.size(); ++k) {
        size_t i = order[k];
        if (!members.empty() && (i >= firstUse) != (members[0] >= firstUse))
          break;
        cv.wait(lock, [&] { return stop || stateOf(next).isReady[i]; });
        if (stop)
          return;
        size_t n = stateOf(next).grads[i].second;
        bool small = n <= bucketing.smallItem;
        if (!members.empty() && (!small || total + n > bucketing.bucket))
          break;
        members.push_back(i);
        total += n;
        if (!small) {
          ++k;
          break;
        }
      }
      std::vector<std::pair<float *, size_t>> parts;
      parts.reserve(members.size());
      for (size_t i : members)
        parts.push_back(stateOf(next).grads[i]);
      lock.unlock();
      if (trace && !start)
        start = trace->now();
      // After a failure the other sums are skipped: the step fails.
      if (status.isOk())
        status = sumParts(parts, scatter && members[0] < firstUse);
      lock.lock();
      StepState &s = stateOf(next);
      for (size_t i : members)
        s.isSummed[i] = status.isOk();
      if (status.failed())
        s.status = status;
      cv.notify_all();
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

std::vector<size_t> rp::runtime::detail::landingOrder(
    const std::vector<std::vector<size_t>> &landsWith, size_t params,
    size_t uses, const std::vector<bool> &fromUses) {
  std::vector<size_t> order;
  std::vector<bool> seen(params, false);
  for (const std::vector<size_t> &lands : landsWith)
    for (size_t i : lands)
      if (!seen[i]) {
        seen[i] = true;
        order.push_back(i);
      }
  // The uses are posted after the step's last pass has landed, and the
  // epilogue's gradients after the epilogue, which waits for the uses.
  for (size_t u = 0; u < uses; ++u)
    order.push_back(params + u);
  for (size_t i = 0; i < params; ++i)
    if (!seen[i] && !(i < fromUses.size() && fromUses[i]))
      order.push_back(i);
  return order;
}

void rp::runtime::detail::setShard(Param &p, size_t n, unsigned rank,
                                   unsigned world) {
  size_t chunk = (n + world - 1) / world;
  p.shardBegin = std::min(chunk * rank, n);
  p.shardEnd = std::min(p.shardBegin + chunk, n);
}

Status rp::runtime::detail::gatherShards(GradientReducer &reducer,
                                         unsigned step, float *full,
                                         const float *mine, const Param &p) {
  Communicator &comm = reducer.communicator();
  size_t world = size_t(comm.size());
  size_t n = p.size, chunk = (n + world - 1) / world;
  // Chunks of equal size for the all-gather: the last rank's is padded.
  std::vector<float> in(chunk, 0.0f), all(chunk * world);
  std::copy(mine, mine + (p.shardEnd - p.shardBegin), in.begin());
  return reducer.collective(step, [&] {
    if (Status s = comm.allGather(in.data(), all.data(), chunk * sizeof(float));
        s.failed())
      return s;
    std::copy(all.begin(), all.begin() + n, full);
    return Status::ok();
  });
}

Status
rp::runtime::detail::withWholeState(GradientReducer &reducer, unsigned step,
                                    std::vector<Param> &params, bool wanted,
                                    const std::function<Status()> &write) {
  std::vector<std::vector<float>> s0(params.size()), s1(params.size()),
      m(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Param &p = params[i];
    s0[i].resize(p.size);
    s1[i].resize(p.size);
    // A sharded master too (its chunk is the state's).
    if (p.master.size() != p.size) {
      m[i].resize(p.size);
      if (Status s =
              gatherShards(reducer, step, m[i].data(), p.master.data(), p);
          s.failed())
        return s;
    }
    if (Status s =
            gatherShards(reducer, step, s0[i].data(), p.state0.data(), p);
        s.failed())
      return s;
    if (Status s =
            gatherShards(reducer, step, s1[i].data(), p.state1.data(), p);
        s.failed())
      return s;
  }
  if (!wanted)
    return Status::ok();
  // The checkpoint writer reads the parameters' state: the whole state
  // stands in for the shards while it writes.
  auto swapIn = [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      std::swap(params[i].state0, s0[i]);
      std::swap(params[i].state1, s1[i]);
      if (!m[i].empty())
        std::swap(params[i].master, m[i]);
    }
  };
  swapIn();
  Status s = write();
  swapIn();
  return s;
}
