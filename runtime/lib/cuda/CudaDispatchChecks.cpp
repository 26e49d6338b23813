//===- CudaDispatchChecks.cpp - argument checks of the cuda dispatch ------===//
//
// The checks look at shapes and dtypes only, never at data, which lives on
// the GPU; what the host checks in the data the kernels check there.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatchChecks.h"

#include <algorithm>
#include <cstring>

using namespace rp::runtime;
using namespace rp::runtime::kernels;

namespace rp::runtime::cuda::detail {

ElementMap toMap(const StridedPlan &plan) {
  ElementMap map;
  map.rank = plan.rank;
  map.numOperands = plan.numOperands;
  for (int d = 0; d < plan.rank; ++d) {
    map.shape[d] = plan.shape[d];
    for (int k = 0; k < plan.numOperands; ++k)
      map.strides[k][d] = plan.strides[k][d];
  }
  return map;
}

Status broadcastMap(const char *op,
                    const std::vector<const TensorRef *> &operands,
                    const TensorRef &out, ElementMap &map) {
  StridedPlan plan;
  if (Status s = planBroadcastOp(op, operands, out, plan); s.failed())
    return s;
  map = toMap(plan);
  return {};
}

Status reduceMap(const char *op, const TensorRef &x,
                 const std::vector<int64_t> &dims, bool keepDims,
                 ReduceMap &map, Shape &expected) {
  if (Status s = checkReduceDims(op, dims, x); s.failed())
    return s;
  const int rank = static_cast<int>(x.shape.size());
  if (rank > kMaxRank)
    return invalidArgument(std::string(op) + ": " + describe(x) +
                           " has more than " + std::to_string(kMaxRank) +
                           " dimensions");
  std::vector<int64_t> strides(rank);
  kernels::contiguousStrides(x.shape.data(), rank, strides.data());
  map = ReduceMap();
  for (int d = 0, i = 0; d < rank; ++d) {
    bool reduced = i < static_cast<int>(dims.size()) && dims[i] == d;
    if (reduced) {
      ++i;
      map.reducedSize[map.numReduced] = x.shape[d];
      map.reducedStride[map.numReduced++] = strides[d];
      map.reducedCount *= x.shape[d];
      if (keepDims)
        expected.push_back(1);
    } else {
      map.keptSize[map.numKept] = x.shape[d];
      map.keptStride[map.numKept++] = strides[d];
      expected.push_back(x.shape[d]);
    }
  }
  return {};
}

Status attentionShape(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const std::optional<TensorRef> &mask,
                      bool causal, double scale, const TensorRef &y,
                      const AttentionGradRefs *grads, AttentionShape &shape,
                      const kernels::AttentionExtras &extras) {
  AttentionDims dims;
  if (Status s = checkAttentionArgs(q, k, v, mask, causal, scale, y, grads,
                                    dims, extras);
      s.failed())
    return s;
  if (dims.d > kMaxHeadDim || dims.dv > kMaxHeadDim)
    return unsupported(
        std::string(grads ? "attention_grad" : "attention") + ": head width " +
        std::to_string(std::max(dims.d, dims.dv)) +
        " is above the cuda kernel's " + std::to_string(kMaxHeadDim) +
        "; run this model on --backend host");
  shape = AttentionShape{dims.b,  dims.h,   dims.s,
                         dims.d,  dims.hkv, dims.t,
                         dims.dv, {},       static_cast<int>(maskKind(mask)),
                         causal,  scale};
  std::memcpy(shape.maskStrides, dims.maskStrides, sizeof(shape.maskStrides));
  shape.window = extras.window;
  shape.softcap = extras.softcap;
  shape.sinks = extras.sinks ? extras.sinks->data : nullptr;
  shape.sinksGrad = extras.sinksGrad ? extras.sinksGrad->data : nullptr;
  return {};
}

} // namespace rp::runtime::cuda::detail
