//===- StagedCopies.cpp - the copy jobs of a staged plan ------------------===//
//
// The copies of a staged plan's schedule commands: a forward or backward
// job's results handed on (downloaded by whichever of its downloads carries
// them first), its inputs and gradients uploaded from the host rows, its
// weight set's chunks uploaded, and its weight gradients downloaded.
//
//===----------------------------------------------------------------------===//

#include "StagedExporter.h"

using namespace mlir;
using namespace mlir::rp;

void StagedExporter::assignCarriers(unsigned job, unsigned mb) {
  const StageJob &j = jobs[job];
  const std::vector<unsigned> &downs = downloadsOf[{job, mb}];
  for (Value r : j.handedOn) {
    // By default the first download carries it (every later one on the
    // queue finishes after it).
    int chosen = downs.empty() ? -1 : int(downs.front());
    // A forward's output goes down alone: a value goes with the first
    // download, in queue order, that one of its consumers waits for, so
    // the next stage's input does not wait behind saved inputs. Values
    // read elsewhere than by other jobs' layers, or by a job no download
    // is listed for, stay on the first.
    if (j.role == LayerRole::forward) {
      std::set<int> needed;
      bool anywhere = false;
      for (Operation *user : r.getUsers()) {
        auto it = layerJob.find(user);
        if (!isa<LayerOp>(user) || it == layerJob.end()) {
          anywhere = true;
          continue;
        }
        if (it->second != job)
          needed.insert(int(jobs[it->second].begin));
      }
      std::set<int> listed;
      for (unsigned d : downs)
        listed.insert(cmds[d].boundary);
      bool covered =
          llvm::all_of(needed, [&](int b) { return listed.count(b); });
      if (!anywhere && covered && !needed.empty())
        for (unsigned d : downs)
          if (needed.count(cmds[d].boundary)) {
            chosen = int(d);
            break;
          }
    }
    carrier[{valueKey(r), mb}] = chosen;
  }
}

unsigned StagedExporter::emitDownload(const Cmd &c, int index,
                                      ArrayRef<unsigned> waits,
                                      const std::string &text) {
  const StageJob &j = jobs[c.job];
  unsigned mb = c.mb;
  std::vector<fb::Offset<pf::Copy>> copies;
  auto [it, fresh] = firstDownload.try_emplace({unsigned(c.job), mb}, 0);
  if (fresh)
    assignCarriers(c.job, mb);
  for (Value r : j.handedOn) {
    int by = carrier.at({valueKey(r), mb});
    if (index >= 0 ? by != index : !fresh)
      continue;
    // Token slices: a loss row per slice (@main's), a value of a slice
    // function a row per sequence.
    Value k = canonical(r);
    uint32_t h = hostRows(k);
    int64_t row = rowBytes(k, h);
    copies.push_back(
        copy(outputBuffer(r, c.job, mb), 0, h, row * rowOf(k, mb), row));
  }
  unsigned e = addJob(c, pf::Queue::d2h, std::nullopt, copies, waits, text);
  if (fresh)
    it->second = e;
  return e;
}

void StagedExporter::emitInputs(unsigned index) {
  const Cmd &c = cmds[index];
  unsigned mb = c.mb;
  SmallVector<unsigned> waits;
  llvm::DenseSet<unsigned> from;
  for (unsigned x : c.waits) {
    waits.push_back(eventOf[x]);
    if (cmds[x].kind == Kind::activationOut ||
        cmds[x].kind == Kind::gradientOut)
      from.insert(cmds[x].job);
  }
  bool gradient = c.kind == Kind::gradientIn;
  std::vector<fb::Offset<pf::Copy>> copies;
  llvm::SetVector<Value> &pending = toUpload[{unsigned(c.job), mb}];
  for (Value v : SmallVector<Value>(pending.begin(), pending.end())) {
    if (isGradientValue(v) != gradient)
      continue;
    if (producer.count(v) && !from.contains(producerOf(v, mb)))
      continue;
    if (slices) {
      // Kept keys and values come with the rp.kept_keys uploads only.
      if (c.keys != bool(keptArgs.count(v)))
        continue;
      hostCopies(v, mb, inputBuffer(v, c.job, mb), copies, c.keptFirst,
                 c.keptEnd);
      // A part of the prefix leaves the rest to the upload after it.
      if (c.keptFirst < 0 || unsigned(c.keptEnd) == mb % slices)
        pending.remove(v);
      continue;
    }
    uint32_t b = isa<BlockArgument>(v) ? w.bufferIndex.at(v) : hostRows(v);
    int64_t row = rowBytes(v, b);
    copies.push_back(copy(b, row * mb, inputBuffer(v, c.job, mb), 0,
                          row ? row : w.bufferBytes[b]));
    pending.remove(v);
  }
  eventOf[index] = addJob(c, pf::Queue::activation_h2d, std::nullopt, copies,
                          waits, label(c));
}

void StagedExporter::emitWeights(unsigned index) {
  const Cmd &c = cmds[index];
  unsigned set = jobs[c.job].weightSet;
  SmallVector<unsigned> waits = waitsOf(c);
  // The set's weights as one byte stream cut into the schedule's chunks.
  int64_t lo = int64_t(c.chunk) * kWeightChunkBytes;
  int64_t hi =
      c.chunk + 1 == upCount[c.job] ? INT64_MAX : lo + kWeightChunkBytes;
  std::vector<fb::Offset<pf::Copy>> copies;
  int64_t at = 0;
  for (Value v : setWeights[set]) {
    uint32_t src = w.bufferOf(v);
    int64_t n = w.bufferBytes[src];
    int64_t b = std::max(at, lo), e = std::min(at + n, hi);
    if (b < e)
      copies.push_back(
          copy(src, b - at, weightBuffer(v, c.job), b - at, e - b));
    at += n;
  }
  eventOf[index] =
      addJob(c, pf::Queue::weight_h2d, std::nullopt, copies, waits, label(c));
}

void StagedExporter::emitWeightGrads(unsigned index) {
  const Cmd &c = cmds[index];
  unsigned set = jobs[c.job].weightSet;
  SmallVector<unsigned> waits = waitsOf(c);
  std::vector<fb::Offset<pf::Copy>> copies;
  for (auto [n, j] : llvm::enumerate(jobs))
    if (j.weightSet == set)
      for (Value r : j.grads) {
        std::pair<Operation *, unsigned> key{gradKey(r), unsigned(n)};
        if (downloadedEarly.count(key))
          continue;
        auto [h, fresh] = gradHost.try_emplace(key, 0);
        if (fresh)
          h->second = w.newBuffer(r.getType(), "grad", -1);
        copies.push_back(
            copy(accBuffer.at(key), 0, h->second, 0, w.bufferBytes[h->second]));
      }
  Cmd g = c;
  g.mb = -1;
  eventOf[index] =
      addJob(g, pf::Queue::d2h, std::nullopt, copies, waits, label(c));
}
