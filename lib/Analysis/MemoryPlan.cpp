//===- MemoryPlan.cpp - static buffers of a pipeline ----------------------===//

#include "rp/Analysis/MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>

using namespace mlir;
using namespace mlir::rp;

struct HappensBefore::Rows {
  /// The schedule's shape: per command its device, queue and earlier
  /// waits (all the rows read).
  std::vector<unsigned> shape;
  std::vector<std::vector<uint64_t>> reach;
  /// horizons(pool) answered before, by pool.
  std::mutex mutex;
  std::map<std::vector<unsigned>, std::vector<unsigned>> horizons;
};

namespace {

/// The rows of the last schedules built (each up to commands^2 / 8 bytes:
/// a few kept), shared by every plan of the same shape; a search's
/// threads build theirs at once.
struct RowsMemo {
  std::mutex mutex;
  std::vector<std::shared_ptr<HappensBefore::Rows>> kept;
};
constexpr size_t kRowsKept = 2;

RowsMemo &rowsMemo() {
  static RowsMemo memo;
  return memo;
}

} // namespace

HappensBefore::HappensBefore(const Schedule &schedule) {
  const std::vector<Command> &cmds = schedule.commands;
  std::vector<unsigned> shape;
  shape.reserve(cmds.size() * 4);
  for (unsigned i = 0; i < cmds.size(); ++i) {
    shape.push_back(cmds[i].device);
    shape.push_back(unsigned(cmds[i].queue));
    size_t at = shape.size();
    shape.push_back(0);
    for (unsigned w : cmds[i].waits)
      if (w < i) {
        shape.push_back(w);
        ++shape[at];
      }
  }
  RowsMemo &memo = rowsMemo();
  {
    std::lock_guard<std::mutex> lock(memo.mutex);
    for (const std::shared_ptr<Rows> &r : memo.kept)
      if (r->shape == shape) {
        rows = r;
        reach = &rows->reach;
        return;
      }
  }
  rows = std::make_shared<Rows>();
  rows->shape = std::move(shape);
  std::vector<std::vector<uint64_t>> &reach = rows->reach;
  size_t words = (cmds.size() + 63) / 64;
  reach.assign(cmds.size(), std::vector<uint64_t>(words, 0));
  std::map<std::pair<unsigned, unsigned>, unsigned> lastOnQueue;
  for (unsigned i = 0; i < cmds.size(); ++i) {
    std::vector<unsigned> preds;
    for (unsigned w : cmds[i].waits)
      if (w < i)
        preds.push_back(w);
    auto key = std::make_pair(cmds[i].device, unsigned(cmds[i].queue));
    if (auto it = lastOnQueue.find(key); it != lastOnQueue.end())
      preds.push_back(it->second);
    lastOnQueue[key] = i;
    for (unsigned p : preds) {
      for (size_t w = 0; w < words; ++w)
        reach[i][w] |= reach[p][w];
      reach[i][p / 64] |= uint64_t(1) << (p % 64);
    }
  }
  this->reach = &rows->reach;
  std::lock_guard<std::mutex> lock(memo.mutex);
  memo.kept.insert(memo.kept.begin(), rows);
  if (memo.kept.size() > kRowsKept)
    memo.kept.pop_back();
}

std::vector<unsigned>
HappensBefore::horizons(llvm::ArrayRef<unsigned> pool) const {
  std::vector<unsigned> key(pool.begin(), pool.end());
  {
    std::lock_guard<std::mutex> lock(rows->mutex);
    if (auto it = rows->horizons.find(key); it != rows->horizons.end())
      return it->second;
  }
  const std::vector<std::vector<uint64_t>> &reach = *this->reach;
  size_t n = reach.size(), words = (n + 63) / 64;
  std::vector<unsigned> horizon(n);
  for (unsigned u = 0; u < n; ++u)
    horizon[u] = u + 1;
  // From the last command of the pool down: a command not yet given a
  // horizon that v does not wait for gets v + 1, the latest such v.
  std::vector<uint64_t> given(words, 0);
  for (unsigned v : llvm::reverse(pool)) {
    const std::vector<uint64_t> &row = reach[v];
    for (size_t w = 0; w * 64 < v; ++w) {
      uint64_t open = ~row[w] & ~given[w];
      if (w == v / 64)
        open &= (uint64_t(1) << (v % 64)) - 1;
      given[w] |= open;
      for (; open; open &= open - 1)
        horizon[w * 64 + __builtin_ctzll(open)] = v + 1;
    }
  }
  std::lock_guard<std::mutex> lock(rows->mutex);
  rows->horizons.try_emplace(std::move(key), horizon);
  return horizon;
}

bool mlir::rp::disjointInTime(const PlannedBuffer &a, const PlannedBuffer &b,
                              const HappensBefore &hb) {
  auto allBefore = [&](const PlannedBuffer &x, const PlannedBuffer &y) {
    for (unsigned u : x.users)
      for (unsigned v : y.users)
        if (!hb(u, v))
          return false;
    return true;
  };
  return allBefore(a, b) || allBefore(b, a);
}

namespace {

std::string rangeText(StageRange r) {
  return "layers " + std::to_string(r.begin) + "-" + std::to_string(r.end - 1);
}

/// A pool's buffer as place() reads it: its issue-order span, and the
/// horizon of its users (HappensBefore::horizons): a buffer of the pool
/// whose first user is at or past `done` comes after it in time.
struct Span {
  PlannedBuffer *buffer;
  unsigned first, last, done;
};

/// Whether every use of `p` happens before every use of `b`
/// (disjointInTime one way round); never when `p`'s last use is not
/// before `b`'s first in issue order.
bool before(const Span &p, const Span &b, const HappensBefore &hb) {
  if (p.last >= b.first)
    return false;
  for (unsigned u : p.buffer->users)
    for (unsigned v : b.buffer->users)
      if (!hb(u, v))
        return false;
  return true;
}

/// First fit: the lowest offset where `b` overlaps no placed buffer of its
/// device that it may be live with. `live` is scratch. Either way round:
/// largest first places a buffer before earlier-used ones.
void place(const Span &b, llvm::ArrayRef<Span> placed,
           std::vector<std::pair<int64_t, int64_t>> &live,
           const HappensBefore &hb) {
  live.clear();
  // Spans apart by their horizons are ordered (before() would say so,
  // user by user): only the others are tested.
  for (const Span &p : placed)
    if (p.first < b.done && b.first < p.done && !before(p, b, hb) &&
        !before(b, p, hb))
      live.emplace_back(p.buffer->offset, p.buffer->offset + p.buffer->bytes);
  // By offset: `placed` is kept sorted by offset (firstFit), so `live`
  // is too, without a sort (a w32-256 report's trials spent a tenth of
  // their time sorting it). Equal offsets in any order give the same
  // answer: each of them overlaps the window once one does, and the
  // window then moves past the largest of their ends.
  int64_t offset = 0, bytes = b.buffer->bytes;
  for (auto [at, end] : live)
    if (at < offset + bytes && end > offset)
      offset = std::max(offset, end);
  b.buffer->offset = offset;
}

/// RP_FIRST_FIT_CHECK=1 (set in the environment): each buffer is also
/// placed testing every placed buffer, and a different offset aborts (a
/// self-check of the horizons, quadratic; off by default).
bool firstFitCheck() {
  static const bool on = [] {
    const char *env = std::getenv("RP_FIRST_FIT_CHECK");
    return env && *env && *env != '0';
  }();
  return on;
}

/// Places `order`'s buffers first fit, one after another; returns the peak.
/// In issue order (`order` by first user) a placed buffer whose horizon a
/// buffer's first user has reached is before it and every later one, and
/// is no longer tested: the buffers tested are those of a window of issue
/// order, not every one placed.
int64_t firstFit(llvm::ArrayRef<Span> order, const HappensBefore &hb,
                 bool issueOrder) {
  std::vector<std::pair<int64_t, int64_t>> live;
  std::vector<Span> placed;
  int64_t peak = 0;
  for (const Span &b : order) {
    if (issueOrder)
      llvm::erase_if(placed, [&](const Span &p) { return p.done <= b.first; });
    place(b, placed, live, hb);
    if (firstFitCheck()) {
      int64_t at = b.buffer->offset;
      std::vector<Span> all(order.begin(), &b);
      for (Span &s : all)
        s.done = UINT_MAX;
      // place() reads the placed buffers by offset.
      std::stable_sort(all.begin(), all.end(),
                       [](const Span &x, const Span &y) {
                         return x.buffer->offset < y.buffer->offset;
                       });
      // With no horizons every placed buffer is tested as before(), user
      // by user.
      Span plain = b;
      plain.done = UINT_MAX;
      place(plain, all, live, hb);
      if (b.buffer->offset != at) {
        llvm::errs() << "memory plan: " << b.buffer->what << " at " << at
                     << ", " << b.buffer->offset
                     << " testing every placed buffer (RP_FIRST_FIT_CHECK)\n";
        std::abort();
      }
    }
    // Sorted by offset, which place() reads them in.
    placed.insert(std::upper_bound(placed.begin(), placed.end(), b,
                                   [](const Span &x, const Span &y) {
                                     return x.buffer->offset < y.buffer->offset;
                                   }),
                  b);
    peak = std::max(peak, b.buffer->offset + b.buffer->bytes);
  }
  return peak;
}

/// The most bytes live at once over `events` (a span's first command and
/// bytes, its last command + 1 and minus its bytes): no placement of the
/// spans peaks lower (liveBytesBounds says why). Sorts `events`.
int64_t mostLive(std::vector<std::pair<unsigned, int64_t>> &events) {
  // Ends before starts at one command: a span ending at i - 1 and one
  // starting at i are apart.
  std::sort(events.begin(), events.end());
  int64_t live = 0, most = 0;
  for (auto [at, bytes] : events) {
    live += bytes;
    most = std::max(most, live);
  }
  return most;
}

} // namespace

MemoryPlan mlir::rp::collectBuffers(const Pipeline &pl,
                                    llvm::ArrayRef<LayerCost> layers) {
  MemoryPlan mp;
  const std::vector<Command> &cmds = pl.schedule.commands;
  mp.commandBuffers.assign(cmds.size(), {-1, -1, -1, -1, -1});
  auto create = [&](BufferRole role, unsigned device, std::string what) {
    mp.buffers.push_back({role, device, 0, 0, {}, std::move(what)});
    return int(mp.buffers.size() - 1);
  };
  // A command's use of a buffer that is not one of its named slots (a
  // copy's, or a static backward's read of its forward's input).
  constexpr unsigned other = 5;
  auto use = [&](int buffer, unsigned cmd, unsigned slot) {
    mp.buffers[buffer].users.push_back(cmd);
    if (slot < other)
      mp.commandBuffers[cmd][slot] = buffer;
  };

  // Weight sets: each layer's weights once, and its gradients when a job of
  // the set computes them.
  std::map<unsigned, int> setBuffer;
  for (const StageJob &job : pl.jobs) {
    if (setBuffer.count(job.weightSet))
      continue;
    std::vector<bool> inSet(layers.size(), false), grads(layers.size(), false);
    StageRange span = job.range;
    for (const StageJob &j : pl.jobs)
      if (j.weightSet == job.weightSet)
        for (unsigned l = j.range.begin; l < j.range.end; ++l) {
          inSet[l] = true;
          grads[l] = grads[l] || j.kind != CommandKind::forward;
          span.begin = std::min(span.begin, j.range.begin);
          span.end = std::max(span.end, j.range.end);
        }
    int b = create(BufferRole::weights, job.device,
                   "weights of set " + std::to_string(job.weightSet) + " (" +
                       rangeText(span) + ")");
    // A layer's constants stay on the device beside its weights.
    for (unsigned l = 0; l < layers.size(); ++l)
      mp.buffers[b].bytes +=
          (inSet[l] ? layers[l].paramBytes + layers[l].constBytes : 0) +
          (grads[l] ? layers[l].gradBytes : 0);
    setBuffer[job.weightSet] = b;
  }

  // Which compute each activation, gradient or key copy serves: an upload
  // the compute that waits for it, a download the compute it waits for
  // (both of its job and microbatch). A sliced schedule's tail runs a
  // slice twice (its forward sweep, then the fused command), each with
  // its own uploads, so the copies are not keyed by job and microbatch.
  auto isUpload = [](CommandKind k) {
    return k == CommandKind::h2dActivation || k == CommandKind::h2dGradient ||
           k == CommandKind::h2dKeys;
  };
  auto isDownload = [](CommandKind k) {
    return k == CommandKind::d2hActivation || k == CommandKind::d2hGradient ||
           k == CommandKind::d2hKeys;
  };
  std::vector<int> served(cmds.size(), -1);
  for (unsigned i = 0; i < cmds.size(); ++i) {
    const Command &c = cmds[i];
    if (!isCompute(c.kind))
      continue;
    for (unsigned w : c.waits)
      if (isUpload(cmds[w].kind) && cmds[w].job == c.job &&
          cmds[w].microbatch == c.microbatch)
        served[w] = int(i);
  }
  for (unsigned i = 0; i < cmds.size(); ++i) {
    const Command &c = cmds[i];
    if (isDownload(c.kind)) {
      for (unsigned w : c.waits)
        if (isCompute(cmds[w].kind) && cmds[w].job == c.job &&
            cmds[w].microbatch == c.microbatch)
          served[i] = std::max(served[i], int(w));
    } else if (isUpload(c.kind) && served[i] < 0) {
      // No compute waits for it directly: the next of its job and
      // microbatch reads it.
      for (unsigned j = i + 1; j < cmds.size() && served[i] < 0; ++j)
        if (isCompute(cmds[j].kind) && cmds[j].job == c.job &&
            cmds[j].microbatch == c.microbatch)
          served[i] = int(j);
    }
  }

  // Token slices: a tail or backward job that brings up kept keys sums
  // their gradients from its later slices into an accumulator that lives
  // across the job's computes of the pass, as its weight gradients do.
  // Slice k adds rows [0, o) and reads its own; the rows of the first
  // slice it runs (the last of the sequence) are never added to, so the
  // accumulator holds that slice's prefix: its upload's bytes.
  std::map<int, int64_t> keyGradBytes;
  for (unsigned i = 0; i < cmds.size(); ++i)
    if (cmds[i].kind == CommandKind::h2dKeys && served[i] >= 0 &&
        (cmds[served[i]].kind == CommandKind::tail ||
         cmds[served[i]].kind == CommandKind::backward))
      keyGradBytes[cmds[i].job] =
          std::max(keyGradBytes[cmds[i].job], cmds[i].bytes);
  std::map<int, int> keyGrads;
  for (auto [job, bytes] : keyGradBytes) {
    int b = create(BufferRole::keyGrads, pl.jobs[job].device,
                   "key and value gradients of job " + std::to_string(job) +
                       " (" + rangeText(pl.jobs[job].range) + ")");
    mp.buffers[b].bytes = bytes;
    keyGrads[job] = b;
  }

  // Per compute its input and output buffers; a copy's by the compute it
  // serves, or by its job and microbatch where it serves none.
  std::map<std::pair<int, int>, int> input;
  std::map<unsigned, int> outputOf;
  auto inputBuffer = [&](unsigned i, std::string what) {
    const Command &c = cmds[i];
    std::pair<int, int> key = isCompute(c.kind) ? std::make_pair(int(i), 0)
                              : served[i] >= 0
                                  ? std::make_pair(served[i], 0)
                                  : std::make_pair(-1 - c.job, c.microbatch);
    auto [it, fresh] = input.try_emplace(key, -1);
    if (fresh)
      it->second = create(BufferRole::input, c.device, std::move(what));
    return it->second;
  };
  std::map<unsigned, int> staged; // download command -> host buffer
  unsigned host = pl.devices;
  for (unsigned i = 0; i < cmds.size(); ++i) {
    const Command &c = cmds[i];
    if (c.kind == CommandKind::optimizer)
      continue;
    const StageJob &job = pl.jobs[c.job];
    std::string tag = c.label;
    switch (c.kind) {
    case CommandKind::forward:
    case CommandKind::tail:
    case CommandKind::backward: {
      use(setBuffer[job.weightSet], i, 0);
      use(inputBuffer(i, "input of " + tag), i, 1);
      int out = create(BufferRole::output, c.device, "output of " + tag);
      outputOf[i] = out;
      use(out, i, 2);
      int w = create(BufferRole::work, c.device, "work of " + tag);
      mp.buffers[w].bytes = c.bytes;
      use(w, i, 3);
      if (c.kind != CommandKind::forward)
        if (auto it = keyGrads.find(c.job); it != keyGrads.end())
          use(it->second, i, 4);
      // A static stage's backward reads the input its forward kept.
      for (unsigned p : c.waits) {
        const Command &pc = cmds[p];
        if (c.kind == CommandKind::backward &&
            pc.kind == CommandKind::forward &&
            pl.jobs[pc.job].weightSet == job.weightSet)
          use(inputBuffer(p, ""), i, other);
      }
      break;
    }
    case CommandKind::h2dWeights:
    case CommandKind::d2hWeightGrads:
      use(setBuffer[job.weightSet], i, other);
      break;
    // Token slices' kept keys and values come up into the compute's input
    // buffer (the prefix beside its input) and go down from its output.
    case CommandKind::h2dActivation:
    case CommandKind::h2dGradient:
    case CommandKind::h2dKeys: {
      int in = inputBuffer(
          i, "input of " +
                 std::string(c.kind == CommandKind::h2dGradient ? "B" : "") +
                 std::to_string(c.job) + " mb" + std::to_string(c.microbatch));
      mp.buffers[in].bytes += c.bytes;
      use(in, i, other);
      for (unsigned w : c.waits)
        if (auto it = staged.find(w); it != staged.end())
          use(it->second, i, other);
      break;
    }
    case CommandKind::d2hActivation:
    case CommandKind::d2hGradient:
    case CommandKind::d2hKeys: {
      if (auto it = outputOf.find(unsigned(std::max(served[i], 0)));
          served[i] >= 0 && it != outputOf.end()) {
        mp.buffers[it->second].bytes += c.bytes;
        use(it->second, i, other);
      }
      int s = create(BufferRole::staged, host, "staged " + tag);
      mp.buffers[s].bytes = c.bytes;
      use(s, i, other);
      staged[i] = s;
      break;
    }
    case CommandKind::optimizer:
      break;
    }
  }

  for (const LayerCost &l : layers)
    mp.pinnedHostBytes += l.paramBytes + l.gradBytes;
  return mp;
}

int64_t mlir::rp::placePool(MemoryPlan &mp, const HappensBefore &hb,
                            unsigned pool, bool largestFirstToo) {
  std::vector<Span> mine;
  std::vector<unsigned> users;
  for (PlannedBuffer &b : mp.buffers)
    if (b.device == pool && b.bytes > 0) {
      auto [lo, hi] = std::minmax_element(b.users.begin(), b.users.end());
      mine.push_back({&b, *lo, *hi, 0});
      users.insert(users.end(), b.users.begin(), b.users.end());
    }
  llvm::sort(users);
  users.erase(std::unique(users.begin(), users.end()), users.end());
  std::vector<unsigned> horizon = hb.horizons(users);
  for (Span &s : mine)
    for (unsigned u : s.buffer->users)
      s.done = std::max(s.done, horizon[u]);
  std::stable_sort(mine.begin(), mine.end(), [](const Span &x, const Span &y) {
    return x.first < y.first;
  });
  int64_t peak = firstFit(mine, hb, /*issueOrder=*/true);
  if (!largestFirstToo)
    return peak;
  std::vector<std::pair<unsigned, int64_t>> events;
  events.reserve(2 * mine.size());
  for (const Span &s : mine) {
    events.emplace_back(s.first, s.buffer->bytes);
    events.emplace_back(s.last + 1, -s.buffer->bytes);
  }
  if (peak <= mostLive(events))
    return peak;
  // Issue order leaves holes a larger buffer cannot use: Qwen3-235B LoRA's
  // backward weight sets (4.90 GiB, with their adapters' gradients) find
  // only the forward's 4.76 GiB slots free, and its device arenas at
  // 16,775 tokens peaked at 24 GiB over 17.6 GiB live. Largest first puts
  // the sets and the backward's working memory in slots of their own.
  std::vector<int64_t> issueOrder;
  issueOrder.reserve(mine.size());
  for (const Span &s : mine)
    issueOrder.push_back(s.buffer->offset);
  std::vector<Span> largest = mine;
  std::stable_sort(largest.begin(), largest.end(),
                   [](const Span &x, const Span &y) {
                     return x.buffer->bytes > y.buffer->bytes;
                   });
  int64_t largestPeak = firstFit(largest, hb, /*issueOrder=*/false);
  if (largestPeak < peak)
    return largestPeak;
  for (auto [s, offset] : llvm::zip(mine, issueOrder))
    s.buffer->offset = offset;
  return peak;
}

void mlir::rp::placeBuffers(MemoryPlan &mp, const Pipeline &pl) {
  HappensBefore hb(pl.schedule);
  mp.peakBytes.assign(pl.devices + 1, 0);
  for (unsigned d = 0; d <= pl.devices; ++d)
    mp.peakBytes[d] = placePool(mp, hb, d, /*largestFirstToo=*/d < pl.devices);
  mp.stagedHostBytes = mp.peakBytes.back();
  mp.peakBytes.pop_back();
}

MemoryPlan mlir::rp::planMemory(const Pipeline &pl,
                                llvm::ArrayRef<LayerCost> layers) {
  MemoryPlan mp = collectBuffers(pl, layers);
  placeBuffers(mp, pl);
  return mp;
}

std::vector<int64_t> mlir::rp::liveBytesBounds(const MemoryPlan &mp,
                                               unsigned devices) {
  // Each buffer as the span of issue order from its first user to its
  // last: two spans that share a command cannot be ordered by
  // HappensBefore (which needs the earlier's last user before the later's
  // first), so place() puts them apart, and the bytes live across any one
  // command are under that pool's peak. A sweep, no HappensBefore.
  std::vector<std::vector<std::pair<unsigned, int64_t>>> events(devices + 1);
  for (const PlannedBuffer &b : mp.buffers) {
    if (b.bytes <= 0 || b.users.empty())
      continue;
    auto [lo, hi] = std::minmax_element(b.users.begin(), b.users.end());
    events[b.device].push_back({*lo, b.bytes});
    events[b.device].push_back({*hi + 1, -b.bytes});
  }
  std::vector<int64_t> bounds;
  bounds.reserve(events.size());
  for (auto &pool : events)
    bounds.push_back(mostLive(pool));
  return bounds;
}

FullestDevice mlir::rp::fullestDevice(const MemoryPlan &mp) {
  FullestDevice f;
  for (auto [d, peak] : llvm::enumerate(mp.peakBytes))
    if (peak > f.peak) {
      f.peak = peak;
      f.device = unsigned(d);
    }
  for (const PlannedBuffer &b : mp.buffers)
    if (b.device == f.device && b.bytes > f.biggestBytes) {
      f.biggestBytes = b.bytes;
      f.biggest = b.what;
    }
  return f;
}

std::vector<int64_t> mlir::rp::runPeakBytes(llvm::ArrayRef<int64_t> passPeaks,
                                            unsigned copies, bool renamed) {
  int64_t largest = 0;
  for (int64_t p : passPeaks)
    largest = std::max(largest, p);
  std::vector<int64_t> run;
  for (int64_t p : passPeaks)
    run.push_back(int64_t(copies) * (renamed ? largest : p));
  return run;
}

unsigned mlir::rp::chooseArenaCopies(llvm::ArrayRef<int64_t> passPeaks,
                                     int64_t budget, bool renamed) {
  for (int64_t p : runPeakBytes(passPeaks, 2, renamed))
    if (p > budget)
      return 1;
  return 2;
}
