//===- ProgramGraphCache.h - stage jobs as CUDA graphs ----------*- C++ -*-===//
//
// With RP_CUDA_GRAPHS=on, the cuda device captures each program's kernel
// sequence once as a CUDA graph and replays it: one cudaGraphLaunch per job
// instead of one launch (and its host-side checks, plan lookups and cuBLAS
// descriptor set-up) per call. A graph holds the addresses it was captured
// with, so it is keyed by the program (its plan's address and a fingerprint
// of its calls and their buffers' types and shapes, since another plan may
// later lie at the same address) and the addresses of the buffers its calls
// name: a program that runs on each microbatch's slots gets one graph per
// slot.
// What a capture cannot hold (a call that waits for the stream: cuBLAS's
// grouped GEMM copying the MoE counts back, in a build without CUTLASS)
// invalidates it; that program then runs call by call for the rest of the
// process, said once. Past kMaxGraphs graphs per queue a new key runs call
// by call too (a bound on device memory, also said once).
//
// No CUDA header here: capture, replay and destruction are behind
// GraphBackend, so the policy is tested without a GPU (runtime/test, a fake
// backend); CudaDevice.cpp binds it to the stream.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_PROGRAMGRAPHCACHE_H
#define RP_LIB_CUDA_PROGRAMGRAPHCACHE_H

#include "rp/runtime/Device.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Status.h"

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rp::runtime::cuda {

/// Capture, replay and destruction of one queue's graphs.
class GraphBackend {
public:
  virtual ~GraphBackend() = default;
  /// Enqueues `run` under capture and instantiates what it captured into
  /// `graph`. `captured` false (and ok) where the capture was invalidated
  /// by what `run` did: nothing ran, the caller runs it again uncaptured.
  /// A failure of `run` itself is returned as it is.
  virtual Status capture(const std::function<Status()> &run, void *&graph,
                         bool &captured) = 0;
  virtual Status replay(void *graph) = 0;
  virtual void destroy(void *graph) = 0;
};

/// Whether the environment asks for graphs (RP_CUDA_GRAPHS=on or 1).
bool graphsRequested(const char *value);

/// A hash of program `program`'s calls (ops, operands, attributes) and of
/// the types and shapes of the buffers they name.
uint64_t programFingerprint(const Plan &plan, uint32_t program);

class ProgramGraphCache {
public:
  static constexpr size_t kMaxGraphs = 256;

  explicit ProgramGraphCache(GraphBackend &backend) : backend(backend) {}
  ~ProgramGraphCache();
  ProgramGraphCache(const ProgramGraphCache &) = delete;
  ProgramGraphCache &operator=(const ProgramGraphCache &) = delete;

  /// Program `program` of `plan` with `buffers`: its graph replayed, or
  /// captured from `run` on its first run and then replayed, or `run`
  /// itself where it cannot be captured.
  Status launch(const Plan &plan, uint32_t program,
                const BufferAddresses &buffers,
                const std::function<Status()> &run);

  /// Counts, for tests and the docs' figures.
  size_t graphCount() const { return graphs.size(); }
  size_t captures() const { return captured; }
  size_t replays() const { return replayed; }
  size_t direct() const { return uncaptured; }

private:
  struct Key {
    const void *plan;
    uint32_t program;
    uint64_t fingerprint;
    BufferAddresses buffers;
    bool operator==(const Key &o) const {
      return plan == o.plan && program == o.program &&
             fingerprint == o.fingerprint && buffers == o.buffers;
    }
  };
  struct KeyHash {
    size_t operator()(const Key &key) const;
  };

  GraphBackend &backend;
  std::unordered_map<Key, void *, KeyHash> graphs;
  /// Programs whose capture was invalidated: they run call by call.
  std::set<std::pair<const void *, uint64_t>> refused;
  size_t captured = 0, replayed = 0, uncaptured = 0;
};

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_PROGRAMGRAPHCACHE_H
