//===- CudaQueue.h - a plan queue and an event on CUDA ----------*- C++ -*-===//
//
// Queue and Event (Device.h) on CUDA: each of a GPU's four plan queues is a
// stream of its own priority, each plan event a cudaEvent. The compute
// queue also holds cuBLAS and cuBLASLt bound to its stream with a fixed
// workspace, cuDNN's attention, the CUDA graph cache (RP_CUDA_GRAPHS) and
// the device's kernel error record, which synchronize copies back and
// turns into a Status naming the program and call. CudaDevice.cpp makes
// them; private to lib/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_CUDAQUEUE_H
#define RP_LIB_CUDA_CUDAQUEUE_H

#include "rp/runtime/Device.h"

#include "CudaDispatch.h"
#include "CudaGraphs.h"
#include "CudaJobTimer.h"
#include "CudaStatus.h"
#ifdef RP_CUDA_CUDNN
#include "cudnn/CudnnAttention.h"
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <mutex>

#include <atomic>
#include <memory>

namespace rp::runtime::cuda {

/// A plan event: a cudaEvent of the GPU its device runs on.
class CudaEvent : public Event {
public:
  CudaEvent(int device, int gpu, cudaEvent_t event)
      : device(device), gpu(gpu), event(event) {}
  ~CudaEvent() override {
    cudaSetDevice(gpu);
    cudaEventDestroy(event);
  }
  bool query() override {
    cudaSetDevice(gpu);
    return cudaEventQuery(event) != cudaErrorNotReady;
  }
  Status synchronize() override {
    cudaSetDevice(gpu);
    return fromCuda(cudaEventSynchronize(event), "cudaEventSynchronize");
  }
  cudaEvent_t get() const { return event; }
  int getDevice() const { return device; }

private:
  /// The plan's device that made it, and the GPU that device runs on.
  int device, gpu;
  cudaEvent_t event;
};

/// rp-run --tf32: f32 GEMMs round their inputs to TF32 (the backend's
/// option, for every device it opens).
extern std::atomic<bool> useTf32;

/// One of a device's four plan queues: a CUDA stream.
class CudaQueue : public Queue {
public:
  CudaQueue(int device, int gpu, QueueKind kind, int priority,
            cudaStream_t stream);
  ~CudaQueue() override;

  /// Makes this the compute queue: cuBLAS bound to its stream with a fixed
  /// workspace (reproducible GEMMs), and the device's error record.
  Status enableKernels(void *workspace, size_t workspaceBytes,
                       KernelErrorRecord *hostRecord,
                       KernelErrorRecord *deviceRecord);
  uint32_t getDevice() const override { return device; }
  QueueKind getKind() const override { return kind; }
  int getPriority() const override { return priority; }
  void beginJob(uint32_t job) override { timer.begin(job); }
  bool timeJobs() override { return timer.enable(); }
  bool takeJobTime(uint32_t job, bool wait, int64_t &startNs,
                   int64_t &endNs) override {
    return timer.take(job, wait, startNs, endNs);
  }
  bool timeCalls() override {
    timingCalls = kind == QueueKind::compute && blas;
    return timingCalls;
  }
  void takeCallTimes(std::vector<CallTime> &out) override;

  Status copy(void *dst, const void *src, size_t bytes, CopyKind how) override;
  Status launch(const Plan &plan, uint32_t program,
                const BufferAddresses &buffers) override;
  Status record(Event &event) override;
  Status wait(Event &event) override;
  Status synchronize() override;

private:
  /// The plan's device this queue belongs to, and the GPU it runs on.
  int device, gpu;
  QueueKind kind;
  int priority;
  cudaStream_t stream;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
#ifdef RP_CUDA_CUDNN
  std::unique_ptr<CudnnAttention> cudnn;
#endif
  /// The kernel error record (compute queue only): in device memory, and
  /// its pinned host copy.
  KernelErrorRecord *errorsHost = nullptr, *errorsDevice = nullptr;
  DispatchContext context;
  const Plan *lastPlan = nullptr;
  std::unique_ptr<GraphBackend> graphBackend;
  std::unique_ptr<ProgramGraphCache> graphs; ///< Null without RP_CUDA_GRAPHS.
  /// The GPU's span of each job, when a trace asks (timeJobs).
  JobTimer timer;
  /// rp-run --profile (timeCalls): two events around each call, read back
  /// by takeCallTimes; programs run without graph replay meanwhile.
  struct TimedCall {
    CallTime call;
    cudaEvent_t start = nullptr, end = nullptr;
  };
  bool timingCalls = false;
  std::mutex timedMutex;
  std::vector<TimedCall> timedCalls;
};

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_CUDAQUEUE_H
