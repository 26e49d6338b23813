//===- Kernels.h - the host kernel library ----------------------*- C++ -*-===//
//
// Forward kernels for every op the compiler emits, on CPU threads. Storage
// types f32, f16, bf16 compute in f32 (accumulation included); f64 computes
// in f64 and is the reference the tests check the others against; i32, i64
// and i1 where the op allows them.
//
// Contract for every kernel:
// - tensors are contiguous row-major; shapes follow the rp op's verifier
//   (the compiler guarantees them; kernels check what is cheap and return a
//   Status on a mismatch instead of writing out of bounds);
// - `out` is preallocated with its shape and dtype; it never aliases an
//   input unless the op's comment says so;
// - work is split into fixed chunks whose boundaries and reduction order do
//   not depend on the pool size, so results are bitwise identical for any
//   thread count (DESIGN.md, Determinism);
// - BLAS is called single-threaded from pool workers;
// - the math of each op lives in kernels/*.h as `RP_HD` functions that a
//   CUDA kernel can include.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_HOST_KERNELS_H
#define RP_RUNTIME_HOST_KERNELS_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/kernels/Checks.h"
#include "rp/runtime/kernels/Kinds.h"
#include "rp/runtime/kernels/Philox.h"

#include <optional>

namespace rp::runtime::host {

// The kinds are the kernels' shared ones (the cuda kernels take them too).
using kernels::BinaryKind;
using kernels::CmpKind;
using kernels::ReduceKind;
using kernels::UnaryKind;

/// out = a op b with numpy broadcasting (out has the broadcast shape).
Status binary(ThreadPool &pool, BinaryKind kind, const TensorRef &a,
              const TensorRef &b, const TensorRef &out);
/// out (i1) = a cmp b with broadcasting; floats compare ordered (NaN: only
/// `ne` is true).
Status compare(ThreadPool &pool, CmpKind kind, const TensorRef &a,
               const TensorRef &b, const TensorRef &out);
/// out = cond ? onTrue : onFalse with broadcasting of all three.
Status where(ThreadPool &pool, const TensorRef &cond, const TensorRef &onTrue,
             const TensorRef &onFalse, const TensorRef &out);
Status unary(ThreadPool &pool, UnaryKind kind, const TensorRef &x,
             const TensorRef &out);
/// Dropout with the counter-based mask of kernels/Philox.h: out = x / (1 -
/// p) where element key.offset + i is kept, else 0 (floats only).
Status dropout(ThreadPool &pool, const kernels::DropoutKey &key,
               const TensorRef &x, const TensorRef &out);
/// The key of a plan's dropout call (kernels/Philox.h's dropoutKeyOfRow):
/// `row` its i64 [1, 4] dropout_key slice, x of `elements` values, the
/// call's tensor number and probability; `on` false: copy x instead.
Status dropoutKeyOf(const TensorRef &row, int64_t elements, int64_t tensor,
                    double p, kernels::DropoutKey &key, bool &on);
/// Element type conversion, same shape (round to nearest even between
/// floats, truncation toward zero float -> int, x != 0 to i1).
Status cast(ThreadPool &pool, const TensorRef &x, const TensorRef &out);
/// A copy (reshape is a copy into the output's shape; same element count).
Status copy(ThreadPool &pool, const TensorRef &x, const TensorRef &out);
Status transpose(ThreadPool &pool, const TensorRef &x,
                 const std::vector<int64_t> &permutation, const TensorRef &out);
Status slice(ThreadPool &pool, const TensorRef &x,
             const std::vector<int64_t> &offsets,
             const std::vector<int64_t> &strides, const TensorRef &out);
Status concat(ThreadPool &pool, const std::vector<TensorRef> &inputs,
              int64_t dim, const TensorRef &out);
Status broadcast(ThreadPool &pool, const TensorRef &x, const TensorRef &out);
/// ONNX Gather; negative indices count from the end; an index out of range
/// is an InvalidArgument status naming it.
Status gather(ThreadPool &pool, const TensorRef &x, const TensorRef &indices,
              int64_t axis, const TensorRef &out);
/// The GEMM matmul runs on: "openblas" or "plain" (the build's choice).
const char *gemmName();
/// Batched matmul with broadcasting batch dims and transpose flags.
Status matmul(ThreadPool &pool, const TensorRef &a, const TensorRef &b,
              bool transposeA, bool transposeB, const TensorRef &out);
/// matmul's fused epilogue (the plan's third matmul integer,
/// kernels::MatmulEpilogue): out = act(a x b + bias) with `extra` the bias
/// [N] broadcast over the rows, and `pre` (optional, for the activation's
/// gradient) a x b + bias; or, for dGelu, out = unary_grad(gelu, extra,
/// a x b) with `extra` the forward's pre-activation. The unfused host
/// calls in sequence (matmul, add, gelu; matmul, unary_grad), each result
/// rounded to the storage type as the unfused plan rounds it, so the
/// outputs are bitwise the unfused plan's.
Status matmulEpilogue(ThreadPool &pool, const TensorRef &a, const TensorRef &b,
                      bool transposeA, bool transposeB, const TensorRef &extra,
                      int64_t epilogue, const TensorRef &out,
                      const std::optional<TensorRef> &pre);
/// dims strictly increasing; keepDims as in rp.reduce.
Status reduce(ThreadPool &pool, ReduceKind kind, const TensorRef &x,
              const std::vector<int64_t> &dims, bool keepDims,
              const TensorRef &out);
Status softmax(ThreadPool &pool, const TensorRef &x, int64_t dim, bool log,
               const TensorRef &out);
/// Normalizes over dims [axis, rank); scale/bias optional (nullopt).
Status layerNorm(ThreadPool &pool, const TensorRef &x,
                 const std::optional<TensorRef> &scale,
                 const std::optional<TensorRef> &bias, int64_t axis,
                 double epsilon, const TensorRef &out);
Status rmsNorm(ThreadPool &pool, const TensorRef &x,
               const std::optional<TensorRef> &scale, int64_t axis,
               double epsilon, const TensorRef &out);
/// q [B,H,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv] -> out [B,H,S,Dv]; mask
/// broadcastable to [B,H,S,T] (i1 keeps true positions, float is added);
/// causal keeps key j <= i + T - S for query i (bottom-right; S <= T), and
/// `extras` adds a sliding window and soft-capping (kernels/Checks.h).
/// Memory beyond the output is O(T) per worker (online softmax), as the
/// fused GPU kernel.
Status attention(ThreadPool &pool, const TensorRef &q, const TensorRef &k,
                 const TensorRef &v, const std::optional<TensorRef> &mask,
                 bool causal, double scale, const TensorRef &out,
                 const kernels::AttentionExtras &extras = {});

} // namespace rp::runtime::host

#endif // RP_RUNTIME_HOST_KERNELS_H
