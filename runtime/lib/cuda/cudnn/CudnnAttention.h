//===- CudnnAttention.h - attention through cuDNN's fused SDPA --*- C++ -*-===//
//
// rp.attention and rp.attention_grad on tensor cores: cuDNN's fused flash
// attention (cudnn-frontend's graph API, header-only, over the libcudnn
// CudnnLibrary.h opened at run time). Forward (and recompute): one SDPA
// graph. Backward: rp's attention_grad has no saved output or softmax
// statistics, so a forward graph first writes O and the row statistics
// (log-sum-exp, f32) into scratch, then cuDNN's backward with its
// deterministic algorithm writes dq, dk and dv.
//
// A graph is built once per shape on each compute queue and reused; the
// execution plan cuDNN's heuristics pick first for a shape, on a GPU
// model, is recorded process-wide and every device of that model builds
// that same plan, so G plan devices compute what one does, bit for bit.
// Only this folder includes the frontend.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDNN_CUDNNATTENTION_H
#define RP_LIB_CUDA_CUDNN_CUDNNATTENTION_H

#include "../CudaKernels.h"

#include "rp/runtime/Status.h"

#include <memory>
#include <string>

namespace rp::runtime::cuda {

/// What a call found: done, or refused by cuDNN (its support check or its
/// plan build failed: `why`), which the caller answers with the CUDA-core
/// kernel. A failure while running is the Status.
struct CudnnOutcome {
  bool refused = false;
  std::string why;
};

/// One compute queue's cuDNN handle (made on first use, bound to the
/// queue's stream) and its graphs.
class CudnnAttention {
public:
  /// `sm` and `smCount` name the GPU model (the process-wide plan record's
  /// key).
  CudnnAttention(int gpu, cudaStream_t stream, int sm, int smCount);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// out = attention(q, k, v); `mask` is null or an additive mask of q's
  /// dtype laid out as shape.maskStrides say.
  Status forward(DType dtype, const AttentionShape &shape, const void *q,
                 const void *k, const void *v, const void *mask, void *out,
                 CudnnOutcome &outcome);
  /// dq, dk, dv of attention(q, k, v) for output gradient dy.
  Status backward(DType dtype, const AttentionShape &shape, const void *q,
                  const void *k, const void *v, const void *mask,
                  const void *dy, void *dq, void *dk, void *dv,
                  CudnnOutcome &outcome);

  struct State;

private:
  std::unique_ptr<State> state;
};

/// What cuDNN says, ahead of time and without a GPU (cuDNN 9.8 and later),
/// of the graphs an attention call needs on the card a descriptor
/// describes.
struct DevicelessVerdict {
  /// Why cuDNN does not support a graph (its support check on the card's
  /// engine configs); empty when it does.
  std::string refused;
  /// Why an execution plan could not be finalized here (runtime-compiled
  /// engines load their kernels through the CUDA driver); empty when
  /// every plan was built.
  std::string notFinalized;
};

/// Checks the graphs attention (`backward`: attention_grad, its forward
/// with statistics and its backward) needs for `shape` on the card that
/// `device` describes (cuDNN's serialized device properties, as
/// captureCudnnDevice writes them; compute capability `sm`, `smCount`
/// SMs), then tries to build their execution plans.
DevicelessVerdict planCudnnAttentionDeviceless(const std::string &device,
                                               int sm, int smCount, DType dtype,
                                               const AttentionShape &shape,
                                               bool backward);

/// GPU `gpu`'s device-properties descriptor, serialized by cuDNN (needs the
/// GPU and its driver), for planCudnnAttentionDeviceless on other machines.
Expected<std::string> captureCudnnDevice(int gpu);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDNN_CUDNNATTENTION_H
