//===- CudaQueue.cpp - a plan queue on CUDA -------------------------------===//
//
// CudaQueue.h's queue: copies, program launches (through the graph cache
// when RP_CUDA_GRAPHS asks), event records and waits on its stream, and
// the synchronize that brings the kernels' error record back.
//
//===----------------------------------------------------------------------===//

#include "CudaQueue.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace rp::runtime::cuda {

/// rp-run --tf32: f32 GEMMs round their inputs to TF32 (the backend's
/// option, for every device it opens).
std::atomic<bool> useTf32{false};

namespace {

/// A kernel's report about its data (CudaKernels.h) as a Status.
Status kernelError(const KernelErrorRecord &r, const Plan *plan) {
  uint32_t program = uint32_t(uint64_t(r.site) >> 32);
  uint32_t call = uint32_t(uint64_t(r.site) & 0xFFFFFFFFu);
  std::string where = "a kernel";
  if (plan && program < plan->programs.size() &&
      call < plan->programs[program].calls.size()) {
    const KernelCallDesc &c = plan->programs[program].calls[call];
    where = "program '" + plan->programs[program].name + "', call #" +
            std::to_string(call) + " (" + opKindName(c.op) +
            (c.loc.empty() ? "" : " at " + c.loc) + ")";
  }
  switch (r.code) {
  case kIndexOutOfRange:
    return invalidArgument(where + ": index " + std::to_string(r.value) +
                           " at position " + std::to_string(r.position) +
                           " is out of range for a dimension of size " +
                           std::to_string(r.limit));
  case kLabelOutOfRange:
    return invalidArgument(where + ": label " + std::to_string(r.value) +
                           " at position " + std::to_string(r.position) +
                           " is out of range [0, " + std::to_string(r.limit) +
                           ") and is not the ignore index");
  case kDivisionByZero:
    return invalidArgument(where + ": integer division by zero at element " +
                           std::to_string(r.position));
  case kExpertOutOfRange:
    return invalidArgument(where + ": expert " + std::to_string(r.value) +
                           " of choice " + std::to_string(r.position) +
                           " is outside [0, " + std::to_string(r.limit) + ")");
  case kPositionOutOfRange:
    return invalidArgument(where + ": position " + std::to_string(r.value) +
                           " of choice " + std::to_string(r.position) +
                           " is outside [0, " + std::to_string(r.limit) + ")");
  case kDuplicatePosition:
    return invalidArgument(where + ": row " + std::to_string(r.value) +
                           " is named by two choices (choice " +
                           std::to_string(r.position) + " is the second)");
  case kGroupsOverflow:
    return invalidArgument(where + ": expert " + std::to_string(r.position) +
                           " has " + std::to_string(r.value) +
                           " rows; the groups must fit in the " +
                           std::to_string(r.limit) + " rows");
  default:
    return internalError(where + ": unknown kernel error code " +
                         std::to_string(r.code));
  }
}

} // namespace

CudaQueue::CudaQueue(int device, int gpu, QueueKind kind, int priority,
                     cudaStream_t stream)
    : device(device), gpu(gpu), kind(kind), priority(priority), stream(stream),
      timer(gpu, stream) {}

CudaQueue::~CudaQueue() {
  cudaSetDevice(gpu);
  graphs.reset(); // Before its stream, as cuDNN.
#ifdef RP_CUDA_CUDNN
  cudnn.reset(); // Before its stream.
#endif
  if (blas)
    cublasDestroy(blas);
  if (lt)
    cublasLtDestroy(lt);
  cudaStreamDestroy(stream);
}

Status CudaQueue::enableKernels(void *workspace, size_t workspaceBytes,
                                KernelErrorRecord *hostRecord,
                                KernelErrorRecord *deviceRecord) {
  if (Status s = fromCublas(cublasCreate(&blas), "cublasCreate"); s.failed())
    return s;
  if (Status s = fromCublas(cublasSetStream(blas, stream), "cublasSetStream");
      s.failed())
    return s;
  if (Status s = fromCublas(cublasSetWorkspace(blas, workspace, workspaceBytes),
                            "cublasSetWorkspace");
      s.failed())
    return s;
  // cuBLASLt (CudaGemmLt.cpp) on the same stream and workspace.
  if (Status s = fromCublas(cublasLtCreate(&lt), "cublasLtCreate"); s.failed())
    return s;
  errorsHost = hostRecord;
  errorsDevice = deviceRecord;
  // RP_CUDA_GRAPHS=on: each program captured once, replayed after.
  if (graphsRequested(std::getenv("RP_CUDA_GRAPHS"))) {
    graphBackend = makeStreamGraphs(stream);
    graphs = std::make_unique<ProgramGraphCache>(*graphBackend);
  }
  context = DispatchContext{gpu, stream,    blas,           deviceRecord,
                            lt,  workspace, workspaceBytes, useTf32.load()};
  cudaDeviceGetAttribute(&context.sm, cudaDevAttrComputeCapabilityMajor, gpu);
  int minor = 0;
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, gpu);
  context.sm = context.sm * 10 + minor;
  cudaDeviceGetAttribute(&context.smCount, cudaDevAttrMultiProcessorCount, gpu);
#ifdef RP_CUDA_CUDNN
  // Its handle is made on the first attention cuDNN takes.
  cudnn = std::make_unique<CudnnAttention>(gpu, stream, context.sm,
                                           context.smCount);
  context.cudnn = cudnn.get();
#endif
  return Status::ok();
}

Status CudaQueue::copy(void *dst, const void *src, size_t bytes, CopyKind how) {
  if (bytes == 0)
    return Status::ok();
  timer.beforeWork();
  cudaSetDevice(gpu);
  cudaMemcpyKind k = how == CopyKind::hostToDevice   ? cudaMemcpyHostToDevice
                     : how == CopyKind::deviceToHost ? cudaMemcpyDeviceToHost
                                                     : cudaMemcpyDeviceToDevice;
  return fromCuda(cudaMemcpyAsync(dst, src, bytes, k, stream),
                  "cudaMemcpyAsync of " + std::to_string(bytes) +
                      " bytes on device " + std::to_string(device));
}

Status CudaQueue::launch(const Plan &plan, uint32_t program,
                         const BufferAddresses &buffers) {
  if (kind != QueueKind::compute || !blas)
    return invalidArgument("kernels run on the compute queue only");
  if (program >= plan.programs.size())
    return invalidArgument("program " + std::to_string(program) +
                           " is not in the plan");
  lastPlan = &plan;
  timer.beforeWork();
  if (timingCalls) {
    // Each call between two events on the stream; a graph replay would
    // hide the calls, so none while profiling.
    // A call's entry is handed over whole, once both events are recorded:
    // takeCallTimes may run on the executor's thread meanwhile.
    cudaEvent_t opened = nullptr;
    return runProgram(
        context, plan, program, buffers, [&](size_t call, bool before) {
          cudaEvent_t e = nullptr;
          if (Status s = fromCuda(cudaEventCreate(&e), "cudaEventCreate");
              s.failed())
            return s;
          Status s = fromCuda(cudaEventRecord(e, stream),
                              "cudaEventRecord around a timed call");
          if (before) {
            opened = e;
            return s;
          }
          std::lock_guard<std::mutex> lock(timedMutex);
          timedCalls.push_back(
              {{&plan, program, uint32_t(call), 0}, opened, e});
          return s;
        });
  }
  auto run = [&] { return runProgram(context, plan, program, buffers); };
  return graphs ? graphs->launch(plan, program, buffers, run) : run();
}

void CudaQueue::takeCallTimes(std::vector<CallTime> &out) {
  std::vector<TimedCall> taken;
  {
    std::lock_guard<std::mutex> lock(timedMutex);
    taken.swap(timedCalls);
  }
  cudaSetDevice(gpu);
  for (TimedCall &t : taken) {
    float ms = 0;
    if (t.end && cudaEventSynchronize(t.end) == cudaSuccess &&
        cudaEventElapsedTime(&ms, t.start, t.end) == cudaSuccess) {
      t.call.ns = int64_t(double(ms) * 1e6);
      out.push_back(t.call);
    }
    cudaEventDestroy(t.start);
    if (t.end)
      cudaEventDestroy(t.end);
  }
  (void)cudaGetLastError();
}

Status CudaQueue::record(Event &event) {
  auto *e = dynamic_cast<CudaEvent *>(&event);
  if (!e)
    return invalidArgument("cannot record an event of another backend on "
                           "cuda device " +
                           std::to_string(device));
  // CUDA would refuse it too, with an unhelpful invalid-handle error.
  if (e->getDevice() != device)
    return invalidArgument(
        "cannot record an event of device " + std::to_string(e->getDevice()) +
        " on device " + std::to_string(device) + "'s " + queueName(kind) +
        " queue: an event is recorded on queues of its own device");
  cudaSetDevice(gpu);
  return fromCuda(cudaEventRecord(e->get(), stream),
                  "cudaEventRecord on device " + std::to_string(device));
}

Status CudaQueue::wait(Event &event) {
  auto *e = dynamic_cast<CudaEvent *>(&event);
  if (!e)
    return invalidArgument("cannot wait for an event of another backend on "
                           "cuda device " +
                           std::to_string(device));
  cudaSetDevice(gpu);
  return fromCuda(cudaStreamWaitEvent(stream, e->get(), 0),
                  "cudaStreamWaitEvent on device " + std::to_string(device));
}

Status CudaQueue::synchronize() {
  cudaSetDevice(gpu);
  const std::string what =
      "cudaStreamSynchronize on device " + std::to_string(device);
  // The record comes back behind the kernels that may have written it.
  if (errorsHost)
    if (Status s = fromCuda(cudaMemcpyAsync(errorsHost, errorsDevice,
                                            sizeof(KernelErrorRecord),
                                            cudaMemcpyDeviceToHost, stream),
                            "cudaMemcpyAsync of the kernel error record");
        s.failed())
      return s;
  if (Status s = fromCuda(cudaStreamSynchronize(stream), what); s.failed())
    return s;
  if (!errorsHost || errorsHost->code == kNoKernelError)
    return Status::ok();
  KernelErrorRecord seen = *errorsHost;
  // Cleared, so that the next step starts clean.
  std::memset(errorsHost, 0, sizeof(KernelErrorRecord));
  if (Status s = fromCuda(
          cudaMemsetAsync(errorsDevice, 0, sizeof(KernelErrorRecord), stream),
          "cudaMemsetAsync of the kernel error record");
      s.failed())
    return s;
  if (Status s = fromCuda(cudaStreamSynchronize(stream), what); s.failed())
    return s;
  return kernelError(seen, lastPlan);
}

} // namespace rp::runtime::cuda
