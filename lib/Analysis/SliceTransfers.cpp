//===- SliceTransfers.cpp - the copies of token slices' kept keys ---------===//
//
// A sliced schedule's jobs keep the keys and values of a sequence's earlier
// slices in pinned host rows, one buffer per layer for the whole sequence
// (docs/token-slices.md): a forward sends its slice's rows down, and every
// later slice's compute of a job with those layers brings rows [0, o) up.
// The rows are the carrier because the backward job of the same layers runs
// on another device, and the forward job's own next slice reads them with
// no second path to plan.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/TokenSlices.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mlir::rp;

bool mlir::rp::insertKeptKeyTransfers(Pipeline &pl,
                                      llvm::ArrayRef<int64_t> sizes,
                                      llvm::ArrayRef<int64_t> keyValueBytes,
                                      const HardwareProfile &hw,
                                      std::string &error) {
  unsigned slices = sizes.size();
  if (slices < 2)
    return true;
  std::vector<int64_t> offsets(slices, 0);
  for (unsigned k = 1; k < slices; ++k)
    offsets[k] = offsets[k - 1] + sizes[k - 1];
  const std::vector<Command> &old = pl.schedule.commands;
  auto perToken = [&](const StageJob &job) {
    int64_t bytes = 0;
    for (unsigned l = job.range.begin;
         l < std::min<size_t>(job.range.end, keyValueBytes.size()); ++l)
      bytes += keyValueBytes[l];
    return bytes;
  };
  // The first layer whose keys a copy carries: its `boundary` in the IR.
  auto firstKeeper = [&](const StageJob &job) {
    for (unsigned l = job.range.begin; l < job.range.end; ++l)
      if (l < keyValueBytes.size() && keyValueBytes[l] > 0)
        return int(l);
    return int(job.range.begin);
  };
  unsigned perStep = std::max(1u, pl.jobsPerStep());

  // The commands as one index space: the old ones, then the new copies.
  std::vector<Command> all = old;
  auto copy = [&](CommandKind kind, const Command &of, int64_t bytes) {
    Command c;
    c.kind = kind;
    c.queue = queueOf(kind);
    c.device = of.device;
    c.job = of.job;
    c.microbatch = of.microbatch;
    c.bytes = bytes;
    c.boundary = firstKeeper(pl.jobs[of.job]);
    c.ms = hw.copyMs(double(bytes), kind == CommandKind::h2dKeys);
    c.label = (kind == CommandKind::h2dKeys ? "KV s" : "KV OUT s") +
              std::to_string(of.job) + " mb" + std::to_string(of.microbatch);
    all.push_back(std::move(c));
    return unsigned(all.size() - 1);
  };
  // Per old command, the new copies issued just before and just after it
  // (the vector's order is each queue's).
  std::vector<std::vector<unsigned>> before(old.size()), after(old.size());

  // The downloads: after each forward-kind compute of a slice but the last,
  // behind its other downloads (the next job's input goes first).
  std::map<unsigned, unsigned> downloadOf; // old compute -> its key download
  for (unsigned i = 0; i < old.size(); ++i) {
    const Command &c = old[i];
    if (c.kind != CommandKind::forward || c.microbatch < 0 ||
        unsigned(c.microbatch) % slices == slices - 1)
      continue;
    int64_t bytes = perToken(pl.jobs[c.job]);
    if (bytes == 0)
      continue;
    unsigned anchor = i;
    for (unsigned j = i + 1; j < old.size(); ++j)
      if (old[j].queue == Queue::d2h && old[j].job == c.job &&
          old[j].microbatch == c.microbatch &&
          llvm::is_contained(old[j].waits, i))
        anchor = j;
    unsigned d = copy(CommandKind::d2hKeys, c,
                      bytes * sizes[unsigned(c.microbatch) % slices]);
    all[d].waits.push_back(i);
    after[anchor].push_back(d);
    downloadOf[i] = d;
  }
  // Which forward-kind compute makes layer l's keys of microbatch mb in
  // step `step`: the one whose job covers l (the forward jobs cover the
  // layers before the tail, the tail's sweep the tail's).
  std::map<std::tuple<unsigned, int, unsigned>, unsigned> maker;
  for (auto [i, c] : llvm::enumerate(old))
    if (c.kind == CommandKind::forward && c.microbatch >= 0)
      for (unsigned l = pl.jobs[c.job].range.begin;
           l < pl.jobs[c.job].range.end; ++l)
        maker[{unsigned(c.job) / perStep, c.microbatch, l}] = unsigned(i);

  // The uploads, and the two-in-flight gates.
  std::vector<std::vector<unsigned>> computes(pl.devices);
  for (unsigned i = 0; i < old.size(); ++i) {
    const Command &c = old[i];
    if (!isCompute(c.kind) || c.microbatch < 0)
      continue;
    std::vector<unsigned> &done = computes[c.device];
    // The key download of the compute two places back frees its buffer.
    if (done.size() >= 2)
      if (auto it = downloadOf.find(done[done.size() - 2]);
          it != downloadOf.end())
        all[i].waits.push_back(it->second);
    unsigned k = unsigned(c.microbatch) % slices;
    const StageJob &job = pl.jobs[c.job];
    int64_t bytes = perToken(job);
    if (k > 0 && bytes > 0) {
      // A forward (a forward job's or the tail's sweep) reads the rows its
      // previous slice is still sending: the rows of the slices before
      // that one come up in a copy of their own, which waits only for
      // their downloads and so runs while that slice computes; then the
      // previous slice's rows, after their download. The round trip that
      // stays serial is one slice's rows, not the whole prefix's.
      bool split = c.kind == CommandKind::forward && k >= 2;
      std::vector<std::pair<int, int>> parts;
      if (split)
        parts = {{0, int(k) - 1}, {int(k) - 1, int(k)}};
      else
        parts = {{-1, -1}};
      int first = c.microbatch - int(k);
      for (auto [from, to] : parts) {
        int lo = from < 0 ? 0 : from, hi = from < 0 ? int(k) : to;
        unsigned up =
            copy(CommandKind::h2dKeys, c,
                 bytes * (offsets[hi - 1] + sizes[hi - 1] - offsets[lo]));
        all[up].keptFirst = from;
        all[up].keptEnd = to;
        std::set<unsigned> waits;
        for (unsigned l = job.range.begin; l < job.range.end; ++l) {
          if (l >= keyValueBytes.size() || keyValueBytes[l] == 0)
            continue;
          for (int j = first + lo; j < first + hi; ++j) {
            auto m = maker.find({unsigned(c.job) / perStep, j, l});
            auto d = m == maker.end() ? downloadOf.end()
                                      : downloadOf.find(m->second);
            if (d == downloadOf.end()) {
              error = "token slices: no forward command makes the keys of "
                      "layer " +
                      std::to_string(l) + " of microbatch " +
                      std::to_string(j) + ", which " + c.label + " reads";
              return false;
            }
            waits.insert(d->second);
          }
        }
        all[up].waits.assign(waits.begin(), waits.end());
        if (done.size() >= 2)
          all[up].waits.push_back(done[done.size() - 2]);
        all[i].waits.push_back(up);
        // The tail and a backward read rows their forwards sent long
        // before: ahead of the compute's own uploads, whose gradient comes
        // last; so does a forward's earlier rows. The rows a forward's
        // previous slice is still sending come behind its input, which
        // may then come up while that slice computes.
        unsigned anchor = i;
        if (c.kind != CommandKind::forward || (split && from == 0))
          for (unsigned w : c.waits)
            if (old[w].queue == Queue::activationH2D && old[w].job == c.job &&
                old[w].microbatch == c.microbatch)
              anchor = std::min(anchor, w);
        before[anchor].push_back(up);
      }
    }
    done.push_back(i);
  }

  // Issue order: each old command with its new neighbours; then the waits
  // renumbered.
  std::vector<unsigned> order;
  order.reserve(all.size());
  for (unsigned i = 0; i < old.size(); ++i) {
    llvm::append_range(order, before[i]);
    order.push_back(i);
    llvm::append_range(order, after[i]);
  }
  std::vector<unsigned> at(all.size());
  for (auto [n, i] : llvm::enumerate(order))
    at[i] = unsigned(n);
  std::vector<Command> out;
  out.reserve(all.size());
  for (unsigned i : order) {
    Command c = std::move(all[i]);
    for (unsigned &w : c.waits)
      w = at[w];
    out.push_back(std::move(c));
  }
  pl.schedule.commands = std::move(out);
  return true;
}
