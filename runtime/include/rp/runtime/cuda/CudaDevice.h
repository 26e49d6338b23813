//===- CudaDevice.h - the device interface on CUDA --------------*- C++ -*-===//
//
// Device.h on CUDA: per GPU four streams created with the plan queues'
// priorities (activation uploads above weight uploads), a cudaEvent per plan
// event (waited on from any GPU with cudaStreamWaitEvent), pinned host
// memory from cudaHostAlloc, device memory and kernel scratch from the GPU's
// stream-ordered pool, and a kernel for every op of the plan format on the
// compute stream (cuBLAS for matmul, our kernels for the rest, their math
// the host kernels' shared RP_HD code). This header includes no CUDA
// header: lib/cuda/ is the only folder that does.
//
// Compiled and linked in CI, never run there: no GPU is attached to the
// development machines (docs/cuda.md lists what has run on a GPU).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_CUDA_CUDADEVICE_H
#define RP_RUNTIME_CUDA_CUDADEVICE_H

#include "rp/runtime/Device.h"

namespace rp::runtime::cuda {

/// Opens `options.devices` GPUs; Unavailable (saying why: no driver, no
/// GPU, too few) when they cannot be had.
Expected<std::unique_ptr<Backend>> createBackend(const BackendOptions &options);

/// How many GPUs createBackend can open; Unavailable saying why when none.
Expected<uint32_t> countDevices();

} // namespace rp::runtime::cuda

#endif // RP_RUNTIME_CUDA_CUDADEVICE_H
