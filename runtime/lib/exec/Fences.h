//===- Fences.h - per-parameter version fences of a staged plan -*- C++ -*-===//
//
// Which jobs of a step read which parameter's weights: the uploads that copy
// a parameter's host buffer, or the compute-dtype copy the prologue makes of
// it. In sync mode the trainer gates those jobs on the parameter's update
// (Pipeline.h, host gates), so a step starts as soon as the weights it
// needs first are new (reference/roundpipe.md §2.6, the version fences).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXEC_FENCES_H
#define RP_RUNTIME_EXEC_FENCES_H

#include "rp/runtime/Plan.h"

#include <optional>
#include <vector>

namespace rp::runtime {

struct ParamFences {
  /// Per plan job: the parameters (indices into the trainer's list) whose
  /// weights it reads.
  std::vector<std::vector<uint32_t>> gatesOf;
  /// Per parameter: the prologue calls that read it, in program order.
  std::vector<std::vector<size_t>> prologueCalls;
  /// The parameters, those the step reads first first.
  std::vector<size_t> order;
};

/// The fences of `plan` for the parameters in `paramBuffers` (plan buffer
/// indices); none when a prologue call reads several parameters or one
/// that is not in the list, since then no call can follow a single update.
std::optional<ParamFences>
planParamFences(const Plan &plan, const std::vector<uint32_t> &paramBuffers);

} // namespace rp::runtime

#endif // RP_RUNTIME_EXEC_FENCES_H
