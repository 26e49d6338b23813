//===- AttentionPath.cpp - which kernel runs a GPU's attention ------------===//
//
// The limits below are cuDNN's documented support surface for its fused
// bf16/f16 SDPA (the frontend's sdpa_support_surface.h at 1.32, cuDNN
// 9.x), taken conservatively: a problem inside them may still be refused
// by cuDNN's own check on the GPU, which then falls back with cuDNN's
// message; a problem outside them never asks cuDNN.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/AttentionPath.h"

#include <iostream>

using namespace rp::runtime;

std::string rp::runtime::cudnnVersionString(int version) {
  // cuDNN 8 counted major * 1000 (8907 is 8.9.7), cuDNN 9 major * 10000.
  if (version < 10000)
    return std::to_string(version / 1000) + "." +
           std::to_string(version / 100 % 10) + "." +
           std::to_string(version % 100);
  return std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

namespace {

std::string smName(int sm) { return "sm_" + std::to_string(sm); }

/// The widest head cuDNN's fused kernels take on `sm` with `version`, and
/// the multiple both widths must be; 0 when the architecture has none.
void headLimits(int sm, int version, int64_t &widest, int64_t &multiple) {
  multiple = 8;
  if (sm >= 100 && sm < 110) {
    // Blackwell datacenter parts: 128 and multiples of 16 (wider pairs
    // come with later cuDNN versions and only in some combinations).
    widest = 128;
    multiple = 16;
  } else if (sm >= 90 && sm < 100) {
    widest = 256; // Hopper
  } else {
    // Ampere, Ada (and the consumer Blackwell parts, which cuDNN serves
    // with the Ampere-style kernels): 128 up to cuDNN 9.9, 256 after.
    widest = version > 90900 ? 256 : 128;
  }
}

AttentionChoice cores(std::string reason) {
  return {AttentionPath::cudaCores, std::move(reason)};
}

} // namespace

AttentionChoice rp::runtime::chooseAttentionPath(const AttentionProblem &p,
                                                 const CudnnLibraryInfo &cudnn,
                                                 int sm) {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16)
    return cores(std::string(dtypeName(p.dtype)) +
                 " attention: cuDNN's fused attention takes bf16 and f16 "
                 "only (compile with --dtype bf16 for tensor cores)");
  if (!cudnn.loaded)
    return cores("no cuDNN: " + cudnn.where);
  if (cudnn.version < kMinCudnnVersion)
    return cores("cuDNN " + cudnnVersionString(cudnn.version) + " (" +
                 cudnn.where + ") is older than the " +
                 cudnnVersionString(kMinCudnnVersion) +
                 " rp's attention graphs need");
  if (sm < 80)
    return cores(smName(sm) +
                 ": cuDNN's fused attention needs sm_80 (Ampere) or newer");
  int64_t widest = 0, multiple = 8;
  headLimits(sm, cudnn.version, widest, multiple);
  if (p.headDim % multiple != 0 || p.valueDim % multiple != 0 ||
      p.headDim > widest || p.valueDim > widest || p.headDim <= 0 ||
      p.valueDim <= 0)
    return cores("head widths " + std::to_string(p.headDim) + " (query/key) " +
                 "and " + std::to_string(p.valueDim) + " (value): cuDNN " +
                 cudnnVersionString(cudnn.version) + " on " + smName(sm) +
                 " takes multiples of " + std::to_string(multiple) + " up to " +
                 std::to_string(widest));
  if (p.kvHeads <= 0 || p.heads % p.kvHeads != 0)
    return cores(std::to_string(p.heads) + " query heads over " +
                 std::to_string(p.kvHeads) +
                 " key/value heads: cuDNN needs a whole number of query "
                 "heads per key/value head");
  // cudnn-frontend has no soft-cap attribute: a cap would be a score
  // modifier (a pointwise subgraph, forward and backward), which turns off
  // the frontend's own causal and window masks.
  if (p.softCap > 0)
    return cores("soft-capped scores (Gemma 2): cudnn-frontend's SDPA has no "
                 "soft-cap attribute, and rp does not build one from score "
                 "modifiers");
  if (p.sinks)
    return cores("attention sinks (GPT-OSS): cuDNN's SDPA has no sink column "
                 "(a learned logit per head in each row's softmax)");
  if (p.window > 0 && cudnn.version < 90200)
    return cores("sliding window: cuDNN's causal band with a left bound "
                 "needs cuDNN 9.2, found " +
                 cudnnVersionString(cudnn.version));
  if ((p.window > 0 || p.bottomRight) &&
      (p.mask == AttentionMaskKind::additive ||
       p.mask == AttentionMaskKind::boolean))
    return cores(std::string(p.window > 0 ? "sliding window"
                                          : "bottom-right causal mask") +
                 " with a mask operand: cuDNN takes its diagonal band "
                 "without a bias only");
  switch (p.mask) {
  case AttentionMaskKind::none:
  case AttentionMaskKind::causal:
  case AttentionMaskKind::additive:
    break;
  case AttentionMaskKind::band:
    // A band that is not causal (a window without the causal bound, or
    // with a bias) came with cuDNN 9.10.2; rp's causal sliding window is
    // `causal` with AttentionProblem::window instead.
    if (cudnn.version < 91002)
      return cores("banded mask without the causal bound: needs cuDNN "
                   "9.10.2, found " +
                   cudnnVersionString(cudnn.version));
    break;
  case AttentionMaskKind::boolean:
    return cores("boolean mask: cuDNN's attention takes an additive bias, "
                 "and rp does not turn an i1 mask into one (an additive "
                 "mask, where(keep, 0, -inf), runs on cuDNN)");
  case AttentionMaskKind::segments:
    // cuDNN's packed (ragged) layout wants each document's offsets, which
    // rp would have to compute from the ids on the device first.
    return cores("segment ids (packed documents): rp does not pass cuDNN "
                 "the documents' ragged offsets");
  }
  if (p.mask == AttentionMaskKind::additive && p.maskBroadcastsRowsOrKeys)
    return cores("additive mask broadcast along the query or key axis: "
                 "cuDNN's bias broadcasts over batch and heads only");
  // The deterministic backward (rp's bitwise contract) on Blackwell came
  // with cuDNN 9.18; on Ampere, Ada and Hopper it is there from 9.0.
  if (p.backward && sm >= 100 && cudnn.version < 91800)
    return cores("deterministic backward on " + smName(sm) +
                 " needs cuDNN 9.18, found " +
                 cudnnVersionString(cudnn.version));
  return {AttentionPath::cudnn, ""};
}

std::string rp::runtime::describeAttentionPath(const CudnnLibraryInfo &cudnn,
                                               int sm, const std::string &gpu) {
  std::string lib = cudnn.loaded
                        ? "cuDNN " + cudnnVersionString(cudnn.version) + " (" +
                              cudnn.where + ")"
                        : std::string();
  if (sm == 0)
    return cudnn.loaded
               ? "attention: " + lib + " loads; no GPU to choose for"
               : "attention: CUDA cores only (no cuDNN: " + cudnn.where + ")";
  AttentionProblem common;
  common.headDim = common.valueDim = 128;
  AttentionChoice c = chooseAttentionPath(common, cudnn, sm);
  if (c.path == AttentionPath::cudnn)
    return "attention on " + gpu + ": bf16/f16 through " + lib +
           " fused SDPA (deterministic backward), f32/f64 on CUDA cores";
  return "attention on " + gpu + ": CUDA cores (" + c.reason + ")";
}

bool FallbackLog::say(const std::string &line) {
  std::lock_guard<std::mutex> hold(lock);
  if (!said.insert(line).second)
    return false;
  sink(line);
  return true;
}

FallbackLog &rp::runtime::attentionFallbackLog() {
  static FallbackLog log([](const std::string &line) {
    std::cerr << "rp: attention on CUDA cores: " << line << "\n";
  });
  return log;
}

void rp::runtime::sayAttentionFallback(const AttentionChoice &choice) {
  if (choice.path != AttentionPath::cudnn)
    attentionFallbackLog().say(choice.reason);
}
