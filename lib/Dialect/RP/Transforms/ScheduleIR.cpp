//===- ScheduleIR.cpp - the pipeline model read from and written to IR ----===//

#include "ScheduleIR.h"
#include "SliceTokens.h"
#include "rp/Analysis/TokenSlices.h"

#include "mlir/IR/Builders.h"

#include <map>
#include <numeric>

using namespace mlir;
using namespace mlir::rp;

FailureOr<func::FuncOp> mlir::rp::layeredFunction(ModuleOp module) {
  func::FuncOp found;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.getOps<LayerOp>().empty() ||
        func->hasAttr(kTokenSliceAttr))
      continue;
    if (found)
      return module.emitError("the pipeline passes take one function with "
                              "layers; found @")
             << found.getSymName() << " and @" << func.getSymName();
    found = func;
  }
  if (!found)
    return module.emitError("no function with rp.layer ops; run "
                            "rp-group-layers first");
  return found;
}

FailureOr<PipelineInputs> mlir::rp::loadPipelineInputs(ModuleOp module,
                                                       CostModel &model,
                                                       StringRef measured) {
  FailureOr<func::FuncOp> func = layeredFunction(module);
  if (failed(func))
    return failure();
  PipelineInputs in;
  in.func = *func;
  in.attr = (*func)->getAttrOfType<PartitionAttr>("rp.partition");
  if (!in.attr)
    return func->emitError("has no rp.partition attribute; run "
                           "rp-partition first");
  // Two tail jobs take alternate microbatches, or with one microbatch
  // alternate token slices (the attribute's verifier cannot tell).
  if (in.attr.getTailJobs() == 2 && in.attr.getMicrobatches() < 2 &&
      !module->hasAttr(kTokenSliceSizesAttr) &&
      llvm::none_of(module.getOps<func::FuncOp>(),
                    [](func::FuncOp f) { return f->hasAttr(kTokenSliceAttr); }))
    return func->emitError("rp.partition has tail_jobs = 2 with one "
                           "microbatch and no token slices: two tail jobs "
                           "take alternate microbatches or token slices; "
                           "give microbatches >= 2, --token-slices, or "
                           "tail_jobs = 1");
  std::string measuredPath = measured.str();
  if (measuredPath.empty())
    if (auto recorded = module.getContext()
                            ->getLoadedDialect<RPDialect>()
                            ->getMeasuredAttrHelper()
                            .getAttr(*func))
      measuredPath = recorded.str();
  FailureOr<const CostInputs *> cost = model.inputs(
      in.attr.getHw().getProfile(), measuredPath, module.getContext());
  if (failed(cost))
    return failure();
  in.hw = (*cost)->hw;
  FailureOr<const std::vector<LayerCost> *> costs =
      model.layerCosts(*func, in.attr.getHw().getProfile(), measuredPath);
  if (failed(costs))
    return failure();
  in.costs = **costs;
  // The attribute's verifier checked the sizes against each other; what is
  // left is that they cover this function's layers.
  ArrayRef<int64_t> fwd = in.attr.getForward(), bwd = in.attr.getBackward();
  int64_t covered = 0;
  for (int64_t n : bwd)
    covered += n;
  if (covered != int64_t(in.costs.size()))
    return func->emitError("rp.partition covers ")
           << covered << " layers but the function has " << in.costs.size()
           << "; run rp-partition on this graph again";
  in.partition = partitionFromSizes(
      SmallVector<unsigned>(fwd.begin(), fwd.end()), unsigned(bwd.front()),
      SmallVector<unsigned>(bwd.begin() + 1, bwd.end()), in.costs.size());
  // Per backward stage its grain; `auto` not yet chosen recomputes a stage
  // at once (rp-choose-recompute resolves it before the schedule).
  in.partition.layerGrain =
      !in.attr.isMixed() && in.attr.getRecompute() == RecomputeGrain::layer;
  for (unsigned b = 0; b < in.partition.backward.size(); ++b)
    in.partition.stageLayerGrain.push_back(in.attr.getGrain(b) ==
                                           RecomputeGrain::layer);
  in.partition.tailJobs = in.attr.getTailJobs();
  return in;
}

FailureOr<ScheduleOp> mlir::rp::theSchedule(ModuleOp module) {
  auto ops = module.getOps<ScheduleOp>();
  if (ops.empty())
    return module.emitError("no rp.schedule; run rp-lower-schedule first");
  if (std::next(ops.begin()) != ops.end())
    return module.emitError("more than one rp.schedule");
  return *ops.begin();
}

static CommandKind commandKind(CopyOp op) {
  bool up = op.getDirection() == CopyDirection::h2d;
  switch (op.getKind()) {
  case CopyKind::weights:
    return CommandKind::h2dWeights;
  case CopyKind::activation:
    return up ? CommandKind::h2dActivation : CommandKind::d2hActivation;
  case CopyKind::gradient:
    return up ? CommandKind::h2dGradient : CommandKind::d2hGradient;
  case CopyKind::weight_grads:
    return CommandKind::d2hWeightGrads;
  }
  return CommandKind::h2dWeights;
}

static CommandKind commandKind(LayerRole role) {
  return role == LayerRole::forward ? CommandKind::forward
         : role == LayerRole::tail  ? CommandKind::tail
                                    : CommandKind::backward;
}

FailureOr<Pipeline> mlir::rp::readSchedule(ScheduleOp op) {
  // Kind, devices and microbatches are the function's partition's, the one
  // record of them.
  PartitionAttr partition = op.getPartition();
  if (!partition)
    return op.emitOpError("schedules @")
           << op.getFunction() << ", which has no rp.partition";
  bool sliced = op->hasAttr(kTokenSlicesAttr);
  Pipeline pl;
  pl.kind = partition.getSchedule();
  pl.devices = partition.getDevices();
  pl.microbatches = partition.getMicrobatches();
  pl.residentWeights = op.getResident();
  if (std::optional<uint64_t> shift = op.getPassShift())
    pl.passShift = int(*shift);
  pl.schedule.devices = pl.devices;
  llvm::DenseMap<Operation *, unsigned> index;
  std::vector<bool> seen;
  for (Operation &inner : op.getBody().front()) {
    Command c;
    OperandRange after = inner.getOperands();
    if (auto compute = dyn_cast<ComputeOp>(inner)) {
      c.kind = commandKind(compute.getKind());
      c.job = compute.getJob();
      c.microbatch = compute.getMb();
      c.device = compute.getDevice();
      c.ms = compute.getMs().convertToDouble();
      c.bytes = compute.getWorkBytes();
      StageJob job{c.kind,
                   {unsigned(compute.getBegin()), unsigned(compute.getEnd())},
                   c.device,
                   unsigned(compute.getWeights())};
      if (c.job < 0)
        return compute.emitOpError("has a negative job");
      if (size_t(c.job) >= pl.jobs.size()) {
        pl.jobs.resize(c.job + 1);
        seen.resize(c.job + 1, false);
      }
      StageJob &known = pl.jobs[c.job];
      // A sliced schedule's tail job also runs forward commands, its
      // forward sweep: the job is the tail.
      bool sweep =
          sliced && seen[c.job] &&
          (known.kind == CommandKind::tail || job.kind == CommandKind::tail) &&
          (known.kind == CommandKind::forward ||
           job.kind == CommandKind::forward);
      if (seen[c.job] &&
          ((known.kind != job.kind && !sweep) || !(known.range == job.range) ||
           known.device != job.device || known.weightSet != job.weightSet))
        return compute.emitOpError("disagrees with an earlier command of job ")
               << c.job << " on its kind, layers, device or weights";
      if (sweep)
        job.kind = CommandKind::tail;
      known = job;
      seen[c.job] = true;
    } else if (auto copy = dyn_cast<CopyOp>(inner)) {
      c.kind = commandKind(copy);
      if (copy->hasAttr(kKeptKeysAttr)) {
        if (copy.getKind() != CopyKind::activation)
          return copy.emitOpError("carries kept keys but is no activation "
                                  "copy");
        c.kind = copy.getDirection() == CopyDirection::h2d
                     ? CommandKind::h2dKeys
                     : CommandKind::d2hKeys;
        if (auto part =
                copy->getAttrOfType<DenseI64ArrayAttr>(kKeptSlicesAttr)) {
          if (part.size() != 2 || part[0] < 0 || part[1] <= part[0] ||
              c.kind != CommandKind::h2dKeys)
            return copy.emitOpError("has an ")
                   << kKeptSlicesAttr
                   << " that is not the [first, end) of some earlier slices "
                      "on an upload";
          c.keptFirst = int(part[0]);
          c.keptEnd = int(part[1]);
        }
      }
      c.job = copy.getJob();
      c.microbatch = copy.getMb() ? int(*copy.getMb()) : -1;
      c.device = copy.getDevice();
      c.ms = copy.getMs().convertToDouble();
      c.bytes = copy.getBytes();
      c.chunk = copy.getChunk();
      c.boundary = copy.getBoundary() ? int(*copy.getBoundary()) : -1;
    } else if (auto opt = dyn_cast<OptimizerStepOp>(inner)) {
      c.kind = CommandKind::optimizer;
      c.ms = opt.getMs().convertToDouble();
    } else {
      return inner.emitOpError("is not a schedule command");
    }
    c.queue = queueOf(c.kind);
    for (Value v : after)
      c.waits.push_back(index.at(v.getDefiningOp()));
    index[&inner] = pl.schedule.add(std::move(c));
  }
  for (auto [j, s] : llvm::enumerate(seen))
    if (!s)
      return op.emitOpError("has no compute for job ") << j;
  for (Command &c : pl.schedule.commands) {
    if (c.job >= int(pl.jobs.size()))
      return op.emitOpError("has a copy for job ")
             << c.job << ", which computes nothing";
    std::string tag = std::to_string(c.job) +
                      (c.microbatch >= 0 ? " mb" + std::to_string(c.microbatch)
                                         : std::string());
    switch (c.kind) {
    case CommandKind::forward:
      c.label = "F" + tag;
      break;
    case CommandKind::tail:
      c.label = "T" + tag;
      break;
    case CommandKind::backward:
      c.label = "B" + tag;
      break;
    case CommandKind::h2dWeights:
      c.label = "UP s" + tag + " c" + std::to_string(c.chunk);
      break;
    case CommandKind::h2dActivation:
      c.label = "IN s" + tag;
      break;
    case CommandKind::h2dGradient:
      c.label = "DIN s" + tag;
      break;
    case CommandKind::d2hActivation:
      c.label = "OUT s" + tag;
      break;
    case CommandKind::d2hGradient:
      c.label = "DOUT s" + tag;
      break;
    case CommandKind::d2hWeightGrads:
      c.label = "GRAD s" + tag;
      break;
    case CommandKind::optimizer:
      c.label = "OPT";
      break;
    case CommandKind::h2dKeys:
      c.label = "KV s" + tag;
      break;
    case CommandKind::d2hKeys:
      c.label = "KV OUT s" + tag;
      break;
    }
  }
  return pl;
}

FailureOr<LoadedSchedule> mlir::rp::loadSchedule(ModuleOp module,
                                                 CostModel &model) {
  FailureOr<PipelineInputs> in = loadPipelineInputs(module, model);
  if (failed(in))
    return failure();
  FailureOr<ScheduleOp> op = theSchedule(module);
  if (failed(op))
    return failure();
  FailureOr<Pipeline> pl = readSchedule(*op);
  if (failed(pl))
    return failure();
  pl->schedule.gpusPerLink = in->hw.gpusPerLink;
  pl->schedule.host = in->hw.hostModel();
  pl->schedule.jobMs = in->hw.jobUs * 1e-3;
  // The grain is the partition's backward stage's: the schedule's commands
  // do not carry it. (A tail pair's backward half is no partition stage.)
  for (StageJob &j : pl->jobs) {
    j.layerGrain = false;
    if (j.kind == CommandKind::backward)
      for (auto [b, s] : llvm::enumerate(in->partition.backward))
        if (s == j.range)
          j.layerGrain = in->partition.layerGrainAt(unsigned(b));
  }
  return LoadedSchedule{std::move(*in), *op, std::move(*pl)};
}

void mlir::rp::writeSchedule(ScheduleOp op, const Pipeline &pl) {
  Block &body = op.getBody().front();
  while (!body.empty())
    body.back().erase();
  op.setResident(pl.residentWeights);
  if (pl.kind == ScheduleKind::roundRobin && pl.passShift >= 0)
    op.setPassShift(uint64_t(pl.passShift));
  else
    op.removePassShiftAttr();
  OpBuilder b = OpBuilder::atBlockEnd(&body);
  Location loc = op.getLoc();
  std::vector<Value> tokens;
  for (const Command &c : pl.schedule.commands) {
    SmallVector<Value> after;
    for (unsigned w : c.waits)
      after.push_back(tokens[w]);
    llvm::APFloat ms(c.ms);
    Value token;
    if (isCompute(c.kind)) {
      const StageJob &job = pl.jobs[c.job];
      LayerRole role = c.kind == CommandKind::forward ? LayerRole::forward
                       : c.kind == CommandKind::tail  ? LayerRole::tail
                                                      : LayerRole::backward;
      token = ComputeOp::create(
          b, loc, role, c.job, job.range.begin, job.range.end, c.microbatch,
          c.device, job.weightSet, after, ms, c.bytes, DenseI64ArrayAttr());
    } else if (c.kind == CommandKind::optimizer) {
      token = OptimizerStepOp::create(b, loc, after, b.getF64FloatAttr(c.ms));
    } else {
      bool up = c.queue != Queue::d2h;
      bool keys =
          c.kind == CommandKind::h2dKeys || c.kind == CommandKind::d2hKeys;
      CopyKind kind = c.kind == CommandKind::h2dWeights ? CopyKind::weights
                      : c.kind == CommandKind::d2hWeightGrads
                          ? CopyKind::weight_grads
                      : keys || c.kind == CommandKind::h2dActivation ||
                              c.kind == CommandKind::d2hActivation
                          ? CopyKind::activation
                          : CopyKind::gradient;
      bool perMicrobatch =
          kind == CopyKind::activation || kind == CopyKind::gradient;
      token = CopyOp::create(
          b, loc,
          CopyDirectionAttr::get(b.getContext(),
                                 up ? CopyDirection::h2d : CopyDirection::d2h),
          CopyKindAttr::get(b.getContext(), kind), b.getI64IntegerAttr(c.job),
          perMicrobatch ? b.getI64IntegerAttr(c.microbatch) : IntegerAttr(),
          b.getI64IntegerAttr(c.device), b.getI64IntegerAttr(c.bytes),
          perMicrobatch ? b.getI64IntegerAttr(c.boundary) : IntegerAttr(),
          after, b.getF64FloatAttr(c.ms), b.getI64IntegerAttr(c.chunk));
      if (keys)
        token.getDefiningOp()->setAttr(kKeptKeysAttr, b.getUnitAttr());
      if (keys && c.keptFirst >= 0)
        token.getDefiningOp()->setAttr(
            kKeptSlicesAttr, b.getDenseI64ArrayAttr({c.keptFirst, c.keptEnd}));
    }
    tokens.push_back(token);
  }
}

LogicalResult mlir::rp::readTokenSlices(ModuleOp module, func::FuncOp func,
                                        unsigned slices,
                                        std::vector<int64_t> &sizes,
                                        std::vector<int64_t> &keyValueBytes) {
  sizes.assign(slices, 0);
  func::FuncOp second;
  for (auto f : module.getOps<func::FuncOp>()) {
    auto slice = f->getAttrOfType<DictionaryAttr>(kTokenSliceAttr);
    if (!slice)
      continue;
    auto index = slice.getAs<IntegerAttr>("index");
    auto size = slice.getAs<IntegerAttr>("size");
    if (!index || !size || index.getInt() < 0 ||
        uint64_t(index.getInt()) >= slices || size.getInt() <= 0)
      return f.emitError("rp.token_slice does not name one of the ")
             << slices << " slices the schedule runs";
    sizes[index.getInt()] = size.getInt();
    if (index.getInt() == 1)
      second = f;
  }
  if (llvm::is_contained(sizes, 0))
    return module.emitError("the schedule runs ")
           << slices << " token slices, but the module lacks a slice function";
  std::map<std::string, unsigned> layerIndex;
  for (LayerOp l : func.getOps<LayerOp>())
    if (l.getRole() == LayerRole::forward)
      layerIndex.emplace(l.getName().str(), unsigned(layerIndex.size()));
  keyValueBytes.assign(layerIndex.size(), 0);
  if (!second)
    return success();
  for (BlockArgument a : second.getArguments()) {
    auto name =
        second.getArgAttrOfType<StringAttr>(a.getArgNumber(), "rp.name");
    if (!name)
      continue;
    StringRef layer = name.getValue();
    if (!layer.consume_front("keys:") && !layer.consume_front("values:"))
      continue;
    auto at = layerIndex.find(layer.str());
    if (at == layerIndex.end())
      return second.emitError("kept keys or values '")
             << name.getValue() << "' name no layer of @" << func.getSymName();
    keyValueBytes[at->second] += tensorBytes(a.getType()) / sizes[0];
  }
  return success();
}

FailureOr<Pipeline> mlir::rp::lowerModuleSchedule(ModuleOp module,
                                                  const PipelineInputs &in,
                                                  CostModel &model,
                                                  unsigned &slices,
                                                  std::string &error) {
  PartitionAttr attr = in.attr;
  // Token slices (rp-slice-tokens) run as microbatches, K per sequence,
  // the tail and backward jobs last slice first.
  slices = 0;
  for (auto f : module.getOps<func::FuncOp>())
    slices += f->hasAttr(kTokenSliceAttr);
  // Per slice, its function's layer costs (the profile and measured
  // times @main's).
  std::vector<std::vector<LayerCost>> sliceCosts(slices);
  std::vector<int64_t> sizes(slices, 0);
  func::FuncOp func = in.func;
  StringRef measured;
  if (auto recorded = module.getContext()
                          ->getLoadedDialect<RPDialect>()
                          ->getMeasuredAttrHelper()
                          .getAttr(func))
    measured = recorded.getValue();
  for (auto f : module.getOps<func::FuncOp>()) {
    auto slice = f->getAttrOfType<DictionaryAttr>(kTokenSliceAttr);
    auto index = slice ? slice.getAs<IntegerAttr>("index") : IntegerAttr();
    if (!index || index.getInt() < 0 || index.getInt() >= int64_t(slices))
      continue;
    FailureOr<const std::vector<LayerCost> *> costs =
        model.layerCosts(f, attr.getHw().getProfile(), measured);
    if (failed(costs))
      return failure();
    if ((*costs)->size() != in.costs.size()) {
      f.emitError("has ") << (*costs)->size() << " layers, @"
                          << func.getSymName() << " " << in.costs.size();
      return failure();
    }
    sliceCosts[index.getInt()] = **costs;
    if (auto size = slice.getAs<IntegerAttr>("size"))
      sizes[index.getInt()] = size.getInt();
  }
  SlicePairCosts kept;
  if (slices > 1)
    kept.kept = keptTensors(func);
  auto timeSlices = [&](Pipeline &pl) {
    for (Command &c : pl.schedule.commands) {
      if (!isCompute(c.kind) || c.microbatch < 0)
        continue;
      const std::vector<LayerCost> &layers =
          sliceCosts[unsigned(c.microbatch) % slices];
      const StageJob &job = pl.jobs[c.job];
      // The slice functions' layers hold the prefix's concat; the
      // key-gradient accumulator's kernels are the exporter's.
      c.ms = sliceComputeMs(job, layers) +
             sliceKernelsMs(job, /*forwardOnly=*/false, kept, sizes,
                            unsigned(c.microbatch) % slices, in.hw,
                            /*layersHoldPrefix=*/true);
      c.bytes = jobWorkBytes(job.kind, job.range, layers, job.layerGrain,
                             /*savedAsInputs=*/true);
    }
  };
  // The layers that keep keys and values across slices: those with an
  // attention (rp-slice-tokens' rule).
  SmallVector<bool> keepsKeys;
  for (LayerOp l : func.getOps<LayerOp>())
    keepsKeys.push_back(l.walk([](AttentionOp) {
                           return WalkResult::interrupt();
                         }).wasInterrupted());
  FailureOr<Pipeline> pl =
      slices ? lowerSlicedSchedule(in.partition, in.costs, attr.getSchedule(),
                                   attr.getDevices(), attr.getMicrobatches(),
                                   slices, /*tailSweep=*/true, error,
                                   timeSlices, keepsKeys)
             : lowerSchedule(in.partition, in.costs, attr.getSchedule(),
                             attr.getDevices(), attr.getMicrobatches(), error);
  if (failed(pl))
    return failure();
  // The kept keys' copies travel with the pipeline, so that every
  // insertTransfers of it (the steady state's, the memory plan's timing)
  // adds them, as predictSlicedPlan's does.
  if (slices > 1 &&
      failed(readTokenSlices(module, func, slices, pl->keptKeySlices,
                             pl->keptKeyBytes)))
    return failure();
  // @main's costs are the whole sequence's: activation copies are sized
  // by their slice.
  pl->sliceCostTokens = std::accumulate(pl->keptKeySlices.begin(),
                                        pl->keptKeySlices.end(), int64_t(0));
  // The tail's forward sweep (added after the timing) runs its slice's
  // forward.
  for (Command &c : pl->schedule.commands)
    if (slices && c.kind == CommandKind::forward &&
        pl->jobs[c.job].kind == CommandKind::tail) {
      const StageJob &job = pl->jobs[c.job];
      c.ms = 0;
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        c.ms += sliceCosts[unsigned(c.microbatch) % slices][l].forwardMs;
    }
  return pl;
}
