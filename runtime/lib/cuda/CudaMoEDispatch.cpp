//===- CudaMoEDispatch.cpp - the rp.moe.* calls on the cuda device --------===//
//
// Call for call host/HostDispatch.cpp's MoE cases, with the shape and dtype
// checks host/HostMoE.cpp calls too (kernels/Checks.h, lib/kernels/
// MoEChecks.cpp); what the host checks by reading data (experts in range,
// counts that fit, positions in range and unique) the kernels check on the
// GPU (CudaMoE.cu, CudaMoEGemm.cu), so the host never reads a count.
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
// batched GEMM of fixed size cannot bound: it is a grouped GEMM, one
// product per expert with k = the expert's rows. Built with CUTLASS, that
// is CUTLASS's (CudaMoECutlass.cu), which reads the problems from device
// memory that a kernel fills from the counts, so nothing waits. Without
// CUTLASS it is cuBLAS's, whose sizes must be on the host, so that call
// copies the counts back (the host waits for the stream there). Where the
// types are f64, the counts bad (cuBLAS's path), or the grouped GEMM
// refuses the problem, the tiled kernel that sums every group in row order
// (CudaMoEGemm.cu) runs instead, which checks and reports bad counts as
// the host does, and the fallback is said once.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatch.h"
#include "CudaMoE.h"
#include "CudaStatus.h"

#include "rp/runtime/kernels/Checks.h"

#include <cublas_v2.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <optional>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using namespace rp::runtime::kernels;

namespace {

Status launched(cudaError_t error, const char *op) {
  return fromCuda(error, std::string("launching the ") + op + " kernels");
}

Status route(const LaunchContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &outs, bool before, bool normalize) {
  const TensorRef &logits = in[0], &weights = outs[0], &experts = outs[1];
  if (Status s = checkMoERoute(logits, weights, experts); s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = weights.shape[1];
  return launched(launchMoERoute(ctx, logits.dtype, before, normalize,
                                 logits.data, tokens, n, k, weights.data,
                                 experts.as<int64_t>()),
                  "moe_route");
}

Status routeGrad(const LaunchContext &ctx, const std::vector<TensorRef> &in,
                 const TensorRef &dlogits, bool before, bool normalize) {
  const TensorRef &logits = in[0], &experts = in[1], &dweights = in[2];
  if (Status s = checkMoERouteGrad(logits, experts, dweights, dlogits);
      s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = experts.shape[1];
  return launched(launchMoERouteGrad(ctx, logits.dtype, before, normalize,
                                     logits.data, experts.as<int64_t>(),
                                     dweights.data, tokens, n, k, dlogits.data),
                  "moe_route_grad");
}

Status dispatch(const DispatchContext &dctx, const LaunchContext &ctx,
                const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &outs) {
  const char *op = "moe_dispatch";
  const TensorRef &x = in[0], &experts = in[1];
  const TensorRef &rows = outs[0], &positions = outs[1], &counts = outs[2];
  if (Status s = checkMoEDispatch(x, experts, rows, positions, counts);
      s.failed())
    return s;
  const int64_t tokens = x.shape[0], hidden = x.shape[1];
  const int64_t k = experts.shape[1];
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

Status groupedMatmul(const DispatchContext &dctx, const LaunchContext &ctx,
                     const std::vector<TensorRef> &in, const TensorRef &out,
                     bool transposeB) {
  const char *op = "moe_grouped_matmul";
  const TensorRef &x = in[0], &weight = in[1], &counts = in[2];
  if (Status s = checkMoEGroupedMatmul(x, weight, counts, transposeB, out);
      s.failed())
    return s;
  const int64_t numRows = x.shape[0], experts = weight.shape[0];
  const int64_t kIn = weight.shape[transposeB ? 2 : 1];
  const int64_t nOut = weight.shape[transposeB ? 1 : 2];
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
  const BlasTypes blas = blasTypes(x.dtype);
  const cudaDataType_t type = blas.type;
  // Row-major tile [R, nOut] = X [R, kIn] op(W) is column-major
  // C^T = op(W)^T X^T: the weight goes first (as CudaMatmul.cpp).
  const char *base = static_cast<const char *>(scratch.get());
  auto *pointers = reinterpret_cast<void *const *>(base + tiles.pointersAt);
  if (Status s = fromCublas(
          cublasGemmBatchedEx(
              dctx.blas, transposeB ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
              int(nOut), int(tiles.tileRows), int(kIn), blas.one,
              reinterpret_cast<const void *const *>(pointers), type,
              int(transposeB ? kIn : nOut),
              reinterpret_cast<const void *const *>(pointers + tiles.numTiles),
              type, int(kIn), blas.zero, pointers + 2 * tiles.numTiles, type,
              int(nOut), int(tiles.numTiles), blas.compute,
              CUBLAS_GEMM_DEFAULT),
          "cublasGemmBatchedEx (" + describe(x) + " x " + describe(weight) +
              " by expert)");
      s.failed())
    return s;
  return launched(launchMoEGemmFinish(ctx, tiles, experts, numRows, nOut, es,
                                      out.data, scratch.get()),
                  op);
}

#ifdef RP_CUDA_CUTLASS
/// dW[e] = P_e^T Q_e through CUTLASS's grouped GEMM; `ran` false (and
/// nothing enqueued) where it does not take the problem.
Status groupedWGradCutlass(const DispatchContext &dctx,
                           const LaunchContext &ctx, const TensorRef &counts,
                           int64_t numRows, const TensorRef &p,
                           const TensorRef &q, const TensorRef &dweight,
                           bool &ran) {
  ran = false;
  const int64_t experts = dweight.shape[0];
  const int64_t pCols = p.shape[1], qCols = q.shape[1];
  if (p.dtype == DType::f64 || experts == 0 || pCols == 0 || qCols == 0)
    return Status::ok();
  static std::atomic<bool> said{false};
  auto fallBack = [&](const char *why) {
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "rp cuda: moe_grouped_matmul_wgrad runs the tiled kernel, "
                   "not CUTLASS's grouped GEMM (said once): %s for %s\n",
                   why, describe(p).c_str());
    return Status::ok();
  };
  const char *why = nullptr;
  if (!moeCutlassTakes(p.dtype, pCols, qCols, p.data, q.data, dweight.data,
                       why))
    return fallBack(why);
  const char *op = "moe_grouped_matmul_wgrad";
  // Empty experts are 0 x 0 x 0 problems: their gradient is these zeros.
  if (Status s = fromCuda(
          cudaMemsetAsync(dweight.data, 0, dweight.bytes(), dctx.stream),
          "cudaMemsetAsync (moe_grouped_matmul_wgrad)");
      s.failed())
    return s;
  const MoEGroupedProblems layout = moeGroupedProblems(experts);
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(layout.bytes, op); s.failed())
    return s;
  if (Status s = launched(launchMoEGroupedProblems(
                              ctx, layout, counts.as<int32_t>(), experts,
                              numRows, p.data, pCols, q.data, qCols,
                              dweight.data, dtypeSize(p.dtype), scratch.get()),
                          op);
      s.failed())
    return s;
  // Refused before it launched: the tiled kernel rewrites every element.
  const cudaError_t error =
      launchMoECutlassWGrad(ctx, p.dtype, experts, layout, scratch.get());
  if (error == cudaErrorNotSupported)
    return fallBack("CUTLASS refused the kernel on this GPU");
  if (Status s = fromCuda(error, "CUTLASS grouped GEMM (" + describe(p) +
                                     "^T x " + describe(q) + " by expert)");
      s.failed())
    return s;
  ran = true;
  return Status::ok();
}
#endif

#ifndef RP_CUDA_CUTLASS
/// dW[e] = P_e^T Q_e through cublasGemmGroupedBatchedEx; `ran` false (and
/// nothing that matters enqueued) where the kernel must run instead.
Status groupedWGradGemm(const DispatchContext &dctx, const TensorRef &counts,
                        int64_t numRows, const TensorRef &p, const TensorRef &q,
                        const TensorRef &dweight, bool &ran) {
  ran = false;
  const int64_t experts = dweight.shape[0];
  const int64_t pCols = p.shape[1], qCols = q.shape[1];
  if (p.dtype == DType::f64 || experts == 0 || pCols == 0 || qCols == 0 ||
      numRows > INT_MAX || pCols > INT_MAX || qCols > INT_MAX)
    return Status::ok();
  std::vector<int32_t> rows(size_t(experts), 0);
  if (Status s = fromCuda(cudaMemcpyAsync(rows.data(), counts.data,
                                          rows.size() * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, dctx.stream),
                          "cudaMemcpyAsync (moe_grouped_matmul_wgrad counts)");
      s.failed())
    return s;
  if (Status s = fromCuda(cudaStreamSynchronize(dctx.stream),
                          "cudaStreamSynchronize (moe_grouped_matmul_wgrad)");
      s.failed())
    return s;
  // Bad counts: the kernel reports them, naming the expert, as the host.
  int64_t begin = 0;
  for (int32_t c : rows) {
    if (c < 0 || begin + c > numRows)
      return Status::ok();
    begin += c;
  }
  // Empty experts take no product: their gradient is these zeros.
  if (Status s = fromCuda(
          cudaMemsetAsync(dweight.data, 0, dweight.bytes(), dctx.stream),
          "cudaMemsetAsync (moe_grouped_matmul_wgrad)");
      s.failed())
    return s;
  // Row-major dW[e] [pCols, qCols] = P_e^T Q_e is column-major
  // C [qCols, pCols] = Q_e P_e^T, Q_e and P_e column-major as they lie.
  const size_t es = dtypeSize(p.dtype);
  std::vector<const void *> pointers;
  std::vector<int> m, n, k, lda, ldb, ldc, size;
  std::vector<float> one, zero;
  begin = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t c = rows[size_t(e)];
    if (c > 0) {
      m.push_back(int(qCols)), n.push_back(int(pCols)), k.push_back(int(c));
      lda.push_back(int(qCols)), ldb.push_back(int(pCols));
      ldc.push_back(int(qCols)), size.push_back(1);
      one.push_back(1.0f), zero.push_back(0.0f);
    }
    begin += c;
  }
  const int groups = int(m.size());
  if (groups == 0) {
    ran = true;
    return Status::ok();
  }
  pointers.resize(3 * size_t(groups));
  begin = 0;
  for (int64_t e = 0, g = 0; e < experts; ++e) {
    const int64_t c = rows[size_t(e)];
    if (c > 0) {
      pointers[g] = static_cast<const char *>(q.data) + begin * qCols * es;
      pointers[groups + g] =
          static_cast<const char *>(p.data) + begin * pCols * es;
      pointers[2 * groups + g] =
          static_cast<const char *>(dweight.data) + e * pCols * qCols * es;
      ++g;
    }
    begin += c;
  }
  Scratch scratch(dctx.stream);
  const size_t bytes = pointers.size() * sizeof(void *);
  if (Status s = scratch.allocate(bytes, "moe_grouped_matmul_wgrad");
      s.failed())
    return s;
  // From pageable memory: the call returns once the bytes are staged.
  if (Status s = fromCuda(cudaMemcpyAsync(scratch.get(), pointers.data(), bytes,
                                          cudaMemcpyHostToDevice, dctx.stream),
                          "cudaMemcpyAsync (grouped GEMM pointers)");
      s.failed())
    return s;
  auto *device = static_cast<const void *const *>(scratch.get());
  std::vector<cublasOperation_t> opA(size_t(groups), CUBLAS_OP_N),
      opB(size_t(groups), CUBLAS_OP_T);
  const BlasTypes blas = blasTypes(p.dtype);
  cublasStatus_t status = cublasGemmGroupedBatchedEx(
      dctx.blas, opA.data(), opB.data(), m.data(), n.data(), k.data(),
      one.data(), device, blas.type, lda.data(), device + groups, blas.type,
      ldb.data(), zero.data(), const_cast<void *const *>(device + 2 * groups),
      blas.type, ldc.data(), groups, size.data(), blas.compute);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      status == CUBLAS_STATUS_INVALID_VALUE ||
      status == CUBLAS_STATUS_ARCH_MISMATCH) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "rp cuda: moe_grouped_matmul_wgrad runs the tiled kernel, "
                   "not cuBLAS's grouped GEMM (said once): %s for %s\n",
                   cublasGetStatusName(status), describe(p).c_str());
    return Status::ok();
  }
  if (Status s =
          fromCublas(status, "cublasGemmGroupedBatchedEx (" + describe(p) +
                                 "^T x " + describe(q) + " by expert)");
      s.failed())
    return s;
  ran = true;
  return Status::ok();
}

#endif

Status groupedMatmulWGrad(const DispatchContext &dctx, const LaunchContext &ctx,
                          const std::vector<TensorRef> &in,
                          const TensorRef &dweight, bool transposeB) {
  const char *op = "moe_grouped_matmul_wgrad";
  const TensorRef &x = in[0], &dy = in[1], &counts = in[2];
  if (Status s = checkMoEGroupedMatmulWGrad(x, dy, counts, transposeB, dweight);
      s.failed())
    return s;
  const int64_t numRows = x.shape[0], experts = dweight.shape[0];
  const TensorRef &p = transposeB ? dy : x, &q = transposeB ? x : dy;
  bool ran = false;
#ifdef RP_CUDA_CUTLASS
  // No host round trip: where CUTLASS does not take it, the tiled kernel.
  if (Status s =
          groupedWGradCutlass(dctx, ctx, counts, numRows, p, q, dweight, ran);
      s.failed() || ran)
    return s;
#else
  if (Status s = groupedWGradGemm(dctx, counts, numRows, p, q, dweight, ran);
      s.failed() || ran)
    return s;
#endif
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(moeOffsetsScratchBytes(experts), op);
      s.failed())
    return s;
  return launched(launchMoEWGrad(ctx, x.dtype, counts.as<int32_t>(), experts,
                                 numRows, p.data, p.shape[1], q.data,
                                 q.shape[1], dweight.data, scratch.get()),
                  op);
}

Status combine(const LaunchContext &ctx, const std::vector<TensorRef> &in,
               const TensorRef &out, bool weighted) {
  const std::optional<TensorRef> weights =
      weighted ? std::optional<TensorRef>(in[2]) : std::nullopt;
  const TensorRef &rows = in[0], &positions = in[1];
  if (Status s = checkMoECombine(rows, positions, weights, out); s.failed())
    return s;
  return launched(launchMoECombine(ctx, rows.dtype, rows.data, rows.shape[0],
                                   positions.as<int32_t>(),
                                   weights ? weights->data : nullptr,
                                   positions.shape[0], positions.shape[1],
                                   rows.shape[1], out.data),
                  "moe_combine");
}

Status combineGrad(const DispatchContext &dctx, const LaunchContext &ctx,
                   const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &outs, bool weighted) {
  const char *op = "moe_combine_grad";
  const std::optional<TensorRef> weights =
      weighted ? std::optional<TensorRef>(in[2]) : std::nullopt;
  const TensorRef &rows = in[0], &positions = in[1], &dy = in.back();
  const TensorRef &drows = outs[0];
  const std::optional<TensorRef> dweights =
      weighted && outs.size() >= 2 ? std::optional<TensorRef>(outs[1])
                                   : std::nullopt;
  if (Status s =
          checkMoECombineGrad(rows, positions, weights, dy, drows, dweights);
      s.failed())
    return s;
  const int64_t tokens = positions.shape[0], k = positions.shape[1];
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
