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
// Flat: each entry's key and answer side by side in one array (a look-up
// reads one place, not a key here and an answer there), and an
// open-addressed index of their offsets tagged with half the hash (a probe
// that misses reads no entry); nothing is allocated per entry. Past
// kMaxWords words the table starts afresh (an answer is the same
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
    double cores = 0;
    static Context of(const HostModel &h, unsigned linkCount) {
      return {h.h2dGBps,        h.d2hGBps,      h.uplinkGBps, h.dramGBps,
              h.copyDramFactor, h.interpreters, linkCount,    h.cores};
    }
    bool sameAs(const Context &o) const {
      // Bitwise: an answer is kept for exactly these rates.
      return std::memcmp(&h2dGBps, &o.h2dGBps, 5 * sizeof(double)) == 0 &&
             interpreters == o.interpreters && linkCount == o.linkCount &&
             cores == o.cores;
    }
  };

  /// An answer: per flow (in the key's order) how much slower than alone it
  /// runs, per uplink direction its share in use, and DRAM's.
  struct Answer {
    const uint64_t *words = nullptr;
    size_t flows = 0;
    double slow(size_t f) const { return asDouble(words[f]); }
    double linkUse(size_t l) const { return asDouble(words[flows + l]); }
    double dramUse(size_t linkCount) const {
      return asDouble(words[flows + linkCount]);
    }
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
    uint64_t tag = hash >> 32;
    for (size_t s = slotOf(hash) & mask;; s = (s + 1) & mask) {
      uint64_t slot = slots[s];
      if (slot == kEmpty)
        return false;
      if (slot >> 32 != tag)
        continue;
      const uint64_t *entry = data.data() + uint32_t(slot);
      if (entry[0] == hash && entry[1] == key.size() &&
          std::memcmp(entry + 3, key.data(), key.size() * sizeof(uint64_t)) ==
              0) {
        answer = {entry + 3 + key.size(), size_t(entry[2])};
        return true;
      }
    }
  }

  /// Keeps `slow` (one per flow), `linkUse` (context's linkCount) and
  /// `dramUse` as the answer for `key`.
  void insert(const std::vector<uint64_t> &key, uint64_t hash,
              const double *slow, size_t flows, const double *linkUse,
              double dramUse) {
    size_t words = 3 + key.size() + flows + context.linkCount + 1;
    if (data.size() + words > kMaxWords)
      clear();
    if (2 * (entries + 1) > slots.size())
      grow();
    uint64_t at = data.size();
    data.push_back(hash);
    data.push_back(key.size());
    data.push_back(flows);
    data.insert(data.end(), key.begin(), key.end());
    for (size_t f = 0; f < flows; ++f)
      data.push_back(asWord(slow[f]));
    for (size_t l = 0; l < context.linkCount; ++l)
      data.push_back(asWord(linkUse[l]));
    data.push_back(asWord(dramUse));
    place(hash >> 32 << 32 | at);
    ++entries;
  }

private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  /// About 64 MiB per thread.
  static constexpr size_t kMaxWords = size_t(1) << 23;

  static double asDouble(uint64_t w) {
    double d;
    std::memcpy(&d, &w, sizeof(d));
    return d;
  }
  static uint64_t asWord(double d) {
    uint64_t w;
    std::memcpy(&w, &d, sizeof(w));
    return w;
  }
  static size_t slotOf(uint64_t hash) { return size_t(hash ^ (hash >> 29)); }

  /// Places a slot word (the hash's high half, the entry's offset in data).
  void place(uint64_t slot) {
    size_t mask = slots.size() - 1;
    const uint64_t *entry = data.data() + uint32_t(slot);
    size_t s = slotOf(entry[0]) & mask;
    while (slots[s] != kEmpty)
      s = (s + 1) & mask;
    slots[s] = slot;
  }

  void grow() {
    std::vector<uint64_t> old(slots.size() ? 2 * slots.size() : 1024, kEmpty);
    old.swap(slots);
    for (uint64_t slot : old)
      if (slot != kEmpty)
        place(slot);
  }

  void clear() {
    data.clear();
    entries = 0;
    std::fill(slots.begin(), slots.end(), kEmpty);
  }

  Context context;
  bool valid = false;
  /// Per entry: its hash, key length and flows, the key, then the answer
  /// (slow per flow, linkUse per uplink direction, dramUse) as bits.
  std::vector<uint64_t> data;
  size_t entries = 0;
  /// Open addressing: per slot the hash's high half and the entry's offset
  /// in data, or kEmpty.
  std::vector<uint64_t> slots;
};

} // namespace rp::timing::detail

#endif // RP_TIMING_SHARETABLE_H
