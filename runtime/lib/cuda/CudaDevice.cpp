//===- CudaDevice.cpp - the device interface on CUDA ----------------------===//
//
// Device.h on CUDA: per GPU four streams created with the plan queues'
// priorities (activation uploads above weight uploads), a cudaEvent per plan
// event (waited on from any GPU with cudaStreamWaitEvent), pinned host
// memory from cudaHostAlloc, device memory and kernel scratch from the GPU's
// stream-ordered pool, and a kernel for every op of the plan format on the
// compute stream (cuBLAS for matmul, our kernels for the rest, their math
// the host kernels' shared RP_HD code). The driver's one entry point is
// rp_driver_cuda (Driver.h); the registry loads this library for it.
//
// Compiled and linked in CI, not run there: no GPU is attached to CI's
// machines (docs/cuda.md lists what has run on a GPU, and where).
//
// Every call sets its GPU current first: the controllers of several GPUs
// run on their own threads, and the current device is per thread.
//
// Memory: every allocation, the executor's buffers and the kernels'
// scratch, comes from the GPU's stream-ordered pool (cudaMallocAsync) with
// its release threshold at the maximum, so memory given back stays in the
// pool and the next allocation of a step is served from it without the
// driver: after the first step nothing is requested from the system.
//
// Errors the kernels find in the data (an index or label out of range) are
// written to a record in device memory, which the compute queue's
// synchronize (CudaQueue.cpp) copies back behind the stream's work and
// turns into a Status naming the program and call. (Device memory, not mapped
// host memory: a GPU's atomics on host memory are not guaranteed over PCIe.)
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/DeviceMap.h"
#include "rp/runtime/Driver.h"

#include "CudaDispatch.h"
#include "CudaGraphs.h"
#include "CudaJobTimer.h"
#include "CudaQueue.h"
#include "CudaStatus.h"
#ifdef RP_CUDA_CUDNN
#include "cudnn/CudnnAttention.h"
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

/// cuBLAS's workspace per GPU, allocated once: with a fixed workspace on
/// one stream its GEMMs give the same bits on every run.
constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;

class CudaDevice : public Device {
public:
  CudaDevice(int index, int gpu) : index(index), gpu(gpu) {}
  ~CudaDevice() override {
    cudaSetDevice(gpu);
    if (allocStream)
      cudaStreamSynchronize(allocStream);
    queues = {};
    if (blasWorkspace)
      cudaFree(blasWorkspace);
    if (errorRecord)
      cudaFreeHost(errorRecord);
    if (errorRecordDevice)
      cudaFree(errorRecordDevice);
    if (allocStream)
      cudaStreamDestroy(allocStream);
    // The pool is the GPU's and outlives this device: hand back what it
    // kept, for whoever opens the GPU next.
    if (pool)
      cudaMemPoolTrimTo(pool, 0);
  }

  static Expected<std::unique_ptr<CudaDevice>> open(int index, int gpu) {
    std::unique_ptr<CudaDevice> d(new CudaDevice(index, gpu));
    if (Status s = fromCuda(cudaSetDevice(gpu), "cudaSetDevice"); s.failed())
      return s;
    // CUDA's priorities run the other way: a lower number is served first,
    // and the greatest priority is the least number.
    int least = 0, greatest = 0;
    if (Status s = fromCuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                            "cudaDeviceGetStreamPriorityRange");
        s.failed())
      return s;
    for (QueueKind k : {QueueKind::compute, QueueKind::weight_h2d,
                        QueueKind::activation_h2d, QueueKind::d2h}) {
      int ours = queuePriority(k);
      cudaStream_t stream;
      if (Status s = fromCuda(
              cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                           ours > 0 ? greatest : least),
              "cudaStreamCreateWithPriority");
          s.failed())
        return s;
      d->queues[static_cast<int>(k)] =
          std::make_unique<CudaQueue>(index, gpu, k, ours, stream);
    }
    if (Status s = d->openMemory(); s.failed())
      return s;
    return d;
  }

  /// The pool, cuBLAS's workspace and the error record.
  Status openMemory() {
    int pools = 0;
    if (Status s = fromCuda(cudaDeviceGetAttribute(
                                &pools, cudaDevAttrMemoryPoolsSupported, gpu),
                            "cudaDeviceGetAttribute");
        s.failed())
      return s;
    if (!pools)
      return unavailable("GPU " + std::to_string(gpu) +
                         " has no stream-ordered memory pools "
                         "(cudaMallocAsync), which the cuda device needs; "
                         "update the driver, or run on --backend host");
    if (Status s = fromCuda(cudaDeviceGetDefaultMemPool(&pool, gpu),
                            "cudaDeviceGetDefaultMemPool");
        s.failed())
      return s;
    // Keep everything given back: a step's frees feed the next step.
    uint64_t threshold = UINT64_MAX;
    if (Status s =
            fromCuda(cudaMemPoolSetAttribute(
                         pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                     "cudaMemPoolSetAttribute");
        s.failed())
      return s;
    if (Status s = fromCuda(
            cudaStreamCreateWithFlags(&allocStream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");
        s.failed())
      return s;
    if (Status s = fromCuda(cudaMalloc(&blasWorkspace, kBlasWorkspaceBytes),
                            "cudaMalloc of cuBLAS's workspace");
        s.failed())
      return s;
    if (Status s = fromCuda(
            cudaHostAlloc(reinterpret_cast<void **>(&errorRecord),
                          sizeof(KernelErrorRecord), cudaHostAllocDefault),
            "cudaHostAlloc of the kernel error record");
        s.failed())
      return s;
    std::memset(errorRecord, 0, sizeof(KernelErrorRecord));
    if (Status s =
            fromCuda(cudaMalloc(reinterpret_cast<void **>(&errorRecordDevice),
                                sizeof(KernelErrorRecord)),
                     "cudaMalloc of the kernel error record");
        s.failed())
      return s;
    if (Status s = fromCuda(
            cudaMemset(errorRecordDevice, 0, sizeof(KernelErrorRecord)),
            "cudaMemset of the kernel error record");
        s.failed())
      return s;
    return queues[static_cast<int>(QueueKind::compute)]->enableKernels(
        blasWorkspace, kBlasWorkspaceBytes, errorRecord, errorRecordDevice);
  }

  uint32_t getIndex() const override { return index; }
  int getGpu() const { return gpu; }
  Expected<void *> allocate(size_t bytes) override {
    cudaSetDevice(gpu);
    void *p = nullptr;
    // From the pool, on the allocation stream, which is then drained: the
    // memory is ready for every queue when allocate returns (Device.h).
    std::lock_guard<std::mutex> lock(allocLock);
    if (Status s =
            fromCuda(cudaMallocAsync(&p, bytes ? bytes : 64, allocStream),
                     "cudaMallocAsync of " + std::to_string(bytes) +
                         " bytes on device " + std::to_string(index));
        s.failed())
      return s;
    if (Status s = fromCuda(cudaStreamSynchronize(allocStream),
                            "cudaStreamSynchronize after cudaMallocAsync");
        s.failed()) {
      cudaFreeAsync(p, allocStream);
      return s;
    }
    return p;
  }
  void deallocate(void *memory) override {
    if (!memory)
      return;
    cudaSetDevice(gpu);
    // No queued work uses it (the caller's promise), so it can go back to
    // the pool at once.
    std::lock_guard<std::mutex> lock(allocLock);
    cudaFreeAsync(memory, allocStream);
  }
  MemoryUse getMemoryUse() const override {
    cudaSetDevice(gpu);
    // The frees enqueued so far count once they have run.
    cudaStreamSynchronize(allocStream);
    uint64_t used = 0, reserved = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    return {size_t(used), size_t(reserved)};
  }
  bool isHostAccessible() const override { return false; }
  Queue &getQueue(QueueKind kind) override {
    return *queues[static_cast<int>(kind)];
  }
  Expected<std::unique_ptr<Event>> createEvent() override {
    cudaSetDevice(gpu);
    cudaEvent_t e;
    if (Status s = fromCuda(
            cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
            "cudaEventCreateWithFlags on device " + std::to_string(index));
        s.failed())
      return s;
    return std::unique_ptr<Event>(new CudaEvent(index, gpu, e));
  }

private:
  /// The plan's device, and the GPU it runs on (RP_CUDA_GPUS).
  int index, gpu;
  std::array<std::unique_ptr<CudaQueue>, 4> queues;
  cudaMemPool_t pool = nullptr;
  /// Where allocate and deallocate order their pool operations.
  cudaStream_t allocStream = nullptr;
  std::mutex allocLock;
  void *blasWorkspace = nullptr;
  KernelErrorRecord *errorRecord = nullptr;       ///< Pinned host copy.
  KernelErrorRecord *errorRecordDevice = nullptr; ///< What kernels write.
};

class CudaBackend : public Backend {
public:
  const char *getName() const override { return "cuda"; }
  std::string describe() const override {
    std::string text = "cuda, " + std::to_string(devices.size()) + " GPU(s)";
    for (size_t i = 0; i < devices.size(); ++i) {
      cudaDeviceProp prop;
      // The GPU the device runs on: with RP_CUDA_GPUS=0,0 device 1 is GPU
      // 0, and asking for ordinal 1 would leave an invalid-device error
      // for the next launch's cudaGetLastError to report.
      int gpu = devices[i]->getGpu();
      if (cudaGetDeviceProperties(&prop, gpu) == cudaSuccess)
        text += std::string(i ? ", " : ": ") + prop.name + " " +
                std::to_string(prop.totalGlobalMem >> 30) + " GiB" +
                (gpu != int(i) ? " (GPU " + std::to_string(gpu) + ")" : "");
    }
    return text;
  }
  uint32_t getNumDevices() const override { return devices.size(); }
  Device &getDevice(uint32_t index) override { return *devices.at(index); }
  Expected<void *> allocateHost(size_t bytes) override {
    void *p = nullptr;
    // Pinned, so that copies are asynchronous and run at full link speed.
    // A large buffer (a weight set) is ordinary memory registered with the
    // driver instead: cudaHostAlloc rounds and reserves generously, and
    // pinned allocations of that size fail on boxes whose host memory is
    // mostly weights (reference/roundpipe.md §2.9, pin_model="register").
    if (bytes >= kRegisterBytes) {
      size_t rounded = (bytes + kPage - 1) / kPage * kPage;
      p = std::aligned_alloc(kPage, rounded);
      if (!p)
        return resourceExhausted("cannot allocate " + std::to_string(bytes) +
                                 " bytes of host memory");
      if (Status s = fromCuda(
              cudaHostRegister(p, rounded, cudaHostRegisterPortable),
              "cudaHostRegister of " + std::to_string(bytes) + " bytes");
          s.failed()) {
        std::free(p);
        return s;
      }
      std::lock_guard<std::mutex> lock(registeredMutex);
      registered.insert(p);
      return p;
    }
    if (Status s = fromCuda(
            cudaHostAlloc(&p, bytes ? bytes : 64, cudaHostAllocPortable),
            "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
        s.failed())
      return s;
    return p;
  }
  void deallocateHost(void *memory) override {
    if (!memory)
      return;
    {
      std::lock_guard<std::mutex> lock(registeredMutex);
      if (registered.erase(memory)) {
        cudaHostUnregister(memory);
        std::free(memory);
        return;
      }
    }
    cudaFreeHost(memory);
  }

  /// Host buffers from this size up are registered, not cudaHostAlloc'ed.
  static constexpr size_t kRegisterBytes = size_t(256) << 20;
  static constexpr size_t kPage = 4096;
  std::vector<std::unique_ptr<CudaDevice>> devices;
  std::mutex registeredMutex;
  std::unordered_set<void *> registered;
};

/// How many GPUs createBackend can open; Unavailable saying why when none.
Expected<uint32_t> countDevices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return unavailable(
        std::string("no CUDA device can be opened (") +
        (err != cudaSuccess ? cudaGetErrorString(err) : "no GPU found") +
        "); run on the host backend with --backend host");
  return uint32_t(count);
}

/// Opens `options.devices` GPUs; Unavailable (saying why: no driver, no
/// GPU, too few) when they cannot be had.
Expected<std::unique_ptr<Backend>>
createBackend(const BackendOptions &options) {
  Expected<uint32_t> found = countDevices();
  if (!found)
    return found.getStatus();
  // RP_CUDA_GPUS=0,0 runs a two-device plan on GPU 0 (DeviceMap.h).
  Expected<std::vector<int>> gpus = mapPlanDevices(
      options.devices, *found, std::getenv("RP_CUDA_GPUS"), "RP_CUDA_GPUS");
  if (!gpus)
    return gpus.getStatus();
  auto backend = std::make_unique<CudaBackend>();
  useTf32 = options.tf32;
  for (uint32_t i = 0; i < options.devices; ++i) {
    auto d = CudaDevice::open(int(i), (*gpus)[i]);
    if (!d)
      return d.getStatus();
    backend->devices.push_back(std::move(*d));
  }
  return std::unique_ptr<Backend>(std::move(backend));
}

} // namespace

/// The cuda driver's entry point, the only symbol this library exports.
extern "C" __attribute__((visibility("default"))) const Driver *
rp_driver_cuda() {
  static const Driver driver = [] {
    Driver d;
    d.name = "cuda";
    d.create = createBackend;
    d.countDevices = countDevices;
    d.describeAttention = describeAttention;
#ifdef RP_CUDA_NCCL
    d.createCommunicator = createNcclCommunicator;
#endif
    return d;
  }();
  return &driver;
}
