//===- CudaEpilogue.cu - matmul's bias and activation on CUDA cores -------===//
//
// The fallback of matmul's fused epilogue (kernels::MatmulEpilogue) where
// cuBLASLt does not apply it (CudaMatmul.cpp): after the GEMM has written
// a x b, one pass adds the bias row and applies the activation, one thread
// per element; for the backward's gelu gradient, one pass multiplies the
// product by gelu's derivative at the pre-activation. Each element is rounded
// to the storage type after the add and after the activation, with the functors
// the unfused add and gelu kernels apply (CudaElementwise.cu), so the result is
// bitwise the unfused sequence's on the same GPU: one kernel instead of two,
// and the product read once instead of twice.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

#include "rp/runtime/kernels/Elementwise.h"
#include "rp/runtime/kernels/ElementwiseGrad.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

/// x is [rows, n]; bias (nullable: the GEMM added it) is [n]; pre
/// (nullable) gets x + bias; out gets act(x + bias). x may be pre or out.
template <typename T, typename Act>
__global__ void biasActivationKernel(const T *x, const T *bias, T *pre, T *out,
                                     int64_t total, int64_t n, Act act) {
  RP_GRID_LOOP(i, total) {
    T sum = bias ? store<T>(AddOp{}(load(x[i]), load(bias[i % n]))) : x[i];
    if (pre)
      pre[i] = sum;
    if constexpr (!std::is_same_v<Act, std::nullptr_t>)
      out[i] = store<T>(act(load(sum)));
    else
      out[i] = sum;
  }
}

/// unary_grad's kernel (CudaElementwise.cu) with gelu's derivative: the
/// same functor and the one rounding, so bitwise the unfused sequence.
template <typename T, typename Grad>
__global__ void geluGradKernel(const T *pre, const T *dy, T *out, int64_t n,
                               Grad grad) {
  RP_GRID_LOOP(i, n) { out[i] = store<T>(grad(load(pre[i]), load(dy[i]))); }
}

} // namespace

cudaError_t launchGeluGradEpilogue(const LaunchContext &ctx, DType dtype,
                                   int epilogue, const void *pre,
                                   const void *dy, void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = [&](auto grad) {
      geluGradKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          static_cast<const T *>(pre), static_cast<const T *>(dy),
          static_cast<T *>(out), n, grad);
    };
    if (static_cast<MatmulEpilogue>(epilogue) == MatmulEpilogue::dGeluTanh)
      run(GeluTanhGrad{});
    else
      run(GeluGrad{});
  });
  return lastLaunchError();
}

cudaError_t launchBiasActivation(const LaunchContext &ctx, DType dtype,
                                 int epilogue, const void *x, const void *bias,
                                 void *pre, void *out, int64_t rows,
                                 int64_t n) {
  const int64_t total = rows * n;
  if (total == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto run = [&](auto act) {
      biasActivationKernel<<<blocksFor(total), kThreadsPerBlock, 0,
                             ctx.stream>>>(
          static_cast<const T *>(x), static_cast<const T *>(bias),
          static_cast<T *>(pre), static_cast<T *>(out), total, n, act);
    };
    switch (static_cast<MatmulEpilogue>(epilogue)) {
    case MatmulEpilogue::biasGelu:
      run(GeluOp{});
      break;
    case MatmulEpilogue::biasGeluTanh:
      run(GeluTanhOp{});
      break;
    default:
      run(nullptr);
      break;
    }
  });
  return lastLaunchError();
}

} // namespace rp::runtime::cuda
