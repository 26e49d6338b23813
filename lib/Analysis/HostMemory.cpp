//===- HostMemory.cpp - what a plan holds in host memory ------------------===//
//
// Counted from the IR the plan is exported from: the parameters (frozen or
// trained, as stored), the casts that make their compute-dtype copies, the
// schedule's weight copies and its pinned bytes, as a continuous run
// allocates them (HostForward: the frozen weights once, what a pass writes
// once per pass in flight; the trainer's f32 state beside them). The schedule's
// `pinned_bytes` holds the uploaded weights and the gradients (rp-plan-
// memory: each layer's parameter and gradient bytes) besides the staging
// buffers: those are taken out here, so that no byte is counted twice.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/HostMemory.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::rp;

static int64_t bytesOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  unsigned bits = t.getElementType().getIntOrFloatBitWidth();
  return t.getNumElements() * std::max(1u, bits / 8);
}

// The adds are a LoRA adapter's update (rp-add-lora puts one on the
// router, as PEFT's all-linear does on Qwen3-MoE's mlp.gate) or a routing
// bias; a residual add reaches a norm, never a route.
bool mlir::rp::feedsRouter(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<MoERouteOp>(user))
      return true;
    if (isa<ReshapeOp, CastOp, AddOp>(user) && feedsRouter(user->getResult(0)))
      return true;
  }
  return false;
}

/// A weight (or its compute-dtype cast) some layer multiplies into the
/// router's scores.
static bool isRouterWeight(Value weight) {
  for (OpOperand &use : weight.getUses()) {
    if (auto cast = dyn_cast<CastOp>(use.getOwner())) {
      if (isRouterWeight(cast.getResult()))
        return true;
      continue;
    }
    auto layer = dyn_cast<LayerOp>(use.getOwner());
    if (!layer)
      continue;
    for (Operation *user :
         layer.getBody().getArgument(use.getOperandNumber()).getUsers())
      if (auto mm = dyn_cast<MatmulOp>(user); mm && feedsRouter(mm.getResult()))
        return true;
  }
  return false;
}

HostMemory mlir::rp::hostMemoryOf(ModuleOp module, bool forwardPlan) {
  HostMemory m;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return m;
  llvm::StringSet<> adapted;
  for (auto p : main.getOps<ParamOp>())
    if (p.getTrainable() && p.getName().ends_with(".lora_A"))
      adapted.insert(p.getName().drop_back(StringRef(".lora_A").size()));
  // A training plan runs two passes in flight unless rp-plan-memory chose
  // one (before it has, as rp-partition's host budget reads it: two).
  auto schedules = module.getOps<ScheduleOp>();
  bool training = false;
  for (auto p : main.getOps<ParamOp>())
    training |= p.getTrainable() && !forwardPlan;
  if (!schedules.empty())
    m.passes = (*schedules.begin()).getPassesInFlight().value_or(2);
  else if (auto asked =
               module->getAttrOfType<IntegerAttr>("rp.passes_in_flight");
           training && asked && asked.getInt() > 0)
    m.passes = asked.getInt(); // rp-compile --passes-in-flight N
  else if (training)
    m.passes = 2;
  llvm::StringMap<std::pair<int64_t, int64_t>> perAdapter;
  for (auto p : main.getOps<ParamOp>()) {
    int64_t stored = p.getSizeInBytes(), copies = 0;
    for (Operation *user : p->getUsers())
      if (isa<CastOp>(user))
        copies += bytesOf(user->getResult(0).getType());
    if (p.getTrainable() && training) {
      m.trainedOnePass += stored + copies + 12 * p.getType().getNumElements();
      // Per pass: the weights, their copies, the f32 gradient and its
      // compute-dtype copy (the download's, where the compute differs).
      int64_t elements = p.getType().getNumElements();
      int64_t slot = stored + copies + 4 * elements + copies;
      int64_t state = 24 * elements;
      m.trained += slot;
      m.optimizer += state;
      StringRef name = p.getName();
      if (name.consume_back(".lora_A") || name.consume_back(".lora_B")) {
        perAdapter[name].first += slot;
        perAdapter[name].second += state;
      }
      continue;
    }
    m.base += stored + copies;
    m.baseCopies += copies;
    if (adapted.contains(p.getName()) &&
        isa<FloatType>(p.getType().getElementType()) &&
        !isRouterWeight(p.getResult())) {
      m.adapted += stored + copies;
      m.adaptedElements.push_back(p.getType().getNumElements());
    }
  }
  // The part of pinned_bytes that is weights and gradients, as
  // rp-plan-memory counts it (LayerCost, before autodiff): per forward
  // layer, each parameter it reads (or its cast) once, twice when it
  // trains. Layers that exist only inside the fused tail (a backward
  // program now) count once each parameter no forward layer read.
  int64_t weightsAndGrads = 0;
  llvm::StringSet<> counted;
  auto count = [&](LayerOp layer, llvm::StringSet<> &seen) {
    for (Value operand : layer.getInputs()) {
      ParamOp param = operand.getDefiningOp<ParamOp>();
      if (auto cast = operand.getDefiningOp<CastOp>())
        param = cast.getInput().getDefiningOp<ParamOp>();
      if (!param || !seen.insert(param.getName()).second)
        continue;
      counted.insert(param.getName());
      int64_t bytes = bytesOf(operand.getType());
      weightsAndGrads += param.getTrainable() ? 2 * bytes : bytes;
    }
  };
  for (auto layer : main.getOps<LayerOp>())
    if (layer.getRole() == LayerRole::forward) {
      llvm::StringSet<> seen;
      count(layer, seen);
    }
  llvm::StringSet<> tail = counted;
  for (auto layer : main.getOps<LayerOp>())
    if (layer.getRole() != LayerRole::forward)
      count(layer, tail);
  for (auto s : module.getOps<ScheduleOp>()) {
    if (std::optional<uint64_t> pinned = s.getPinnedBytes())
      m.pinned += std::max<int64_t>(0, int64_t(*pinned) - weightsAndGrads);
    for (auto copy : s.getBody().front().getOps<CopyOp>())
      if (copy.getKind() == CopyKind::weights)
        m.uploads += copy.getBytes();
  }
  for (const auto &entry : perAdapter)
    m.adapters[entry.getKey()] =
        m.passes * entry.getValue().first + entry.getValue().second;
  // A forward plan (no schedule) uploads each layer's weights once.
  if (module.getOps<ScheduleOp>().empty())
    m.uploads = weightsAndGrads;
  return m;
}

int64_t mlir::rp::hostStagedBudget(ModuleOp module, double gib) {
  if (!(gib > 0))
    return 0;
  HostMemory m = hostMemoryOf(module);
  int64_t left = int64_t(gib * double(1ull << 30)) - m.fixed();
  return left > 0 ? left / m.passes : 0;
}

SlicedHostModel mlir::rp::slicedHostModel(ModuleOp module, int64_t keptPerToken,
                                          int64_t seq, int64_t rowBytes) {
  HostMemory held = hostMemoryOf(module);
  SlicedHostModel m;
  // One pass's buffers, as before the passes in flight and the trainer's
  // state were counted (token slices: docs/token-slices.md; open).
  m.fixed = held.base + held.trainedOnePass;
  m.keptPerToken = keptPerToken;
  m.rowsPerToken = seq > 0 ? double(rowBytes) / double(seq) : 0;
  return m;
}
