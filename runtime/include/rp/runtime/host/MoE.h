//===- MoE.h - mixture-of-experts kernels on the host -----------*- C++ -*-===//
//
// The kernels of the rp.moe ops (RPMoEOps.td states their semantics). Same
// contract as Kernels.h: contiguous row-major tensors, preallocated
// outputs, the same bits for any thread count. Routing picks the top-k the
// way PyTorch's CPU topk does, so equal scores choose the same experts.
// Positions and counts are i32, expert indices i64.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_HOST_MOE_H
#define RP_RUNTIME_HOST_MOE_H

#include "rp/runtime/host/Kernels.h"

namespace rp::runtime::host {

/// Where moeRoute takes the softmax (rp MoESoftmax): over all experts
/// before the top-k, or over the chosen logits after it.
enum class MoESoftmax { before = 0, after = 1 };

/// logits [T, E] -> weights [T, K], experts [T, K] (i64).
Status moeRoute(ThreadPool &pool, const TensorRef &logits, MoESoftmax softmax,
                bool normalize, const TensorRef &weights,
                const TensorRef &experts);

/// dlogits [T, E] from dweights [T, K], recomputing the route's softmax.
Status moeRouteGrad(ThreadPool &pool, const TensorRef &logits,
                    const TensorRef &experts, const TensorRef &dweights,
                    MoESoftmax softmax, bool normalize,
                    const TensorRef &dlogits);

/// x [T, H], experts [T, K] -> rows [T*K, H] grouped by expert, positions
/// [T, K] (the row of each choice), counts [E]. An expert index outside
/// [0, E) is an InvalidArgument status naming the token.
Status moeDispatch(ThreadPool &pool, const TensorRef &x,
                   const TensorRef &experts, const TensorRef &rows,
                   const TensorRef &positions, const TensorRef &counts);

/// out [R, N] = each group of x [R, K] times its expert's weight [E, K, N]
/// ([E, N, K] transposed with transposeB); rows past the groups are zero.
Status moeGroupedMatmul(ThreadPool &pool, const TensorRef &x,
                        const TensorRef &weight, const TensorRef &counts,
                        bool transposeB, const TensorRef &out);

/// dweight [E, K, N] = x_e^T dy_e per group ([E, N, K] = dy_e^T x_e with
/// transposeB); experts without rows get zeros.
Status moeGroupedMatmulWGrad(ThreadPool &pool, const TensorRef &x,
                             const TensorRef &dy, const TensorRef &counts,
                             bool transposeB, const TensorRef &dweight);

/// out[t] = sum over k of weights[t, k] * rows[positions[t, k]] (weights 1
/// when absent), summed in k order.
Status moeCombine(ThreadPool &pool, const TensorRef &rows,
                  const TensorRef &positions,
                  const std::optional<TensorRef> &weights,
                  const TensorRef &out);

/// drows (rows no token reads are zero) and, with weights, dweights of
/// moeCombine given dy [T, H]. Positions naming a row twice are an
/// InvalidArgument status (each row has one writer).
Status moeCombineGrad(ThreadPool &pool, const TensorRef &rows,
                      const TensorRef &positions,
                      const std::optional<TensorRef> &weights,
                      const TensorRef &dy, const TensorRef &drows,
                      const std::optional<TensorRef> &dweights);

} // namespace rp::runtime::host

#endif // RP_RUNTIME_HOST_MOE_H
