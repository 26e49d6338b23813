//===- Transfers.cpp - the copies a pipeline's compute needs --------------===//

#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/TokenSlices.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Bytes of the activation entering layer `b` (the model output for the
/// boundary after the last layer); its gradient has the same size.
int64_t boundaryBytes(llvm::ArrayRef<LayerCost> layers, unsigned b) {
  return b < layers.size() ? layers[b].actInBytes : layers.back().actOutBytes;
}

/// What one compute reads from another: an activation (from a forward
/// job) at the consumer's first layer, or the gradient (from the tail or a
/// backward job) at the consumer's end.
struct Edge {
  CommandKind download; // d2hActivation or d2hGradient
  unsigned boundary;
};

Edge edgeBetween(const StageJob &producer, const StageJob &consumer) {
  if (producer.kind == CommandKind::forward)
    return {CommandKind::d2hActivation, consumer.range.begin};
  return {CommandKind::d2hGradient, consumer.range.end};
}

struct Inserter {
  Pipeline &pl;
  llvm::ArrayRef<LayerCost> layers;
  const HardwareProfile &hw;
  const Schedule &old;
  Schedule out;
  std::vector<unsigned> newIndex;
  /// Per old compute: the downloads its consumers need, and their new
  /// indices once emitted.
  std::vector<std::vector<Edge>> downloads;
  std::map<std::tuple<unsigned, CommandKind, unsigned>, unsigned> emitted;

  Inserter(Pipeline &pl, llvm::ArrayRef<LayerCost> layers,
           const HardwareProfile &hw, const Schedule &old)
      : pl(pl), layers(layers), hw(hw), old(old),
        newIndex(old.commands.size(), ~0u), downloads(old.commands.size()) {
    out.devices = old.devices;
    out.gpusPerLink = hw.gpusPerLink;
    out.host = hw.hostModel();
    out.jobMs = hw.jobUs * 1e-3;
  }

  const StageJob &jobOf(unsigned oldIdx) const {
    return pl.jobs[old.commands[oldIdx].job];
  }
  /// Whether the dependency stays on the device (a static schedule's
  /// backward reading the input its own stage's forward kept, or a tail
  /// pair's backward half its forward half's intermediates), or moves
  /// nothing: a job waiting for its own earlier command (a token-sliced
  /// tail's last slice for its forward sweep, whose kept keys travel by
  /// insertKeptKeyTransfers' copies).
  bool direct(unsigned producer, unsigned consumer) const {
    if (old.commands[producer].job == old.commands[consumer].job)
      return true;
    return (pl.kind != ScheduleKind::roundRobin ||
            jobOf(consumer).keepsForward) &&
           jobOf(producer).device == jobOf(consumer).device &&
           jobOf(producer).weightSet == jobOf(consumer).weightSet;
  }

  unsigned add(Command c) { return out.add(std::move(c)); }

  Command copy(CommandKind kind, unsigned device, int64_t bytes,
               const Command &of, std::string label) {
    Command c;
    c.device = device;
    c.kind = kind;
    c.queue = queueOf(kind);
    // A token slice's activations and their gradients are its own tokens'
    // where the costs are the whole sequence's (the IR passes'): sized
    // per slice, as the exporter writes them. Kept keys come after, sized
    // by insertKeptKeyTransfers.
    if (pl.sliceCostTokens > 0 && of.microbatch >= 0 &&
        !pl.keptKeySlices.empty() &&
        (kind == CommandKind::h2dActivation ||
         kind == CommandKind::h2dGradient ||
         kind == CommandKind::d2hActivation ||
         kind == CommandKind::d2hGradient))
      bytes = int64_t(double(bytes) *
                      double(pl.keptKeySlices[unsigned(of.microbatch) %
                                              pl.keptKeySlices.size()]) /
                      double(pl.sliceCostTokens));
    c.bytes = bytes;
    c.job = of.job;
    c.microbatch = of.microbatch;
    // At the rate the timing core gives a copy alone on its link (pageable
    // host memory's where the profile says so), as the sim times it.
    c.ms = hw.copyMs(double(bytes), c.queue != Queue::d2h);
    c.label = std::move(label);
    return c;
  }

  void run();
};

void Inserter::run() {
  const std::vector<Command> &cmds = old.commands;
  for (unsigned i = 0; i < cmds.size(); ++i)
    for (unsigned p : cmds[i].waits)
      if (!direct(p, i)) {
        Edge e = edgeBetween(jobOf(p), jobOf(i));
        auto &list = downloads[p];
        if (llvm::none_of(list, [&](const Edge &x) {
              return x.download == e.download && x.boundary == e.boundary;
            }))
          list.push_back(e);
      }

  // Per weight set: its first and last compute, and whether it has
  // gradients; per device, the order its weight sets first run in.
  unsigned numSets = 0;
  for (const StageJob &j : pl.jobs)
    numSets = std::max(numSets, j.weightSet + 1);
  std::vector<int> firstOfSet(numSets, -1), lastOfSet(numSets, -1);
  std::vector<bool> setHasGrads(numSets, false);
  std::vector<std::vector<unsigned>> setsOnDevice(pl.devices);
  for (unsigned i = 0; i < cmds.size(); ++i) {
    const StageJob &j = jobOf(i);
    if (firstOfSet[j.weightSet] < 0) {
      firstOfSet[j.weightSet] = i;
      setsOnDevice[j.device].push_back(j.weightSet);
    }
    lastOfSet[j.weightSet] = i;
    if (j.kind != CommandKind::forward)
      setHasGrads[j.weightSet] = true;
  }
  std::vector<unsigned> setTurn(numSets, 0);
  for (const auto &sets : setsOnDevice)
    for (auto [turn, s] : llvm::enumerate(sets))
      setTurn[s] = turn;
  std::vector<unsigned> lastUpload(numSets, ~0u);
  // The old index of each job's compute of each microbatch.
  std::map<std::pair<unsigned, unsigned>, unsigned> computeAt;
  for (unsigned i = 0; i < cmds.size(); ++i)
    computeAt[{unsigned(cmds[i].job), unsigned(cmds[i].microbatch)}] = i;
  // Per device, the computes emitted so far, and their last download.
  std::vector<std::vector<unsigned>> deviceComputes(pl.devices);
  std::map<unsigned, unsigned> lastDownloadOf;
  // Per step: its gradient downloads, each device's last compute, and its
  // weight uploads.
  unsigned steps = std::max(1u, pl.steps), perStep = pl.jobsPerStep();
  std::vector<std::vector<unsigned>> gradDownloads(steps);
  std::vector<std::vector<int>> lastComputeOf(steps,
                                              std::vector<int>(pl.devices, -1));
  std::vector<std::pair<unsigned, unsigned>> weightUploads;
  std::map<unsigned, unsigned> gradDownloadOf; // by weight set

  for (unsigned i = 0; i < cmds.size(); ++i) {
    Command c = cmds[i];
    const StageJob &job = jobOf(i);
    unsigned dev = job.device;
    unsigned step = std::min(unsigned(c.job) / perStep, steps - 1);
    std::vector<unsigned> waits;
    std::vector<unsigned> &done = deviceComputes[dev];
    std::string tag =
        std::to_string(c.job) + " mb" + std::to_string(c.microbatch);

    if (int(i) == firstOfSet[job.weightSet] && !pl.residentWeights) {
      int64_t bytes = 0;
      for (unsigned l = job.range.begin; l < job.range.end; ++l)
        bytes += layers[l].paramBytes;
      std::optional<unsigned> after;
      unsigned turn = setTurn[job.weightSet];
      if (pl.kind == ScheduleKind::roundRobin && turn >= 2) {
        // The set two turns back leaves its buffers once its compute is
        // done and its gradients are downloaded.
        unsigned twoBack = setsOnDevice[dev][turn - 2];
        after = gradDownloadOf.count(twoBack) ? gradDownloadOf[twoBack]
                                              : newIndex[lastOfSet[twoBack]];
      }
      unsigned chunks = std::max<int64_t>(1, (bytes + kWeightChunkBytes - 1) /
                                                 kWeightChunkBytes);
      for (unsigned k = 0; k < chunks; ++k) {
        int64_t part =
            std::min(kWeightChunkBytes, bytes - k * kWeightChunkBytes);
        Command up =
            copy(CommandKind::h2dWeights, dev, part, c,
                 "UP s" + std::to_string(c.job) + " c" + std::to_string(k));
        up.microbatch = -1;
        up.chunk = k;
        if (after)
          up.waits.push_back(*after);
        lastUpload[job.weightSet] = add(std::move(up));
        weightUploads.emplace_back(lastUpload[job.weightSet], step);
      }
    }
    if (lastUpload[job.weightSet] != ~0u)
      waits.push_back(lastUpload[job.weightSet]);

    // Inputs: at most two in flight per device, so an upload waits for the
    // compute two places back to free its buffer.
    auto upload = [&](CommandKind kind, unsigned boundary,
                      std::vector<unsigned> after, int64_t extra = 0,
                      const char *name = nullptr) {
      Command in =
          copy(kind, dev,
               boundaryBytes(layers, boundary) * (name == nullptr) + extra, c,
               (name                               ? name
                : kind == CommandKind::h2dGradient ? "DIN s"
                                                   : "IN s") +
                   tag);
      in.boundary = boundary;
      llvm::append_range(in.waits, after);
      if (done.size() >= 2)
        in.waits.push_back(done[done.size() - 2]);
      waits.push_back(add(std::move(in)));
    };
    bool fromHost = job.range.begin == 0 &&
                    (c.job % perStep == 0 || job.kind == CommandKind::tail ||
                     (job.kind == CommandKind::backward &&
                      pl.kind == ScheduleKind::roundRobin));
    // A layer-grain backward (round-robin) reads its inner layers' inputs,
    // which the forward jobs that computed them sent down: those of the
    // forward that also made the stage's input come up with it, the others
    // in one more upload ("IN+"), behind the saved input and ahead of the
    // activation gradient, after every download of their forwards (the
    // exporter moves each value with one of them).
    std::map<unsigned, int64_t> savedFrom; // forward job -> bytes
    int producerOfInput = -1;
    if (job.kind == CommandKind::backward && job.layerGrain &&
        pl.kind == ScheduleKind::roundRobin) {
      for (unsigned k = step * perStep;
           k < std::min<size_t>((step + 1) * perStep, pl.jobs.size()); ++k) {
        const StageJob &f = pl.jobs[k];
        if (f.kind != CommandKind::forward)
          continue;
        if (job.range.begin > 0 && f.range.begin < job.range.begin &&
            job.range.begin <= f.range.end)
          producerOfInput = int(k);
        for (unsigned l = job.range.begin + 1; l < job.range.end; ++l)
          if (f.range.begin < l && l <= f.range.end)
            savedFrom[k] += layers[l].actInBytes;
      }
    }
    if (fromHost)
      upload(CommandKind::h2dActivation, 0, {});
    // A backward's saved input is uploaded ahead of its activation
    // gradient: the saved input is ready first (its forward ran long
    // before), and behind the gradient it would hold up the recompute.
    std::vector<unsigned> inputs = c.waits;
    std::stable_partition(inputs.begin(), inputs.end(), [&](unsigned p) {
      return direct(p, i) || jobOf(p).kind == CommandKind::forward;
    });
    bool savedSent = savedFrom.empty();
    auto sendSaved = [&] {
      savedSent = true;
      int64_t bytes = 0;
      std::vector<unsigned> after;
      unsigned first = job.range.end;
      for (auto [k, b] : savedFrom) {
        if (int(k) == producerOfInput)
          continue;
        bytes += b;
        first = std::min(first, pl.jobs[k].range.end);
        auto at = computeAt.find({k, unsigned(c.microbatch)});
        if (at == computeAt.end())
          continue;
        for (const auto &[key, d] : emitted)
          if (std::get<0>(key) == at->second)
            after.push_back(d);
      }
      if (bytes > 0)
        upload(CommandKind::h2dActivation, first, after, bytes, "IN+ s");
    };
    for (unsigned p : inputs) {
      if (direct(p, i)) {
        waits.push_back(newIndex[p]);
        continue;
      }
      Edge e = edgeBetween(jobOf(p), job);
      if (e.download == CommandKind::d2hGradient && !savedSent)
        sendSaved();
      unsigned d = emitted.at({p, e.download, e.boundary});
      int64_t extra = 0;
      if (int(old.commands[p].job) == producerOfInput &&
          e.download == CommandKind::d2hActivation)
        if (auto it = savedFrom.find(unsigned(producerOfInput));
            it != savedFrom.end())
          extra = boundaryBytes(layers, e.boundary) + it->second;
      if (extra > 0)
        upload(CommandKind::h2dActivation, e.boundary, {d}, extra, "IN s");
      else
        upload(e.download == CommandKind::d2hActivation
                   ? CommandKind::h2dActivation
                   : CommandKind::h2dGradient,
               e.boundary, {d});
    }
    if (!savedSent)
      sendSaved();
    // Outputs: two buffers per device, so the compute waits for the
    // downloads of the compute two places back.
    if (done.size() >= 2) {
      auto it = lastDownloadOf.find(done[done.size() - 2]);
      if (it != lastDownloadOf.end())
        waits.push_back(it->second);
    }
    c.waits = waits;
    unsigned ci = add(std::move(c));
    newIndex[i] = ci;
    done.push_back(ci);
    lastComputeOf[step][dev] = ci;

    // A layer-grain backward reads the inputs of its inner layers, saved
    // by the forward that computes them: they go down with that forward's
    // first download (the exporter's carrier), so its output buffer holds
    // them too.
    // (The exporter sends a value with the first download, in queue order,
    // towards a job that reads it, else with the first: here, the download
    // towards the backward's own input when there is one.)
    std::map<unsigned, int64_t> savedFor; // backward's first layer -> bytes
    if (job.kind == CommandKind::forward)
      for (unsigned k = step * perStep;
           k < std::min<size_t>((step + 1) * perStep, pl.jobs.size()); ++k) {
        const StageJob &b = pl.jobs[k];
        if (b.kind == CommandKind::backward && b.layerGrain)
          for (unsigned l = std::max(b.range.begin + 1, job.range.begin + 1);
               l < std::min(b.range.end, job.range.end); ++l)
            savedFor[b.range.begin] += layers[l].actInBytes;
      }
    bool firstDownload = true;
    for (const Edge &e : downloads[i]) {
      int64_t savedBytes = 0;
      for (const auto &[first, bytes] : savedFor) {
        // A structured binding is not captured by a lambda before C++20.
        unsigned begin = first;
        if (begin == e.boundary ||
            (firstDownload && llvm::none_of(downloads[i], [&](const Edge &x) {
               return x.boundary == begin;
             })))
          savedBytes += bytes;
      }
      firstDownload = false;
      Command d = copy(
          e.download, dev, boundaryBytes(layers, e.boundary) + savedBytes,
          out.commands[ci],
          (e.download == CommandKind::d2hGradient ? "DOUT s" : "OUT s") + tag);
      d.boundary = e.boundary;
      d.waits.push_back(ci);
      unsigned di = add(std::move(d));
      emitted[{i, e.download, e.boundary}] = di;
      lastDownloadOf[ci] = di;
    }
    if (int(i) == lastOfSet[job.weightSet] && setHasGrads[job.weightSet] &&
        !pl.residentWeights) {
      int64_t bytes = 0;
      for (const StageJob &j : pl.jobs)
        if (j.weightSet == job.weightSet && j.kind != CommandKind::forward)
          for (unsigned l = j.range.begin; l < j.range.end; ++l)
            bytes += layers[l].gradBytes;
      if (bytes > 0) {
        Command g =
            copy(CommandKind::d2hWeightGrads, dev, bytes, out.commands[ci],
                 "GRAD s" + std::to_string(job.weightSet));
        g.microbatch = -1;
        g.waits.push_back(ci);
        gradDownloads[step].push_back(add(std::move(g)));
        gradDownloadOf[job.weightSet] = gradDownloads[step].back();
      }
    }
  }
  // The host optimizer step of each step runs once every gradient of the
  // step is in (global-norm clipping sees them all), streaming the state of
  // every trainable parameter through host memory.
  int64_t trainable = 0;
  for (const LayerCost &l : layers)
    trainable += l.trainableElements;
  std::vector<unsigned> optimizers;
  for (unsigned k = 0; k < steps; ++k) {
    Command opt;
    opt.kind = CommandKind::optimizer;
    opt.queue = Queue::host;
    opt.label = steps > 1 ? "OPT " + std::to_string(k) : "OPT";
    if (hw.optimizerGBps > 0)
      opt.ms = hw.optimizerMs(double(trainable));
    opt.waits = gradDownloads[k];
    if (pl.residentWeights)
      for (int last : lastComputeOf[k])
        if (last >= 0)
          opt.waits.push_back(last);
    optimizers.push_back(add(std::move(opt)));
  }
  // The weight version gate of a continuous run: step k reads the weights
  // the optimizer of step k - lag wrote.
  unsigned lag = pl.syncOptimizer ? 1 : 2;
  for (auto [up, k] : weightUploads)
    if (k >= lag)
      out.commands[up].waits.push_back(optimizers[k - lag]);
}

} // namespace

void mlir::rp::insertTransfers(Pipeline &pipeline,
                               llvm::ArrayRef<LayerCost> layers,
                               const HardwareProfile &hw) {
  Schedule old = std::move(pipeline.schedule);
  Inserter inserter(pipeline, layers, hw, old);
  inserter.run();
  pipeline.schedule = std::move(inserter.out);
  // The caller that set the kept keys checked that their copies can be
  // made (every layer's keys have a forward that makes them).
  std::string error;
  if (pipeline.keptKeySlices.size() > 1 &&
      !insertKeptKeyTransfers(pipeline, pipeline.keptKeySlices,
                              pipeline.keptKeyBytes, hw, error))
    llvm::report_fatal_error(llvm::Twine(error) +
                             "; this is a bug in rp, please report it");
}

Schedule mlir::rp::recomputeSplit(const Schedule &schedule,
                                  const Pipeline &pipeline,
                                  llvm::ArrayRef<LayerCost> layers) {
  const std::vector<Command> &cmds = schedule.commands;
  // What runs before the gradient: a stage-grain backward recomputes its
  // whole stage first; a layer-grain one recomputes and differentiates one
  // layer at a time, deepest first, so only the deepest layer's recompute
  // can go ahead (the next layer's recompute follows its backward in the
  // queue, as the exporter orders it). A layer-grain backward whose
  // deepest layer recomputes nothing is not split (nor is its program).
  auto aheadMs = [&](const Command &c) {
    const StageJob &j = pipeline.jobs[c.job];
    unsigned end = std::min<unsigned>(j.range.end, layers.size());
    double ms = 0;
    for (unsigned l = j.range.begin; l < end; ++l) {
      if (!j.layerGrain || l + 1 == end)
        ms += layers[l].backwardRecomputeMs();
      // At stage grain a shallower layer's whole forward feeds the next
      // (Pipeline.cpp, computeMs).
      if (!j.layerGrain && l + 1 < end)
        ms += layers[l].recomputeSkippedMs;
    }
    return ms;
  };
  auto splits = [&](const Command &c) {
    return c.kind == CommandKind::backward && c.job >= 0 &&
           size_t(c.job) < pipeline.jobs.size() &&
           !pipeline.jobs[c.job].keepsForward &&
           llvm::any_of(c.waits,
                        [&](unsigned w) {
                          return cmds[w].kind == CommandKind::h2dGradient;
                        }) &&
           (!pipeline.jobs[c.job].layerGrain || aheadMs(c) > 0);
  };
  // New indices: a split command's recompute goes right before it.
  std::vector<unsigned> index(cmds.size());
  unsigned n = 0;
  for (auto [i, c] : llvm::enumerate(cmds)) {
    n += splits(c);
    index[i] = n++;
  }
  Schedule out;
  out.devices = schedule.devices;
  out.gpusPerLink = schedule.gpusPerLink;
  out.host = schedule.host;
  out.jobMs = schedule.jobMs;
  out.commands.reserve(n);
  for (const Command &c : cmds) {
    Command rest = c;
    for (unsigned &w : rest.waits)
      w = index[w];
    if (!splits(c)) {
      out.add(std::move(rest));
      continue;
    }
    double recomputeMs = std::min(aheadMs(c), c.ms);
    Command recompute = rest;
    recompute.ms = recomputeMs;
    recompute.label += " recompute";
    recompute.waits.clear();
    rest.waits.clear();
    for (unsigned w : c.waits)
      (cmds[w].kind == CommandKind::h2dGradient ? rest.waits : recompute.waits)
          .push_back(index[w]);
    rest.ms = c.ms - recomputeMs;
    out.add(std::move(recompute));
    out.add(std::move(rest));
  }
  return out;
}
