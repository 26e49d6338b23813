//===- CudaCommon.cuh - what every .cu file of the cuda device uses -*- CUDA
//-*-//
//
// Launch geometry, the dtype switch from a runtime DType to a storage type,
// and the index arithmetic of ElementMap / ReduceMap on the device. Private
// to lib/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDACOMMON_CUH
#define RP_LIB_CUDA_CUDACOMMON_CUH

#include "CudaKernels.h"

#include "rp/runtime/Half.h"
#include "rp/runtime/kernels/Numeric.h"
#include "rp/runtime/kernels/Visit.h"

#include <cuda_runtime.h>

#include <type_traits>

namespace rp::runtime::cuda {

using kernels::Bool8;
using kernels::Compute;
using kernels::load;
using kernels::store;
using kernels::Tag;
using kernels::visitDType;
using kernels::visitElementSize;

constexpr int kThreadsPerBlock = 256;

/// Blocks for a grid-stride loop over n items: enough to fill any GPU,
/// few enough that each thread does several items on large tensors.
inline unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const int64_t kMaxBlocks = 1 << 16;
  return static_cast<unsigned>(blocks < 1            ? 1
                               : blocks > kMaxBlocks ? kMaxBlocks
                                                     : blocks);
}

/// The item range a thread of a grid-stride loop visits.
#define RP_GRID_LOOP(i, n)                                                     \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

/// fn(Tag<S>{}) for float dtypes only (the dispatch refuses the others).
template <typename Fn> void visitFloat(DType dtype, Fn &&fn) {
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<Compute<T>>)
      fn(tag);
  });
}

/// Operand k's offset for output position `linear`.
__device__ inline int64_t mapOffset(const ElementMap &map, int k,
                                    int64_t linear) {
  return kernels::offsetAt(linear, map.shape, map.strides[k], map.rank);
}

/// The input offset of output `o` (row-major over the kept dimensions).
__device__ inline int64_t keptOffset(const ReduceMap &map, int64_t o) {
  return kernels::offsetAt(o, map.keptSize, map.keptStride, map.numKept);
}

/// Reports a bad value once per record; later reports are dropped.
__device__ inline void reportError(const LaunchContext &ctx, int32_t code,
                                   int64_t position, int64_t value,
                                   int64_t limit) {
  if (atomicCAS(&ctx.errors->code, 0, code) == 0) {
    ctx.errors->site = ctx.site;
    ctx.errors->position = position;
    ctx.errors->value = value;
    ctx.errors->limit = limit;
    __threadfence();
  }
}

inline cudaError_t lastLaunchError() { return cudaGetLastError(); }

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDACOMMON_CUH
