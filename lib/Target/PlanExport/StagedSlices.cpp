//===- StagedSlices.cpp - token slices in a staged plan -------------------===//
//
// A schedule of token slices (rp.token_slices = K, issue 35): microbatch
// m * K + k is slice k of sequence m, whose programs are the slice
// function @main.slice<k>'s layers (docs/token-slices.md, "The executing
// path"). Each slice function is bound to the stage jobs on its own (a
// view, made current per command); its parameters, prologue results,
// inputs, loss rows and weight gradients stand for @main's, so weights,
// their uploads and the gradient accumulators are shared by the slices.
// What the slices add:
// - the global inputs hold whole sequences; slice k uploads columns
//   [o, o + s) of each row;
// - the kept keys and values of each attention layer live in host rows
//   [M * B, H, S, d]: a forward of slice k (a forward job's or the tail's
//   sweep) downloads its own into rows [o, o + s), and a command of a later
//   slice uploads rows [0, o), one copy per batch row and head;
// - a tail or backward job sums key gradients in an accumulator [B, H,
//   o_max, d]: slice k reads its own rows [o, o + s) from it before its
//   program and adds its prefix's gradient, rows [0, o), after (the first
//   slice of the sweep, K - 1, starts it);
// - the tail's forward sweep runs, per earlier slice, the ops of the fused
//   body that the slice's own keys and values depend on.
//
//===----------------------------------------------------------------------===//

#include "StagedExporter.h"

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Whether `name` names kept keys or values (`keys:L`, `values:L`).
bool isKeptName(StringRef name) {
  return name.starts_with("keys:") || name.starts_with("values:");
}

int64_t elementBytes(Type t) {
  return planDTypeBytes(*planDTypeOf(cast<RankedTensorType>(t)));
}

/// `t` with its sequence dimension (2 of [B, H, n, d]) set to `n`.
RankedTensorType withRows(Type t, int64_t n) {
  auto r = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(r.getShape());
  shape[2] = n;
  return RankedTensorType::get(shape, r.getElementType());
}

/// The ops of `l`'s body that its results in `kept` depend on, in body
/// order, and the body arguments they read.
void sweepClosure(LayerOp l, const llvm::DenseMap<Value, std::string> &kept,
                  SmallVectorImpl<Operation *> &ops,
                  llvm::DenseSet<Value> &used) {
  Block &body = l.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<Value> work;
  for (auto [r, y] : llvm::zip(l.getResults(), yield.getOperands()))
    if (kept.count(r))
      work.push_back(y);
  llvm::DenseSet<Operation *> need;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (isa<BlockArgument>(v)) {
      used.insert(v);
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (def && need.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  for (Operation &op : body)
    if (need.contains(&op))
      ops.push_back(&op);
}

} // namespace

LogicalResult StagedExporter::bindSlices() {
  if (!roundRobin || tailJobs > 2)
    return schedule.emitOpError(
        "runs token slices with a schedule other than round-robin or a tail "
        "as more than two jobs; the exporter writes token slices for "
        "round-robin with a fused tail as one or two jobs (compile without "
        "--token-slices)");
  auto module = main->getParentOfType<ModuleOp>();
  views.clear();
  views.resize(slices);
  std::string prefix = (main.getName() + ".slice").str();
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto info = fn->getAttrOfType<DictionaryAttr>("rp.token_slice");
    if (!info || !fn.getName().starts_with(prefix))
      continue;
    auto get = [&](StringRef key) -> int64_t {
      auto a = info.getAs<IntegerAttr>(key);
      return a ? a.getInt() : -1;
    };
    int64_t k = get("index");
    if (k < 0 || k >= int64_t(slices) || views[k].fn)
      return fn.emitOpError("is token slice ")
             << k << ", not one of the schedule's " << slices
             << " (or a second one of that index)";
    views[k].fn = fn;
    views[k].offset = get("offset");
    views[k].size = get("size");
    sequenceLength = get("sequence");
  }
  for (auto [k, view] : llvm::enumerate(views))
    if (!view.fn)
      return schedule.emitOpError("runs ")
             << slices << " token slices per sequence, but the module has no @"
             << prefix << k << " (run rp-slice-tokens)";
  std::vector<StageJob> base = jobs;
  func::FuncOp whole = main;
  unsigned index = layerIndex.size();
  for (SliceView &view : views) {
    jobs = base;
    producer.clear();
    layerJob.clear();
    main = view.fn;
    LogicalResult bound = classifySlice(view, whole);
    if (succeeded(bound))
      bound = bindLayers();
    main = whole;
    if (failed(bound))
      return failure();
    for (LayerOp l : view.fn.getOps<LayerOp>())
      layerIndex[l] = index++;
    analyzeJobs();
    // A slice's key gradients are neither uploaded (the job's accumulator
    // holds them) nor weight gradients, and its own keys go down to the
    // kept rows, not to the next job.
    for (StageJob &j : jobs) {
      j.outside.remove_if([&](Value v) { return keyGradArgs.count(v); });
      llvm::erase_if(j.grads, [&](Value r) {
        return keyGradResults.count(r) || keptResults.count(r);
      });
      for (LayerOp l : j.layers)
        for (Value r : l.getResults())
          if (keptResults.count(r))
            j.keptOut.push_back(r);
    }
    // Two tail jobs take alternate slices: a tail that kept keys would
    // read, before its slice, rows the other job made (rp-lower-schedule
    // and rp-verify-schedule refuse it first).
    if (tailJobs > 1)
      for (StageJob &j : jobs)
        if (j.role == LayerRole::tail && j.sweepOf < 0 && !j.keptOut.empty())
          return schedule.emitOpError("runs the fused tail as ")
                 << tailJobs
                 << " jobs on alternate token slices, but its layers keep "
                    "keys and values for the later slices; a tail of two "
                    "jobs must keep none (the head alone)";
    for (StageJob &j : jobs) {
      if (j.sweepOf < 0)
        continue;
      const StageJob &tail = jobs[j.sweepOf];
      j.layers = tail.layers;
      j.keptOut = tail.keptOut;
      j.outside.clear();
      j.handedOn.clear();
      j.grads.clear();
      for (LayerOp l : j.layers) {
        SmallVector<Operation *> ops;
        llvm::DenseSet<Value> used;
        sweepClosure(l, keptResults, ops, used);
        for (auto [arg, v] :
             llvm::zip(l.getBody().front().getArguments(), l.getInputs()))
          if (used.count(arg) && !isWeight(v))
            j.outside.insert(v);
      }
    }
    view.jobs = std::move(jobs);
    view.producer = std::move(producer);
    view.layerJob = std::move(layerJob);
  }
  currentSlice = -1;
  jobs.clear();
  selectSlice(0);
  return success();
}

LogicalResult StagedExporter::classifySlice(SliceView &view,
                                            func::FuncOp whole) {
  func::FuncOp fn = view.fn;
  llvm::StringMap<Value> params, args, results;
  for (auto p : whole.getOps<ParamOp>())
    params[p.getName()] = p.getResult();
  for (auto [i, arg] : llvm::enumerate(whole.getArguments()))
    if (auto n = whole.getArgAttrOfType<StringAttr>(i, "rp.name"))
      args[n.getValue()] = arg;
  auto wholeRet = cast<func::ReturnOp>(whole.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(wholeRet.getOperands()))
    if (auto n = whole.getResultAttrOfType<StringAttr>(i, "rp.name"))
      results[n.getValue()] = v;

  size_t pi = 0, ei = 0;
  LogicalResult walked =
      forEachTopLevel(fn, [&](Operation &op, TopLevel kind) -> LogicalResult {
        if (kind == TopLevel::param) {
          auto p = cast<ParamOp>(op);
          auto it = params.find(p.getName());
          if (it == params.end())
            return p.emitOpError("is not a parameter of @")
                   << whole.getName() << "; a token slice shares its weights";
          canon[p.getResult()] = it->second;
          weights.insert(p.getResult());
        } else if (kind == TopLevel::prologue) {
          // The prologue (weights in the compute dtype) is @main's, op by op.
          if (pi >= prologue.size() ||
              prologue[pi]->getName() != op.getName() ||
              prologue[pi]->getResultTypes() != op.getResultTypes())
            return op.emitOpError("computes weights that @")
                   << whole.getName() << "'s prologue does not";
          for (auto [r, m] :
               llvm::zip(op.getResults(), prologue[pi]->getResults())) {
            canon[r] = m;
            weights.insert(r);
          }
          ++pi;
        } else if (ei < epilogue.size() &&
                   epilogue[ei]->getName() == op.getName() &&
                   epilogue[ei]->getResultTypes() == op.getResultTypes()) {
          // The epilogue (a weight's per-use gradients summed: tied weights)
          // is @main's, op by op: the slice's per-use gradients stand for
          // @main's, whose accumulators they add to.
          Operation *m = epilogue[ei++];
          for (auto [v, mv] : llvm::zip(op.getOperands(), m->getOperands()))
            if (v.getDefiningOp<LayerOp>())
              canon[v] = mv;
          for (auto [r, mr] : llvm::zip(op.getResults(), m->getResults()))
            canon[r] = mr;
        } else {
          return op.emitOpError("runs between the layers of token slice @")
                 << fn.getName()
                 << "; the exporter writes slices whose function-level ops are "
                    "parameters, constants, the prologue and the epilogue, "
                    "@main's op by op";
        }
        return success();
      });
  if (failed(walked))
    return failure();
  // Each argument and result is @main's of the same name, kept keys or
  // values (`keys:L`), or their gradient (`grad:keys:L`).
  auto bind = [&](Value v, StringAttr n, const llvm::StringMap<Value> &ofMain,
                  llvm::DenseMap<Value, std::string> &kept,
                  llvm::DenseMap<Value, std::string> &keyGrads, StringRef what,
                  StringRef inMain, size_t i) -> LogicalResult {
    StringRef name = n ? n.getValue() : StringRef();
    if (name.starts_with("grad:") && isKeptName(name.drop_front(5))) {
      keyGrads[v] = name.drop_front(5).str();
    } else if (isKeptName(name)) {
      kept[v] = name.str();
    } else if (auto it = ofMain.find(name); n && it != ofMain.end()) {
      canon[v] = it->second;
      return success();
    } else {
      return fn.emitOpError()
             << what << " #" << i << " ('" << name << "') is no " << inMain
             << " of @" << whole.getName()
             << " and no kept keys, values or their gradients";
    }
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() != 4 || !t.hasStaticShape())
      return fn.emitOpError("keeps ")
             << name << " as " << v.getType()
             << "; kept keys and values are [batch, heads, tokens, dim]";
    return success();
  };
  for (auto [i, arg] : llvm::enumerate(fn.getArguments()))
    if (failed(bind(arg, fn.getArgAttrOfType<StringAttr>(i, "rp.name"), args,
                    keptArgs, keyGradArgs, "argument", "input", i)))
      return failure();
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (failed(bind(v, fn.getResultAttrOfType<StringAttr>(i, "rp.name"),
                    results, keptResults, keyGradResults, "result", "result",
                    i)))
      return failure();
  return success();
}

void StagedExporter::selectSlice(int mb) {
  if (!slices || mb < 0)
    return;
  int k = mb % int(slices);
  if (k == currentSlice)
    return;
  auto swapView = [&](SliceView &v) {
    std::swap(v.jobs, jobs);
    std::swap(v.producer, producer);
    std::swap(v.layerJob, layerJob);
  };
  if (currentSlice >= 0)
    swapView(views[currentSlice]);
  swapView(views[k]);
  currentSlice = k;
}

uint32_t StagedExporter::keptBuffer(const std::string &name, Type slicedType) {
  auto [it, fresh] = keptHost.try_emplace(name, 0);
  if (fresh)
    it->second = w.newBuffer(withRows(slicedType, sequenceLength),
                             "kept " + name, -1, sequences);
  return it->second;
}

void StagedExporter::keptRowCopies(RankedTensorType t, uint32_t host,
                                   uint32_t device, unsigned m, int64_t first,
                                   bool toHost,
                                   std::vector<fb::Offset<pf::Copy>> &out,
                                   int64_t from, int64_t rows) {
  int64_t B = t.getDimSize(0), H = t.getDimSize(1), n = t.getDimSize(2),
          d = t.getDimSize(3), e = elementBytes(t), S = sequenceLength;
  int64_t count = rows < 0 ? n : rows;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hd = 0; hd < H; ++hd) {
      int64_t atHost = (((m * B + b) * H + hd) * S + first + from) * d * e,
              atDevice = ((b * H + hd) * n + from) * d * e;
      out.push_back(toHost
                        ? copy(device, atDevice, host, atHost, count * d * e)
                        : copy(host, atHost, device, atDevice, count * d * e));
    }
}

void StagedExporter::hostCopies(Value v, unsigned mb, uint32_t dst,
                                std::vector<fb::Offset<pf::Copy>> &out,
                                int keptFirst, int keptEnd) {
  unsigned m = mb / slices;
  int64_t o = sliceOffset(mb);
  if (auto kept = keptArgs.find(v); kept != keptArgs.end()) {
    // Rows [0, o): the argument's; or the rows of slices [keptFirst,
    // keptEnd) of them.
    auto t = cast<RankedTensorType>(v.getType());
    uint32_t host = keptBuffer(kept->second, t);
    if (keptFirst < 0) {
      keptRowCopies(t, host, dst, m, 0, false, out);
      return;
    }
    int64_t from = views[keptFirst].offset,
            to = views[keptEnd - 1].offset + views[keptEnd - 1].size;
    keptRowCopies(t, host, dst, m, 0, false, out, from, to - from);
    return;
  }
  if (isa<BlockArgument>(v)) {
    // An input of @main: the sequence's columns [o, o + s) per row (the
    // dimension where the slice's type differs), or its row, or the step's
    // scalar.
    Value whole = canonical(v);
    uint32_t b = w.bufferIndex.at(whole);
    auto t = cast<RankedTensorType>(v.getType());
    auto full = cast<RankedTensorType>(whole.getType());
    if (t.getRank() == 0) {
      out.push_back(copy(b, 0, dst, 0, w.bufferBytes[b]));
      return;
    }
    int seq = -1;
    for (int i = 0; i < t.getRank(); ++i)
      if (t.getDimSize(i) != full.getDimSize(i))
        seq = i;
    if (seq < 0) {
      int64_t row = w.bufferBytes[b] / sequences;
      out.push_back(copy(b, row * m, dst, 0, row));
      return;
    }
    int64_t outer = 1, inner = elementBytes(t);
    for (int i = 0; i < t.getRank(); ++i)
      (i < seq ? outer : inner) *= i == seq ? 1 : t.getDimSize(i);
    int64_t s = t.getDimSize(seq), S = full.getDimSize(seq);
    for (int64_t i = 0; i < outer; ++i)
      out.push_back(copy(b, ((m * outer + i) * S + o) * inner, dst,
                         i * s * inner, s * inner));
    return;
  }
  Value k = canonical(v);
  uint32_t h = hostRows(k);
  int64_t row = w.bufferBytes[h] / rowsOf(k);
  out.push_back(copy(h, row * rowOf(k, mb), dst, 0, row));
}

unsigned StagedExporter::emitKeptDownload(unsigned index) {
  const Cmd &c = cmds[index];
  unsigned mb = c.mb, m = mb / slices;
  std::vector<fb::Offset<pf::Copy>> copies;
  for (Value r : jobs[c.job].keptOut) {
    auto t = cast<RankedTensorType>(r.getType());
    keptRowCopies(t, keptBuffer(keptResults.lookup(r), t),
                  outputBuffer(r, c.job, mb), m, sliceOffset(mb), true, copies);
  }
  return addJob(c, pf::Queue::d2h, std::nullopt, copies, waitsOf(c),
                "KV OUT s" + std::to_string(stageOf(c.job)) + " mb" +
                    std::to_string(mb));
}

FailureOr<uint32_t> StagedExporter::sweepProgram(unsigned job, unsigned mb,
                                                 LayerOp l) {
  const StageJob &j = jobs[job];
  JobBodyBuffers own(*this, l, job);
  w.device = j.device;
  w.overrides.clear();
  SmallVector<Operation *> ops;
  llvm::DenseSet<Value> used;
  sweepClosure(l, keptResults, ops, used);
  Block &body = l.getBody().front();
  for (auto [arg, v] : llvm::zip(body.getArguments(), l.getInputs()))
    if (used.count(arg))
      w.overrides[arg] =
          isWeight(v) ? weightBuffer(v, job) : inputBuffer(v, job, mb);
  std::vector<fb::Offset<pf::KernelCall>> extra;
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [r, y] : llvm::zip(l.getResults(), yield.getOperands())) {
    if (!keptResults.count(r))
      continue;
    uint32_t target = outputBuffer(r, job, mb);
    Operation *def = y.getDefiningOp();
    if (def && !isa<ConstantOp>(def) && !w.overrides.count(y))
      w.overrides[y] = target;
    else
      extra.push_back(w.copyCall(w.bufferOf(y), target, false));
  }
  std::string slot = " slot" + std::to_string(slotOf(job, mb));
  FailureOr<uint32_t> p =
      w.addProgram(l.getName().str() + ".sweep" + slot, ops, extra);
  w.overrides.clear();
  return p;
}

uint32_t StagedExporter::keyGradAccumulator(Value v, unsigned job, bool pad) {
  auto name =
      keyGradArgs.count(v) ? keyGradArgs.lookup(v) : keyGradResults.lookup(v);
  auto &map = pad ? keyGradPad : keyGradAcc;
  auto [it, fresh] = map.try_emplace({name, job}, 0);
  if (fresh)
    it->second =
        w.newBuffer(withRows(v.getType(), views.back().offset),
                    (pad ? "dkv pad " : "dkv acc ") + name, jobs[job].device);
  return it->second;
}

/// ints of a slice of rank-4 [B, H, n, d] at row `o` of dimension 2:
/// offsets, then unit strides.
static SmallVector<int64_t> rowsAt(int64_t o) {
  return {0, 0, o, 0, 1, 1, 1, 1};
}

uint32_t
StagedExporter::keyGradInput(Value v, unsigned job, unsigned mb,
                             std::vector<fb::Offset<pf::KernelCall>> &prefix) {
  auto [it, fresh] = keyGradBuffers.try_emplace(v, 0);
  if (fresh)
    it->second = w.newBuffer(v.getType(), "dkv " + keyGradArgs.lookup(v),
                             jobs[job].device);
  uint32_t acc = keyGradAccumulator(v, job, false);
  SmallVector<int64_t> ints = rowsAt(sliceOffset(mb));
  prefix.push_back(pf::CreateKernelCall(
      w.fbb, pf::OpKind::slice, w.fbb.CreateVector(std::vector<uint32_t>{acc}),
      w.fbb.CreateVector(std::vector<uint32_t>{it->second}),
      w.fbb.CreateVector(ints.data(), ints.size())));
  return it->second;
}

uint32_t
StagedExporter::keyGradOutput(Value r, unsigned job, unsigned mb,
                              std::vector<fb::Offset<pf::KernelCall>> &extra) {
  auto [it, fresh] = keyGradBuffers.try_emplace(r, 0);
  if (fresh)
    it->second = w.newBuffer(r.getType(), "dkv " + keyGradResults.lookup(r),
                             jobs[job].device);
  uint32_t acc = keyGradAccumulator(r, job, false);
  // The sweep's first slice (the sequence's last) starts the accumulator:
  // its prefix is all of it; the others add theirs, zero-padded.
  bool first = mb % slices == slices - 1;
  uint32_t into = first ? acc : keyGradAccumulator(r, job, true);
  SmallVector<int64_t> ints = rowsAt(0);
  extra.push_back(pf::CreateKernelCall(
      w.fbb, pf::OpKind::slice_grad,
      w.fbb.CreateVector(std::vector<uint32_t>{it->second}),
      w.fbb.CreateVector(std::vector<uint32_t>{into}),
      w.fbb.CreateVector(ints.data(), ints.size())));
  if (!first)
    extra.push_back(w.copyCall(into, acc, true));
  return it->second;
}
