//===- LayerAssignment.cpp - which layer each op of a graph is in ---------===//

#include "rp/Analysis/LayerAssignment.h"
#include "rp/Dialect/RP/RPOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::rp;

bool mlir::rp::isLayerFree(Operation *op) {
  return isa<ConstantOp, ParamOp>(op) || op->hasTrait<OpTrait::IsTerminator>();
}

static SmallVector<Operation *> computeOps(func::FuncOp func) {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    if (!isLayerFree(&op))
      ops.push_back(&op);
  return ops;
}

static StringRef nameOf(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().getValue();
  return {};
}

/// Wraps ops outside the layers into a prefix and a suffix layer, and gives
/// ops between layers to the layer before them.
static LayerAssignment finish(ArrayRef<Operation *> ops,
                              ArrayRef<int> bodyIndex,
                              ArrayRef<std::string> bodyNames,
                              StringRef source) {
  LayerAssignment a;
  a.source = source.str();
  int first = -1, last = -1;
  for (auto [i, b] : llvm::enumerate(bodyIndex))
    if (b >= 0) {
      if (first < 0)
        first = i;
      last = i;
    }
  bool prefix = first > 0, suffix = last + 1 < (int)ops.size();
  if (prefix)
    a.names.push_back("prefix");
  unsigned offset = prefix ? 1 : 0;
  llvm::append_range(a.names, bodyNames);
  if (suffix)
    a.names.push_back("suffix");
  int current = -1;
  for (auto [i, op] : llvm::enumerate(ops)) {
    int b = bodyIndex[i];
    if (b >= 0)
      current = b;
    if ((int)i < first)
      a.layerOf[op] = 0;
    else if ((int)i > last)
      a.layerOf[op] = a.names.size() - 1;
    else
      a.layerOf[op] = offset + (b >= 0 ? b : current);
  }
  return a;
}

FailureOr<LayerAssignment> mlir::rp::assignLayersByScope(func::FuncOp func) {
  SmallVector<Operation *> ops = computeOps(func);
  // A scope component ending in a number (h.3, layers.1, encoder_layer_2)
  // is a candidate layer; its family is the path with the number removed.
  llvm::Regex numbered("^(.*[._])([0-9]+)$");
  SmallVector<std::pair<std::string, std::string>> keyOf; // (family, key)
  llvm::StringMap<unsigned> familyCount;
  for (Operation *op : ops) {
    SmallVector<StringRef> parts;
    nameOf(op).split(parts, '/');
    std::string path, family, key;
    // The last component names the op itself, not a scope.
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].empty())
        continue;
      path += (path.empty() ? "" : ".") + parts[i].str();
      SmallVector<StringRef> m;
      if (numbered.match(parts[i], &m)) {
        family = path.substr(0, path.size() - m[2].size());
        key = path;
        break;
      }
    }
    keyOf.push_back({family, key});
    if (!key.empty())
      ++familyCount[family];
  }
  // The family covering the most ops is the stack of layers.
  std::string best;
  unsigned bestCount = 0;
  for (auto &f : familyCount)
    if (f.second > bestCount || (f.second == bestCount && f.first() < best)) {
      best = f.first().str();
      bestCount = f.second;
    }
  if (bestCount == 0)
    return failure();
  std::vector<std::string> names;
  llvm::StringMap<int> indexOf;
  SmallVector<int> bodyIndex;
  for (auto &[family, key] : keyOf) {
    if (family != best) {
      bodyIndex.push_back(-1);
      continue;
    }
    auto [it, inserted] = indexOf.try_emplace(key, names.size());
    if (inserted)
      names.push_back(key);
    bodyIndex.push_back(it->second);
  }
  return finish(ops, bodyIndex, names, "scope");
}

/// A segment's signature: the op names and result types in order (two
/// layers of one stack compute the same shapes).
static std::string signature(ArrayRef<Operation *> ops) {
  std::string s;
  llvm::raw_string_ostream os(s);
  for (Operation *op : ops) {
    os << op->getName() << ":";
    for (Type t : op->getResultTypes())
      os << t << ",";
    os << ";";
  }
  return s;
}

FailureOr<LayerAssignment>
mlir::rp::assignLayersByStructure(func::FuncOp func) {
  SmallVector<Operation *> ops = computeOps(func);
  if (ops.size() < 2)
    return failure();
  llvm::DenseMap<Operation *, int> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // Live activations across the cut before op i: values defined before i
  // (arguments count as defined at -1) and used at or after i. Constants
  // and parameters are not activations.
  SmallVector<int> live(ops.size() + 1, 0);
  auto lastUse = [&](Value v) {
    int l = -1;
    for (Operation *user : v.getUsers()) {
      auto it = position.find(user);
      l = std::max(l, it == position.end() ? (int)ops.size() : it->second);
    }
    return l;
  };
  auto addRange = [&](int def, int use) {
    for (int c = def + 1; c <= use && c <= (int)ops.size(); ++c)
      ++live[c];
  };
  for (BlockArgument arg : func.getArguments())
    addRange(-1, lastUse(arg));
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value r : op->getResults())
      addRange(i, lastUse(r));
  int minLive = INT_MAX;
  for (size_t c = 1; c < ops.size(); ++c)
    minLive = std::min(minLive, live[c]);
  SmallVector<size_t> cuts = {0};
  for (size_t c = 1; c < ops.size(); ++c)
    if (live[c] == minLive)
      cuts.push_back(c);
  cuts.push_back(ops.size());
  SmallVector<std::string> sigs;
  for (size_t s = 0; s + 1 < cuts.size(); ++s)
    sigs.push_back(
        signature(ArrayRef(ops).slice(cuts[s], cuts[s + 1] - cuts[s])));
  // The longest run of identical groups of `period` segments; ties go to
  // the shorter period (finer layers).
  size_t m = sigs.size(), bestStart = 0, bestPeriod = 0, bestRun = 0;
  for (size_t period = 1; period <= m / 2; ++period)
    for (size_t start = 0; start + 2 * period <= m; ++start) {
      size_t run = 1;
      while (start + (run + 1) * period <= m &&
             std::equal(sigs.begin() + start, sigs.begin() + start + period,
                        sigs.begin() + start + run * period))
        ++run;
      if (run >= 2 && run * period > bestRun * bestPeriod) {
        bestStart = start;
        bestPeriod = period;
        bestRun = run;
      }
    }
  if (bestRun < 2)
    return failure();
  SmallVector<int> bodyIndex(ops.size(), -1);
  std::vector<std::string> names;
  for (size_t l = 0; l < bestRun; ++l) {
    names.push_back("layers." + std::to_string(l));
    size_t from = cuts[bestStart + l * bestPeriod];
    size_t to = cuts[bestStart + (l + 1) * bestPeriod];
    for (size_t i = from; i < to; ++i)
      bodyIndex[i] = l;
  }
  return finish(ops, bodyIndex, names, "structure");
}

LogicalResult mlir::rp::verifyLayerOrder(func::FuncOp func,
                                         const LayerAssignment &a, bool emit) {
  for (Operation &op : func.getBody().front()) {
    auto self = a.layerOf.find(&op);
    if (self == a.layerOf.end())
      continue;
    unsigned layer = self->second;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto it = def ? a.layerOf.find(def) : a.layerOf.end();
      if (it != a.layerOf.end() && it->second > layer) {
        if (emit) {
          InFlightDiagnostic diag = op.emitOpError("in layer '")
                                    << a.names[layer]
                                    << "' reads a value of the later layer '"
                                    << a.names[it->second] << "'";
          diag.attachNote(def->getLoc()) << "the value is computed here";
        }
        return failure();
      }
    }
  }
  return success();
}
