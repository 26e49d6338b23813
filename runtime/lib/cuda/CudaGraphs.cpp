//===- CudaGraphs.cpp - ProgramGraphCache's backend on a CUDA stream ------===//
//
// Relaxed capture mode: the calls may still ask the driver things that are
// not stream work (cuBLASLt's heuristic, CUTLASS's occupancy query, cuDNN's
// plan building, the first cudaMalloc of a workspace) on their first run,
// which is the capture. A call that waits for the stream invalidates the
// capture; that is seen after the program and reported as not captured, so
// the cache runs it again call by call (ProgramGraphCache.h).
//
//===----------------------------------------------------------------------===//

#include "CudaGraphs.h"
#include "CudaStatus.h"

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

class StreamGraphs : public GraphBackend {
public:
  explicit StreamGraphs(cudaStream_t stream) : stream(stream) {}

  Status capture(const std::function<Status()> &run, void *&graph,
                 bool &captured) override {
    captured = false;
    if (Status s = fromCuda(
            cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
            "cudaStreamBeginCapture");
        s.failed())
      return s;
    Status ran = run();
    cudaStreamCaptureStatus state = cudaStreamCaptureStatusNone;
    cudaError_t asked = cudaStreamIsCapturing(stream, &state);
    cudaGraph_t g = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream, &g);
    const bool invalidated = asked != cudaSuccess ||
                             state == cudaStreamCaptureStatusInvalidated ||
                             end == cudaErrorStreamCaptureInvalidated ||
                             end == cudaErrorStreamCaptureUnsupported;
    if (invalidated || ran.failed() || end != cudaSuccess) {
      if (g)
        cudaGraphDestroy(g);
      (void)cudaGetLastError(); // A capture's error is not sticky.
      if (invalidated)
        return Status::ok(); // Not captured: the caller runs it directly.
      if (ran.failed())
        return ran;
      return fromCuda(end, "cudaStreamEndCapture");
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t made = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    if (Status s = fromCuda(made, "cudaGraphInstantiate"); s.failed())
      return s;
    graph = exec;
    captured = true;
    return Status::ok();
  }

  Status replay(void *graph) override {
    return fromCuda(
        cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream),
        "cudaGraphLaunch");
  }

  void destroy(void *graph) override {
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

private:
  cudaStream_t stream;
};

} // namespace

std::unique_ptr<GraphBackend>
rp::runtime::cuda::makeStreamGraphs(cudaStream_t stream) {
  return std::make_unique<StreamGraphs>(stream);
}
