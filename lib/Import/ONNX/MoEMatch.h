//===- MoEMatch.h - one matched ONNX mixture-of-experts block -*- C++ -*-===//
//
// Private to the MoE stage: the matcher of a block that starts at a TopK
// (MoEBlocks.cpp) and what it found, which MoERecognize.cpp writes as the
// replacement node.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOEMATCH_H
#define RP_LIB_IMPORT_ONNX_MOEMATCH_H

#include "MoEGraphIndex.h"
#include "MoEOss.h"
#include "MoESigmoidRouter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::rp::onnx_import::moe {

struct Expert {
  std::string gate, up, down; // W1, W3, W2
  /// transformers 5's form: `gate` (== `up`) is the [E, 2F, H] stack whose
  /// halves are W1 and W3 (W1 first when `gateFirst`), `down` the [E, H, F]
  /// stack, `index` the value selecting this expert from both.
  bool stacked = false, gateFirst = true;
  std::string index;
  /// DBRX's form (MoESplitStacks.cpp): `gate` and `up` separate [E, F, H]
  /// stacks, `down` [E, F, H] (`downXAtW`) or [E, H, F]; each a 3-D value
  /// (an initializer or a Reshape of one), `count` experts, the rows
  /// gathered from `tokens`.
  bool split = false, downXAtW = false;
  int64_t count = 0, hidden = 0;
  std::string tokens;
};

/// One block's match: what the replacement node needs and the nodes it
/// replaces.
struct MoEMatch {
  std::string x, logits, output;
  int64_t topK = 0;
  bool normalize = false;
  /// The softmax is over the k chosen logits (rp.moe.route softmax = after).
  bool softmaxAfter = false;
  bool stacked = false, gateFirst = true;
  /// Three stacks (Expert::split), the down one maybe in `x @ W` layout.
  bool split = false, downXAtW = false;
  /// transformers 5's `batched_mm` experts (matchBatchedExpert).
  bool batched = false;
  SmallVector<Expert> experts;
  /// GPT-OSS's biased, clamped-SwiGLU experts (MoEOss.h).
  std::optional<OssExpert> oss;
  /// DeepSeek-V3's routing (sigmoid scores, group-limited top-k).
  bool isSigmoid = false;
  SigmoidRouter sigmoid;
  llvm::DenseSet<int> nodes;
  int last = -1;
  /// The values the matcher recognised as an expert's output (weighted by
  /// the routing), and the weighting Muls it checked whole (batched_mm).
  llvm::StringSet<> expertOutputs;
  llvm::DenseSet<int> weighing;
};

/// The first node of `b`'s region (after the TopK at `topK`) whose effect
/// the replacement MoE node does not reproduce, and what it computes
/// (MoERegionCheck.cpp); nullopt when every node is accounted for.
std::optional<std::pair<int, std::string>>
uncheckedRegionNode(const GraphIndex &g, const MoEMatch &b, int topK);

/// (i, n) when `index` is the i-th of the n experts the routing hit: the
/// expert loop of transformers 5 runs over `NonZero(hit)` split into one
/// value per expert, so each one-hot class it reads is a run-time value.
std::optional<std::pair<int64_t, int64_t>> hitClass(const GraphIndex &g,
                                                    StringRef index);

class Matcher {
public:
  Matcher(const GraphIndex &g, Location fileLoc) : g(g), fileLoc(fileLoc) {}

  FailureOr<MoEMatch> match(int topKIndex);

  /// Set by match when the TopK's scores are a group-limited sigmoid
  /// router's (sigmoid plus a bias), whether the rest matched or not: its
  /// first TopK only chooses groups, and keeps its error even when no
  /// expert reads its choices.
  bool knownRouter = false;

private:
  InFlightDiagnostic error(const onnx::NodeProto &node, int index) {
    std::string name = node.name().empty()
                           ? node.op_type() + "_" + std::to_string(index)
                           : node.name();
    return emitError(NameLoc::get(StringAttr::get(fileLoc.getContext(), name),
                                  fileLoc))
           << node.op_type() << " node '" << name << "'"
           << (modulePath(node).empty()
                   ? std::string()
                   : " (module '" + modulePath(node) + "')")
           << ": a mixture-of-experts block (TopK routing) rp-import cannot "
              "map: ";
  }
  /// `b`, or the error naming a region node it does not account for.
  FailureOr<MoEMatch> checked(MoEMatch &b, int topKIndex);
  int indexOf(const onnx::NodeProto *node) const {
    return g.producer.lookup(outputOf(*node, 0));
  }
  std::string siluInput(const onnx::NodeProto *node) const {
    return g.siluInput(node);
  }
  /// Matches W2(silu(W1 x) * W3 x) ending at `down`.
  std::optional<Expert> matchExpert(const onnx::NodeProto &down) const;
  /// The same with stacked weights: W2[i](silu(a) * b), a and b the two
  /// halves (Slice) of W13[i] x.
  std::optional<Expert> matchStackedExpert(const onnx::NodeProto &down) const;
  /// The same with DBRX's three stacks (MoESplitStacks.cpp): W2[i](silu(
  /// W1[i] x) * W3[i] x), W1 and W3 separate stacks.
  std::optional<Expert>
  matchSplitStackedExpert(const onnx::NodeProto &down) const;
  /// True when the TopK at `topKIndex` takes router logits along their
  /// last axis and only a Softmax over its last axis reads the values it
  /// keeps.
  bool softmaxAfterTopK(int topKIndex) const;

  const GraphIndex &g;
  Location fileLoc;
};

} // namespace mlir::rp::onnx_import::moe

#endif // RP_LIB_IMPORT_ONNX_MOEMATCH_H
