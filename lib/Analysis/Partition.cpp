//===- Partition.cpp - RoundPipe's stage partitioning ---------------------===//

#include "rp/Analysis/Partition.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// RoundPipe accepts bottlenecks up to 10% above the largest layer.
constexpr double kUpperThreshold = 1.1;

struct LayerLoad {
  double f, g;     // recompute, recompute + backward
  int64_t sz, bsz; // weights; weights and gradients
};

} // namespace

std::vector<StageRange> mlir::rp::cutUnder(llvm::ArrayRef<LayerCost> layers,
                                           unsigned k, double w, int64_t cap,
                                           bool backward) {
  // Forward lists are cut from the deepest layer down, backward ones from
  // layer 0 up; either way the stages come out in list order once the walk
  // is reversed, with the remainder in the last stage cut.
  std::vector<StageRange> stages;
  double time = 0;
  int64_t bytes = 0;
  for (unsigned i = 0; i < k; ++i) {
    unsigned l = backward ? i : k - 1 - i;
    const LayerCost &c = layers[l];
    double t = c.recomputeMs + (backward ? c.backwardMs : 0);
    int64_t b = c.paramBytes + (backward ? c.gradBytes : 0);
    if (stages.empty() || time + t > w || bytes + b > cap) {
      stages.push_back({l, l + 1});
      time = t;
      bytes = b;
      continue;
    }
    StageRange &s = stages.back();
    s = {std::min(s.begin, l), std::max(s.end, l + 1)};
    time += t;
    bytes += b;
  }
  std::reverse(stages.begin(), stages.end());
  return stages;
}

Partition mlir::rp::partitionFromSizes(llvm::ArrayRef<unsigned> fwd,
                                       unsigned tail,
                                       llvm::ArrayRef<unsigned> bwd,
                                       unsigned numLayers) {
  Partition p;
  unsigned next = 0;
  for (unsigned n : fwd) {
    p.forward.push_back({next, next + n});
    next += n;
  }
  p.tail = {numLayers - tail, numLayers};
  unsigned end = numLayers - tail;
  for (unsigned n : bwd) {
    p.backward.push_back({end - n, end});
    end -= n;
  }
  return p;
}

Partition mlir::rp::partitionRoundPipe(llvm::ArrayRef<LayerCost> layers,
                                       int64_t stageBytes, unsigned minStages,
                                       std::string *raisedFor) {
  std::vector<LayerLoad> loads;
  double wMax = 0;
  for (const LayerCost &c : layers) {
    LayerLoad load{c.recomputeMs, c.recomputeMs + c.backwardMs, c.paramBytes,
                   c.paramBytes + c.gradBytes};
    wMax = std::max({wMax, load.f, load.g});
    if (load.bsz > stageBytes) {
      stageBytes = load.bsz;
      if (raisedFor)
        *raisedFor = c.name;
    }
    loads.push_back(load);
  }

  // Candidate bottlenecks: contiguous run sums in [wMax, 1.1 wMax].
  std::vector<double> candidates;
  for (bool backwardLoad : {false, true})
    for (unsigned start = 0; start < loads.size(); ++start) {
      double sum = 0;
      for (unsigned l = start; l < loads.size(); ++l) {
        sum += backwardLoad ? loads[l].g : loads[l].f;
        if (sum > kUpperThreshold * wMax)
          break;
        if (sum >= wMax)
          candidates.push_back(sum);
      }
    }
  llvm::sort(candidates);
  candidates.erase(std::unique(candidates.begin(), candidates.end()),
                   candidates.end());

  unsigned numLayers = loads.size();
  Partition best;
  bool found = false;
  for (double w : candidates) {
    Partition p;
    p.bottleneckMs = w;
    p.stageBytes = stageBytes;
    // The fused tail takes layers from the end while they fit.
    unsigned k = numLayers;
    double time = 0;
    int64_t bytes = 0;
    while (k > 0 && time + loads[k - 1].g <= w &&
           bytes + loads[k - 1].bsz <= stageBytes) {
      --k;
      time += loads[k].g;
      bytes += loads[k].bsz;
    }
    if (k == numLayers)
      continue; // cannot happen for w >= wMax; kept for safety
    p.tail = {k, numLayers};

    p.forward = cutUnder(layers, k, w, stageBytes, /*backward=*/false);
    p.backward = cutUnder(layers, k, w, stageBytes, /*backward=*/true);

    p.proxyCostMs = std::max(p.numStages(), minStages) * w;
    if (!found || p.proxyCostMs < best.proxyCostMs) {
      best = std::move(p);
      found = true;
    }
  }
  return best;
}

namespace {

/// "A,B,C" into sizes; false on anything but positive integers.
bool parseSizes(StringRef list, std::vector<unsigned> &sizes) {
  list = list.trim();
  if (list.empty())
    return true;
  llvm::SmallVector<StringRef> parts;
  list.split(parts, ',');
  for (StringRef part : parts) {
    unsigned n;
    if (part.trim().getAsInteger(10, n) || n == 0)
      return false;
    sizes.push_back(n);
  }
  return true;
}

unsigned sum(llvm::ArrayRef<unsigned> sizes) {
  unsigned total = 0;
  for (unsigned n : sizes)
    total += n;
  return total;
}

} // namespace

FailureOr<Partition>
mlir::rp::parseStages(StringRef spec, unsigned numLayers,
                      llvm::function_ref<InFlightDiagnostic()> emit) {
  auto [fwdPart, bwdPart] = spec.split(';');
  std::vector<unsigned> fwd, bwd;
  StringRef fwdList = fwdPart.trim(), bwdList = bwdPart.trim();
  if (!fwdList.consume_front("fwd:") || !bwdList.consume_front("bwd:") ||
      !parseSizes(fwdList, fwd) || !parseSizes(bwdList, bwd))
    return emit() << "cannot read stages '" << spec
                  << "': expected fwd:A,B,...;bwd:X,Y,... with positive "
                     "layer counts (the backward list starts with the fused "
                     "tail)";
  if (bwd.empty())
    return emit() << "stages '" << spec
                  << "' have no backward list; its first entry is the fused "
                     "tail, which every training step needs";
  if (sum(bwd) != numLayers || sum(fwd) + bwd.front() != numLayers)
    return emit() << "stages '" << spec << "' do not cover the " << numLayers
                  << " layers: the backward sizes add up to " << sum(bwd)
                  << " and the forward sizes plus the tail (" << bwd.front()
                  << ") to " << sum(fwd) + bwd.front() << "; both must be "
                  << numLayers;
  return partitionFromSizes(fwd, bwd.front(), llvm::ArrayRef(bwd).drop_front(),
                            numLayers);
}

std::string mlir::rp::formatStages(const Partition &p) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "fwd:";
  llvm::interleave(
      p.forward, os, [&](const StageRange &s) { os << s.size(); }, ",");
  os << ";bwd:" << p.tail.size();
  for (const StageRange &s : p.backward)
    os << "," << s.size();
  return text;
}

int64_t mlir::rp::stageBytes(const StageRange &s,
                             llvm::ArrayRef<LayerCost> layers,
                             bool withGradients) {
  int64_t bytes = 0;
  for (unsigned l = s.begin; l < s.end; ++l)
    bytes += layers[l].paramBytes + (withGradients ? layers[l].gradBytes : 0);
  return bytes;
}

void mlir::rp::scorePartition(Partition &p, llvm::ArrayRef<LayerCost> layers,
                              unsigned minStages) {
  auto time = [&](const StageRange &s, bool backward) {
    double t = 0;
    for (unsigned l = s.begin; l < s.end; ++l)
      t += layers[l].recomputeMs + (backward ? layers[l].backwardMs : 0);
    return t;
  };
  double w = time(p.tail, true);
  for (const StageRange &s : p.forward)
    w = std::max(w, time(s, false));
  for (const StageRange &s : p.backward)
    w = std::max(w, time(s, true));
  p.bottleneckMs = w;
  p.proxyCostMs = std::max(p.numStages(), minStages) * w;
}
