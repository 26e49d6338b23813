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

#include "rp/runtime/kernels/Checks.h"

#include <cublas_v2.h>

#include <climits>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using namespace rp::runtime::kernels;

namespace {

/// The constant step of `offsets` (entry i at i * step), if there is one.
bool constantStride(const std::vector<int64_t> &offsets, int64_t &step) {
  step = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] != int64_t(i) * step)
      return false;
  return true;
}

} // namespace

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

Status rp::runtime::cuda::matmul(const DispatchContext &ctx, const TensorRef &a,
                                 const TensorRef &b, bool transposeA,
                                 bool transposeB, const TensorRef &out) {
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
  if (p.batch <= INT_MAX && constantStride(p.aOffset, strideA) &&
      constantStride(p.bOffset, strideB)) {
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
      bool ran = false;
      if (Status s = ltMatmul(ctx, key, b.data, a.data, out.data, nullptr, ran);
          s.failed() || ran)
        return s;
    }
    return gemm(0, 0, 0, strideA, strideB, p.batch);
  }
  for (int64_t i = 0; i < p.batch; ++i)
    if (Status s = gemm(p.aOffset[i], p.bOffset[i], i * cMatrix, 0, 0, 1);
        s.failed())
      return s;
  return {};
}
