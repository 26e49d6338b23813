//===- LayerCost.cpp - per-layer compute, memory and transfer costs -------===//

#include "rp/Analysis/LayerCost.h"

#include "rp/Analysis/BackwardLiveness.h"

#include "rp/Dialect/RP/RPOps.h"
#include "rp/timing/Hardware.h"
#include "rp/timing/Measured.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::rp;

namespace {

int64_t numel(Value v) {
  auto tensor = dyn_cast<RankedTensorType>(v.getType());
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

/// One kernel: the work it does and the bytes it moves.
struct Kernel {
  int64_t flops = 0;
  int64_t traffic = 0;
  /// Independent GEMMs (a grouped matmul's experts): KernelWork::groups.
  double groups = 1;
  /// The launches the host issues for it as the cuda device makes them
  /// (timing::kernelLaunches: 0 for a view, several for a MoE call).
  unsigned launches = 1;
  /// The plan kernel call it is, as a measured profile's "ops" name it
  /// (timing::measuredOpKey); empty where it is no one call of the plan.
  std::string key;
};

/// The kernels an op launches in forward and, when some operand needs a
/// gradient, in backward.
struct OpKernels {
  std::vector<Kernel> forward;
  std::vector<Kernel> backward;
};

/// The work of `op`'s forward kernel: the plan kernel call it lowers to,
/// by the formula the plan exporter and the sim device use
/// (contract/include/rp/timing/KernelCost.h).
Kernel forwardKernel(Operation *op) {
  auto operand = [](Type t) {
    ::rp::timing::Operand o;
    auto tensor = cast<RankedTensorType>(t);
    o.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    o.elementBytes = (tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8;
    return o;
  };
  std::vector<::rp::timing::Operand> in, out;
  bool known = true;
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && t.hasStaticShape())
      in.push_back(operand(t));
    else
      known = false;
  for (Value v : op->getResults())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && t.hasStaticShape())
      out.push_back(operand(t));
    else
      known = false;
  // Plan kernels are named with '_' where ops nest ("moe.route": moe_route).
  std::string kind = op->getName().stripDialect().str();
  std::replace(kind.begin(), kind.end(), '.', '_');
  int index = ::rp::timing::kernelOpIndex(kind);
  if (!known || index < 0) {
    // No plan kernel of that kind: one FLOP per result element.
    int64_t io = 0;
    for (Value v : op->getOperands())
      io += tensorBytes(v.getType());
    for (Value v : op->getResults())
      io += tensorBytes(v.getType());
    return {op->getNumResults() ? numel(op->getResult(0)) : 0, io};
  }
  // The call's attributes as lib/Target/PlanExport writes them, for the
  // work and the measured key (timing::measuredOpAttrs); `mirrored` where
  // they are all here.
  std::vector<int64_t> ints;
  std::vector<double> floats;
  bool mirrored = true;
  if (auto mm = dyn_cast<MatmulOp>(op))
    ints = {mm.getTransposeA(), mm.getTransposeB()};
  else if (auto attn = dyn_cast<AttentionOp>(op)) {
    ints = {attn.getCausal(), attn.getMask() != nullptr,
            static_cast<int64_t>(attn.getWindow().value_or(0)),
            attn.getSinks() != nullptr};
    floats = {1.0,
              attn.getSoftcap() ? attn.getSoftcap()->convertToDouble() : 0.0};
  } else if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    // As PlanExportGrad writes it: a causal gradient does half the work;
    // sinks add their gradient's kernel.
    ints = {grad.getCausal(), grad.getMask() != nullptr,
            static_cast<int64_t>(grad.getWindow().value_or(0)),
            grad.getSinks() != nullptr};
    floats = {1.0,
              grad.getSoftcap() ? grad.getSoftcap()->convertToDouble() : 0.0};
  } else if (auto combine = dyn_cast<MoECombineGradOp>(op))
    ints = {combine.getWeights() != nullptr}; // as PlanExportMoE writes it
  else if (auto gelu = dyn_cast<GeluOp>(op))
    ints = {static_cast<int64_t>(gelu.getApproximate())};
  else if (auto reduce = dyn_cast<ReduceOp>(op)) {
    ints = {static_cast<int64_t>(reduce.getKind()), reduce.getKeepDims()};
    ints.insert(ints.end(), reduce.getDims().begin(), reduce.getDims().end());
  } else if (auto softmax = dyn_cast<SoftmaxOp>(op))
    ints = {static_cast<int64_t>(softmax.getDim())};
  else if (auto logSoftmax = dyn_cast<LogSoftmaxOp>(op))
    ints = {static_cast<int64_t>(logSoftmax.getDim())};
  else if (auto norm = dyn_cast<LayerNormOp>(op))
    ints = {static_cast<int64_t>(norm.getAxis()), norm.getScale() != nullptr,
            norm.getBias() != nullptr};
  else if (auto norm = dyn_cast<RmsNormOp>(op))
    ints = {static_cast<int64_t>(norm.getAxis()), norm.getScale() != nullptr};
  else
    mirrored = !::rp::timing::measuredOpHasAttrs(uint16_t(index));
  ::rp::timing::KernelWork w =
      ::rp::timing::kernelWork(uint16_t(index), in, out, ints);
  // The call's element type as the plan's calls have it: the first
  // floating-point operand's.
  std::string dtype = "f32";
  for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && isa<FloatType>(t.getElementType())) {
      llvm::raw_string_ostream os(dtype);
      dtype.clear();
      t.getElementType().print(os);
      break;
    }
  std::vector<std::vector<int64_t>> inShapes, outShapes;
  for (const ::rp::timing::Operand &o : in)
    inShapes.push_back(o.shape);
  for (const ::rp::timing::Operand &o : out)
    outShapes.push_back(o.shape);
  // A kind whose key attributes are not mirrored above takes no measured
  // time: a key without them could name another call's.
  return {int64_t(w.flops), int64_t(w.bytes), w.groups, w.launches,
          mirrored
              ? ::rp::timing::measuredOpKey(kind, dtype, inShapes, outShapes,
                                            ::rp::timing::measuredOpAttrs(
                                                uint16_t(index), ints, floats))
              : std::string()};
}

/// rp.linear_cross_entropy as the kernels its chunks run: the head's
/// matmul and the loss forward; the matmul again (the logits are not kept),
/// the loss gradient and one matmul per operand gradient backward.
OpKernels linearLossKernels(LinearCrossEntropyOp op,
                            llvm::function_ref<bool(Value)> needsGrad) {
  auto hidden = op.getHidden().getType();
  auto weight = op.getWeight().getType();
  int64_t rows = numel(op.getLabels()), k = weight.getShape()[1],
          classes = weight.getShape()[0];
  int64_t bytes = (hidden.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  auto operand = [](std::vector<int64_t> shape, int64_t elementBytes) {
    ::rp::timing::Operand o;
    o.shape = std::move(shape);
    o.elementBytes = elementBytes;
    return o;
  };
  auto work = [](const char *kind, const std::vector<::rp::timing::Operand> &in,
                 const std::vector<::rp::timing::Operand> &out,
                 const std::vector<int64_t> &ints) {
    ::rp::timing::KernelWork w = ::rp::timing::kernelWork(
        uint16_t(::rp::timing::kernelOpIndex(kind)), in, out, ints);
    return Kernel{int64_t(w.flops), int64_t(w.bytes), 1, w.launches};
  };
  // The chunk loop's launches (timing::kernelLaunches of the fused call),
  // charged on the loss kernel: its matmuls are one launch each.
  auto fusedLaunches = [&](const char *kind, unsigned matmuls) {
    unsigned n = ::rp::timing::kernelLaunches(
        uint16_t(::rp::timing::kernelOpIndex(kind)),
        {int64_t(op.getIgnoreIndex()), int64_t(op.getChunk())},
        {operand({rows, k}, bytes), operand({classes, k}, bytes)}, {});
    return std::max(1u, n - std::min(n, matmuls));
  };
  auto logits = operand({rows, classes}, bytes);
  auto labels = operand({rows}, 8);
  Kernel head =
      work("matmul", {operand({rows, k}, bytes), operand({classes, k}, bytes)},
           {logits}, {0, 1});
  OpKernels kernels;
  kernels.forward = {head, work("cross_entropy", {logits, labels},
                                {operand({}, 4), operand({}, 8)}, {})};
  kernels.forward[1].launches = fusedLaunches("linear_cross_entropy", 1);
  bool hiddenGrad = needsGrad(op.getHidden()),
       weightGrad = needsGrad(op.getWeight());
  if (!hiddenGrad && !weightGrad)
    return kernels;
  kernels.backward = {head,
                      work("cross_entropy_grad",
                           {logits, labels, operand({}, 4)}, {logits}, {})};
  for (bool grad : {hiddenGrad, weightGrad})
    if (grad)
      kernels.backward.push_back(head);
  kernels.backward[1].launches = fusedLaunches(
      "linear_cross_entropy_grad", unsigned(kernels.backward.size()) - 1);
  return kernels;
}

OpKernels kernelsOf(Operation *op, llvm::function_ref<bool(Value)> needsGrad) {
  OpKernels k;
  if (isa<ReshapeOp, StopGradientOp>(op))
    return k; // a view: no kernel
  if (auto loss = dyn_cast<LinearCrossEntropyOp>(op))
    return linearLossKernels(loss, needsGrad);
  bool anyGrad = llvm::any_of(op->getOperands(), needsGrad);
  Kernel kernel = forwardKernel(op);
  k.forward.push_back(kernel);
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    // Each operand that needs a gradient costs one more matmul of the same
    // size: dA = dC·Bᵀ, dB = Aᵀ·dC.
    // Their shapes are not the forward's: no measured time of its own.
    kernel.key.clear();
    for (Value operand : {mm.getLhs(), mm.getRhs()})
      if (needsGrad(operand))
        k.backward.push_back(kernel);
    return k;
  }
  if (auto gm = dyn_cast<MoEGroupedMatmulOp>(op)) {
    // As a matmul: the rows' gradient and the experts' weight gradient
    // are grouped matmuls of the same size.
    kernel.key.clear();
    for (Value operand : {gm.getInput(), gm.getWeight()})
      if (needsGrad(operand))
        k.backward.push_back(kernel);
    return k;
  }
  if (!anyGrad)
    return k;
  if (isa<AttentionOp>(op)) {
    // Backward recomputes P and forms dV, dP, dQ, dK: five products to the
    // forward's two.
    k.backward.push_back({kernel.flops * 5 / 2, 2 * kernel.traffic});
    return k;
  }
  // The gradient reads the result's gradient and the saved inputs and
  // writes the inputs' gradients: about twice the work and traffic.
  k.backward.push_back({2 * kernel.flops, 2 * kernel.traffic});
  return k;
}

Type computeType(Operation *op) {
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && isa<FloatType>(t.getElementType()))
      return t.getElementType();
  if (op->getNumResults())
    if (auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType()))
      return t.getElementType();
  return Float32Type::get(op->getContext());
}

/// Bytes an op holds while it runs beyond its results: the logits of one
/// chunk for rp.linear_cross_entropy (chunk x classes, never tokens x
/// classes). The layer's work bytes also bound its backward, so this counts
/// what the gradient kernel holds too: with 16-bit weights and more than
/// one chunk, the cuda kernel sums the weight gradient over the chunks in
/// an f32 copy of it (4 bytes per weight element; 1.2 GiB for a
/// 151,936 x 2,048 head), rounded once at the end.
int64_t opScratchBytes(Operation &op) {
  auto loss = dyn_cast<LinearCrossEntropyOp>(op);
  if (!loss)
    return 0;
  auto weight = loss.getWeight().getType();
  int64_t tokens = numel(loss.getLabels());
  int64_t rows = std::min(static_cast<int64_t>(loss.getChunk()), tokens);
  unsigned width = weight.getElementType().getIntOrFloatBitWidth();
  int64_t bytes = rows * weight.getShape()[0] * ((width + 7) / 8);
  if (width < 32 && tokens > rows)
    bytes += 4 * weight.getNumElements();
  return bytes;
}

/// Peak bytes of the body's intermediate values, each live from its op to
/// its last use, plus what an op holds while it runs (opScratchBytes);
/// views are counted like copies, an upper bound.
int64_t peakWorkBytes(Block &body) {
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(body))
    position[&op] = i;
  std::vector<int64_t> freedAt(body.getOperations().size() + 1, 0);
  int64_t live = 0, peak = 0;
  for (auto [i, op] : llvm::enumerate(body)) {
    for (Value result : op.getResults()) {
      unsigned last = i;
      for (Operation *user : result.getUsers())
        last =
            std::max(last, position.lookup(body.findAncestorOpInBlock(*user)));
      live += tensorBytes(result.getType());
      freedAt[last] += tensorBytes(result.getType());
    }
    peak = std::max(peak, live + opScratchBytes(op));
    live -= freedAt[i];
  }
  return peak;
}

/// The plan's program adding one microbatch's gradient of a weight of
/// `type` to its accumulator (StagedExport's accumulateProgram): an add
/// kernel reading both and writing the sum. The first microbatch copies
/// instead, a third fewer bytes; charged as an add, the estimate is high
/// by that on one microbatch in M.
double accumulateMs(Type type, const ::rp::timing::HardwareModel &model,
                    const MeasuredProfile *measured, LayerCost &cost) {
  auto tensor = cast<RankedTensorType>(type);
  ::rp::timing::Operand o;
  o.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  o.elementBytes = (tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  int index = ::rp::timing::kernelOpIndex("add");
  ::rp::timing::KernelWork w =
      ::rp::timing::kernelWork(uint16_t(index), {o, o}, {o}, {});
  cost.accumulateFlops += int64_t(w.flops);
  cost.accumulateTraffic += int64_t(w.bytes);
  std::string dtype;
  llvm::raw_string_ostream os(dtype);
  tensor.getElementType().print(os);
  ::rp::timing::CallOperands call{{o, o}, {o}, dtype};
  if (std::optional<double> ms = ::rp::timing::measuredCallMs(
          measured, uint16_t(index), call, {}, {})) {
    ++cost.measuredOps;
    return *ms;
  }
  return model.kernelMs(uint16_t(index),
                        {double(w.flops), double(w.bytes), 1, w.groups}, dtype);
}

/// A kernel of op kind `op` (a plan op kind name) in element type `dtype`:
/// its measured time where `measured` (may be null) names its call, as the
/// sim and the plan's prediction time that call (timing::timedCallMs),
/// counted in `count`; else the model's.
double kernelMs(const Kernel &kernel, StringRef op, const std::string &dtype,
                const ::rp::timing::HardwareModel &model,
                const MeasuredProfile *measured = nullptr,
                unsigned *count = nullptr) {
  if (measured && !kernel.key.empty()) {
    auto it = measured->ops.find(kernel.key);
    if (it != measured->ops.end()) {
      if (count)
        ++*count;
      return it->second.ms;
    }
  }
  std::string kind = op.str();
  std::replace(kind.begin(), kind.end(), '.', '_');
  int index = ::rp::timing::kernelOpIndex(kind);
  return model.kernelMs(index < 0 ? uint16_t(~0) : uint16_t(index),
                        {double(kernel.flops), double(kernel.traffic),
                         kernel.launches, kernel.groups},
                        dtype);
}

} // namespace

FailureOr<std::vector<LayerCost>>
mlir::rp::analyzeLayerCosts(func::FuncOp func, const HardwareProfile &hw,
                            const MeasuredProfile *measured, bool strict) {
  // Values that need a gradient: trainable parameters and everything
  // computed from one in a float type.
  llvm::DenseSet<Value> needs;
  auto needsGrad = [&](Value v) { return needs.contains(v); };
  auto propagate = [&](Operation *op) {
    if (!llvm::any_of(op->getOperands(), needsGrad))
      return;
    for (Value r : op->getResults())
      if (isa<FloatType>(getElementTypeOrSelf(r.getType())))
        needs.insert(r);
  };

  // The profile is the contract's timing model (rp/timing/Hardware.h): the
  // one the plan exporter and the sim device time kernels with, so that a
  // profile's per op kind efficiencies steer the partitioner too.
  const ::rp::timing::HardwareModel &model = hw;
  std::vector<LayerCost> costs;
  // Per layer, the host's dispatch work beside its kernels: added once the
  // kernels' times are final, measured or not (the sim adds it to both);
  // and its kernel calls, whose issue work (kernel_host_us) runs beside the
  // kernels (HardwareModel::programMs; each device's own here: the
  // estimate does not share interpreters).
  struct HostDispatch {
    double forward = 0, backward = 0;
    size_t forwardCalls = 0, backwardCalls = 0;
  };
  std::vector<HostDispatch> dispatches;
  auto withDispatch = [&]() {
    for (auto [cost, d] : llvm::zip(costs, dispatches)) {
      cost.forwardMs =
          model.programMs(cost.forwardMs, d.forward, d.forwardCalls);
      cost.recomputeMs =
          model.programMs(cost.recomputeMs, d.forward, d.forwardCalls);
      cost.backwardMs =
          model.programMs(cost.backwardMs, d.backward, d.backwardCalls);
    }
    return std::move(costs);
  };
  for (Operation &op : func.getBody().getOps()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (param.getTrainable())
        needs.insert(param.getResult());
      continue;
    }
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer) {
      propagate(&op);
      continue;
    }
    if (layer.getRole() != LayerRole::forward)
      return layer.emitOpError()
             << "has role " << stringifyLayerRole(layer.getRole())
             << "; layer costs are computed on the forward graph, so run "
                "the cost analysis before rp-autodiff";

    LayerCost cost;
    cost.name = layer.getName().str();
    Block &body = layer.getBody().front();
    llvm::StringSet<> params;
    for (auto [operand, arg] :
         llvm::zip(layer.getInputs(), body.getArguments())) {
      if (needs.contains(operand))
        needs.insert(arg);
      int64_t bytes = tensorBytes(operand.getType());
      // Mixed precision feeds layers the compute-type cast of a parameter:
      // it is uploaded and differentiated as the parameter.
      ParamOp param = operand.getDefiningOp<ParamOp>();
      if (auto cast = operand.getDefiningOp<CastOp>())
        param = cast.getInput().getDefiningOp<ParamOp>();
      if (param) {
        if (!params.insert(param.getName()).second)
          continue;
        cost.paramBytes += bytes;
        if (param.getTrainable()) {
          cost.gradBytes += bytes;
          cost.accumulateMs +=
              accumulateMs(operand.getType(), model, measured, cost);
          cost.trainableElements += param.getType().getNumElements();
        }
      } else {
        cost.actInBytes += bytes;
      }
    }
    for (Type t : layer.getResultTypes())
      cost.actOutBytes += tensorBytes(t);

    // Each op's forward time and work, for what a backward's recompute
    // re-runs.
    std::vector<double> opMs;
    std::vector<std::pair<int64_t, int64_t>> opWork;
    HostDispatch &dispatch = dispatches.emplace_back();
    for (Operation &inner : body.without_terminator()) {
      opMs.push_back(0);
      opWork.emplace_back(0, 0);
      if (isa<ConstantOp>(inner))
        continue;
      OpKernels kernels = kernelsOf(&inner, needsGrad);
      propagate(&inner);
      Type type = computeType(&inner);
      FailureOr<double> rate = hw.flopsPerSecond(type);
      if (failed(rate))
        return inner.emitOpError()
               << "computes in " << type << " but hardware profile '" << hw.name
               << "' gives no rate for it; add it to \"tflops\"";
      std::string dtype = "f32";
      if (isa<FloatType>(type)) {
        llvm::raw_string_ostream os(dtype);
        dtype.clear();
        type.print(os);
      }
      // Each kernel is timed as the op kind the plan lowers it to; the
      // backward of an op as its forward's kind, but attention's as the
      // attention_grad kernel it is.
      StringRef name = inner.getName().stripDialect();
      StringRef backwardName =
          isa<AttentionOp>(inner) ? "attention_grad" : name;
      for (const Kernel &k : kernels.forward) {
        cost.forwardFlops += k.flops;
        cost.forwardTraffic += k.traffic;
        double ms =
            kernelMs(k, name, dtype, model, measured, &cost.measuredOps);
        opMs.back() += ms;
        opWork.back().first += k.flops;
        opWork.back().second += k.traffic;
        cost.forwardMs += ms;
        if (isa<AttentionOp>(inner))
          cost.attentionForwardMs += ms;
        ++cost.kernels;
        dispatch.forwardCalls += k.launches;
      }
      for (const Kernel &k : kernels.backward) {
        dispatch.backwardCalls += k.launches;
        cost.backwardFlops += k.flops;
        cost.backwardTraffic += k.traffic;
        cost.backwardMs += kernelMs(k, backwardName, dtype, model);
        if (isa<AttentionOp>(inner))
          cost.attentionBackwardMs += kernelMs(k, backwardName, dtype, model);
      }
      // The host's work per routing (moe_host_us), as the sim charges the
      // plan's moe_route and moe_route_grad calls.
      if (name == "moe.route") {
        dispatch.forward += model.hostDispatchMs(
            uint16_t(::rp::timing::kernelOpIndex("moe_route")));
        if (!kernels.backward.empty())
          dispatch.backward += model.hostDispatchMs(
              uint16_t(::rp::timing::kernelOpIndex("moe_route_grad")));
      }
    }
    Operation *yield = body.getTerminator();
    for (auto [result, value] :
         llvm::zip(layer.getResults(), yield->getOperands()))
      if (needs.contains(value))
        needs.insert(result);
    cost.workBytes = peakWorkBytes(body);
    // Parameters, as rp-autodiff tells them: what no layer computes and
    // the function does not take as an argument.
    auto isWeight = [&](unsigned i) {
      Value in = layer.getInputs()[i];
      return !isa<BlockArgument>(in) && !isa<LayerOp>(in.getDefiningOp());
    };
    // The reverse sweep's ops, each timed as the plan kernel it lowers to:
    // the backward program the plan runs, rather than a rule of thumb per
    // forward op (twice its work and traffic). The fused loss keeps its
    // chunked kernels' count (linearLossKernels).
    bool fusedLoss = !body.getOps<LinearCrossEntropyOp>().empty();
    // The sweep's kernels' work, summed as measureBackward times each of
    // them once: what backwardFlops reports in place of the rule's.
    int64_t sweepFlops = 0, sweepTraffic = 0;
    size_t sweepCalls = 0;
    unsigned sweepMeasured = 0;
    double sweepAttentionMs = 0;
    auto timeOp = [&](Operation &o) {
      Type type = computeType(&o);
      std::string dtype = "f32";
      if (isa<FloatType>(type)) {
        llvm::raw_string_ostream os(dtype);
        dtype.clear();
        type.print(os);
      }
      Kernel k = forwardKernel(&o);
      if (k.launches) {
        sweepFlops += k.flops;
        sweepTraffic += k.traffic;
        sweepCalls += k.launches;
      }
      double ms = kernelMs(k, o.getName().stripDialect(), dtype, model,
                           measured, &sweepMeasured);
      if (isa<AttentionOp, AttentionGradOp>(o))
        sweepAttentionMs += ms;
      return ms;
    };
    cost.recomputeFlops = cost.forwardFlops;
    cost.recomputeTraffic = cost.forwardTraffic;
    if (std::optional<BackwardLiveness> bwd = measureBackward(
            layer, needs, isWeight, opScratchBytes,
            fusedLoss ? llvm::function_ref<double(Operation &)>() : timeOp)) {
      if (bwd->backwardMs >= 0) {
        cost.backwardMs = bwd->backwardMs;
        cost.attentionBackwardMs = sweepAttentionMs;
        cost.backwardFlops = sweepFlops;
        cost.backwardTraffic = sweepTraffic;
        dispatches.back().backwardCalls = sweepCalls;
        cost.measuredOps += sweepMeasured;
      }
      cost.recomputePeakBytes = bwd->forwardPeak;
      cost.keptBytes = bwd->keptBytes;
      cost.keptInputBytes = bwd->keptInputBytes;
      cost.backwardPeakBytes = bwd->backwardPeak;
      cost.resultGradBytes = bwd->resultGradBytes;
      cost.backwardMeasured = true;
      for (auto [ms, work, again] : llvm::zip(opMs, opWork, bwd->recomputed))
        if (!again) {
          cost.recomputeSkippedMs += ms;
          cost.recomputeFlops -= work.first;
          cost.recomputeTraffic -= work.second;
        }
    }
    for (auto constant : body.getOps<ConstantOp>())
      cost.constBytes += tensorBytes(constant->getResult(0).getType());
    cost.recomputeMs = cost.forwardMs;
    cost.uploadMs = cost.paramBytes / (hw.h2dGBps * 1e9) * 1e3;
    cost.downloadMs = cost.gradBytes / (hw.d2hGBps * 1e9) * 1e3;
    costs.push_back(std::move(cost));
  }
  if (costs.empty())
    return func.emitOpError()
           << "has no rp.layer ops; group the graph into layers first "
              "(rp-group-layers)";

  if (!measured)
    return withDispatch();
  if (!measured->hw.empty() && measured->hw != hw.name)
    return func.emitOpError()
           << "measured profile was taken on '" << measured->hw
           << "' but costs are computed for '" << hw.name
           << "'; use the same hardware profile or measure again";
  for (const std::string &name : measured->order) {
    auto it = llvm::find_if(costs,
                            [&](const LayerCost &c) { return c.name == name; });
    if (it == costs.end() && !strict)
      continue;
    if (it == costs.end())
      return func.emitOpError()
             << "measured profile names layer '" << name
             << "', which this graph does not have; was it measured on "
                "another model or with other layer names?";
    // -1: the file gives no such time (a missing recompute_ms is
    // forward_ms already).
    const ::rp::timing::MeasuredLayerTimes &m = measured->layers.at(name);
    if (m.forwardMs >= 0)
      it->forwardMs = m.forwardMs;
    if (m.recomputeMs >= 0)
      it->recomputeMs = m.recomputeMs;
    if (m.backwardMs >= 0)
      it->backwardMs = m.backwardMs;
    it->measured = true;
    // Its own times win over its calls' (docs/sim.md, the row "measured times"
    // of its model table).
    it->measuredOps = 0;
    // The file times the layer's recompute and backward whole; the
    // gradients' accumulation is no layer's program, so the model times it
    // still, as the sim does (measuredProgramMs), unless the file's
    // backward already holds it (a framework's autograd adding into its
    // gradients inside the timed backward, as RoundPipe's does).
    it->recomputeSkippedMs = 0;
    if (measured->backwardIncludesAccumulation && m.backwardMs >= 0)
      it->accumulateMs = 0;
  }
  return withDispatch();
}

int64_t mlir::rp::tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  int64_t width = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * ((width + 7) / 8);
}
