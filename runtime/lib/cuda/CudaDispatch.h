//===- CudaDispatch.h - a plan program on the cuda kernels ------*- C++ -*-===//
//
// Private to lib/cuda: what Queue::launch of a compute queue runs. The
// mapping from a plan's kernel calls (OpKind, ints, floats; plan.fbs and
// lib/Target/PlanExport) to kernels is the host dispatch's
// (host/HostDispatch.cpp), call for call.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDADISPATCH_H
#define RP_LIB_CUDA_CUDADISPATCH_H

#include "CudaKernels.h"
#include "CudaStatus.h"
#include <functional>

#include "rp/runtime/kernels/OpKinds.h"

#include "rp/runtime/AttentionPath.h"
#include "rp/runtime/Device.h"

#include <cublasLt.h>
#include <cublas_api.h>

namespace rp::runtime::cuda {

class CudnnAttention;

/// One GPU's compute stream and what its kernels need.
struct DispatchContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  /// Bound to `stream`, with a fixed workspace.
  cublasHandle_t blas = nullptr;
  /// The device's view of its KernelErrorRecord.
  KernelErrorRecord *errors = nullptr;
  /// cuBLASLt on `stream` (CudaGemmLt.h), sharing cuBLAS's fixed workspace.
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// rp-run --tf32: f32 GEMMs may round their inputs to TF32.
  bool tf32 = false;
  /// The GPU's compute capability (major * 10 + minor) and SM count.
  int sm = 0, smCount = 0;
  /// The queue's cuDNN attention (cudnn/); null in a driver built without
  /// the cuDNN frontend.
  CudnnAttention *cudnn = nullptr;
};

/// Enqueues program `program` of `plan` on ctx.stream, buffer b at
/// `buffers[b]` (device memory). Kernel scratch comes from the device's
/// stream-ordered pool (cudaMallocAsync / cudaFreeAsync on the stream), so
/// a step allocates nothing from the driver once the pool has grown to the
/// largest call. A failure names the program, the call and its op.
/// `around`, where given, is called before (true) and after (false) each
/// call's work is enqueued: rp-run --profile's events (CudaQueue).
Status runProgram(
    const DispatchContext &ctx, const Plan &plan, uint32_t program,
    const BufferAddresses &buffers,
    const std::function<Status(size_t call, bool before)> &around = nullptr);

/// Kernel scratch from the device's stream-ordered pool, given back on the
/// same stream after the kernels that use it, so the next call can reuse it
/// without the driver.
class Scratch {
public:
  explicit Scratch(cudaStream_t stream) : stream(stream) {}
  ~Scratch() {
    if (memory)
      cudaFreeAsync(memory, stream);
  }
  Status allocate(size_t bytes, const char *op) {
    return fromCuda(cudaMallocAsync(&memory, bytes ? bytes : 64, stream),
                    std::string("cudaMallocAsync of ") + std::to_string(bytes) +
                        " bytes of " + op + " scratch");
  }
  void *get() const { return memory; }

private:
  cudaStream_t stream;
  void *memory = nullptr;
};

/// rp.attention and its gradient (CudaAttentionDispatch.cpp) on the path
/// chooseAttentionPath (AttentionPath.h) picks: cuDNN's fused SDPA, or the
/// CUDA-core kernels of CudaAttention.cu, each fallback said once. `shape`
/// has passed the host kernels' checks.
Status attentionForward(const DispatchContext &dctx, const LaunchContext &ctx,
                        DType dtype, const AttentionShape &shape, const void *q,
                        const void *k, const void *v, const void *mask,
                        void *out);
Status attentionBackward(const DispatchContext &dctx, const LaunchContext &ctx,
                         DType dtype, const AttentionShape &shape,
                         const void *q, const void *k, const void *v,
                         const void *mask, const void *dy, void *dq, void *dk,
                         void *dv);
/// The process's cuDNN as the choice sees it (not built: not loaded, and
/// why).
CudnnLibraryInfo cudnnInfo();
/// rp-run --list-devices' attention lines (Driver::describeAttention): each
/// GPU's path, or, without a GPU, whether cuDNN loads.
std::string describeAttention();

/// rp.matmul through cuBLAS (CudaMatmul.cpp).
/// How cuBLAS's *Ex calls see a float dtype: its storage type, the compute
/// type (f32, f64 for f64) and alpha = 1, beta = 0 in that compute type.
struct BlasTypes {
  cudaDataType_t type;
  cublasComputeType_t compute;
  const void *one, *zero;
};
BlasTypes blasTypes(DType dtype);

Status matmul(const DispatchContext &ctx, const TensorRef &a,
              const TensorRef &b, bool transposeA, bool transposeB,
              const TensorRef &out);

/// matmul with its fused epilogue (kernels::MatmulEpilogue): cuBLASLt's
/// BIAS, GELU_BIAS or DGELU epilogue where it runs the GEMM, else the GEMM
/// and CudaEpilogue.cu's pass; `pre` (nullable) gets a x b + bias.
Status matmulEpilogue(const DispatchContext &dctx, const LaunchContext &ctx,
                      const TensorRef &a, const TensorRef &b, bool transposeA,
                      bool transposeB, const TensorRef &bias, int64_t epilogue,
                      const TensorRef &out, const TensorRef *pre);

/// The rp.moe.* calls (CudaMoEDispatch.cpp): checks as the host's, then the
/// kernels of CudaMoE.cu and cuBLAS; `ctx` is the call's launch context.
Status runMoE(const DispatchContext &dctx, const LaunchContext &ctx,
              const KernelCallDesc &call, const kernels::CallTensors &tensors);

/// rp.linear_cross_entropy and its gradient (CudaLinearLossDispatch.cpp):
/// the host kernel's checks, then the chunk loops of CudaLinearLoss.h on
/// cuBLAS and the kernels of CudaLinearLoss.cu.
Status runLinearLoss(const DispatchContext &dctx, const LaunchContext &ctx,
                     const KernelCallDesc &call,
                     const kernels::CallTensors &tensors);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDADISPATCH_H
