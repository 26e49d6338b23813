//===- ArenaPacking.cpp - packing a staged plan's device buffers ----------===//

#include "rp/contract/ArenaPacking.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>

using namespace rp::arena;

std::optional<JobOrder> JobOrder::build(const PlanShape &plan) {
  size_t n = plan.jobs.size();
  std::vector<std::vector<size_t>> next(n);
  std::vector<unsigned> pending(n, 0);
  auto edge = [&](size_t a, size_t b) {
    next[a].push_back(b);
    ++pending[b];
  };
  std::map<std::pair<uint32_t, uint32_t>, size_t> lastOnQueue;
  std::vector<std::vector<size_t>> recorders(plan.events);
  for (size_t j = 0; j < n; ++j) {
    const Job &job = plan.jobs[j];
    auto [it, first] = lastOnQueue.try_emplace({job.device, job.queue}, j);
    if (!first) {
      edge(it->second, j);
      it->second = j;
    }
    for (uint32_t e : job.records)
      if (e < plan.events)
        recorders[e].push_back(j);
  }
  for (size_t j = 0; j < n; ++j)
    for (uint32_t e : plan.jobs[j].waits)
      if (e < plan.events)
        for (size_t r : recorders[e])
          edge(r, j);

  std::vector<size_t> order;
  order.reserve(n);
  for (size_t j = 0; j < n; ++j)
    if (!pending[j])
      order.push_back(j);
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t s : next[order[i]])
      if (!--pending[s])
        order.push_back(s);
  if (order.size() != n)
    return std::nullopt;

  JobOrder result;
  result.words = (n + 63) / 64;
  result.reach.assign(n * result.words, 0);
  result.ranks.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
    result.ranks[order[i]] = i;
  for (size_t i = n; i-- > 0;) {
    size_t a = order[i];
    uint64_t *row = &result.reach[a * result.words];
    for (size_t s : next[a]) {
      const uint64_t *later = &result.reach[s * result.words];
      for (size_t w = 0; w < result.words; ++w)
        row[w] |= later[w];
      row[s / 64] |= uint64_t(1) << (s % 64);
    }
  }
  return result;
}

namespace {

/// RP_FIRST_FIT_CHECK=1 (set in the environment): pack also places each
/// buffer testing every placed range, and the shared marks pair by pair,
/// and aborts where either differs (a self-check of the intervals below,
/// quadratic; off by default).
bool firstFitCheck() {
  static const bool on = [] {
    const char *env = std::getenv("RP_FIRST_FIT_CHECK");
    return env && *env && *env != '0';
  }();
  return on;
}

uint64_t alignUp(uint64_t bytes) {
  uint64_t a = Layout::kAlignment;
  return (std::max<uint64_t>(bytes, 1) + a - 1) / a * a;
}

/// What one job does with one buffer.
struct Use {
  size_t job = 0;
  /// The calls of the job's program that touch it (0 for copy jobs).
  size_t first = 0, last = 0;
  /// The job writes all of the buffer before it reads any of it.
  bool writesFirst = false;
  /// A copy job that writes part of the buffer and reads none of it: the
  /// byte ranges it writes (a chunk of an upload split over several jobs).
  std::vector<std::pair<uint64_t, uint64_t>> part;
};

/// The end of the prefix [0, end) that sorted `ranges` cover.
uint64_t coveredPrefix(std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t end = 0;
  for (auto [a, b] : ranges)
    if (a <= end)
      end = std::max(end, b);
  return end;
}

/// What one program does with each buffer it touches.
struct ProgramUse {
  size_t first = 0, last = 0;
  bool writesFirst = false;
};

std::map<uint32_t, ProgramUse> usesOf(const Program &program) {
  std::map<uint32_t, ProgramUse> uses;
  for (size_t c = 0; c < program.calls.size(); ++c) {
    const Call &call = program.calls[c];
    auto touch = [&](uint32_t buffer, bool written) {
      auto [it, first] = uses.try_emplace(buffer);
      if (first) {
        // A kernel writes the whole of each output.
        bool read = std::count(call.inputs.begin(), call.inputs.end(), buffer);
        it->second = {c, c, written && !read};
      }
      it->second.last = c;
    };
    for (uint32_t b : call.inputs)
      touch(b, false);
    for (uint32_t b : call.outputs)
      touch(b, true);
  }
  return uses;
}

/// The uses of every buffer by the jobs of `plan`.
std::vector<std::vector<Use>> usesByBuffer(const PlanShape &plan) {
  std::vector<std::vector<Use>> uses(plan.buffers.size());
  std::vector<std::map<uint32_t, ProgramUse>> programs;
  programs.reserve(plan.programs.size());
  for (const Program &p : plan.programs)
    programs.push_back(usesOf(p));
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const Job &job = plan.jobs[j];
    if (job.run) {
      for (const auto &[buffer, u] : programs[job.program])
        uses[buffer].push_back({j, u.first, u.last, u.writesFirst, {}});
      continue;
    }
    // A copy job writes a buffer first when its copies into it cover all
    // of it and it reads nothing from it.
    std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> written;
    std::map<uint32_t, bool> read;
    for (const Copy &c : job.copies) {
      written[c.dst].emplace_back(c.dstOffset, c.dstOffset + c.bytes);
      read[c.src] = true;
      read.try_emplace(c.dst, false);
    }
    for (const auto &[buffer, isRead] : read) {
      bool covers = !isRead && coveredPrefix(written[buffer]) >=
                                   plan.buffers[buffer].bytes;
      Use use{j, 0, 0, covers, {}};
      if (!isRead && !covers)
        use.part = written[buffer];
      uses[buffer].push_back(std::move(use));
    }
  }
  return uses;
}

/// One value a buffer holds: the use that writes all of it and the uses
/// after that read it (or update it in place) before the next such write.
struct Life {
  Use write;
  std::vector<Use> reads;
  /// The jobs after every use's job (the intersection of their rows of
  /// the job order), and those jobs themselves, sorted: with them a test
  /// whether the life is over before another's write is one bit, but for
  /// a write in one of its own jobs (Lives::summarize).
  std::vector<uint64_t> after;
  std::vector<size_t> jobs;
};

/// What packing knows of a staged plan: its job order and each buffer's
/// lives.
class Lives {
public:
  /// Null when the plan shares nothing (unstaged, or jobs in a cycle).
  static std::optional<Lives> of(const PlanShape &plan) {
    if (!plan.staged)
      return std::nullopt;
    std::optional<JobOrder> order = JobOrder::build(plan);
    if (!order)
      return std::nullopt;
    Lives l(std::move(*order));
    l.compute(plan);
    return l;
  }

  /// The buffer's lives, or null when it must keep bytes of its own.
  const std::vector<Life> *of(uint32_t buffer) const {
    return shareable[buffer] ? &lives[buffer] : nullptr;
  }
  /// The first job (by index) that writes a value of a shareable buffer.
  size_t firstWrite(uint32_t buffer) const {
    size_t w = SIZE_MAX;
    for (const Life &l : lives[buffer])
      w = std::min(w, l.write.job);
    return w;
  }
  /// An index past which every write of the buffers in `writers` (a
  /// bitset of jobs) is after all of the buffer's jobs: the buffer's
  /// values are done with before any of those writes.
  size_t doneBefore(uint32_t buffer, const std::vector<uint64_t> &writers,
                    std::vector<size_t> &horizon) const {
    size_t done = 0;
    for (const Life &l : lives[buffer])
      for (size_t j : l.jobs)
        done = std::max(done, horizonOf(j, writers, horizon));
    return done;
  }
  const JobOrder &getOrder() const { return order; }

  bool before(const Use &a, const Use &b) const {
    return a.job == b.job ? a.last < b.first : order.before(a.job, b.job);
  }
  /// Every use of `a` happens before `b` is written (and so before all of
  /// `b`, whose reads follow its write). From `a`'s summary: a write in a
  /// job after all of `a`'s jobs is after it, one in none of them is not;
  /// only one in a job of `a`'s needs its uses, call by call.
  bool before(const Life &a, const Life &b) const {
    size_t w = b.write.job;
    if ((a.after[w / 64] >> (w % 64)) & 1)
      return true;
    if (!std::binary_search(a.jobs.begin(), a.jobs.end(), w))
      return false;
    if (!before(a.write, b.write))
      return false;
    return std::all_of(a.reads.begin(), a.reads.end(),
                       [&](const Use &u) { return before(u, b.write); });
  }
  /// Whether two buffers may hold the same bytes: each value of one is
  /// done with before each value of the other is written, or after it.
  bool disjoint(const std::vector<Life> &x, const std::vector<Life> &y) const {
    for (const Life &a : x)
      for (const Life &b : y)
        if (!before(a, b) && !before(b, a))
          return false;
    return true;
  }

private:
  explicit Lives(JobOrder order) : order(std::move(order)) {}

  /// 1 + the last job of `writers` (or job `a` itself) that is not after
  /// job `a`: every writer from there on runs after `a`. Kept in
  /// `horizon` (SIZE_MAX: not yet computed).
  size_t horizonOf(size_t a, const std::vector<uint64_t> &writers,
                   std::vector<size_t> &horizon) const {
    if (horizon[a] != SIZE_MAX)
      return horizon[a];
    const uint64_t *after = order.after(a);
    size_t h = a + 1;
    for (size_t w = writers.size(); w-- > 0;)
      if (uint64_t open = writers[w] & ~after[w]) {
        h = std::max(h, w * 64 + (63 - size_t(__builtin_clzll(open))) + 1);
        break;
      }
    return horizon[a] = h;
  }

  /// A buffer uploaded in chunks by several copy jobs (a weight set over
  /// the upload chunk size) is written whole by the run of those jobs, one
  /// after the other with nothing reading it between: the first chunk
  /// starts its value and the later ones update it, as reads of that life
  /// do. Without this such a buffer keeps bytes of its own, and a plan with
  /// one cannot rename its devices from pass to pass.
  void markChunkedWrites(std::vector<Use> &u, uint64_t bytes) const {
    for (size_t i = 0; i < u.size(); ++i) {
      if (u[i].part.empty())
        continue;
      std::vector<std::pair<uint64_t, uint64_t>> ranges = u[i].part;
      for (size_t k = i + 1;
           k < u.size() && !u[k].part.empty() && before(u[k - 1], u[k]); ++k) {
        ranges.insert(ranges.end(), u[k].part.begin(), u[k].part.end());
        if (coveredPrefix(ranges) >= bytes) {
          u[i].writesFirst = true;
          i = k;
          break;
        }
      }
    }
  }

  void compute(const PlanShape &plan) {
    size_t nb = plan.buffers.size();
    std::vector<std::vector<Use>> uses = usesByBuffer(plan);
    lives.assign(nb, {});
    shareable.assign(nb, false);
    std::vector<bool> pinned(nb, false);
    for (int32_t p : {plan.prologue, plan.epilogue})
      if (p >= 0 && size_t(p) < plan.programs.size())
        for (const auto &entry : usesOf(plan.programs[p]))
          pinned[entry.first] = true;
    for (uint32_t b = 0; b < nb; ++b) {
      const Buffer &d = plan.buffers[b];
      if (d.device < 0 || pinned[b] || d.keeps || uses[b].empty())
        continue;
      std::vector<Use> &u = uses[b];
      std::sort(u.begin(), u.end(), [&](const Use &x, const Use &y) {
        return order.rank(x.job) < order.rank(y.job);
      });
      markChunkedWrites(u, d.bytes);
      // Each read belongs to the latest write before it; a read that
      // follows no write sees what a previous step left.
      bool ok = true;
      for (const Use &use : u) {
        if (use.writesFirst) {
          lives[b].push_back(Life{use, {}, {}, {}});
          continue;
        }
        ok = !lives[b].empty() && before(lives[b].back().write, use);
        if (!ok)
          break;
        lives[b].back().reads.push_back(use);
      }
      shareable[b] = ok;
      if (!ok)
        lives[b].clear();
      for (Life &life : lives[b])
        summarize(life);
    }
  }

  /// Fills `life.after` and `life.jobs`. A 1-GPU plan packs thousands of
  /// buffers on one device, each tested against every one placed before
  /// it: testing use by use made that quadratic count of tests the whole
  /// of a 235B plan's 9-minute sim.
  void summarize(Life &life) const {
    life.jobs.push_back(life.write.job);
    for (const Use &u : life.reads)
      life.jobs.push_back(u.job);
    std::sort(life.jobs.begin(), life.jobs.end());
    life.jobs.erase(std::unique(life.jobs.begin(), life.jobs.end()),
                    life.jobs.end());
    size_t words = order.rowWords();
    const uint64_t *first = order.after(life.jobs.front());
    life.after.assign(first, first + words);
    for (size_t j : life.jobs) {
      const uint64_t *row = order.after(j);
      for (size_t k = 0; k < words; ++k)
        life.after[k] &= row[k];
    }
  }

  JobOrder order;
  std::vector<std::vector<Life>> lives;
  std::vector<bool> shareable;
};

} // namespace

Layout rp::arena::pack(const PlanShape &plan) {
  Layout layout;
  size_t nb = plan.buffers.size();
  layout.arenaBytes.assign(plan.devices, 0);
  layout.unsharedBytes.assign(plan.devices, 0);
  layout.paddingBytes.assign(plan.devices, 0);
  layout.offset.assign(nb, 0);
  layout.shared.assign(nb, false);
  layout.transient.assign(nb, false);
  // A plan whose jobs wait in a cycle (validation refuses it; tests of the
  // watchdog run it anyway) shares nothing.
  std::optional<Lives> lives = Lives::of(plan);

  // First fit, largest buffer first: each buffer takes the lowest offset
  // where it overlaps no placed buffer whose values meet its own. Placing
  // by offset rather than into whole slots lets a small buffer use the
  // bytes a large one frees and a large one span several small ones, so
  // the arena comes near the most bytes live at once, which is what the
  // compiler's memory plan (rp-plan-memory) counts. (First written first,
  // the planner's order, gave no smaller arena on the test models.)
  std::vector<uint32_t> packed;
  for (uint32_t b = 0; b < nb && lives; ++b)
    if (lives->of(b) && plan.buffers[b].device >= 0 &&
        uint32_t(plan.buffers[b].device) < plan.devices) {
      packed.push_back(b);
      layout.transient[b] = true;
    }
  std::stable_sort(packed.begin(), packed.end(), [&](uint32_t x, uint32_t y) {
    return alignUp(plan.buffers[x].bytes) > alignUp(plan.buffers[y].bytes);
  });
  // Per packed buffer an interval of job indices, [its first write, the
  // index past which every write on its device is after all its jobs):
  // two buffers whose intervals do not meet are apart in time (the later
  // one's writes all follow the earlier one's uses), which two compares
  // say where Lives::disjoint tests their values pair by pair. Only
  // intervals that meet are tested, so the offsets are the same.
  std::vector<size_t> firstWrite(nb, 0), done(nb, 0);
  if (lives) {
    size_t words = lives->getOrder().rowWords();
    std::vector<std::vector<uint64_t>> writers(plan.devices,
                                               std::vector<uint64_t>(words, 0));
    for (uint32_t b : packed) {
      firstWrite[b] = lives->firstWrite(b);
      for (const Life &l : *lives->of(b))
        writers[plan.buffers[b].device][l.write.job / 64] |=
            uint64_t(1) << (l.write.job % 64);
    }
    std::vector<std::vector<size_t>> horizon(plan.devices);
    for (uint32_t b : packed) {
      std::vector<size_t> &h = horizon[plan.buffers[b].device];
      if (h.empty())
        h.assign(plan.jobs.size(), SIZE_MAX);
      done[b] = lives->doneBefore(b, writers[plan.buffers[b].device], h);
    }
  }
  struct Range {
    uint64_t begin, end;
    uint32_t buffer;
  };
  // Each device's placed ranges, kept sorted by their start. The scan
  // stops at the first range starting past the candidate's end (all later
  // ones do too) and tests whether a range's values meet the buffer's only
  // for ranges that overlap the candidate: the same offset as testing
  // every placed range first, without testing most of them.
  std::vector<std::vector<Range>> placed(plan.devices);
  std::vector<uint64_t> checkedOffsets;
  for (uint32_t b : packed) {
    const Buffer &d = plan.buffers[b];
    uint64_t bytes = alignUp(d.bytes);
    const std::vector<Life> &mine = *lives->of(b);
    std::vector<Range> &ranges = placed[d.device];
    uint64_t at = 0;
    size_t first = firstWrite[b], over = done[b];
    if (firstFitCheck()) {
      // Every placed range tested, as before the intervals: the same
      // offset or a bug.
      uint64_t all = 0;
      for (const Range &r : ranges) {
        if (r.begin >= all + bytes)
          break;
        if (r.end > all && !lives->disjoint(*lives->of(r.buffer), mine))
          all = r.end;
      }
      checkedOffsets.push_back(all);
    }
    for (const Range &r : ranges) {
      if (r.begin >= at + bytes)
        break;
      if (r.end > at && firstWrite[r.buffer] < over && first < done[r.buffer] &&
          !lives->disjoint(*lives->of(r.buffer), mine))
        at = r.end;
    }
    if (firstFitCheck() && checkedOffsets.back() != at) {
      std::fprintf(stderr,
                   "arena packing: buffer %u at %llu, %llu testing every "
                   "placed buffer (RP_FIRST_FIT_CHECK)\n",
                   b, (unsigned long long)at,
                   (unsigned long long)checkedOffsets.back());
      std::abort();
    }
    Range mineRange{at, at + bytes, b};
    ranges.insert(std::upper_bound(ranges.begin(), ranges.end(), mineRange,
                                   [](const Range &x, const Range &y) {
                                     return x.begin < y.begin;
                                   }),
                  mineRange);
    layout.offset[b] = at;
    layout.arenaBytes[d.device] =
        std::max(layout.arenaBytes[d.device], at + bytes);
  }
  // A buffer shares bytes when another one's range overlaps its own.
  for (std::vector<Range> &ranges : placed) {
    std::sort(ranges.begin(), ranges.end(),
              [](const Range &x, const Range &y) { return x.begin < y.begin; });
    // Sorted by start: a range overlaps a later one exactly when the next
    // one starts before its end, and an earlier one exactly when it starts
    // before the furthest end so far.
    uint64_t reach = 0;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].begin < reach ||
          (i + 1 < ranges.size() && ranges[i + 1].begin < ranges[i].end))
        layout.shared[ranges[i].buffer] = true;
      reach = std::max(reach, ranges[i].end);
    }
    for (size_t i = 0; i < ranges.size() && firstFitCheck(); ++i) {
      bool overlaps = false;
      for (size_t k = 0; k < ranges.size(); ++k)
        overlaps |= k != i && ranges[k].begin < ranges[i].end &&
                    ranges[i].begin < ranges[k].end;
      if (overlaps != layout.shared[ranges[i].buffer]) {
        std::fprintf(stderr,
                     "arena packing: buffer %u marked shared wrongly "
                     "(RP_FIRST_FIT_CHECK)\n",
                     ranges[i].buffer);
        std::abort();
      }
    }
  }
  for (uint32_t b = 0; b < nb; ++b) {
    const Buffer &d = plan.buffers[b];
    if (d.device < 0 || uint32_t(d.device) >= plan.devices)
      continue;
    uint64_t bytes = alignUp(d.bytes);
    layout.unsharedBytes[d.device] += bytes;
    layout.paddingBytes[d.device] += bytes - d.bytes;
    if (lives && lives->of(b))
      continue;
    layout.offset[b] = layout.arenaBytes[d.device];
    layout.arenaBytes[d.device] += bytes;
  }
  return layout;
}

uint64_t rp::arena::renamedArenaBytes(const PlanShape &plan,
                                      const Layout &layout) {
  std::vector<bool> written(plan.buffers.size(), false);
  for (const Job &job : plan.jobs)
    for (const Copy &c : job.copies)
      if (c.dst < written.size())
        written[c.dst] = true;
  for (const Program &program : plan.programs)
    for (const Call &call : program.calls)
      for (uint32_t out : call.outputs)
        if (out < written.size())
          written[out] = true;
  uint64_t end = 0, others = 0;
  for (uint32_t i = 0; i < plan.buffers.size(); ++i) {
    const Buffer &b = plan.buffers[i];
    if (b.device < 0)
      continue;
    if (layout.transient[i]) {
      end = std::max(end, layout.offset[i] + b.bytes);
    } else {
      if (written[i])
        return 0;
      others += alignUp(b.bytes);
    }
  }
  return alignUp(end) + others;
}

std::optional<std::pair<uint32_t, uint32_t>>
rp::arena::overlapInUse(const PlanShape &plan, const Layout &layout) {
  std::vector<uint32_t> onDevice;
  for (uint32_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].device >= 0 && plan.buffers[b].bytes)
      onDevice.push_back(b);
  std::sort(onDevice.begin(), onDevice.end(), [&](uint32_t x, uint32_t y) {
    return std::make_pair(plan.buffers[x].device, layout.offset[x]) <
           std::make_pair(plan.buffers[y].device, layout.offset[y]);
  });
  std::optional<Lives> lives = Lives::of(plan);
  for (size_t i = 0; i < onDevice.size(); ++i) {
    uint32_t x = onDevice[i];
    const Buffer &a = plan.buffers[x];
    uint64_t end = layout.offset[x] + a.bytes;
    for (size_t k = i + 1; k < onDevice.size(); ++k) {
      uint32_t y = onDevice[k];
      const Buffer &c = plan.buffers[y];
      if (c.device != a.device || layout.offset[y] >= end)
        break;
      bool ok = lives && lives->of(x) && lives->of(y) &&
                lives->disjoint(*lives->of(x), *lives->of(y));
      if (!ok)
        return std::make_pair(x, y);
    }
  }
  return std::nullopt;
}
