//===- AttentionPath.h - which kernel runs a GPU's attention ----*- C++ -*-===//
//
// The cuda device runs attention either through cuDNN's fused SDPA (flash
// attention on tensor cores, bf16/f16 only) or through its own tiled kernel
// on CUDA cores (CudaAttention.cu: every dtype, every mask). The choice is
// a pure function of the problem, the cuDNN library found at run time and
// the GPU's compute capability, kept apart from the cuda library so that
// it is tested on any machine (AttentionPathTest). A problem cuDNN cannot
// take falls back with a reason, and every reason is said once on stderr
// (FallbackLog), never silently.
//
// cuDNN's own support check (at graph build, on the GPU) stays the last
// word: a graph it refuses falls back too, with cuDNN's message.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_ATTENTIONPATH_H
#define RP_RUNTIME_ATTENTIONPATH_H

#include "rp/runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

namespace rp::runtime {

enum class AttentionPath { cudnn, cudaCores };

/// How an attention call masks its scores. A band (lo <= key - query <=
/// hi) is what cuDNN's diagonal band bounds express; rp's plan op carries
/// causal (with AttentionProblem's window and bottom-right alignment: the
/// causal band) and a dense mask operand, so the dispatch passes `causal`,
/// `additive` or `boolean`. `band` is a band without the causal bound,
/// which rp's op does not express.
enum class AttentionMaskKind {
  none,
  causal,
  band,
  additive,
  boolean,
  segments
};

/// What the choice looks at: one attention or attention_grad call.
struct AttentionProblem {
  DType dtype = DType::bf16;
  AttentionMaskKind mask = AttentionMaskKind::none;
  /// An additive mask whose query or key axis is broadcast (size 1 or
  /// stride 0): cuDNN's bias broadcasts over batch and heads only.
  bool maskBroadcastsRowsOrKeys = false;
  int64_t headDim = 0, valueDim = 0;
  int64_t heads = 1, kvHeads = 1;
  /// tanh soft-capping of the scores (Gemma 2's 50.0); 0 for none.
  double softCap = 0;
  /// GPT-OSS's attention sinks (a learned logit per head in each row's
  /// softmax): cuDNN's SDPA has no such column.
  bool sinks = false;
  /// A causal sliding window (rp.attention's `window`: the keys in
  /// (p - window, p]); 0 for none. cuDNN's left bound.
  int64_t window = 0;
  /// Causal with fewer queries than keys: the queries are the last ones,
  /// cuDNN's bottom-right diagonal alignment.
  bool bottomRight = false;
  /// attention_grad: cuDNN's backward, with its deterministic algorithm.
  bool backward = false;
};

/// The cuDNN library the cuda driver loaded at run time (dlopen), or why
/// it did not.
struct CudnnLibraryInfo {
  bool loaded = false;
  /// cudnnGetVersion(): major * 10000 + minor * 100 + patch (9.19.0 is
  /// 91900).
  int version = 0;
  /// The file it was loaded from, or why it was not loaded.
  std::string where;
};

struct AttentionChoice {
  AttentionPath path = AttentionPath::cudaCores;
  /// Why not cuDNN; empty when the path is cuDNN.
  std::string reason;
};

/// The oldest cuDNN rp's graphs are built for (grouped-query heads, bf16
/// backward, the deterministic algorithm's attribute).
constexpr int kMinCudnnVersion = 90000;

/// "9.19.0" for 91900.
std::string cudnnVersionString(int version);

/// The path of `problem` on a GPU of compute capability `sm` (major * 10
/// + minor: 89 for an RTX 4090, 90 for an H100) with `cudnn`. The reasons
/// are the lines FallbackLog says; they name the cause and what would lift
/// it, not the call (one line covers every call with that cause).
AttentionChoice chooseAttentionPath(const AttentionProblem &problem,
                                    const CudnnLibraryInfo &cudnn, int sm);

/// rp-run --list-devices' attention line of one GPU: which path its bf16
/// and f16 attention takes (a head width of 128, no mask: the common
/// case), and that f32/f64 run on CUDA cores. `gpu` names it ("GPU 0
/// (NVIDIA H200, sm_90)"); sm 0 for no GPU at all, which says only whether
/// cuDNN loads.
std::string describeAttentionPath(const CudnnLibraryInfo &cudnn, int sm,
                                  const std::string &gpu);

/// Says each distinct line once through `sink` (thread-safe): the
/// fallbacks of a run, which would otherwise repeat every step.
class FallbackLog {
public:
  explicit FallbackLog(std::function<void(const std::string &)> sink)
      : sink(std::move(sink)) {}
  /// Says `line` unless it was said before; true when it was said now.
  bool say(const std::string &line);

private:
  std::function<void(const std::string &)> sink;
  std::mutex lock;
  std::set<std::string> said;
};

/// The process's log of attention fallbacks, to stderr as
/// "rp: attention on CUDA cores: <reason>".
FallbackLog &attentionFallbackLog();

/// Says `choice`'s reason once on attentionFallbackLog(); nothing for
/// cuDNN.
void sayAttentionFallback(const AttentionChoice &choice);

} // namespace rp::runtime

#endif // RP_RUNTIME_ATTENTIONPATH_H
