//===- StagedExport.cpp - a pipeline schedule into a staged plan ----------===//
//
// Turns the training graph (rp-autodiff after rp-partition: every layer has
// a `span`) and its `rp.schedule` (after rp-insert-transfers) into a staged
// plan: each schedule command becomes jobs on its device's queue that wait
// for and record the events of the schedule's tokens.
//
// Where values live:
// - host: the parameters, the global-batch inputs, the prologue's results
//   (compute-dtype weights), one buffer per microbatch-sized value that
//   crosses stages (rows for all M microbatches), one per weight gradient,
//   and the epilogue's results;
// - device: per weight set its weights; per stage job and slot its inputs
//   and the results it hands on (two slots for round-robin, whose copies
//   are double buffered by the schedule's flow-control waits; one slot per
//   microbatch for the static schedules, which keep a stage's inputs for
//   its backward); per stage job its gradient accumulators; and the
//   intermediates of its programs, shared by the slots because one compute
//   queue runs them.
// A copy command moves every value of its kind that its compute needs
// from the producer it waits for; all results a compute hands on go down
// with its first download, so whichever download a consumer waits for,
// they have landed.
//
//===----------------------------------------------------------------------===//

#include "StagedExporter.h"

#include "rp/Analysis/CostModel.h"
#include "rp/Analysis/MemoryPlan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::rp;

/// Where microbatch `mb` of a host value lies: the global input or the
/// value's host rows; a scalar input (loss_scale) is one per step.
struct HostSlice {
  uint32_t buffer;
  int64_t offset, bytes;
};

LogicalResult StagedExporter::emitCompute(unsigned index) {
  const Cmd &c = cmds[index];
  StageJob &j = jobs[c.job];
  unsigned mb = c.mb;
  SmallVector<unsigned> waits = waitsOf(c);
  auto slice = [&](Value v) {
    uint32_t b = isa<BlockArgument>(v) ? w.bufferIndex.at(v) : hostRows(v);
    int64_t row = rowBytes(v, b);
    return HostSlice{b, row * mb, row ? row : w.bufferBytes[b]};
  };
  // Inputs whose producer no upload of this compute waits for (an input
  // from two stages back, or one the schedule has no copy for).
  std::vector<fb::Offset<pf::Copy>> late;
  SmallVector<unsigned> lateWaits;
  for (Value v : toUpload[{unsigned(c.job), mb}]) {
    if (slices) {
      hostCopies(v, mb, inputBuffer(v, c.job, mb), late);
    } else {
      HostSlice h = slice(v);
      late.push_back(
          copy(h.buffer, h.offset, inputBuffer(v, c.job, mb), 0, h.bytes));
    }
    if (producer.count(v)) {
      auto it = firstDownload.find({producerOf(v, mb), mb});
      if (it == firstDownload.end())
        return schedule.emitOpError("stage job ")
               << c.job << " reads a value of stage job " << producerOf(v, mb)
               << " before the schedule computes it";
      // The download that carries it, when it has run already.
      auto by = carrier.find({valueKey(v), mb});
      lateWaits.push_back(by != carrier.end() && by->second >= 0 &&
                                  eventOf[by->second] >= 0
                              ? unsigned(eventOf[by->second])
                              : it->second);
    }
  }
  std::vector<int> &done = extraDownloads[c.device];
  if (!late.empty()) {
    if (roundRobin && done.size() >= 2)
      lateWaits.push_back(computeEvents[c.device][done.size() - 2]);
    Cmd in = c;
    waits.push_back(
        addJob(in, pf::Queue::activation_h2d, std::nullopt, late, lateWaits,
               "IN+ s" + std::to_string(c.job) + " mb" + std::to_string(mb)));
  }
  toUpload[{unsigned(c.job), mb}].clear();
  if (done.size() >= 2 && done[done.size() - 2] >= 0)
    waits.push_back(done[done.size() - 2]);

  // A backward whose activation gradient comes by upload recomputes its
  // forward before the gradient is there: the recompute-marked ops that
  // open its first layer run as a job of their own, gated on the rest of
  // the uploads (the saved input, the weights), and the gradient's upload
  // gates the job after them. The two programs share their buffers (the
  // writer keys them by value), so the results are the same bits.
  SmallVector<unsigned> gradientWaits, otherWaits;
  for (auto [x, e] :
       llvm::zip(c.waits, ArrayRef(waits).take_front(c.waits.size())))
    (cmds[x].kind == Kind::gradientIn ? gradientWaits : otherWaits)
        .push_back(e);
  llvm::append_range(otherWaits, ArrayRef(waits).drop_front(c.waits.size()));
  // Where in `run` the gradient is first needed (0: the first job).
  size_t gradientAt = 0;
  SmallVector<uint32_t> run;
  // Per entry of `run`: the weight gradients whose download follows it.
  std::map<size_t, SmallVector<Value>> downloadAfter;
  // Each layer's weight gradients go into the job's accumulators as soon
  // as its backward has run, so its gradient buffers are free for the next
  // layer's; in the job's last microbatch the accumulators then go down,
  // layer by layer, while the layers below compute. The last layer's go
  // with the set's GRAD download, which the schedule times and the
  // optimizer and the next uploads wait for.
  bool first = int(mb) == j.firstMb, last = int(mb) == j.lastMb;
  LayerOp lastWithGrads;
  for (LayerOp l : j.layers)
    for (Value r : l.getResults())
      if (llvm::is_contained(j.grads, r))
        lastWithGrads = l;
  auto accumulate = [&](LayerOp l) -> LogicalResult {
    SmallVector<Value> grads;
    for (Value r : l.getResults())
      if (llvm::is_contained(j.grads, r))
        grads.push_back(r);
    if (grads.empty())
      return success();
    FailureOr<uint32_t> p = accumulateProgram(c.job, l, grads, first);
    if (failed(p))
      return failure();
    run.push_back(*p);
    if (last && l != lastWithGrads)
      downloadAfter[run.size() - 1] = grads;
    return success();
  };
  for (LayerOp l : j.layers) {
    auto key = std::make_pair(unsigned(layerIndex.at(l)), slotKey(c.job, mb));
    if (j.sweepOf >= 0) {
      // The tail's forward sweep: its own keys and values only.
      auto it = programs.find(key);
      if (it == programs.end()) {
        FailureOr<uint32_t> p = sweepProgram(c.job, mb, l);
        if (failed(p))
          return failure();
        it = programs.emplace(key, *p).first;
      }
      run.push_back(it->second);
      continue;
    }
    bool split = !gradientWaits.empty() && run.empty() &&
                 l.getRole() != LayerRole::forward;
    auto it = programs.find(key);
    if (auto rest = recomputeRest.find(key); rest != recomputeRest.end()) {
      run.push_back(it->second);
      if (split)
        gradientAt = run.size();
      run.push_back(rest->second);
      if (failed(accumulate(l)))
        return failure();
      continue;
    }
    if (it == programs.end()) {
      JobBodyBuffers own(*this, l, c.job);
      w.device = j.device;
      w.overrides.clear();
      Block &body = l.getBody().front();
      std::vector<fb::Offset<pf::KernelCall>> keyPrefix, keyExtra;
      for (auto [arg, v] : llvm::zip(body.getArguments(), l.getInputs())) {
        uint32_t b;
        if (isWeight(v))
          b = weightBuffer(v, c.job);
        else if (slices && keyGradArgs.count(v))
          b = keyGradInput(v, c.job, mb, keyPrefix);
        else if (inJob(c.job, v.getDefiningOp()))
          b = outputBuffer(v, c.job, mb);
        else if (std::optional<unsigned> src = directSource(c.job, v))
          b = inputBuffer(v, *src, mb);
        else
          b = inputBuffer(v, c.job, mb);
        w.overrides[arg] = b;
      }
      std::vector<fb::Offset<pf::KernelCall>> extra;
      auto yield = cast<YieldOp>(body.getTerminator());
      for (auto [r, y] : llvm::zip(l.getResults(), yield.getOperands())) {
        uint32_t target;
        if (llvm::is_contained(j.grads, r)) {
          auto [g, fresh] =
              gradBuffer.try_emplace({gradKey(r), unsigned(c.job)}, 0);
          if (fresh)
            g->second = w.newBuffer(r.getType(), "dw s" + std::to_string(c.job),
                                    j.device);
          target = g->second;
        } else if (slices && keyGradResults.count(r)) {
          target = keyGradOutput(r, c.job, mb, keyExtra);
        } else {
          target = outputBuffer(r, c.job, mb);
        }
        Operation *def = y.getDefiningOp();
        if (def && !isa<ConstantOp>(def) && !w.overrides.count(y))
          w.overrides[y] = target;
        else
          extra.push_back(w.copyCall(w.bufferOf(y), target, false));
      }
      // A slice's prefix gradients go into the accumulator once they are
      // in their buffers.
      llvm::append_range(extra, keyExtra);
      SmallVector<Operation *> ops;
      for (Operation &op : body)
        ops.push_back(&op);
      std::string name = l.getName().str();
      std::string slot = roundRobin && microbatches > 1
                             ? " slot" + std::to_string(slotOf(c.job, mb))
                             : "";
      // The recompute prefix: constants and recompute-marked ops up to the
      // first op that is neither.
      size_t prefix = 0;
      bool marked = false;
      if (split)
        for (; prefix < ops.size(); ++prefix) {
          if (ops[prefix]->hasAttr(kRecomputeAttr))
            marked = true;
          else if (!isa<ConstantOp>(ops[prefix]))
            break;
        }
      if (marked && prefix < ops.size()) {
        FailureOr<uint32_t> a =
            w.addProgram(name + ".recompute" + slot,
                         ArrayRef(ops).take_front(prefix), {}, keyPrefix);
        FailureOr<uint32_t> b =
            failed(a) ? a
                      : w.addProgram(name + ".rest" + slot,
                                     ArrayRef(ops).drop_front(prefix), extra);
        w.overrides.clear();
        if (failed(b))
          return failure();
        programs.emplace(key, *a);
        recomputeRest.emplace(key, *b);
        run.push_back(*a);
        gradientAt = run.size();
        run.push_back(*b);
        if (failed(accumulate(l)))
          return failure();
        continue;
      }
      FailureOr<uint32_t> p = w.addProgram(name + slot, ops, extra, keyPrefix);
      w.overrides.clear();
      if (failed(p))
        return failure();
      it = programs.emplace(key, *p).first;
    }
    run.push_back(it->second);
    if (failed(accumulate(l)))
      return failure();
  }
  if (run.empty()) {
    // A backward with nothing to differentiate (a frozen prefix) still
    // marks its place in the queue.
    auto key = std::make_pair(~0u - 2, 0u);
    auto it = programs.find(key);
    if (it == programs.end()) {
      FailureOr<uint32_t> p = w.addProgram("nothing", {});
      if (failed(p))
        return failure();
      it = programs.emplace(key, *p).first;
    }
    run.push_back(it->second);
  }
  for (auto [k, p] : llvm::enumerate(run)) {
    ArrayRef<unsigned> jobWaits;
    if (gradientAt == 0)
      jobWaits = k == 0 ? ArrayRef<unsigned>(waits) : ArrayRef<unsigned>();
    else if (k == 0)
      jobWaits = otherWaits;
    else if (k == gradientAt)
      jobWaits = gradientWaits;
    auto down = downloadAfter.find(k);
    bool end = k + 1 == run.size();
    unsigned e = addJob(c, pf::Queue::compute, p, {}, jobWaits, label(c),
                        end || down != downloadAfter.end());
    if (end)
      eventOf[index] = e;
    if (down == downloadAfter.end())
      continue;
    std::vector<fb::Offset<pf::Copy>> copies;
    for (Value r : down->second) {
      std::pair<Operation *, unsigned> key{gradKey(r), unsigned(c.job)};
      auto [h, fresh] = gradHost.try_emplace(key, 0);
      if (fresh)
        h->second = w.newBuffer(r.getType(), "grad", -1);
      copies.push_back(
          copy(accBuffer.at(key), 0, h->second, 0, w.bufferBytes[h->second]));
      downloadedEarly.insert(key);
    }
    std::string layer =
        cast<LayerOp>(down->second.front().getDefiningOp()).getName().str();
    addJob(c, pf::Queue::d2h, std::nullopt, copies, {e},
           "GRAD s" + std::to_string(c.job) + " " + layer);
  }
  computeEvents[c.device].push_back(eventOf[index]);
  done.push_back(-1);
  if (!j.handedOn.empty() && !hasDownload.count({unsigned(c.job), mb})) {
    Cmd out = c;
    unsigned e = emitDownload(out, -1, {unsigned(eventOf[index])},
                              "OUT+ s" + std::to_string(c.job) + " mb" +
                                  std::to_string(mb));
    done.back() = e;
  }
  return success();
}

FailureOr<uint32_t> StagedExporter::accumulateProgram(unsigned job, LayerOp l,
                                                      ArrayRef<Value> grads,
                                                      bool first) {
  auto key = std::make_tuple(unsigned(layerIndex.at(l)), first, job);
  if (auto it = accumulatePrograms.find(key); it != accumulatePrograms.end())
    return it->second;
  // The first microbatch's gradients start the accumulators, the others
  // add to them in microbatch order: the same sums, bit for bit, as when
  // the whole job's gradients were added at its end.
  std::vector<fb::Offset<pf::KernelCall>> calls;
  w.device = jobs[job].device;
  for (Value r : grads) {
    std::pair<Operation *, unsigned> k{gradKey(r), job};
    auto [a, fresh] = accBuffer.try_emplace(k, 0);
    if (fresh)
      a->second =
          w.newBuffer(r.getType(), "acc s" + std::to_string(job), w.device);
    calls.push_back(w.copyCall(gradBuffer.at(k), a->second, !first));
  }
  FailureOr<uint32_t> p = w.addProgram(
      (first ? "start-grads " : "add-grads ") + l.getName().str(), {}, calls);
  if (succeeded(p))
    accumulatePrograms.emplace(key, *p);
  return p;
}

LogicalResult StagedExporter::run(std::vector<uint8_t> &bytes) {
  if (failed(readCommands()))
    return failure();
  // Inputs hold the global batch; a scalar input is one per step.
  for (auto [i, arg] : llvm::enumerate(main.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !planDTypeOf(type))
      return main.emitOpError("argument #")
             << i << " is not a tensor a plan can hold";
    auto name = main.getArgAttrOfType<StringAttr>(i, "rp.name");
    std::string n = name ? name.str() : "arg" + std::to_string(i);
    // Token slices: the inputs hold whole sequences, M of them.
    uint32_t b = w.newBuffer(type, n, -1,
                             type.getRank() == 0 ? 1
                             : slices            ? sequences
                                                 : microbatches);
    w.bufferIndex[arg] = b;
    w.inputs.push_back(pf::CreateBinding(w.fbb, w.fbb.CreateString(n), b,
                                         planIndexLimit(arg)));
  }
  if (failed(classifyOps()))
    return failure();
  if (slices) {
    if (failed(bindSlices()))
      return failure();
  } else {
    if (failed(bindLayers()))
      return failure();
    unsigned li = 0;
    for (LayerOp l : main.getOps<LayerOp>())
      layerIndex[l] = li++;
    analyzeJobs();
  }
  // Token slices: every slice's weights, as @main's (one set for all).
  for (unsigned k = 0; k < std::max(slices, 1u); ++k) {
    selectSlice(int(k));
    for (const StageJob &j : jobs)
      for (LayerOp l : j.layers)
        for (Value v : l.getInputs())
          if (isWeight(v))
            setWeights[j.weightSet].insert(canonical(v));
  }
  for (unsigned mb = 0; mb < microbatches; ++mb) {
    selectSlice(int(mb));
    for (auto [i, j] : llvm::enumerate(jobs))
      for (Value v : j.outside)
        if (!directSource(i, v) &&
            (j.role != LayerRole::tail || tailOfMb[mb] == int(i)))
          toUpload[{unsigned(i), mb}].insert(v);
  }
  for (auto [i, c] : llvm::enumerate(cmds))
    if ((c.kind == Kind::activationOut || c.kind == Kind::gradientOut) &&
        !c.keys) {
      hasDownload.insert({unsigned(c.job), unsigned(c.mb)});
      downloadsOf[{unsigned(c.job), unsigned(c.mb)}].push_back(i);
    }

  w.device = -1;
  int prologueIndex = -1, epilogueIndex = -1;
  if (!prologue.empty()) {
    FailureOr<uint32_t> p = w.addProgram("prologue", prologue);
    if (failed(p))
      return failure();
    prologueIndex = *p;
  }
  eventOf.assign(cmds.size(), -1);
  extraDownloads.assign(devices, {});
  computeEvents.assign(devices, {});
  for (auto [i, c] : llvm::enumerate(cmds)) {
    for (unsigned x : c.waits)
      if (eventOf[x] < 0)
        return schedule.emitOpError("waits for the optimizer step within the "
                                    "step");
    selectSlice(c.mb);
    switch (c.kind) {
    case Kind::compute:
      if (failed(emitCompute(i)))
        return failure();
      break;
    case Kind::weights:
      emitWeights(i);
      break;
    case Kind::activationIn:
    case Kind::gradientIn:
      emitInputs(i);
      break;
    case Kind::activationOut:
    case Kind::gradientOut: {
      eventOf[i] = c.keys ? emitKeptDownload(i)
                          : emitDownload(c, int(i), waitsOf(c), label(c));
      break;
    }
    case Kind::weightGrads:
      emitWeightGrads(i);
      break;
    case Kind::optimizer:
      break;
    }
  }
  for (auto &[key, pending] : toUpload)
    if (!pending.empty())
      return schedule.emitOpError("never runs microbatch ")
             << key.second << " of stage job " << key.first;

  // Host side of the step's end: loss rows, gradient sums, outputs.
  w.device = -1;
  w.overrides.clear();
  std::vector<fb::Offset<pf::KernelCall>> sums;
  bindHostGradients(sums);
  for (auto &[v, h] : hostBuffer)
    w.overrides[v] = h;
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  for (Value v : ret.getOperands())
    if (!w.overrides.count(v) &&
        !llvm::is_contained(epilogue, v.getDefiningOp()))
      return ret.emitOpError("returns a value the staged plan does not "
                             "bring to the host");
  if (!epilogue.empty() || !sums.empty()) {
    FailureOr<uint32_t> p = w.addProgram("epilogue", epilogue, {}, sums);
    if (failed(p))
      return failure();
    epilogueIndex = *p;
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto name = main.getResultAttrOfType<StringAttr>(i, "rp.name");
    std::string n = name ? name.str() : "result" + std::to_string(i);
    w.outputs.push_back(
        pf::CreateBinding(w.fbb, w.fbb.CreateString(n), w.bufferOf(v)));
  }
  w.overrides.clear();
  // A profile file is recorded by its absolute path, so that rp-run finds
  // it from any folder.
  PartitionAttr partition = schedule.getPartition();
  StringRef profile = partition.getHw().getProfile();
  SmallString<256> hw(profile);
  if (hw.str().contains('/') || hw.str().ends_with(".json")) {
    // Where the working folder cannot be read, the path stays as given.
    if (!llvm::sys::fs::make_absolute(hw))
      llvm::sys::path::remove_dots(hw, /*remove_dot_dot=*/true);
  }
  std::optional<uint64_t> shift = schedule.getPassShift();
  // What the run allocates per device: one pass's peak per copy of the
  // arenas, the largest device's when the devices are renamed
  // (runPeakBytes).
  w.passesInFlight = unsigned(schedule.getPassesInFlight().value_or(0));
  w.arenaCopies = unsigned(schedule.getArenaCopies().value_or(0));
  unsigned passes = std::max(w.passesInFlight, 1u);
  unsigned copies = w.arenaCopies ? w.arenaCopies : passes;
  unsigned moved = partition.getSchedule() == ScheduleKind::roundRobin && shift
                       ? unsigned(*shift % devices)
                       : 0;
  bool renamed = w.passesInFlight && renamesDevices(moved, passes);
  auto runPeaks = [&](ArrayRef<int64_t> peaks) {
    return w.passesInFlight ? runPeakBytes(peaks, copies, renamed)
                            : std::vector<int64_t>(peaks.begin(), peaks.end());
  };
  std::optional<ArrayRef<int64_t>> peaks = schedule.getPeakBytes();
  if (peaks) {
    std::vector<int64_t> run = runPeaks(*peaks);
    w.plannedPeakBytes.assign(run.begin(), run.end());
  }
  w.finish(bytes, devices, events, /*staged=*/true, prologueIndex,
           epilogueIndex, stringifyScheduleKind(partition.getSchedule()),
           hw.str(), shift ? int(*shift % devices) : -1);
  // The runtime holds its arenas to the planned peak: where its packing of
  // the buffers just written takes more than the memory model counted, the
  // peak is the packing's (ArenaPeak.cpp), in the plan and in the
  // schedule's summary alike.
  if (peaks && !w.plannedPeakBytes.empty()) {
    std::vector<int64_t> covered = peaksCoveringArenas(bytes, *peaks, renamed);
    if (!llvm::equal(covered, *peaks)) {
      std::vector<int64_t> run = runPeaks(covered);
      auto *planned =
          pf::GetMutablePlan(bytes.data())->mutable_planned_peak_bytes();
      for (size_t d = 0; d < run.size() && d < planned->size(); ++d)
        planned->Mutate(d, uint64_t(run[d]));
      schedule.setPeakBytesAttr(
          DenseI64ArrayAttr::get(schedule.getContext(), covered));
    }
  }
  // The jobs' predicted times: the plan's own calls and copies, timed as
  // the sim device times them, with the profile the passes costed the
  // layers with and their measured per-layer times (rp-compile
  // --measured), which time the programs of the layers they name. Both
  // come from the compile's CostModel when the caller has one (parsed
  // once, by the passes), under the keys the passes used.
  StringRef measuredPath;
  if (auto path = main->getContext()
                      ->getLoadedDialect<RPDialect>()
                      ->getMeasuredAttrHelper()
                      .getAttr(main))
    measuredPath = path.getValue();
  CostModel own(nullptr);
  CostModel &model = w.options.costs ? *w.options.costs : own;
  FailureOr<const CostInputs *> in =
      model.inputs(profile, measuredPath, main->getContext());
  if (failed(in))
    return failure();
  std::string error;
  if (!predictJobTimes(bytes, (*in)->hw, error,
                       (*in)->measured ? &*(*in)->measured : nullptr))
    return schedule.emitOpError() << error;
  return success();
}

LogicalResult PlanWriter::runStaged(func::FuncOp main, ScheduleOp schedule,
                                    std::vector<uint8_t> &bytes) {
  return StagedExporter(*this, main, schedule).run(bytes);
}
