//===- Fences.cpp - per-parameter version fences of a staged plan ---------===//

#include "Fences.h"

#include <algorithm>
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
  std::vector<size_t> firstReader(n, plan.jobs.size());
  for (size_t j = 0; j < plan.jobs.size(); ++j)
    for (const CopyDesc &c : plan.jobs[j].copies) {
      auto it = holds.find(c.src);
      if (it == holds.end())
        continue;
      std::vector<uint32_t> &gates = f.gatesOf[j];
      if (std::find(gates.begin(), gates.end(), it->second) == gates.end())
        gates.push_back(it->second);
      firstReader[it->second] = std::min(firstReader[it->second], j);
    }
  f.order.resize(n);
  for (size_t i = 0; i < n; ++i)
    f.order[i] = i;
  std::stable_sort(f.order.begin(), f.order.end(), [&](size_t a, size_t b) {
    return firstReader[a] < firstReader[b];
  });
  return f;
}
