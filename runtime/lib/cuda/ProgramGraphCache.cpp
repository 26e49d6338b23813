//===- ProgramGraphCache.cpp - a stage job's kernels as CUDA graphs -------===//

#include "ProgramGraphCache.h"

#include <atomic>
#include <cstdio>
#include <cstring>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

void sayOnce(std::atomic<bool> &said, const char *what) {
  if (!said.exchange(true))
    std::fprintf(stderr, "rp cuda: %s (said once)\n", what);
}

std::atomic<bool> saidRefused{false}, saidFull{false};

/// FNV-1a, a 64-bit word at a time.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void mix(uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8)
      h = (h ^ (v & 0xff)) * 1099511628211ull;
  }
};

} // namespace

bool rp::runtime::cuda::graphsRequested(const char *value) {
  return value &&
         (std::strcmp(value, "on") == 0 || std::strcmp(value, "1") == 0);
}

uint64_t rp::runtime::cuda::programFingerprint(const Plan &plan,
                                               uint32_t program) {
  Fnv f;
  const ProgramDesc &p = plan.programs[program];
  f.mix(p.calls.size());
  auto buffer = [&](uint32_t b) {
    f.mix(b);
    if (b >= plan.buffers.size())
      return;
    const BufferDesc &d = plan.buffers[b];
    f.mix(uint64_t(d.dtype));
    f.mix(d.shape.size());
    for (int64_t n : d.shape)
      f.mix(uint64_t(n));
  };
  for (const KernelCallDesc &c : p.calls) {
    f.mix(uint64_t(c.op));
    f.mix(uint64_t(c.inputs.size()) << 32 | c.outputs.size());
    for (uint32_t b : c.inputs)
      buffer(b);
    for (uint32_t b : c.outputs)
      buffer(b);
    f.mix(c.ints.size());
    for (int64_t v : c.ints)
      f.mix(uint64_t(v));
    f.mix(c.floats.size());
    for (double v : c.floats) {
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      f.mix(bits);
    }
  }
  return f.h;
}

size_t ProgramGraphCache::KeyHash::operator()(const Key &key) const {
  Fnv f;
  f.mix(uint64_t(reinterpret_cast<uintptr_t>(key.plan)));
  f.mix(key.program);
  f.mix(key.fingerprint);
  for (const uint8_t *b : key.buffers)
    f.mix(uint64_t(reinterpret_cast<uintptr_t>(b)));
  return size_t(f.h);
}

ProgramGraphCache::~ProgramGraphCache() {
  for (auto &entry : graphs)
    backend.destroy(entry.second);
}

Status ProgramGraphCache::launch(const Plan &plan, uint32_t program,
                                 const BufferAddresses &buffers,
                                 const std::function<Status()> &run) {
  // The addresses of the buffers the program names, in call order: what
  // its graph holds (the plan's other buffers may move between runs).
  BufferAddresses used;
  for (const KernelCallDesc &c : plan.programs[program].calls)
    for (const auto *list : {&c.inputs, &c.outputs})
      for (uint32_t b : *list)
        used.push_back(b < buffers.size() ? buffers[b] : nullptr);
  Key key{&plan, program, programFingerprint(plan, program), std::move(used)};
  if (auto it = graphs.find(key); it != graphs.end()) {
    ++replayed;
    return backend.replay(it->second);
  }
  auto direct = [&] {
    ++uncaptured;
    return run();
  };
  if (refused.count({key.plan, key.fingerprint}))
    return direct();
  if (graphs.size() >= kMaxGraphs) {
    sayOnce(saidFull, "more programs and buffer sets than the graph cache "
                      "holds; the others run call by call");
    return direct();
  }
  void *graph = nullptr;
  bool ok = false;
  if (Status s = backend.capture(run, graph, ok); s.failed())
    return s;
  if (!ok) {
    sayOnce(saidRefused, "a program waits for the stream and cannot be "
                         "captured as a CUDA graph; it runs call by call");
    refused.insert({key.plan, key.fingerprint});
    return direct();
  }
  ++captured;
  graphs.emplace(std::move(key), graph);
  // Capture enqueued nothing: the first run is the graph's first replay.
  ++replayed;
  return backend.replay(graph);
}
