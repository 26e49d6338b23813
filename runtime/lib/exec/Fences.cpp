//===- Fences.cpp - per-parameter version fences of a staged plan ---------===//

#include "Fences.h"

#include <algorithm>
#include <cstdint>
#include <map>

using namespace rp::runtime;

std::optional<ParamFences>
rp::runtime::planParamFences(const Plan &plan,
                             const std::vector<uint32_t> &paramBuffers) {
  ParamFences f;
  size_t n = paramBuffers.size();
  f.gatesOf.resize(plan.jobs.size());
  f.prologueCalls.resize(n);
  // The parameter each host buffer holds the weights of, as it is or as
  // the prologue's copy.
  std::map<uint32_t, uint32_t> holds;
  for (uint32_t i = 0; i < n; ++i)
    holds[paramBuffers[i]] = i;
  if (plan.prologue >= 0) {
    const ProgramDesc &prologue = plan.programs[plan.prologue];
    for (size_t c = 0; c < prologue.calls.size(); ++c) {
      std::optional<uint32_t> param;
      for (uint32_t b : prologue.calls[c].inputs) {
        const BufferDesc &d = plan.buffers[b];
        if (!d.constant.empty())
          continue;
        auto it = holds.find(b);
        if (it == holds.end() || (param && *param != it->second))
          return std::nullopt;
        param = it->second;
      }
      if (!param)
        return std::nullopt;
      f.prologueCalls[*param].push_back(c);
      for (uint32_t out : prologue.calls[c].outputs)
        holds[out] = *param;
    }
  }
  // A parameter's first reader: the earliest stage job of the step's chain
  // that uploads it, then the earliest job. The plan lists the first
  // stage jobs' upload chunks interleaved (every device prefetches at
  // once), so job order alone would update the first G jobs' weights side
  // by side and open the first job's gates near the end of the update; in
  // stage order the update runs as fast as the chain needs its weights,
  // and the forward jobs run beside it (the order the compiler's steady
  // state assumes, Continuous.cpp). Unstaged plans: job order.
  using Key = std::pair<int64_t, size_t>;
  const Key never{INT64_MAX, plan.jobs.size()};
  std::vector<Key> firstReader(n, never);
  for (size_t j = 0; j < plan.jobs.size(); ++j)
    for (const CopyDesc &c : plan.jobs[j].copies) {
      auto it = holds.find(c.src);
      if (it == holds.end())
        continue;
      std::vector<uint32_t> &gates = f.gatesOf[j];
      if (std::find(gates.begin(), gates.end(), it->second) == gates.end())
        gates.push_back(it->second);
      Key key{std::max<int64_t>(plan.jobs[j].stage, 0), j};
      firstReader[it->second] = std::min(firstReader[it->second], key);
    }
  f.order.resize(n);
  for (size_t i = 0; i < n; ++i)
    f.order[i] = i;
  std::stable_sort(f.order.begin(), f.order.end(), [&](size_t a, size_t b) {
    return firstReader[a] < firstReader[b];
  });
  return f;
}
