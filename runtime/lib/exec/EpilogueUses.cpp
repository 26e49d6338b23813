//===- EpilogueUses.cpp - the epilogue inputs summed once per step --------===//
//
// Which of a staged plan's epilogue inputs the trainer may sum over a
// step's passes (and across the ranks) so that the epilogue runs once per
// step (StagedTrainer.h, EpilogueUses): a question about the plan alone,
// asked by train() and by the staged loop.
//
//===----------------------------------------------------------------------===//

#include "StagedTrainer.h"

#include <algorithm>

using namespace rp::runtime;
using namespace rp::runtime::detail;

EpilogueUses
rp::runtime::detail::epilogueUses(const Plan &plan,
                                  const std::vector<Param> &params,
                                  const std::vector<bool> &landsEarly) {
  // Only when every use is an f32 download and the epilogue makes nothing
  // but such parameters' gradients: else the epilogue runs per pass.
  EpilogueUses r;
  if (plan.epilogue < 0)
    return r;
  std::vector<uint32_t> &uses = r.buffers;
  std::vector<bool> made(plan.buffers.size(), false), downloaded = made;
  for (const JobDesc &job : plan.jobs)
    for (const CopyDesc &copy : job.copies)
      downloaded[copy.dst] = true;
  bool linear = true;
  for (const KernelCallDesc &call : plan.programs[plan.epilogue].calls) {
    for (uint32_t b : call.inputs) {
      const BufferDesc &d = plan.buffers[b];
      if (made[b] || std::find(uses.begin(), uses.end(), b) != uses.end())
        continue;
      linear &= d.dtype == DType::f32 && downloaded[b] && !d.weight &&
                d.constant.empty();
      uses.push_back(b);
    }
    for (uint32_t b : call.outputs)
      made[b] = true;
  }
  std::vector<bool> isGrad(plan.buffers.size(), false);
  for (size_t i = 0; i < params.size(); ++i)
    isGrad[params[i].gradOutput] = !landsEarly[i];
  for (const BindingDesc &out : plan.outputs)
    linear &= !made[out.buffer] || isGrad[out.buffer];
  if (!linear) {
    uses.clear();
    return r;
  }
  r.summedPerUse.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    r.summedPerUse[i] = made[params[i].gradOutput] && !landsEarly[i];
  return r;
}
