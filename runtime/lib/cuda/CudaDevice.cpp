//===- CudaDevice.cpp - the device interface on CUDA ----------------------===//
//
// Every call sets its GPU current first: the controllers of several GPUs
// run on their own threads, and the current device is per thread.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/cuda/CudaDevice.h"

#include "CudaStatus.h"

#include <cuda_runtime_api.h>

#include <array>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

class CudaEvent : public Event {
public:
  CudaEvent(int device, cudaEvent_t event) : device(device), event(event) {}
  ~CudaEvent() override {
    cudaSetDevice(device);
    cudaEventDestroy(event);
  }
  bool query() override {
    cudaSetDevice(device);
    return cudaEventQuery(event) != cudaErrorNotReady;
  }
  Status synchronize() override {
    cudaSetDevice(device);
    return fromCuda(cudaEventSynchronize(event), "cudaEventSynchronize");
  }
  cudaEvent_t get() const { return event; }

private:
  int device;
  cudaEvent_t event;
};

class CudaQueue : public Queue {
public:
  CudaQueue(int device, QueueKind kind, int priority, cudaStream_t stream)
      : device(device), kind(kind), priority(priority), stream(stream) {}
  ~CudaQueue() override {
    cudaSetDevice(device);
    cudaStreamDestroy(stream);
  }
  uint32_t getDevice() const override { return device; }
  QueueKind getKind() const override { return kind; }
  int getPriority() const override { return priority; }

  Status copy(void *dst, const void *src, size_t bytes,
              CopyKind how) override {
    if (bytes == 0)
      return Status::ok();
    cudaSetDevice(device);
    cudaMemcpyKind k = how == CopyKind::hostToDevice   ? cudaMemcpyHostToDevice
                       : how == CopyKind::deviceToHost ? cudaMemcpyDeviceToHost
                                                       : cudaMemcpyDeviceToDevice;
    return fromCuda(cudaMemcpyAsync(dst, src, bytes, k, stream),
                    "cudaMemcpyAsync of " + std::to_string(bytes) +
                        " bytes on device " + std::to_string(device));
  }

  Status launch(const Plan &plan, uint32_t program,
                const BufferAddresses &) override {
    if (kind != QueueKind::compute)
      return invalidArgument("kernels run on the compute queue only");
    const ProgramDesc &p = plan.programs.at(program);
    if (p.calls.empty())
      return Status::ok();
    return unsupported(
        "program '" + p.name + "' needs the " + opKindName(p.calls[0].op) +
        " kernel, which the cuda device does not have yet (compiled, never "
        "run on a GPU); run it on --backend host");
  }

  Status record(Event &event) override {
    cudaSetDevice(device);
    return fromCuda(
        cudaEventRecord(static_cast<CudaEvent &>(event).get(), stream),
        "cudaEventRecord on device " + std::to_string(device));
  }
  Status wait(Event &event) override {
    cudaSetDevice(device);
    return fromCuda(cudaStreamWaitEvent(
                        stream, static_cast<CudaEvent &>(event).get(), 0),
                    "cudaStreamWaitEvent on device " + std::to_string(device));
  }
  Status synchronize() override {
    cudaSetDevice(device);
    return fromCuda(cudaStreamSynchronize(stream),
                    "cudaStreamSynchronize on device " +
                        std::to_string(device));
  }

private:
  int device;
  QueueKind kind;
  int priority;
  cudaStream_t stream;
};

class CudaDevice : public Device {
public:
  explicit CudaDevice(int index) : index(index) {}

  static Expected<std::unique_ptr<CudaDevice>> open(int index) {
    std::unique_ptr<CudaDevice> d(new CudaDevice(index));
    if (Status s = fromCuda(cudaSetDevice(index), "cudaSetDevice"); s.failed())
      return s;
    // CUDA's priorities run the other way: a lower number is served first,
    // and the greatest priority is the least number.
    int least = 0, greatest = 0;
    if (Status s = fromCuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                            "cudaDeviceGetStreamPriorityRange");
        s.failed())
      return s;
    for (QueueKind k : {QueueKind::compute, QueueKind::weightH2D,
                        QueueKind::activationH2D, QueueKind::d2h}) {
      int ours = queuePriority(k);
      cudaStream_t stream;
      if (Status s = fromCuda(
              cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                           ours > 0 ? greatest : least),
              "cudaStreamCreateWithPriority");
          s.failed())
        return s;
      d->queues[static_cast<int>(k)] =
          std::make_unique<CudaQueue>(index, k, ours, stream);
    }
    return d;
  }

  uint32_t getIndex() const override { return index; }
  Expected<void *> allocate(size_t bytes) override {
    cudaSetDevice(index);
    void *p = nullptr;
    // Once per run (the executor keeps its buffers across steps), so the
    // plain allocator is enough; cudaMalloc aligns to 256 bytes.
    if (Status s = fromCuda(cudaMalloc(&p, bytes ? bytes : 64),
                            "cudaMalloc of " + std::to_string(bytes) +
                                " bytes on device " + std::to_string(index));
        s.failed())
      return s;
    return p;
  }
  void deallocate(void *memory) override {
    if (!memory)
      return;
    cudaSetDevice(index);
    cudaFree(memory);
  }
  bool isHostAccessible() const override { return false; }
  Queue &getQueue(QueueKind kind) override {
    return *queues[static_cast<int>(kind)];
  }
  Expected<std::unique_ptr<Event>> createEvent() override {
    cudaSetDevice(index);
    cudaEvent_t e;
    if (Status s = fromCuda(
            cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
            "cudaEventCreateWithFlags on device " + std::to_string(index));
        s.failed())
      return s;
    return std::unique_ptr<Event>(new CudaEvent(index, e));
  }

private:
  int index;
  std::array<std::unique_ptr<CudaQueue>, 4> queues;
};

class CudaBackend : public Backend {
public:
  const char *getName() const override { return "cuda"; }
  std::string describe() const override {
    std::string text = "cuda, " + std::to_string(devices.size()) + " GPU(s)";
    for (size_t i = 0; i < devices.size(); ++i) {
      cudaDeviceProp prop;
      if (cudaGetDeviceProperties(&prop, int(i)) == cudaSuccess)
        text += std::string(i ? ", " : ": ") + prop.name + " " +
                std::to_string(prop.totalGlobalMem >> 30) + " GiB";
    }
    return text;
  }
  uint32_t getNumDevices() const override { return devices.size(); }
  Device &getDevice(uint32_t index) override { return *devices.at(index); }
  Expected<void *> allocateHost(size_t bytes) override {
    void *p = nullptr;
    // Pinned, so that copies are asynchronous and run at full link speed.
    if (Status s = fromCuda(cudaHostAlloc(&p, bytes ? bytes : 64,
                                          cudaHostAllocPortable),
                            "cudaHostAlloc of " + std::to_string(bytes) +
                                " bytes");
        s.failed())
      return s;
    return p;
  }
  void deallocateHost(void *memory) override {
    if (memory)
      cudaFreeHost(memory);
  }

  std::vector<std::unique_ptr<CudaDevice>> devices;
};

} // namespace

Expected<std::unique_ptr<Backend>>
rp::runtime::cuda::createBackend(const BackendOptions &options) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return unavailable(
        std::string("no CUDA device can be opened (") +
        (err != cudaSuccess ? cudaGetErrorString(err) : "no GPU found") +
        "); run on the host backend with --backend host");
  if (uint32_t(count) < options.devices)
    return unavailable("the plan runs on " + std::to_string(options.devices) +
                       " devices but this machine has " +
                       std::to_string(count) +
                       " GPU(s); recompile it with rp-compile --devices " +
                       std::to_string(count));
  auto backend = std::make_unique<CudaBackend>();
  for (uint32_t i = 0; i < options.devices; ++i) {
    auto d = CudaDevice::open(int(i));
    if (!d)
      return d.getStatus();
    backend->devices.push_back(std::move(*d));
  }
  return std::unique_ptr<Backend>(std::move(backend));
}
