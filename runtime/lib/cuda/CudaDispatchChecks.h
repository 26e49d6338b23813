//===- CudaDispatchChecks.h - argument checks of the cuda dispatch -*- C++ -*-//
//
// Private to lib/cuda: the shape and dtype checks of CudaDispatch.cpp that
// the host kernels keep inside their own files, and the index maps the
// kernels take. Messages are the host kernels' own, so that a call fails
// the same way on either device.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDADISPATCHCHECKS_H
#define RP_LIB_CUDA_CUDADISPATCHCHECKS_H

#include "CudaKernels.h"

#include "rp/runtime/kernels/Checks.h"

namespace rp::runtime::cuda::detail {

using kernels::AttentionGradRefs;
using kernels::StridedPlan;

ElementMap toMap(const StridedPlan &plan);

/// The plan of a broadcasting op (kernels::planBroadcastOp).
Status broadcastMap(const char *op,
                    const std::vector<const TensorRef *> &operands,
                    const TensorRef &out, ElementMap &map);

/// Kept and reduced dimensions of `x` for reduce and its gradient; the
/// shape of the result (keepDims or not) in `expected`.
Status reduceMap(const char *op, const TensorRef &x,
                 const std::vector<int64_t> &dims, bool keepDims,
                 ReduceMap &map, Shape &expected);

// Logits and labels, gather's shapes, softmax and concat: kernels::
// checkLogitsShape, gatherShape, checkSoftmax(Grad) and checkConcat
// (Checks.h, as the host kernels); the kernels check the values on the GPU.

/// attention's and attention_grad's checks (kernels::checkAttentionArgs) and
/// the kernels' view of the shapes; heads wider than kMaxHeadDim are refused.
Status attentionShape(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const std::optional<TensorRef> &mask,
                      bool causal, double scale, const TensorRef &y,
                      const AttentionGradRefs *grads, AttentionShape &shape,
                      const kernels::AttentionExtras &extras = {});

} // namespace rp::runtime::cuda::detail

#endif // RP_LIB_CUDA_CUDADISPATCHCHECKS_H
