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

struct HostMemory {
  /// The frozen weights as stored (a quantized weight's blob), and their
  /// compute-dtype copies in mixed precision.
  int64_t base = 0;
  /// The trained parameters: f32 master weights, f32 gradients, AdamW's two
  /// moments, and their compute-dtype copies.
  int64_t trained = 0;
  /// The pinned staging buffers of activations and their gradients.
  int64_t pinned = 0;
  /// Weight bytes uploaded per step (every rp.copy of weights).
  int64_t uploads = 0;
  /// The part of `base` that is frozen weights with LoRA adapters, as
  /// stored and copied (what --quantize-base would quantize), and their
  /// element counts.
  int64_t adapted = 0;
  std::vector<int64_t> adaptedElements;
  /// Each adapted weight's adapters (lora_A and lora_B, as `trained`
  /// counts them), by the weight's name: what --lora-targets would take
  /// out of `trained`.
  llvm::StringMap<int64_t> adapters;
  int64_t total() const { return base + trained + pinned; }
  /// The bytes of the adapted weights stored as `kind`.
  int64_t adaptedQuantized(QuantKind kind) const {
    int64_t bytes = 0;
    for (int64_t n : adaptedElements)
      bytes += quantizedBytes(kind, n);
    return bytes;
  }
};

/// The host memory of a compiled module (a plan's schedule, or a forward
/// plan's layers).
HostMemory hostMemoryOf(ModuleOp module);

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
/// buffers: the budget less the parts no partition changes (the base, the
/// adapters and optimizer state, as rp-compile's summary counts them). 0
/// (unchecked) without a budget, and where those parts alone are over it:
/// no partition fits then, and the stages are cut as without one for the
/// refusal to name (SearchTarget::hostStagedBytes).
int64_t hostStagedBudget(ModuleOp module, double gib);

} // namespace mlir::rp

#endif // RP_ANALYSIS_HOSTMEMORY_H
