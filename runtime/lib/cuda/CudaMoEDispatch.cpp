//===- CudaMoEDispatch.cpp - the rp.moe.* calls on the cuda device --------===//
//
// Call for call host/HostDispatch.cpp's MoE cases, with host/HostMoE.cpp's
// shape and dtype checks and messages; what the host checks by reading data
// (experts in range, counts that fit, positions in range and unique) the
// kernels check on the GPU (CudaMoE.cu, CudaMoEGemm.cu), so the host never
// reads a count.
//
// The grouped matmul is one cublasGemmBatchedEx over tiles of up to 128
// rows: the per-expert row counts exist only on the device, and cuBLAS's
// grouped GEMM (cublasGemmGroupedBatchedEx) takes its sizes in host
// arrays, so the sizes here are fixed - every tile has the same shape - and
// what varies, each tile's expert and rows, is in device pointer arrays a
// one-thread kernel fills from the counts. A group's last, partial tile is
// computed into scratch and its rows copied out after; the batch holds
// numRows / 128 + experts tiles, so the work is at most one tile per expert
// above the rows'. The weight gradient sums over each group's rows, which a
// batched GEMM of fixed size cannot bound, so it is a tiled kernel that
// sums every group in row order (CudaMoEGemm.cu).
//
//===----------------------------------------------------------------------===//

#include "CudaDispatch.h"
#include "CudaMoE.h"
#include "CudaStatus.h"

#include "rp/runtime/kernels/Checks.h"

#include <cublas_v2.h>

#include <climits>
#include <optional>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using namespace rp::runtime::kernels;

namespace {

Status launched(cudaError_t error, const char *op) {
  return fromCuda(error, std::string("launching the ") + op + " kernels");
}

Status expectRank2(const char *op, const char *role, const TensorRef &t) {
  if (Status s = checkTensor(t, role, op); s.failed())
    return s;
  if (t.shape.size() != 2)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have rank 2");
  return {};
}

Status expectShape(const char *op, const char *role, const TensorRef &t,
                   DType dtype, const Shape &shape) {
  if (Status s = checkTensorOf(t, dtype, role, op); s.failed())
    return s;
  if (t.shape != shape)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have shape " + describeShape(shape));
  return {};
}

Status expectFloatMatrix(const char *op, const char *role, const TensorRef &t) {
  if (Status s = expectRank2(op, role, t); s.failed())
    return s;
  return isFloat(t.dtype) ? Status{} : unsupportedDType(op, t.dtype);
}

Status expectStack(const char *op, const char *role, const TensorRef &t,
                   DType dtype, const char *why) {
  if (Status s = checkTensorOf(t, dtype, role, op); s.failed())
    return s;
  if (t.shape.size() != 3)
    return invalidArgument(std::string(op) + ": " + role + " " + describe(t) +
                           " should have rank 3" + why);
  return {};
}

Status route(const LaunchContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &outs, bool before, bool normalize) {
  const char *op = "moe_route";
  const TensorRef &logits = in[0], &weights = outs[0], &experts = outs[1];
  if (Status s = expectFloatMatrix(op, "logits", logits); s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = weights.shape.size() == 2 ? weights.shape[1] : 0;
  if (k < 1 || k > n)
    return invalidArgument(std::string(op) + ": weights " + describe(weights) +
                           " should be [" + std::to_string(tokens) +
                           ", k] with 1 <= k <= " + std::to_string(n));
  if (Status s = expectShape(op, "weights", weights, logits.dtype, {tokens, k});
      s.failed())
    return s;
  if (Status s = expectShape(op, "experts", experts, DType::i64, {tokens, k});
      s.failed())
    return s;
  return launched(launchMoERoute(ctx, logits.dtype, before, normalize,
                                 logits.data, tokens, n, k, weights.data,
                                 experts.as<int64_t>()),
                  op);
}

Status routeGrad(const LaunchContext &ctx, const std::vector<TensorRef> &in,
                 const TensorRef &dlogits, bool before, bool normalize) {
  const char *op = "moe_route_grad";
  const TensorRef &logits = in[0], &experts = in[1], &dweights = in[2];
  if (Status s = expectFloatMatrix(op, "logits", logits); s.failed())
    return s;
  if (Status s = expectRank2(op, "experts", experts); s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = experts.shape[1];
  if (Status s = expectShape(op, "experts", experts, DType::i64, {tokens, k});
      s.failed())
    return s;
  if (Status s = expectShape(op, "weights gradient", dweights, logits.dtype,
                             {tokens, k});
      s.failed())
    return s;
  if (Status s = expectShape(op, "logits gradient", dlogits, logits.dtype,
                             {tokens, n});
      s.failed())
    return s;
  return launched(launchMoERouteGrad(ctx, logits.dtype, before, normalize,
                                     logits.data, experts.as<int64_t>(),
                                     dweights.data, tokens, n, k, dlogits.data),
                  op);
}

Status dispatch(const DispatchContext &dctx, const LaunchContext &ctx,
                const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &outs) {
  const char *op = "moe_dispatch";
  const TensorRef &x = in[0], &experts = in[1];
  const TensorRef &rows = outs[0], &positions = outs[1], &counts = outs[2];
  if (Status s = expectRank2(op, "input", x); s.failed())
    return s;
  if (Status s = expectRank2(op, "experts", experts); s.failed())
    return s;
  const int64_t tokens = x.shape[0], hidden = x.shape[1];
  const int64_t k = experts.shape[1];
  if (Status s = expectShape(op, "experts", experts, DType::i64, {tokens, k});
      s.failed())
    return s;
  if (Status s = expectShape(op, "rows", rows, x.dtype, {tokens * k, hidden});
      s.failed())
    return s;
  if (Status s =
          expectShape(op, "positions", positions, DType::i32, {tokens, k});
      s.failed())
    return s;
  if (counts.shape.size() != 1 || counts.dtype != DType::i32)
    return invalidArgument(std::string(op) + ": counts " + describe(counts) +
                           " should be i32[experts]");
  if (tokens * k > INT32_MAX)
    return invalidArgument(std::string(op) + ": " + std::to_string(tokens * k) +
                           " choices do not fit the i32 positions");
  const int64_t numExperts = counts.shape[0];
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(moeDispatchScratchBytes(numExperts), op);
      s.failed())
    return s;
  return launched(launchMoEDispatch(ctx, dtypeSize(x.dtype), x.data,
                                    experts.as<int64_t>(), tokens, k, hidden,
                                    numExperts, rows.data,
                                    positions.as<int32_t>(),
                                    counts.as<int32_t>(), scratch.get()),
                  op);
}

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::f16:
    return CUDA_R_16F;
  case DType::bf16:
    return CUDA_R_16BF;
  case DType::f64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

Status groupedMatmul(const DispatchContext &dctx, const LaunchContext &ctx,
                     const std::vector<TensorRef> &in, const TensorRef &out,
                     bool transposeB) {
  const char *op = "moe_grouped_matmul";
  const TensorRef &x = in[0], &weight = in[1], &counts = in[2];
  if (Status s = expectFloatMatrix(op, "input", x); s.failed())
    return s;
  if (Status s = expectStack(op, "weight", weight, x.dtype,
                             " (a stack of expert weights)");
      s.failed())
    return s;
  const int64_t numRows = x.shape[0], experts = weight.shape[0];
  const int64_t kIn = weight.shape[transposeB ? 2 : 1];
  const int64_t nOut = weight.shape[transposeB ? 1 : 2];
  if (x.shape[1] != kIn)
    return invalidArgument(std::string(op) + ": input " + describe(x) +
                           " does not match the weight " + describe(weight));
  if (Status s = expectShape(op, "output", out, x.dtype, {numRows, nOut});
      s.failed())
    return s;
  if (Status s = expectShape(op, "counts", counts, DType::i32, {experts});
      s.failed())
    return s;
  const size_t es = dtypeSize(x.dtype);
  const MoEGemmTiles tiles = moeGemmTiles(numRows, experts, nOut, es);
  if (tiles.numTiles > INT_MAX || kIn > INT_MAX || nOut > INT_MAX)
    return invalidArgument(std::string(op) + ": " + describe(x) + " x " +
                           describe(weight) + " is too large for cuBLAS");
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(
          tiles.bytes ? tiles.bytes : moeOffsetsScratchBytes(experts), op);
      s.failed())
    return s;
  // The counts are checked (on the device) whatever the sizes.
  if (Status s = launched(launchMoEGemmPlan(ctx, tiles, counts.as<int32_t>(),
                                            experts, numRows, x.data, kIn,
                                            weight.data, kIn * nOut, out.data,
                                            nOut, es, scratch.get()),
                          op);
      s.failed() || out.size() == 0)
    return s;
  // Empty sums, or no expert (every row past the groups): +0.0 everywhere.
  if (kIn == 0 || experts == 0)
    return fromCuda(cudaMemsetAsync(out.data, 0, out.bytes(), dctx.stream),
                    "cudaMemsetAsync (moe_grouped_matmul of no products)");
  const bool f64 = x.dtype == DType::f64;
  const float oneF = 1.0f, zeroF = 0.0f;
  const double oneD = 1.0, zeroD = 0.0;
  const void *alpha = f64 ? static_cast<const void *>(&oneD) : &oneF;
  const void *beta = f64 ? static_cast<const void *>(&zeroD) : &zeroF;
  const cudaDataType_t type = cudaTypeOf(x.dtype);
  // Row-major tile [R, nOut] = X [R, kIn] op(W) is column-major
  // C^T = op(W)^T X^T: the weight goes first (as CudaMatmul.cpp).
  const char *base = static_cast<const char *>(scratch.get());
  auto *pointers = reinterpret_cast<void *const *>(base + tiles.pointersAt);
  if (Status s = fromCublas(
          cublasGemmBatchedEx(
              dctx.blas, transposeB ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
              int(nOut), int(tiles.tileRows), int(kIn), alpha,
              reinterpret_cast<const void *const *>(pointers), type,
              int(transposeB ? kIn : nOut),
              reinterpret_cast<const void *const *>(pointers + tiles.numTiles),
              type, int(kIn), beta, pointers + 2 * tiles.numTiles, type,
              int(nOut), int(tiles.numTiles),
              f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
              CUBLAS_GEMM_DEFAULT),
          "cublasGemmBatchedEx (" + describe(x) + " x " + describe(weight) +
              " by expert)");
      s.failed())
    return s;
  return launched(launchMoEGemmFinish(ctx, tiles, experts, numRows, nOut, es,
                                      out.data, scratch.get()),
                  op);
}

Status groupedMatmulWGrad(const DispatchContext &dctx, const LaunchContext &ctx,
                          const std::vector<TensorRef> &in,
                          const TensorRef &dweight, bool transposeB) {
  const char *op = "moe_grouped_matmul_wgrad";
  const TensorRef &x = in[0], &dy = in[1], &counts = in[2];
  if (Status s = expectFloatMatrix(op, "input", x); s.failed())
    return s;
  if (Status s = expectRank2(op, "output gradient", dy); s.failed())
    return s;
  const int64_t numRows = x.shape[0];
  if (Status s = expectStack(op, "weight gradient", dweight, x.dtype, "");
      s.failed())
    return s;
  const int64_t experts = dweight.shape[0];
  Shape expected = transposeB ? Shape{experts, dy.shape[1], x.shape[1]}
                              : Shape{experts, x.shape[1], dy.shape[1]};
  if (Status s = expectShape(op, "weight gradient", dweight, x.dtype, expected);
      s.failed())
    return s;
  if (Status s = expectShape(op, "output gradient", dy, x.dtype,
                             {numRows, dy.shape[1]});
      s.failed())
    return s;
  if (Status s = expectShape(op, "counts", counts, DType::i32, {experts});
      s.failed())
    return s;
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(moeOffsetsScratchBytes(experts), op);
      s.failed())
    return s;
  const TensorRef &p = transposeB ? dy : x, &q = transposeB ? x : dy;
  return launched(launchMoEWGrad(ctx, x.dtype, counts.as<int32_t>(), experts,
                                 numRows, p.data, p.shape[1], q.data,
                                 q.shape[1], dweight.data, scratch.get()),
                  op);
}

/// What moe_combine and its gradient both read (HostMoE.cpp's
/// checkCombine, less the positions' values).
Status checkCombine(const char *op, const TensorRef &rows,
                    const TensorRef &positions,
                    const std::optional<TensorRef> &weights,
                    const char *outRole, const TensorRef &out) {
  if (Status s = expectFloatMatrix(op, "rows", rows); s.failed())
    return s;
  if (Status s = expectRank2(op, "positions", positions); s.failed())
    return s;
  if (positions.dtype != DType::i32)
    return unsupportedDType(op, positions.dtype, "positions");
  const int64_t tokens = positions.shape[0], k = positions.shape[1];
  if (weights)
    if (Status s =
            expectShape(op, "weights", *weights, rows.dtype, {tokens, k});
        s.failed())
      return s;
  return expectShape(op, outRole, out, rows.dtype, {tokens, rows.shape[1]});
}

Status combine(const LaunchContext &ctx, const std::vector<TensorRef> &in,
               const TensorRef &out, bool weighted) {
  const char *op = "moe_combine";
  const std::optional<TensorRef> weights =
      weighted ? std::optional<TensorRef>(in[2]) : std::nullopt;
  const TensorRef &rows = in[0], &positions = in[1];
  if (Status s = checkCombine(op, rows, positions, weights, "output", out);
      s.failed())
    return s;
  return launched(launchMoECombine(ctx, rows.dtype, rows.data, rows.shape[0],
                                   positions.as<int32_t>(),
                                   weights ? weights->data : nullptr,
                                   positions.shape[0], positions.shape[1],
                                   rows.shape[1], out.data),
                  op);
}

Status combineGrad(const DispatchContext &dctx, const LaunchContext &ctx,
                   const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &outs, bool weighted) {
  const char *op = "moe_combine_grad";
  const std::optional<TensorRef> weights =
      weighted ? std::optional<TensorRef>(in[2]) : std::nullopt;
  const TensorRef &rows = in[0], &positions = in[1], &dy = in.back();
  const TensorRef &drows = outs[0];
  if (weighted && outs.size() < 2)
    return invalidArgument(std::string(op) +
                           ": weights and their gradient go together");
  if (Status s =
          checkCombine(op, rows, positions, weights, "output gradient", dy);
      s.failed())
    return s;
  const int64_t tokens = positions.shape[0], k = positions.shape[1];
  if (weighted)
    if (Status s = expectShape(op, "weights gradient", outs[1], rows.dtype,
                               {tokens, k});
        s.failed())
      return s;
  if (Status s =
          expectShape(op, "rows gradient", drows, rows.dtype, rows.shape);
      s.failed())
    return s;
  Scratch scratch(dctx.stream);
  if (Status s =
          scratch.allocate(moeCombineGradScratchBytes(rows.shape[0]), op);
      s.failed())
    return s;
  return launched(
      launchMoECombineGrad(
          ctx, rows.dtype, rows.data, rows.shape[0], positions.as<int32_t>(),
          weights ? weights->data : nullptr, dy.data, tokens, k, rows.shape[1],
          drows.data, weighted ? outs[1].data : nullptr, scratch.get()),
      op);
}

} // namespace

Status rp::runtime::cuda::runMoE(const DispatchContext &dctx,
                                 const LaunchContext &ctx,
                                 const KernelCallDesc &c,
                                 const CallTensors &tensors) {
  const std::vector<TensorRef> &in = tensors.in, &outs = tensors.outs;
  const std::vector<int64_t> &a = c.ints;
  // Attribute conventions: host/HostDispatch.cpp's (softmax 0 = before).
  switch (c.op) {
  case OpKind::moe_route:
    return route(ctx, in, outs, a[1] == 0, a[2] != 0);
  case OpKind::moe_route_grad:
    return routeGrad(ctx, in, outs[0], a[0] == 0, a[1] != 0);
  case OpKind::moe_dispatch:
    return dispatch(dctx, ctx, in, outs);
  case OpKind::moe_grouped_matmul:
    return groupedMatmul(dctx, ctx, in, outs[0], a[0] != 0);
  case OpKind::moe_grouped_matmul_wgrad:
    return groupedMatmulWGrad(dctx, ctx, in, outs[0], a[0] != 0);
  case OpKind::moe_combine:
    return combine(ctx, in, outs[0], a[0] != 0);
  case OpKind::moe_combine_grad:
    return combineGrad(dctx, ctx, in, outs, a[0] != 0);
  default:
    return internalError(std::string(opKindName(c.op)) +
                         " is not a mixture-of-experts op");
  }
}
