//===- VerifySchedule.cpp - rp-verify-schedule ----------------------------===//
//
// Checks the rules a schedule must keep before it runs: no deadlock, every
// read after the event of its producer, gradients downloaded before the
// optimizer, and memory.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/MemoryPlan.h"

#include <map>

namespace mlir::rp {
#define GEN_PASS_DEF_VERIFYSCHEDULEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Per layer of `func`, whether it holds an attention, i.e. keeps keys and
/// values for a token-sliced schedule's later slices.
std::vector<bool> layersKeepingKeys(func::FuncOp func) {
  std::vector<bool> keeps;
  for (LayerOp l : func.getOps<LayerOp>())
    keeps.push_back(l.walk([](AttentionOp) {
                       return WalkResult::interrupt();
                     }).wasInterrupted());
  return keeps;
}

struct Checker {
  ScheduleOp op;
  const Pipeline &pl;
  const PipelineInputs &in;
  std::vector<Operation *> ops;
  HappensBefore hb;
  std::map<std::pair<int, int>, unsigned> computeOf;

  Checker(ScheduleOp op, const Pipeline &pl, const PipelineInputs &in)
      : op(op), pl(pl), in(in), hb(pl.schedule) {
    for (Operation &inner : op.getBody().front())
      ops.push_back(&inner);
    for (auto [i, c] : llvm::enumerate(pl.schedule.commands))
      if (isCompute(c.kind))
        computeOf[{c.job, c.microbatch}] = i;
  }
  const std::vector<Command> &cmds() const { return pl.schedule.commands; }

  LogicalResult checkWeights(unsigned i);
  LogicalResult checkInput(unsigned i, bool gradient, unsigned boundary,
                           int producer);
  LogicalResult checkGradients();
  LogicalResult checkKeptKeys();
  LogicalResult checkTailJobs();
  LogicalResult checkMemory();
  LogicalResult run();
};

LogicalResult Checker::checkWeights(unsigned i) {
  if (pl.residentWeights)
    return success();
  unsigned set = pl.jobs[cmds()[i].job].weightSet;
  bool any = false;
  for (auto [u, c] : llvm::enumerate(cmds())) {
    if (c.kind != CommandKind::h2dWeights || pl.jobs[c.job].weightSet != set)
      continue;
    any = true;
    if (!hb(u, i))
      return ops[i]->emitOpError("may run before its weights arrive: the "
                                 "upload of chunk ")
             << c.chunk << " of weight set " << set
             << " does not happen before it; wait for it";
  }
  if (!any)
    return ops[i]->emitOpError("computes with weight set ")
           << set << ", which is never uploaded";
  return success();
}

LogicalResult Checker::checkInput(unsigned i, bool gradient, unsigned boundary,
                                  int producer) {
  const Command &c = cmds()[i];
  const char *what = gradient ? "the gradient" : "the activation";
  std::optional<unsigned> made;
  if (producer >= 0) {
    auto it = computeOf.find({producer, c.microbatch});
    if (it == computeOf.end())
      return ops[i]->emitOpError("reads ")
             << what << " from job " << producer << ", which never runs "
             << "microbatch " << c.microbatch;
    made = it->second;
    const StageJob &p = pl.jobs[producer];
    if (pl.kind != ScheduleKind::roundRobin && !gradient &&
        p.kind == CommandKind::forward &&
        p.weightSet == pl.jobs[c.job].weightSet) {
      if (hb(*made, i))
        return success();
      return ops[i]->emitOpError("reads the input its stage's forward kept "
                                 "before that forward ran");
    }
  }
  CommandKind up =
      gradient ? CommandKind::h2dGradient : CommandKind::h2dActivation;
  CommandKind down =
      gradient ? CommandKind::d2hGradient : CommandKind::d2hActivation;
  for (auto [u, x] : llvm::enumerate(cmds())) {
    if (x.kind != up || x.device != c.device || x.job != c.job ||
        x.microbatch != c.microbatch || x.boundary != int(boundary) ||
        !hb(u, i))
      continue;
    if (!made)
      return success();
    for (auto [d, y] : llvm::enumerate(cmds()))
      if (y.kind == down && y.job == producer && y.microbatch == c.microbatch &&
          y.boundary == int(boundary) && hb(d, u) && hb(*made, d))
        return success();
  }
  InFlightDiagnostic diag = ops[i]->emitOpError("reads ")
                            << what << " entering layer " << boundary
                            << " before it arrives: no upload to device "
                            << c.device << " happens before it";
  if (made)
    diag << " after a download of it from job " << producer;
  return diag;
}

LogicalResult Checker::checkGradients() {
  std::map<unsigned, std::vector<unsigned>> downloads;
  std::vector<unsigned> optimizer;
  for (auto [i, c] : llvm::enumerate(cmds())) {
    if (c.kind == CommandKind::d2hWeightGrads)
      downloads[pl.jobs[c.job].weightSet].push_back(i);
    if (c.kind == CommandKind::optimizer)
      optimizer.push_back(i);
  }
  if (optimizer.size() != 1)
    return op.emitOpError("needs one optimizer step, has ") << optimizer.size();
  for (auto [i, c] : llvm::enumerate(cmds())) {
    if (!isCompute(c.kind))
      continue;
    if (pl.residentWeights) {
      if (!hb(i, optimizer[0]))
        return ops[optimizer[0]]->emitOpError("may update weights while ")
               << c.label << " still computes with them";
      continue;
    }
    if (c.kind == CommandKind::forward)
      continue;
    // A backward of frozen layers (a LoRA model's embedding) has no
    // weight gradients to download.
    const StageJob &job = pl.jobs[c.job];
    int64_t gradBytes = 0;
    for (unsigned l = job.range.begin; l < job.range.end; ++l)
      gradBytes += in.costs[l].gradBytes;
    unsigned set = job.weightSet;
    auto &list = downloads[set];
    if (gradBytes == 0 && list.empty())
      continue;
    if (list.size() != 1)
      return ops[i]->emitOpError("computes gradients of weight set ")
             << set << ", which are downloaded " << list.size()
             << " times instead of once";
    if (!hb(i, list[0]))
      return ops[list[0]]->emitOpError("downloads the gradients of weight set ")
             << set << " before " << c.label << " has added to them";
  }
  for (auto &[set, list] : downloads)
    for (unsigned g : list)
      if (!hb(g, optimizer[0]))
        return ops[optimizer[0]]->emitOpError(
                   "may start before the gradients of weight set ")
               << set
               << " are downloaded; the step's update needs all of "
                  "them";
  return success();
}

/// A token-sliced schedule whose fused tail runs as several jobs: they
/// take alternate slices, so the tail must keep no keys (its next slice
/// would read rows the other job made, which no sweep or upload gives it).
LogicalResult Checker::checkTailJobs() {
  auto attr = op->getAttrOfType<IntegerAttr>(kTokenSlicesAttr);
  if (!attr || attr.getInt() < 2)
    return success();
  unsigned perStep = std::max(1u, pl.jobsPerStep());
  unsigned tails = 0;
  for (unsigned j = 0; j < perStep && j < pl.jobs.size(); ++j)
    tails += pl.jobs[j].kind == CommandKind::tail;
  if (tails < 2)
    return success();
  std::vector<bool> keeps = layersKeepingKeys(in.func);
  for (unsigned j = 0; j < perStep && j < pl.jobs.size(); ++j) {
    const StageJob &job = pl.jobs[j];
    if (job.kind != CommandKind::tail)
      continue;
    for (unsigned l = job.range.begin;
         l < std::min<size_t>(job.range.end, keeps.size()); ++l)
      if (keeps[l])
        return op.emitOpError("runs the fused tail as ")
               << tails << " jobs on alternate token slices, but its layer "
               << l
               << " keeps keys and values for the later slices; a tail of "
                  "several jobs must keep none (the head alone)";
  }
  return success();
}

/// A token-sliced schedule: each compute of slice k > 0 of a job whose
/// layers keep keys reads rows [0, o) of them through an upload to its
/// device that happens before it and after the download of each of those
/// rows from the forward command that made them (a forward job's, or the
/// tail's sweep).
LogicalResult Checker::checkKeptKeys() {
  auto attr = op->getAttrOfType<IntegerAttr>(kTokenSlicesAttr);
  if (!attr || attr.getInt() < 2)
    return success();
  unsigned slices = unsigned(attr.getInt());
  std::vector<bool> keeps = layersKeepingKeys(in.func);
  unsigned perStep = std::max(1u, pl.jobsPerStep());
  // Which forward command makes layer l's keys of a microbatch (a forward
  // job's, or the tail's sweep), and the key copies of each job and
  // microbatch, looked up once: a sliced schedule has thousands.
  std::map<std::tuple<unsigned, int, unsigned>, unsigned> maker;
  std::map<std::pair<int, int>, std::vector<unsigned>> ups, downs;
  for (auto [i, c] : llvm::enumerate(cmds())) {
    if (c.kind == CommandKind::forward && c.microbatch >= 0)
      for (unsigned l = pl.jobs[c.job].range.begin;
           l < pl.jobs[c.job].range.end; ++l)
        maker[{unsigned(c.job) / perStep, c.microbatch, l}] = unsigned(i);
    if (c.kind == CommandKind::h2dKeys)
      ups[{c.job, c.microbatch}].push_back(unsigned(i));
    if (c.kind == CommandKind::d2hKeys)
      downs[{c.job, c.microbatch}].push_back(unsigned(i));
  }
  for (auto [i, c] : llvm::enumerate(cmds())) {
    if (!isCompute(c.kind) || c.microbatch < 0 ||
        unsigned(c.microbatch) % slices == 0)
      continue;
    const StageJob &job = pl.jobs[c.job];
    int first = c.microbatch - int(unsigned(c.microbatch) % slices);
    // The forward commands whose keys the compute reads, with the first
    // layer of each (for the message).
    std::map<std::pair<unsigned, int>, unsigned> makers;
    for (unsigned l = job.range.begin;
         l < std::min<size_t>(job.range.end, keeps.size()); ++l)
      for (int j = first; j < c.microbatch && keeps[l]; ++j) {
        auto m = maker.find({unsigned(c.job) / perStep, j, l});
        makers.try_emplace({m == maker.end() ? ~0u : m->second, j}, l);
      }
    if (makers.empty())
      continue;
    // Every earlier slice's rows of every layer must come up in an upload
    // that carries that slice (all of them, or its [first, end): a
    // forward's prefix comes in two parts) and follows their download;
    // else the first layer and microbatch none brings.
    std::optional<std::pair<unsigned, int>> firstGap;
    bool read = true, anyUpload = false;
    for (auto [made, layer] : makers) {
      auto [m, j] = made;
      bool sent = false;
      for (unsigned u : ups[{c.job, c.microbatch}]) {
        const Command &up = cmds()[u];
        if (up.device != c.device || !hb(u, i))
          continue;
        anyUpload = true;
        if (up.keptFirst >= 0 &&
            (j - first < up.keptFirst || j - first >= up.keptEnd))
          continue;
        if (m != ~0u)
          for (unsigned d : downs[{cmds()[m].job, j}])
            sent = sent || (hb(m, d) && hb(d, u));
        if (sent)
          break;
      }
      if (!sent) {
        read = false;
        firstGap = std::make_pair(layer, j);
        break;
      }
    }
    if (read)
      continue;
    if (!anyUpload)
      firstGap.reset();
    InFlightDiagnostic diag = ops[i]->emitOpError("reads the kept keys and "
                                                  "values of earlier token "
                                                  "slices before they arrive");
    if (firstGap)
      diag << ": its upload comes before the download of layer "
           << firstGap->first << "'s keys of microbatch " << firstGap->second;
    else
      diag << ": no upload of them to device " << c.device
           << " happens before it";
    return diag;
  }
  return success();
}

LogicalResult Checker::checkMemory() {
  bool planned = false;
  MemoryPlan mp = planMemory(pl, in.costs);
  for (auto [i, c] : llvm::enumerate(cmds())) {
    auto compute = dyn_cast<ComputeOp>(ops[i]);
    if (!compute || !compute.getOffsets())
      continue;
    planned = true;
    // The fifth offset is the key and value gradient accumulator's: there
    // exactly when the job sums key gradients over its slices, else the
    // accumulator would lie at 0 unchecked, or an offset place nothing.
    bool accumulates = mp.commandBuffers[i][4] >= 0;
    if (accumulates != (compute.getOffsets()->size() == 5))
      return compute.emitOpError()
             << (accumulates ? "sums the key and value gradients of its "
                               "later token slices but has no offset for "
                               "their accumulator"
                             : "has an offset for a key and value gradient "
                               "accumulator its job does not have");
    for (auto [slot, offset] : llvm::enumerate(*compute.getOffsets()))
      if (int b = mp.commandBuffers[i][slot]; b >= 0)
        mp.buffers[b].offset = offset;
  }
  if (!planned)
    return success();
  std::vector<int64_t> peak(pl.devices, 0);
  for (size_t a = 0; a < mp.buffers.size(); ++a) {
    const PlannedBuffer &x = mp.buffers[a];
    if (x.device >= pl.devices || x.bytes == 0)
      continue;
    peak[x.device] = std::max(peak[x.device], x.offset + x.bytes);
    for (size_t b = a + 1; b < mp.buffers.size(); ++b) {
      const PlannedBuffer &y = mp.buffers[b];
      if (y.device != x.device || y.bytes == 0 ||
          x.offset >= y.offset + y.bytes || y.offset >= x.offset + x.bytes)
        continue;
      if (!disjointInTime(x, y, hb))
        return op.emitOpError("places ")
               << x.what << " and " << y.what << " in overlapping bytes of "
               << "device " << x.device << " while both may be live";
    }
  }
  auto recorded = op.getPeakBytes();
  for (unsigned d = 0; d < pl.devices; ++d) {
    if (recorded && (*recorded)[d] < peak[d])
      return op.emitOpError("records a peak of ")
             << (*recorded)[d] << " bytes on device " << d
             << " but its buffers reach " << peak[d];
    if (auto budget = op.getBudgetBytes(); budget && peak[d] > int64_t(*budget))
      return op.emitOpError("needs ") << peak[d] << " bytes on device " << d
                                      << ", over its budget of " << *budget;
  }
  // The run's copies of the arenas must fit too.
  if (auto passes = op.getPassesInFlight(); passes && recorded)
    if (auto budget = op.getBudgetBytes()) {
      unsigned copies = unsigned(op.getArenaCopies().value_or(*passes));
      if (copies > *passes)
        return op.emitOpError("keeps ")
               << copies << " copies of the arenas for " << *passes
               << " pass(es) in flight; a pass needs one copy at most";
      std::vector<int64_t> run =
          runPeakBytes(*recorded, copies,
                       renamesDevices(pl.shiftPerPass(), unsigned(*passes)));
      for (auto [d, bytes] : llvm::enumerate(run))
        if (bytes > int64_t(*budget))
          return op.emitOpError("keeps ")
                 << copies << " copies of the arenas (" << *passes
                 << " passes in flight), " << bytes << " bytes on device " << d
                 << ", over its budget of " << *budget;
    }
  return success();
}

LogicalResult Checker::run() {
  std::string stuck;
  if (!estimateTiming(pl.schedule, &stuck))
    return op.emitOpError("deadlocks: '")
           << stuck << "' waits, directly or through its queue, on itself";
  if (failed(checkTailJobs()))
    return failure();
  unsigned nf = 0;
  while (nf < pl.jobs.size() && pl.jobs[nf].kind == CommandKind::forward)
    ++nf;
  // The fused tail may run as several jobs taking alternate microbatches
  // (tail_jobs): each reads the last forward's output, and the first
  // backward reads the gradient of the tail job that ran its microbatch.
  unsigned tails = 0;
  while (nf + tails < pl.jobs.size() &&
         pl.jobs[nf + tails].kind == CommandKind::tail)
    ++tails;
  auto producerOf = [&](const Command &c) -> int {
    if (tails > 1 && unsigned(c.job) >= nf && unsigned(c.job) < nf + tails)
      return int(nf) - 1;
    if (tails > 1 && unsigned(c.job) == nf + tails)
      for (unsigned t = nf; t < nf + tails; ++t)
        if (computeOf.count({int(t), c.microbatch}))
          return int(t);
    return c.job - 1;
  };
  for (auto [i, c] : llvm::enumerate(cmds())) {
    if (!isCompute(c.kind))
      continue;
    if (failed(checkWeights(i)))
      return failure();
    const StageJob &job = pl.jobs[c.job];
    if (c.kind == CommandKind::backward) {
      if (failed(checkInput(i, true, job.range.end, producerOf(c))))
        return failure();
      // The saved input: kept by the stage's forward in static schedules,
      // else made by the forward job that computed it (or the host's).
      int maker = -1;
      for (unsigned f = 0; f < nf; ++f)
        if (pl.kind != ScheduleKind::roundRobin
                ? pl.jobs[f].weightSet == job.weightSet
                : pl.jobs[f].range.begin < job.range.begin &&
                      job.range.begin <= pl.jobs[f].range.end)
          maker = f;
      if (failed(checkInput(i, false, job.range.begin, maker)))
        return failure();
    } else if (failed(checkInput(i, false, job.range.begin, producerOf(c)))) {
      return failure();
    }
  }
  if (failed(checkGradients()) || failed(checkKeptKeys()))
    return failure();
  return checkMemory();
}

struct VerifySchedulePass
    : SchedulePass<mlir::rp::impl::VerifySchedulePassBase<VerifySchedulePass>> {
  void runOnOperation() override {
    FailureOr<LoadedSchedule> loaded = loadOrFail(/*keepCosts=*/false);
    if (failed(loaded))
      return;
    Checker checker(loaded->op, loaded->pipeline, loaded->in);
    if (failed(checker.run()))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
