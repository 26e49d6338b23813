//===- StagedJobs.cpp - stage jobs, layers and buffers of a staged plan ---===//
//
// Reads the rp.schedule's commands, sorts the function's ops into weights,
// prologue, layers and epilogue, binds every layer to the stage job that
// runs it (by its span), and places values in host and device buffers.
//
//===----------------------------------------------------------------------===//

#include "StagedExporter.h"

using namespace mlir;
using namespace mlir::rp;

std::string StagedExporter::label(const Cmd &c) const {
  std::string j = std::to_string(stageOf(c.job)),
              mb = " mb" + std::to_string(c.mb);
  switch (c.kind) {
  case Kind::compute: {
    if (jobs[c.job].sweepOf >= 0)
      return "W" + j + mb; // the tail's forward sweep
    LayerRole r = jobs[c.job].role;
    return (r == LayerRole::forward ? "F"
            : r == LayerRole::tail  ? "T"
                                    : "B") +
           j + mb;
  }
  case Kind::weights:
    return "UP s" + j + " c" + std::to_string(c.chunk);
  case Kind::activationIn:
    if (c.keys)
      return "KV s" + j + mb; // token slices: a kept prefix
    // A layer-grain backward's saved inner-layer inputs: "IN+".
    return (c.boundary > int(jobs[c.job].begin) ? "IN+ s" : "IN s") + j + mb;
  case Kind::gradientIn:
    return "DIN s" + j + mb;
  case Kind::activationOut:
    return "OUT s" + j + mb;
  case Kind::gradientOut:
    return "DOUT s" + j + mb;
  case Kind::weightGrads:
    return "GRAD s" + j;
  case Kind::optimizer:
    return "OPT";
  }
  return "";
}

LogicalResult StagedExporter::readCommands() {
  if (schedule.getFunction() != main.getName())
    return schedule.emitOpError("schedules @")
           << schedule.getFunction() << ", but the plan exports @"
           << main.getName();
  if (schedule.getResident())
    return schedule.emitOpError(
        "keeps weights resident on the devices, but plans run the optimizer "
        "on the host and upload weights every step; run rp-insert-transfers "
        "with weight-budget=0");
  PartitionAttr partition = schedule.getPartition();
  roundRobin = partition.getSchedule() == ScheduleKind::roundRobin;
  devices = partition.getDevices();
  microbatches = partition.getMicrobatches();
  // Token slices: K slices of each of the partition's M sequences run as
  // microbatches m * K + k (rp-lower-schedule).
  if (auto k = schedule->getAttrOfType<IntegerAttr>("rp.token_slices")) {
    if (k.getInt() < 2)
      return schedule.emitOpError("has rp.token_slices ")
             << k.getInt() << "; a sliced schedule has at least 2";
    slices = unsigned(k.getInt());
    sequences = microbatches;
    microbatches *= slices;
  }
  w.microbatches = microbatches;
  tailJobs = partition.getTailJobs();
  llvm::DenseMap<Operation *, unsigned> index;
  bool transfers = false;
  // Token slices: the tail's forward sweep is a forward command of the tail
  // job; it gets a stage job of its own (after the schedule's), so that its
  // inputs, outputs and copies are its own, not the fused command's.
  std::map<int, int> sweepJob;
  if (slices) {
    int last = -1;
    for (auto compute : schedule.getBody().front().getOps<ComputeOp>())
      last = std::max(last, int(compute.getJob()));
    for (auto compute : schedule.getBody().front().getOps<ComputeOp>())
      if (compute.getKind() == LayerRole::tail &&
          !sweepJob.count(compute.getJob()))
        sweepJob[compute.getJob()] = ++last;
  }
  for (Operation &op : schedule.getBody().front()) {
    Cmd c;
    if (auto compute = dyn_cast<ComputeOp>(op)) {
      c.kind = Kind::compute;
      c.job = compute.getJob();
      c.mb = compute.getMb();
      c.device = compute.getDevice();
      c.ms = compute.getMs().convertToDouble();
      if (c.job < 0 || c.mb < 0 || c.mb >= int(microbatches) ||
          c.device >= devices)
        return compute.emitOpError("has a job, microbatch or device out of "
                                   "range");
      int sweepOf = -1;
      if (compute.getKind() == LayerRole::forward && sweepJob.count(c.job)) {
        sweepOf = c.job;
        c.job = sweepJob[c.job];
      }
      if (size_t(c.job) >= jobs.size())
        jobs.resize(c.job + 1);
      StageJob &j = jobs[c.job];
      j.sweepOf = sweepOf;
      j.role = compute.getKind();
      j.begin = compute.getBegin();
      j.end = compute.getEnd();
      j.device = c.device;
      j.weightSet = compute.getWeights();
      if (j.firstMb < 0)
        j.firstMb = c.mb;
      j.lastMb = c.mb;
      if (j.role == LayerRole::tail) {
        tailOfMb.resize(microbatches, -1);
        tailOfMb[c.mb] = c.job;
      }
    } else if (auto copy = dyn_cast<CopyOp>(op)) {
      transfers = true;
      bool up = copy.getDirection() == CopyDirection::h2d;
      switch (copy.getKind()) {
      case CopyKind::weights:
        c.kind = Kind::weights;
        break;
      case CopyKind::activation:
        c.kind = up ? Kind::activationIn : Kind::activationOut;
        break;
      case CopyKind::gradient:
        c.kind = up ? Kind::gradientIn : Kind::gradientOut;
        break;
      case CopyKind::weight_grads:
        c.kind = Kind::weightGrads;
        break;
      }
      c.job = copy.getJob();
      c.mb = copy.getMb() ? int(*copy.getMb()) : -1;
      c.device = copy.getDevice();
      c.chunk = copy.getChunk();
      c.boundary = copy.getBoundary() ? int(*copy.getBoundary()) : -1;
      c.ms = copy.getMs().convertToDouble();
      c.keys = slices && copy->hasAttr("rp.kept_keys");
      if (auto part =
              copy->getAttrOfType<DenseI64ArrayAttr>("rp.kept_slices")) {
        if (!c.keys || part.size() != 2 || part[0] < 0 || part[1] <= part[0] ||
            unsigned(part[1]) > slices)
          return copy.emitOpError("has an rp.kept_slices that is not the "
                                  "[first, end) of a kept-keys upload's "
                                  "slices");
        c.keptFirst = int(part[0]);
        c.keptEnd = int(part[1]);
      }
      if (c.device >= devices || c.job < 0 || c.mb >= int(microbatches))
        return copy.emitOpError("has a job, microbatch or device out of "
                                "range");
    } else if (auto opt = dyn_cast<OptimizerStepOp>(op)) {
      c.kind = Kind::optimizer;
      c.ms = opt.getMs().convertToDouble();
    } else {
      return op.emitOpError("is not a schedule command");
    }
    for (Value t : op.getOperands())
      c.waits.push_back(index.at(t.getDefiningOp()));
    index[&op] = cmds.size();
    cmds.push_back(std::move(c));
  }
  if (!transfers)
    return schedule.emitOpError("has no transfers; run rp-insert-transfers "
                                "before exporting it");
  // A sweep's copies: the uploads its computes wait for and the downloads
  // that wait for them.
  auto sweepOf = [&](int job) {
    return job >= 0 && size_t(job) < jobs.size() ? jobs[job].sweepOf : -1;
  };
  for (Cmd &c : cmds) {
    if (c.kind == Kind::compute && sweepOf(c.job) >= 0)
      for (unsigned x : c.waits) {
        Cmd &u = cmds[x];
        if ((u.kind == Kind::activationIn || u.kind == Kind::gradientIn) &&
            u.job == sweepOf(c.job) && u.mb == c.mb)
          u.job = c.job;
      }
    if (c.kind == Kind::activationOut || c.kind == Kind::gradientOut)
      for (unsigned x : c.waits) {
        const Cmd &from = cmds[x];
        if (from.kind == Kind::compute && sweepOf(from.job) == c.job &&
            from.mb == c.mb)
          c.job = from.job;
      }
  }
  for (const Cmd &c : cmds)
    if (c.kind != Kind::optimizer && size_t(c.job) >= jobs.size())
      return schedule.emitOpError("copies for job ")
             << c.job << ", which has no compute";
  // Weight sets take turns on their device: the parity of the turn says
  // which of the two resident sets a job's weights are.
  std::map<unsigned, unsigned> turns;
  for (const Cmd &c : cmds)
    if (c.kind == Kind::compute) {
      const StageJob &j = jobs[c.job];
      if (setTurn.try_emplace(j.weightSet, turns[j.device]).second)
        ++turns[j.device];
      if (j.role == LayerRole::forward)
        setFirstForward.try_emplace(j.weightSet, c.job);
    } else if (c.kind == Kind::weights) {
      ++upCount[c.job];
    }
  return success();
}

FailureOr<StagedExporter::TopLevel>
StagedExporter::classifyTopLevel(Operation &op) {
  if (isa<ParamOp>(op))
    return TopLevel::param;
  if (auto c = dyn_cast<ConstantOp>(op)) {
    if (failed(w.addConstant(c)))
      return failure();
    weights.insert(c.getResult());
    return TopLevel::taken;
  }
  if (isa<LayerOp, func::ReturnOp>(op))
    return TopLevel::taken;
  if (llvm::all_of(op.getOperands(), [&](Value v) { return isWeight(v); }))
    return TopLevel::prologue;
  return TopLevel::other;
}

LogicalResult StagedExporter::forEachTopLevel(
    func::FuncOp fn,
    llvm::function_ref<LogicalResult(Operation &, TopLevel)> visit) {
  for (Operation &op : fn.getBody().front()) {
    FailureOr<TopLevel> kind = classifyTopLevel(op);
    if (failed(kind))
      return failure();
    if (*kind != TopLevel::taken && failed(visit(op, *kind)))
      return failure();
  }
  return success();
}

LogicalResult StagedExporter::classifyOps() {
  // Values at function level before any layer reads them as weights:
  // parameters, constants and what the prologue computes from them.
  return forEachTopLevel(
      main, [&](Operation &op, TopLevel kind) -> LogicalResult {
        if (kind == TopLevel::param) {
          auto p = cast<ParamOp>(op);
          if (failed(w.addParam(p)))
            return failure();
          weights.insert(p.getResult());
        } else if (kind == TopLevel::prologue) {
          prologue.push_back(&op);
          for (Value r : op.getResults())
            weights.insert(r);
        } else {
          for (Value v : op.getOperands())
            if (!isWeight(v) && !isGradientValue(v) &&
                !llvm::is_contained(epilogue, v.getDefiningOp()))
              return op.emitOpError("runs between layers on activations; a "
                                    "staged plan runs every such op inside a "
                                    "layer (run rp-group-layers)");
          for (Operation *user : op.getUsers())
            if (isa<LayerOp>(user))
              return op.emitOpError("sums gradients that a later layer reads; "
                                    "a staged plan sums activation gradients "
                                    "inside backward layers, as rp-autodiff "
                                    "emits them (run it on the forward graph)");
          epilogue.push_back(&op);
        }
        return success();
      });
}

LogicalResult StagedExporter::bindLayers() {
  for (LayerOp l : main.getOps<LayerOp>()) {
    std::optional<ArrayRef<int64_t>> span = l.getSpan();
    if (!span)
      return l.emitOpError("has no span; export staged plans of graphs that "
                           "rp-autodiff differentiated after rp-partition");
    int found = -1;
    for (auto [i, j] : llvm::enumerate(jobs))
      if (j.sweepOf < 0 && j.role == l.getRole() && (*span)[0] >= j.begin &&
          (*span)[1] <= j.end)
        found = i;
    // A tail run as several jobs (alternate microbatches) runs its layers
    // in each; the first is the layer's job for the maps below.
    if (found >= 0 && l.getRole() == LayerRole::tail) {
      found = -1;
      for (auto [i, j] : llvm::enumerate(jobs))
        if (j.role == LayerRole::tail && (*span)[0] >= j.begin &&
            (*span)[1] <= j.end) {
          if (found < 0)
            found = i;
          else
            j.layers.push_back(l);
        }
    }
    if (found < 0)
      return l.emitOpError("covers layers [")
             << (*span)[0] << ", " << (*span)[1]
             << ") that no stage job of the schedule runs as "
             << stringifyLayerRole(l.getRole())
             << "; partition, schedule and autodiff disagree";
    jobs[found].layers.push_back(l);
    layerJob[l] = found;
    for (Value r : l.getResults())
      producer[r] = found;
  }
  for (auto [i, j] : llvm::enumerate(jobs))
    if (j.role != LayerRole::backward && j.sweepOf < 0 && j.layers.empty())
      return schedule.emitOpError("runs stage job ")
             << i << " (layers " << j.begin << " to " << j.end
             << ") but the graph has no layer for it";
  return success();
}

void StagedExporter::analyzeJobs() {
  for (auto [index, j] : llvm::enumerate(jobs)) {
    for (LayerOp l : j.layers) {
      for (Value v : l.getInputs())
        if (!isWeight(v) && !inJob(index, v.getDefiningOp()))
          j.outside.insert(v);
      for (auto [k, r] : llvm::enumerate(l.getResults())) {
        bool readByLayer = false, elsewhere = false;
        for (Operation *user : r.getUsers())
          if (isa<LayerOp>(user)) {
            readByLayer = true;
            elsewhere |= !inJob(index, user);
          }
        // The tail's first two results are the loss sum and count of a
        // microbatch; every other result no layer reads is a weight
        // gradient.
        bool loss = l.getRole() == LayerRole::tail && k < 2;
        if (loss || elsewhere)
          j.handedOn.insert(r);
        else if (!readByLayer && l.getRole() != LayerRole::forward)
          j.grads.push_back(r);
      }
    }
  }
}

unsigned StagedExporter::producerOf(Value v, unsigned mb) const {
  unsigned p = producer.lookup(v);
  if (jobs[p].role == LayerRole::tail && mb < tailOfMb.size() &&
      tailOfMb[mb] >= 0)
    return unsigned(tailOfMb[mb]);
  return p;
}

StagedExporter::JobBodyBuffers::JobBodyBuffers(StagedExporter &e, LayerOp l,
                                               unsigned job)
    : e(e), l(l), job(job) {
  unsigned runs = 0;
  for (unsigned j = 0; j < e.jobs.size(); ++j)
    runs += e.inJob(j, l);
  active = runs > 1;
  if (!active)
    return;
  llvm::DenseMap<Value, uint32_t> &mine = e.jobBodyBuffers[job];
  l.getBody().walk([&](Operation *op) {
    for (Value r : op->getResults()) {
      e.w.bufferIndex.erase(r);
      if (auto it = mine.find(r); it != mine.end())
        e.w.bufferIndex[r] = it->second;
    }
  });
}

StagedExporter::JobBodyBuffers::~JobBodyBuffers() {
  if (!active)
    return;
  llvm::DenseMap<Value, uint32_t> &mine = e.jobBodyBuffers[job];
  l.getBody().walk([&](Operation *op) {
    for (Value r : op->getResults())
      if (auto it = e.w.bufferIndex.find(r); it != e.w.bufferIndex.end()) {
        mine[r] = it->second;
        e.w.bufferIndex.erase(it);
      }
  });
}

bool StagedExporter::inJob(unsigned job, Operation *op) const {
  return op && llvm::any_of(jobs[job].layers,
                            [&](LayerOp l) { return l.getOperation() == op; });
}

void StagedExporter::bindHostGradients(
    std::vector<fb::Offset<pf::KernelCall>> &sums) {
  // Each value's host buffers in job order (gradHost keeps creation order,
  // which may not be).
  llvm::MapVector<Operation *, std::map<unsigned, uint32_t>> byValue;
  for (auto &[key, h] : gradHost)
    byValue[key.first][key.second] = h;
  for (auto &[key, hosts] : byValue) {
    Value r = Value::getFromOpaquePointer(key);
    if (hosts.size() == 1) {
      w.overrides[r] = hosts.begin()->second;
      continue;
    }
    // The tail as several jobs: each job's fold over its microbatches,
    // added in job order (the even microbatches' fold, then the odd
    // ones'), on every device count alike.
    uint32_t sum = w.newBuffer(r.getType(), "grad", -1);
    bool first = true;
    for (auto &[job, h] : hosts) {
      sums.push_back(w.copyCall(h, sum, !first));
      first = false;
    }
    w.overrides[r] = sum;
  }
}

uint32_t StagedExporter::hostRows(Value v) {
  auto it = hostBuffer.find(v);
  if (it != hostBuffer.end())
    return it->second;
  uint32_t b = w.newBuffer(
      v.getType(), "host:" + std::to_string(hostBuffer.size()), -1, rowsOf(v));
  hostBuffer[v] = b;
  return b;
}

int64_t StagedExporter::rowBytes(Value v, uint32_t buffer) const {
  bool perStep = cast<RankedTensorType>(v.getType()).getRank() == 0 &&
                 isa<BlockArgument>(v);
  return perStep ? 0 : w.bufferBytes[buffer] / rowsOf(v);
}

uint32_t StagedExporter::cached(BufferMap &map, Value v, unsigned key,
                                const std::string &name, unsigned device) {
  auto [it, fresh] = map.try_emplace({valueKey(v), key}, 0);
  if (fresh)
    it->second = w.newBuffer(v.getType(), name, device);
  return it->second;
}

uint32_t StagedExporter::weightBuffer(Value v, unsigned job) {
  unsigned set = jobs[job].weightSet;
  return cached(weightBuffers, canonical(v), set, "w" + std::to_string(set),
                jobs[job].device);
}

uint32_t StagedExporter::inputBuffer(Value v, unsigned job, unsigned mb) {
  return cached(inBuffers, v, slotKey(job, mb), "in s" + std::to_string(job),
                jobs[job].device);
}

uint32_t StagedExporter::outputBuffer(Value v, unsigned job, unsigned mb) {
  return cached(outBuffers, v, slotKey(job, mb), "out s" + std::to_string(job),
                jobs[job].device);
}

std::optional<unsigned> StagedExporter::directSource(unsigned job,
                                                     Value v) const {
  const StageJob &j = jobs[job];
  if (roundRobin || j.role != LayerRole::backward)
    return std::nullopt;
  auto it = setFirstForward.find(j.weightSet);
  if (it == setFirstForward.end() || !jobs[it->second].outside.contains(v))
    return std::nullopt;
  return it->second;
}

unsigned StagedExporter::addJob(const Cmd &c, pf::Queue queue,
                                std::optional<uint32_t> program,
                                ArrayRef<fb::Offset<pf::Copy>> copies,
                                ArrayRef<unsigned> waits,
                                const std::string &text, bool record) {
  std::vector<uint32_t> waitList(waits.begin(), waits.end()), records;
  unsigned event = events;
  if (record)
    records.push_back(events++);
  std::vector<fb::Offset<pf::Copy>> copyList(copies.begin(), copies.end());
  auto waitVector = w.fbb.CreateVector(waitList);
  auto recordVector = w.fbb.CreateVector(records);
  auto copyVector = program ? 0 : w.fbb.CreateVector(copyList);
  auto textString = w.fbb.CreateString(text);
  // The predicted times are filled in place once the plan is written
  // (predictJobTimes), so they must be stored even while zero.
  w.fbb.ForceDefaults(true);
  w.jobs.push_back(pf::CreateJob(
      w.fbb, program.value_or(0), c.device, queue, std::max(c.mb, 0),
      waitVector, recordVector, program ? pf::JobKind::run : pf::JobKind::copy,
      copyVector, stageOf(c.job), textString, 0.0, 0.0));
  w.fbb.ForceDefaults(false);
  return event;
}
