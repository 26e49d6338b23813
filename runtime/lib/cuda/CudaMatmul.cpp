//===- CudaMatmul.cpp - batched matmul through cuBLAS ---------------------===//
//
// rp.matmul as the host kernel defines it (host/HostMatmul.cpp): operands
// [batch..., M, K] x [batch..., K, N] with numpy-broadcast batch
// dimensions and transpose flags on the last two, f32/f16/bf16 storage
// multiplied with f32 accumulation (CUBLAS_COMPUTE_32F, which does not
// allow TF32) and f64 in f64.
//
// cuBLAS is column-major; a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so B goes first and the leading dimensions are the
// row-major ones. Batches whose operands advance by a constant stride (a
// full batch, or one matrix shared by every batch entry) are one
// cublasGemmStridedBatchedEx; other broadcasts are one call per entry.
//
// cuBLAS gives the same bits run after run on one GPU model when a handle
// is used from one stream with a fixed workspace (CudaDevice.cpp sets both),
// which is what DESIGN.md's determinism needs on one box. The strided
// 16-bit and f32 products go through cuBLASLt first (CudaGemmLt.h: one
// reduction-free algorithm per shape, the same on every device); cuBLAS's
// own GEMM is the fallback and runs f64 and the per-entry broadcasts.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatch.h"
#include "CudaGemmLt.h"
#include "CudaStatus.h"

#include "rp/contract/MatmulBatch.h"
#include "rp/runtime/kernels/Checks.h"

#include <cublas_v2.h>

#include <climits>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using namespace rp::runtime::kernels;

BlasTypes rp::runtime::cuda::blasTypes(DType dtype) {
  static const float oneF = 1.0f, zeroF = 0.0f;
  static const double oneD = 1.0, zeroD = 0.0;
  switch (dtype) {
  case DType::f16:
    return {CUDA_R_16F, CUBLAS_COMPUTE_32F, &oneF, &zeroF};
  case DType::bf16:
    return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, &oneF, &zeroF};
  case DType::f64:
    return {CUDA_R_64F, CUBLAS_COMPUTE_64F, &oneD, &zeroD};
  default:
    return {CUDA_R_32F, CUBLAS_COMPUTE_32F, &oneF, &zeroF};
  }
}

/// The GEMM, with cuBLASLt's `epilogue` (its bias `bias`) where cuBLASLt
/// runs it: `fused` says whether it did; cuBLAS's fallback runs the plain
/// product.
static Status gemm(const DispatchContext &ctx, const TensorRef &a,
                   const TensorRef &b, bool transposeA, bool transposeB,
                   const TensorRef &out, GemmEpilogue epilogue,
                   const void *bias, bool &fused, const void *aux = nullptr) {
  fused = false;
  MatmulProblem p;
  if (Status s = planMatmul(a, b, transposeA, transposeB, out, p); s.failed())
    return s;
  if (out.size() == 0)
    return {};
  if (p.k == 0) // An empty sum: +0.0 in every float type.
    return fromCuda(cudaMemsetAsync(out.data, 0, out.bytes(), ctx.stream),
                    "cudaMemsetAsync (matmul over an empty dimension)");

  const BlasTypes blas = blasTypes(a.dtype);
  const cudaDataType_t type = blas.type;
  const cublasComputeType_t compute = blas.compute;
  const void *alpha = blas.one, *beta = blas.zero;
  const size_t es = dtypeSize(a.dtype);
  const int m = int(p.m), n = int(p.n), k = int(p.k);
  const int lda = int(p.ta ? p.m : p.k), ldb = int(p.tb ? p.k : p.n);
  const cublasOperation_t opA = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t cMatrix = p.m * p.n;
  auto gemm = [&](int64_t aOff, int64_t bOff, int64_t cOff, int64_t strideA,
                  int64_t strideB, int64_t count) {
    return fromCublas(
        cublasGemmStridedBatchedEx(
            ctx.blas, opB, opA, n, m, k, alpha,
            static_cast<const char *>(b.data) + bOff * es, type, ldb, strideB,
            static_cast<const char *>(a.data) + aOff * es, type, lda, strideA,
            beta, static_cast<char *>(out.data) + cOff * es, type, n, cMatrix,
            int(count), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx (" + describe(a) + " x " + describe(b) +
            ")");
  };
  int64_t strideA = 0, strideB = 0;
  // The rule timing::kernelLaunches counts from the shapes
  // (rp/contract/MatmulBatch.h): one strided GEMM, else one per entry.
  if (p.batch <= INT_MAX && rp::plan::constantBatchStride(p.aOffset, strideA) &&
      rp::plan::constantBatchStride(p.bOffset, strideB)) {
    if (a.dtype != DType::f64) {
      // The column-major C^T = op(B)^T op(A)^T, as the cuBLAS call below.
      GemmKey key;
      key.m = p.n, key.n = p.m, key.k = p.k, key.batch = p.batch;
      key.lda = ldb, key.ldb = lda, key.ldc = n;
      key.strideA = strideB, key.strideB = strideA, key.strideC = cMatrix;
      key.transA = p.tb, key.transB = p.ta;
      key.type = a.dtype;
      key.tf32 = ctx.tf32 && a.dtype == DType::f32;
      key.alignA = gemmAlignment(strideB * int64_t(es));
      key.alignB = gemmAlignment(strideA * int64_t(es));
      key.alignC = gemmAlignment(cMatrix * int64_t(es));
      key.epilogue = epilogue;
      bool ran = false;
      if (Status s =
              ltMatmul(ctx, key, b.data, a.data, out.data, bias, ran, aux);
          s.failed() || ran) {
        fused = ran && epilogue != GemmEpilogue::none;
        return s;
      }
    }
    return gemm(0, 0, 0, strideA, strideB, p.batch);
  }
  for (int64_t i = 0; i < p.batch; ++i)
    if (Status s = gemm(p.aOffset[i], p.bOffset[i], i * cMatrix, 0, 0, 1);
        s.failed())
      return s;
  return {};
}

Status rp::runtime::cuda::matmul(const DispatchContext &ctx, const TensorRef &a,
                                 const TensorRef &b, bool transposeA,
                                 bool transposeB, const TensorRef &out) {
  bool fused = false;
  return gemm(ctx, a, b, transposeA, transposeB, out, GemmEpilogue::none,
              nullptr, fused);
}

Status rp::runtime::cuda::matmulEpilogue(
    const DispatchContext &dctx, const LaunchContext &ctx, const TensorRef &a,
    const TensorRef &b, bool transposeA, bool transposeB, const TensorRef &bias,
    int64_t epilogue, const TensorRef &out, const TensorRef *pre) {
  const auto e = static_cast<MatmulEpilogue>(epilogue);
  if (e == MatmulEpilogue::none)
    return matmul(dctx, a, b, transposeA, transposeB, out);
  if (e == MatmulEpilogue::dGelu || e == MatmulEpilogue::dGeluTanh) {
    // The tanh form: cuBLASLt's DGELU epilogue, the pre-activation its
    // auxiliary matrix, where it plans the shape (the derivative taken of
    // the f32 product, before it is rounded). Else, and for the erf form
    // (cuBLASLt has none), the product (dy) into the result and the
    // gradient pass in place: bitwise the unfused matmul and unary_grad.
    const TensorRef &preAct = bias;
    if (preAct.dtype != out.dtype || preAct.shape != out.shape)
      return invalidArgument("matmul: the gelu gradient's pre-activation " +
                             describe(preAct) + " is not the result's " +
                             describe(out));
    bool fused = false;
    if (Status s = gemm(dctx, a, b, transposeA, transposeB, out,
                        e == MatmulEpilogue::dGeluTanh ? GemmEpilogue::dGelu
                                                       : GemmEpilogue::none,
                        nullptr, fused,
                        e == MatmulEpilogue::dGeluTanh ? preAct.data : nullptr);
        s.failed() || fused)
      return s;
    return fromCuda(launchGeluGradEpilogue(ctx, out.dtype, epilogue,
                                           preAct.data, out.data, out.data,
                                           out.size()),
                    "matmul epilogue (gelu gradient)");
  }
  const int64_t n = out.shape.empty() ? 1 : out.shape.back();
  if (bias.dtype != out.dtype || bias.shape != Shape{n} ||
      (pre && (pre->dtype != out.dtype || pre->shape != out.shape)))
    return invalidArgument("matmul: the epilogue's bias " + describe(bias) +
                           " or pre-activation does not match the result " +
                           describe(out));
  // Where the sum a x b + bias goes: the gradient's copy, else the result.
  const TensorRef &sum = pre ? *pre : out;
  // cuBLASLt's GELU is the tanh form, and writes no pre-activation here:
  // the other gelu cases take its bias epilogue and the activation pass.
  const bool whole = e == MatmulEpilogue::biasGeluTanh && !pre;
  const bool act = e != MatmulEpilogue::bias;
  bool fused = false;
  if (Status s = gemm(dctx, a, b, transposeA, transposeB, whole ? out : sum,
                      whole ? GemmEpilogue::biasGelu : GemmEpilogue::bias,
                      bias.data, fused);
      s.failed())
    return s;
  if (fused && (whole || !act))
    return {};
  const int64_t rows = n ? out.size() / n : 0;
  // cuBLAS ran the plain product: the bias (and activation) pass, bitwise
  // the unfused add and gelu; or cuBLASLt added the bias: the activation.
  cudaError_t err =
      fused
          ? launchBiasActivation(ctx, out.dtype, epilogue, sum.data, nullptr,
                                 nullptr, out.data, rows, n)
          : launchBiasActivation(ctx, out.dtype, act ? epilogue : 0,
                                 whole ? out.data : sum.data, bias.data,
                                 pre ? pre->data : nullptr, out.data, rows, n);
  return fromCuda(err, "matmul epilogue");
}
