//===- CudaLinearLossDispatch.cpp - the fused LM-head loss's calls --------===//
//
// rp.linear_cross_entropy and rp.linear_cross_entropy_grad on the cuda
// device: the host kernel's shape and dtype checks and messages
// (checkLinearLoss; the labels' values are checked on the GPU and reported
// through the error record, as cross_entropy's), the call's scratch from
// the stream-ordered pool, and the chunk loops (CudaLinearLossLoop.cpp)
// with their GEMMs on cuBLAS.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatch.h"
#include "CudaLinearLoss.h"
#include "CudaStatus.h"
#include "CudaTypes.h"

#include <cublas_v2.h>

#include <climits>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

/// The loops' GEMMs on the call's cuBLAS handle (bound to its stream).
class CublasGemms final : public LinearLossGemms {
public:
  explicit CublasGemms(const DispatchContext &ctx) : ctx(ctx) {}

  Status matmul(const TensorRef &a, const TensorRef &b, bool transposeB,
                const TensorRef &out) override {
    return cuda::matmul(ctx, a, b, false, transposeB, out);
  }

  Status gemm(const ColumnMajorGemm &g) override {
    if (g.m == 0 || g.n == 0)
      return {};
    if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX || g.lda > INT_MAX ||
        g.ldb > INT_MAX || g.ldc > INT_MAX)
      return invalidArgument(
          "linear_cross_entropy_grad: the weight gradient's GEMM (" +
          std::to_string(g.m) + " x " + std::to_string(g.n) + " over " +
          std::to_string(g.k) + ") has a size past cuBLAS's 32-bit ones");
    const bool f64 = g.cType == DType::f64;
    const float oneF = 1.0f, betaF = g.accumulate ? 1.0f : 0.0f;
    const double oneD = 1.0, betaD = g.accumulate ? 1.0 : 0.0;
    return fromCublas(
        cublasGemmEx(
            ctx.blas, g.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N,
            g.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.m), int(g.n),
            int(g.k), f64 ? static_cast<const void *>(&oneD) : &oneF, g.a,
            cudaDataTypeOf(g.abType), int(g.lda), g.b, cudaDataTypeOf(g.abType),
            int(g.ldb), f64 ? static_cast<const void *>(&betaD) : &betaF, g.c,
            cudaDataTypeOf(g.cType), int(g.ldc),
            f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (linear_cross_entropy_grad weight gradient, " +
            std::to_string(g.m) + " x " + std::to_string(g.n) + " over " +
            std::to_string(g.k) + ")");
  }

private:
  const DispatchContext &ctx;
};

} // namespace

Status rp::runtime::cuda::runLinearLoss(const DispatchContext &dctx,
                                        const LaunchContext &ctx,
                                        const KernelCallDesc &call,
                                        const kernels::CallTensors &tensors) {
  const bool grad = call.op == OpKind::linear_cross_entropy_grad;
  const char *op = grad ? "linear_cross_entropy_grad" : "linear_cross_entropy";
  LinearLossArgs args; // Arities: the plan's validation (Plan.cpp).
  args.ignoreIndex = call.ints[0];
  args.chunk = call.ints[1];
  if (Status s = checkLinearLoss(op, tensors.in, tensors.outs, grad, args);
      s.failed())
    return s;
  const LinearLossScratch layout = linearLossScratch(args, grad);
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(layout.bytes, op); s.failed())
    return s;
  CublasGemms gemms(dctx);
  if (!grad)
    return linearCrossEntropyChunks(
        ctx, gemms, args, layout, scratch.get(), tensors.outs[0].data,
        static_cast<int64_t *>(tensors.outs[1].data));
  return linearCrossEntropyGradChunks(ctx, gemms, args, layout, scratch.get(),
                                      tensors.in[3].dtype, tensors.in[3].data,
                                      tensors.outs[0], tensors.outs[1]);
}
