//===- ShareTable.h - resolve's fair shares, kept between graphs -*- C++
//-*-===//
//
// The max-min fair shares of one set of flows (Timeline.cpp's
// computeShares) are a function of the flows running, in their order (each
// flow's link, device and DRAM rate: the key), and of the host model. A
// run's steps bring the same sets back again and again, and so do the
// thousands of runs the partitioner times on one host model, so each set's
// answer is kept, bit for bit the one computed, for as long as the host
// model stays the same: Qwen3-32B's --report-max-seq looked shares up 20.7
// million times, and a hash map of vectors cleared per graph (its nodes
// allocated and freed) was about 40 % of Qwen3-235B LoRA's compile.
//
// Flat: the keys in one array, the answers in another, an open-addressed
// index of entry numbers; nothing is allocated per entry. Past kMaxWords
// words of keys or answers the table starts afresh (an answer is the same
// whether looked up or computed again, so only the time depends on it).
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_SHARETABLE_H
#define RP_TIMING_SHARETABLE_H

#include "rp/timing/Timeline.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace rp::timing::detail {

class ShareTable {
public:
  /// What an answer depends on besides its key: the host model's rates
  /// and the number of uplink directions (the length of linkUse).
  struct Context {
    double h2dGBps = 0, d2hGBps = 0, uplinkGBps = 0, dramGBps = 0,
           copyDramFactor = 0;
    unsigned interpreters = 0, linkCount = 0;
    static Context of(const HostModel &h, unsigned linkCount) {
      return {h.h2dGBps,        h.d2hGBps,      h.uplinkGBps, h.dramGBps,
              h.copyDramFactor, h.interpreters, linkCount};
    }
    bool sameAs(const Context &o) const {
      // Bitwise: an answer is kept for exactly these rates.
      return std::memcmp(&h2dGBps, &o.h2dGBps, 5 * sizeof(double)) == 0 &&
             interpreters == o.interpreters && linkCount == o.linkCount;
    }
  };

  /// An answer: per flow (in the key's order) how much slower than alone it
  /// runs, per uplink direction its share in use, and DRAM's.
  struct Answer {
    const double *slow, *linkUse;
    double dramUse;
  };

  /// Starts afresh unless `c` is the context of the answers kept.
  void use(const Context &c) {
    if (valid && c.sameAs(context))
      return;
    context = c;
    valid = true;
    clear();
  }

  /// The hash of a key, one word at a time (FNV-1a), as the caller builds it.
  static constexpr uint64_t kHashStart = 1469598103934665603ull;
  static uint64_t hashWord(uint64_t h, uint64_t word) {
    return (h ^ word) * 1099511628211ull;
  }

  /// The answer kept for `key` (hashed to `hash`), if any.
  bool find(const std::vector<uint64_t> &key, uint64_t hash,
            Answer &answer) const {
    if (slots.empty())
      return false;
    size_t mask = slots.size() - 1;
    for (size_t s = slotOf(hash) & mask;; s = (s + 1) & mask) {
      uint32_t e = slots[s];
      if (e == kEmpty)
        return false;
      const Entry &entry = entries[e];
      if (entry.hash == hash && entry.keyLen == key.size() &&
          std::memcmp(keys.data() + entry.keyAt, key.data(),
                      key.size() * sizeof(uint64_t)) == 0) {
        const double *v = values.data() + entry.valueAt;
        answer = {v, v + entry.flows, v[entry.flows + context.linkCount]};
        return true;
      }
    }
  }

  /// Keeps `slow` (one per flow), `linkUse` (context's linkCount) and
  /// `dramUse` as the answer for `key`.
  void insert(const std::vector<uint64_t> &key, uint64_t hash,
              const double *slow, size_t flows, const double *linkUse,
              double dramUse) {
    if (keys.size() + key.size() > kMaxWords ||
        values.size() + flows + context.linkCount + 1 > kMaxWords)
      clear();
    if (2 * (entries.size() + 1) > slots.size())
      grow();
    Entry entry{hash, uint32_t(keys.size()), uint32_t(key.size()),
                uint32_t(values.size()), uint32_t(flows)};
    keys.insert(keys.end(), key.begin(), key.end());
    values.insert(values.end(), slow, slow + flows);
    values.insert(values.end(), linkUse, linkUse + context.linkCount);
    values.push_back(dramUse);
    place(uint32_t(entries.size()), hash);
    entries.push_back(entry);
  }

private:
  static constexpr uint32_t kEmpty = ~0u;
  /// About 16 MiB of keys and as much of answers per thread.
  static constexpr size_t kMaxWords = size_t(1) << 21;

  struct Entry {
    uint64_t hash;
    uint32_t keyAt, keyLen, valueAt, flows;
  };

  static size_t slotOf(uint64_t hash) { return size_t(hash ^ (hash >> 29)); }

  void place(uint32_t e, uint64_t hash) {
    size_t mask = slots.size() - 1;
    size_t s = slotOf(hash) & mask;
    while (slots[s] != kEmpty)
      s = (s + 1) & mask;
    slots[s] = e;
  }

  void grow() {
    slots.assign(slots.empty() ? 1024 : 2 * slots.size(), kEmpty);
    for (uint32_t e = 0; e < entries.size(); ++e)
      place(e, entries[e].hash);
  }

  void clear() {
    keys.clear();
    values.clear();
    entries.clear();
    std::fill(slots.begin(), slots.end(), kEmpty);
  }

  Context context;
  bool valid = false;
  std::vector<uint64_t> keys;
  std::vector<double> values;
  std::vector<Entry> entries;
  std::vector<uint32_t> slots;
};

} // namespace rp::timing::detail

#endif // RP_TIMING_SHARETABLE_H
