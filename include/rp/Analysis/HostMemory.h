//===- HostMemory.h - what a plan holds in host memory ----------*- C++ -*-===//
//
// rp-compile's summary lines for the host side of a plan: its host memory
// by part and the bytes its weight uploads move per step. rp-partition
// reads the parts no partition changes (the base, the adapters and
// optimizer state) to hold the pinned buffers to what a host budget
// leaves of the box (SearchTarget::hostStagedBytes).
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_HOSTMEMORY_H
#define RP_ANALYSIS_HOSTMEMORY_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <vector>

namespace mlir::rp {

/// What a continuous rp-run (or rp.train) holds, part by part, as the
/// runtime allocates it: every host buffer of the plan once (HostForward's
/// slot 0), a second pass in flight's own copy of every buffer a pass
/// writes (not of the frozen weights, which the slots share), and the
/// trainer's f32 state (rp::runtime::trainerHostBytes).
struct HostMemory {
  /// The frozen weights as stored (a quantized weight's blob), and their
  /// compute-dtype copies in mixed precision (one pass's).
  int64_t base = 0;
  /// The part of `base` that is compute-dtype copies, which the prologue
  /// writes into each pass's slot.
  int64_t baseCopies = 0;
  /// One pass's trained parameters: the plan's f32 weights, their
  /// compute-dtype copies, the f32 gradient and its compute-dtype copy.
  int64_t trained = 0;
  /// The trainer's f32 state of the trained parameters: master weights,
  /// the gradient sum and the second sum the optimizer reads while the next
  /// step sums, AdamW's two moments, and the stash of the weights a pass in
  /// flight computes with (24 bytes a parameter).
  int64_t optimizer = 0;
  /// One pass's pinned staging buffers of activations and their gradients.
  int64_t pinned = 0;
  /// Passes in flight (the plan's buffer slots): 2 unless the plan says 1.
  int64_t passes = 1;
  /// The trained parameters as session 23 counted them (stored, copies and
  /// 12 bytes a parameter of gradient and moments, one pass): what the
  /// token-sliced host bound still reads (slicedHostModel; open).
  int64_t trainedOnePass = 0;
  /// Weight bytes uploaded per step (every rp.copy of weights).
  int64_t uploads = 0;
  /// The part of `base` that is frozen weights with LoRA adapters, as
  /// stored and copied (what --quantize-base would quantize), and their
  /// element counts.
  int64_t adapted = 0;
  std::vector<int64_t> adaptedElements;
  /// Each adapted weight's adapters (lora_A and lora_B: their buffers in
  /// every pass and the trainer's state), by the weight's name: what
  /// --lora-targets would take out of the total.
  llvm::StringMap<int64_t> adapters;
  /// The second pass in flight's own buffers: the base's compute-dtype
  /// copies, the trained parameters' buffers and the pinned buffers again.
  int64_t secondPass() const {
    return (passes - 1) * (baseCopies + trained + pinned);
  }
  /// The pinned buffers of every pass in flight.
  int64_t staged() const { return passes * pinned; }
  int64_t total() const {
    return base + trained + optimizer + pinned + secondPass();
  }
  /// What no partition changes: everything but the pinned buffers.
  int64_t fixed() const { return total() - staged(); }
  /// The bytes of the adapted weights stored as `kind`.
  int64_t adaptedQuantized(QuantKind kind) const {
    int64_t bytes = 0;
    for (int64_t n : adaptedElements)
      bytes += quantizedBytes(kind, n);
    return bytes;
  }
};

/// The host memory of a compiled module (a plan's schedule, or a forward
/// plan's layers: `forwardPlan`, whose parameters nothing trains).
HostMemory hostMemoryOf(ModuleOp module, bool forwardPlan = false);

/// A token-sliced plan's host memory as a function of its sequence, for
/// rp-predict-token-slices' longest sequence: the base, adapters and
/// optimizer state, which do not grow with it; every layer's kept keys and
/// values over the whole sequence (the pinned host rows the plan holds
/// between a forward job and its backward, [M x batch, heads, tokens, dim]
/// a layer); and the host rows of the activations and their gradients
/// handed between jobs, linear in the sequence (the exporter writes one
/// per value and sequence).
struct SlicedHostModel {
  int64_t fixed = 0, keptPerToken = 0;
  double rowsPerToken = 0;
  int64_t kept(int64_t seq) const { return keptPerToken * seq; }
  int64_t rows(int64_t seq) const {
    return int64_t(rowsPerToken * double(seq));
  }
  int64_t at(int64_t seq) const { return fixed + kept(seq) + rows(seq); }
};

/// The model of `module` (its weights) whose sliced plan at `seq` tokens
/// downloads `rowBytes` of activations and their gradients a pass.
SlicedHostModel slicedHostModel(ModuleOp module, int64_t keptPerToken,
                                int64_t seq, int64_t rowBytes);

/// True when `v` reaches an rp.moe.route through views, casts and adds:
/// the router's scores. rp-quantize-base keeps such a GEMM's weight as it
/// is, and `adapted` leaves it out, so that what the advice says a
/// quantized base needs is what rp-quantize-base makes.
bool feedsRouter(Value v);

/// What a host budget of `gib` GiB leaves `module`'s pinned staging
/// buffers of one pass: the budget less the parts no partition changes
/// (HostMemory::fixed), shared by the passes in flight, each of which holds
/// its own pinned buffers. 0
/// (unchecked) without a budget, and where those parts alone are over it:
/// no partition fits then, and the stages are cut as without one for the
/// refusal to name (SearchTarget::hostStagedBytes).
int64_t hostStagedBudget(ModuleOp module, double gib);

} // namespace mlir::rp

#endif // RP_ANALYSIS_HOSTMEMORY_H
