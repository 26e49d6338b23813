//===- MoEOss.h - GPT-OSS's experts in an ONNX MoE block -------*- C++ -*-===//
//
// Private to the MoE matcher (MoEBlocks.cpp); see MoEOss.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOEOSS_H
#define RP_LIB_IMPORT_ONNX_MOEOSS_H

#include "MoEGraphIndex.h"

namespace mlir::rp::onnx_import::moe {

/// GPT-OSS's experts: the `x @ W` stacks ([E, H, 2F] and [E, F, H]) with
/// their biases ([E, 2F] and [E, H]), the gate and up columns (interleaved,
/// or the two halves), and the clamped SwiGLU's `alpha` and `limit`.
struct OssExpert {
  std::string gateUp, gateUpBias, down, downBias;
  /// The value every stack and bias is gathered at (the loop's expert
  /// index, or the chosen experts of the batched form).
  std::string index;
  /// The tokens the first matmul reads (before any per-slot reshape).
  std::string input;
  bool interleaved = true;
  double alpha = 0, limit = 0;

  /// The same stacks, biases, layout and constants (another iteration of
  /// one block's expert loop).
  bool sameAs(const OssExpert &o) const {
    return gateUp == o.gateUp && gateUpBias == o.gateUpBias && down == o.down &&
           downBias == o.downBias && interleaved == o.interleaved &&
           alpha == o.alpha && limit == o.limit;
  }
};

/// The expert of one iteration of the eager loop whose output `value` is:
/// `(h W2[i] + b2[i])`, `h` the clamped SwiGLU of `x W13[i] + b13[i]`, each
/// stack and bias read by a Gather at the same index `i`.
std::optional<OssExpert> matchOssLoopExpert(const GraphIndex &g,
                                            StringRef value);

/// The batched_mm experts whose output `weighted` (a Mul) weighs by the
/// routing: the same math with every stack and bias gathered at the chosen
/// experts `ids`, the tokens `x` repeated per slot.
std::optional<OssExpert> matchOssBatchedExpert(const GraphIndex &g,
                                               const onnx::NodeProto &weighted,
                                               StringRef ids, StringRef x);

/// True when `value` is a biased matmul of a gathered stack, `Add(MatMul(
/// ., Gather(W, i)), Gather(b, i))`: an expert of GPT-OSS's form, matched
/// or not (so that a near miss is refused, not skipped).
bool looksLikeBiasedExpert(const GraphIndex &g, StringRef value);

} // namespace mlir::rp::onnx_import::moe

#endif // RP_LIB_IMPORT_ONNX_MOEOSS_H
