//===- CudaAttentionDispatch.cpp - attention's path on a GPU --------------===//
//
// Each attention call asks chooseAttentionPath (AttentionPath.h) whether
// cuDNN's fused SDPA takes it; cuDNN's own refusal at graph build is the
// second gate. Either fallback is said once (attentionFallbackLog) and the
// call runs the CUDA-core kernels of CudaAttention.cu, which take every
// problem the host kernel does.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatch.h"

#ifdef RP_CUDA_CUDNN
#include "cudnn/CudnnAttention.h"
#include "cudnn/CudnnLibrary.h"
#endif

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

Status launched(cudaError_t error, const char *op) {
  return fromCuda(error, std::string("launching the ") + op + " kernel");
}

/// The problem the choice looks at. maskKind: 1 boolean, 2 additive, 3
/// segments.
AttentionProblem problemOf(DType dtype, const AttentionShape &sh,
                           bool backward) {
  AttentionProblem p;
  p.dtype = dtype;
  p.mask = sh.causal ? AttentionMaskKind::causal : AttentionMaskKind::none;
  if (sh.maskKind == 1)
    p.mask = AttentionMaskKind::boolean;
  if (sh.maskKind == 3)
    p.mask = AttentionMaskKind::segments;
  if (sh.maskKind == 2) {
    p.mask = AttentionMaskKind::additive;
    // cuDNN's bias: keys contiguous, one row per query (batch and heads
    // may broadcast).
    p.maskBroadcastsRowsOrKeys =
        sh.maskStrides[3] != 1 || (sh.maskStrides[2] == 0 && sh.s > 1);
  }
  p.headDim = sh.d;
  p.valueDim = sh.dv;
  p.heads = sh.h;
  p.kvHeads = sh.hkv;
  p.softCap = sh.softcap;
  p.sinks = sh.sinks != nullptr;
  p.window = sh.causal ? sh.window : 0;
  p.bottomRight = sh.causal && sh.s != sh.t;
  p.backward = backward;
  return p;
}

/// Whether cuDNN takes the call: said once when it does not.
bool takesCudnn(const DispatchContext &dctx, DType dtype,
                const AttentionShape &sh, bool backward) {
  AttentionChoice c =
      chooseAttentionPath(problemOf(dtype, sh, backward), cudnnInfo(), dctx.sm);
  sayAttentionFallback(c);
  return c.path == AttentionPath::cudnn && dctx.cudnn;
}

#ifdef RP_CUDA_CUDNN
void sayRefused(const CudnnOutcome &o, bool backward) {
  attentionFallbackLog().say(std::string("cuDNN refused the ") +
                             (backward ? "backward" : "forward") +
                             " attention graph: " + o.why);
}
#endif

} // namespace

CudnnLibraryInfo rp::runtime::cuda::cudnnInfo() {
#ifdef RP_CUDA_CUDNN
  return processCudnn().info;
#else
  return {false, 0,
          "this cuda driver was built without the cuDNN frontend's headers "
          "(scripts/setup.sh installs them)"};
#endif
}

/// rp-run --list-devices' attention lines: each GPU's path (AttentionPath.h),
/// or, without a GPU, whether cuDNN loads.
std::string rp::runtime::cuda::describeAttention() {
  CudnnLibraryInfo cudnn = cudnnInfo();
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return describeAttentionPath(cudnn, 0, "") + "\n";
  std::string lines;
  for (int gpu = 0; gpu < count; ++gpu) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, gpu) != cudaSuccess)
      continue;
    int sm = prop.major * 10 + prop.minor;
    lines +=
        describeAttentionPath(cudnn, sm,
                              "GPU " + std::to_string(gpu) + " (" + prop.name +
                                  ", sm_" + std::to_string(sm) + ")") +
        "\n";
  }
  return lines;
}

Status rp::runtime::cuda::attentionForward(
    const DispatchContext &dctx, const LaunchContext &ctx, DType dtype,
    const AttentionShape &shape, const void *q, const void *k, const void *v,
    const void *mask, void *out) {
#ifdef RP_CUDA_CUDNN
  if (takesCudnn(dctx, dtype, shape, false)) {
    CudnnOutcome o;
    Status s = dctx.cudnn->forward(dtype, shape, q, k, v, mask, out, o);
    if (s.failed() || !o.refused)
      return s;
    sayRefused(o, false);
  }
#else
  takesCudnn(dctx, dtype, shape, false);
#endif
  return launched(launchAttention(ctx, dtype, shape, q, k, v, mask, out),
                  "attention");
}

Status rp::runtime::cuda::attentionBackward(
    const DispatchContext &dctx, const LaunchContext &ctx, DType dtype,
    const AttentionShape &shape, const void *q, const void *k, const void *v,
    const void *mask, const void *dy, void *dq, void *dk, void *dv) {
#ifdef RP_CUDA_CUDNN
  if (takesCudnn(dctx, dtype, shape, true)) {
    CudnnOutcome o;
    Status s =
        dctx.cudnn->backward(dtype, shape, q, k, v, mask, dy, dq, dk, dv, o);
    if (s.failed() || !o.refused)
      return s;
    sayRefused(o, true);
  }
#else
  takesCudnn(dctx, dtype, shape, true);
#endif
  Scratch scratch(dctx.stream);
  if (Status s = scratch.allocate(attentionGradScratchBytes(dtype, shape),
                                  "attention_grad");
      s.failed())
    return s;
  return launched(launchAttentionGrad(ctx, dtype, shape, q, k, v, mask, dy, dq,
                                      dk, dv, scratch.get()),
                  "attention_grad");
}
