//===- CudaGraphs.h - ProgramGraphCache on a CUDA stream --------*- C++ -*-===//

#ifndef RP_LIB_CUDA_CUDAGRAPHS_H
#define RP_LIB_CUDA_CUDAGRAPHS_H

#include "ProgramGraphCache.h"

#include <cuda_runtime.h>

#include <memory>

namespace rp::runtime::cuda {

/// Captures on `stream` (relaxed mode), replays there.
std::unique_ptr<GraphBackend> makeStreamGraphs(cudaStream_t stream);

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAGRAPHS_H
