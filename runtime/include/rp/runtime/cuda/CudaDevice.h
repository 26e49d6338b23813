//===- CudaDevice.h - the device interface on CUDA --------------*- C++ -*-===//
//
// Device.h on CUDA: per GPU four streams created with the plan queues'
// priorities (activation uploads above weight uploads), a cudaEvent per plan
// event (waited on from any GPU with cudaStreamWaitEvent), pinned host
// memory from cudaHostAlloc, device memory allocated once per run. This
// header includes no CUDA header: lib/cuda/ is the only folder that does.
//
// Kernels are not written yet: Queue::launch reports which kernel a program
// needs, so a plan fails with a clear message instead of running wrongly.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_CUDA_CUDADEVICE_H
#define RP_RUNTIME_CUDA_CUDADEVICE_H

#include "rp/runtime/Device.h"

namespace rp::runtime::cuda {

/// Opens `options.devices` GPUs; Unavailable (saying why: no driver, no
/// GPU, too few) when they cannot be had.
Expected<std::unique_ptr<Backend>> createBackend(const BackendOptions &options);

} // namespace rp::runtime::cuda

#endif // RP_RUNTIME_CUDA_CUDADEVICE_H
