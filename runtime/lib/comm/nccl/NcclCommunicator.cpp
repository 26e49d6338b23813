//===- NcclCommunicator.cpp - sums across boxes over NCCL -----------------===//
//
// The cuda backend's communicator: one NCCL communicator per job on GPU 0
// of each box, its unique id handed out by rank 0 through the rendezvous
// store. The trainer's gradients live in host memory (the host optimizer),
// so a sum stages them through a device buffer: H2D, ncclAllReduce, D2H.
// NCCL's ring adds in an order fixed by the world size and topology: the
// same bits run to run, and on every rank (docs/multi-box.md).
//
//===----------------------------------------------------------------------===//

#include "../TcpStore.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

using namespace rp::runtime;
using namespace rp::runtime::comm;

namespace {

class NcclCommunicator : public Communicator {
public:
  NcclCommunicator(Rendezvous info, std::unique_ptr<TcpStore> store)
      : Communicator(std::move(info)), store(std::move(store)) {}

  ~NcclCommunicator() override {
    if (comm)
      ncclCommDestroy(comm);
    if (buffer)
      cudaFree(buffer);
    if (stream)
      cudaStreamDestroy(stream);
  }

  Status init() {
    if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess)
      return cuda("cudaSetDevice(0)", e);
    if (cudaError_t e =
            cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        e != cudaSuccess)
      return cuda("cudaStreamCreate", e);
    ncclUniqueId id;
    if (info.rank == 0) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
        return nccl("ncclGetUniqueId", r);
      std::vector<char> bytes(sizeof(id));
      std::memcpy(bytes.data(), &id, sizeof(id));
      if (Status s = store->set("nccl-id", bytes); s.failed())
        return s;
    } else {
      auto bytes = store->get("nccl-id", std::chrono::milliseconds(60000));
      if (!bytes)
        return bytes.getStatus();
      if (bytes->size() != sizeof(id))
        return internalError("rank 0's NCCL id has the wrong size; report it");
      std::memcpy(&id, bytes->data(), sizeof(id));
    }
    if (ncclResult_t r = ncclCommInitRank(&comm, info.worldSize, id, info.rank);
        r != ncclSuccess)
      return nccl("ncclCommInitRank", r);
    return Status::ok();
  }

  std::string describe() const override {
    int version = 0;
    ncclGetVersion(&version);
    return "nccl " + std::to_string(version) + ", rank " +
           std::to_string(info.rank) + " of " + std::to_string(info.worldSize) +
           ", master " + info.masterAddr + ":" +
           std::to_string(info.masterPort) + " (" + info.launcher + ")";
  }

  Status sum(float *data, size_t count) override {
    return reduce(data, count * sizeof(float), count, ncclFloat32);
  }
  Status sum(double *data, size_t count) override {
    return reduce(data, count * sizeof(double), count, ncclFloat64);
  }

  Status reduceScatter(float *data, size_t chunk) override {
    size_t n = size_t(info.worldSize), bytes = chunk * sizeof(float);
    if (Status s = reserve(n * bytes); s.failed())
      return s;
    if (cudaError_t e = cudaMemcpyAsync(buffer, data, n * bytes,
                                        cudaMemcpyHostToDevice, stream);
        e != cudaSuccess)
      return cuda("cudaMemcpyAsync", e);
    // In place: this rank's chunk of the buffer receives its sum.
    char *mine = static_cast<char *>(buffer) + size_t(info.rank) * bytes;
    if (ncclResult_t r = ncclReduceScatter(buffer, mine, chunk, ncclFloat32,
                                           ncclSum, comm, stream);
        r != ncclSuccess)
      return nccl("ncclReduceScatter", r);
    if (cudaError_t e = cudaMemcpyAsync(data + size_t(info.rank) * chunk, mine,
                                        bytes, cudaMemcpyDeviceToHost, stream);
        e != cudaSuccess)
      return cuda("cudaMemcpyAsync", e);
    sent += (n - 1) * bytes;
    return finish();
  }

  Status allGather(const void *mine, void *all, size_t bytes) override {
    sent += (size_t(info.worldSize) - 1) * bytes;
    size_t total = bytes * size_t(info.worldSize);
    if (Status s = reserve(total + bytes); s.failed())
      return s;
    char *in = static_cast<char *>(buffer) + total;
    if (cudaError_t e =
            cudaMemcpyAsync(in, mine, bytes, cudaMemcpyHostToDevice, stream);
        e != cudaSuccess)
      return cuda("cudaMemcpyAsync", e);
    if (ncclResult_t r =
            ncclAllGather(in, buffer, bytes, ncclUint8, comm, stream);
        r != ncclSuccess)
      return nccl("ncclAllGather", r);
    if (cudaError_t e =
            cudaMemcpyAsync(all, buffer, total, cudaMemcpyDeviceToHost, stream);
        e != cudaSuccess)
      return cuda("cudaMemcpyAsync", e);
    return finish();
  }

  void leave() override { store->goodbye(); }

private:
  Status reduce(void *data, size_t bytes, size_t count, ncclDataType_t type) {
    if (Status s = reserve(bytes); s.failed())
      return s;
    // A ring all-reduce: 2 (N - 1)/N of the buffer.
    size_t n = size_t(info.worldSize);
    sent += 2 * (n - 1) * ((bytes + n - 1) / n);
    if (cudaError_t e = cudaMemcpyAsync(buffer, data, bytes,
                                        cudaMemcpyHostToDevice, stream);
        e != cudaSuccess)
      return cuda("cudaMemcpyAsync", e);
    if (ncclResult_t r =
            ncclAllReduce(buffer, buffer, count, type, ncclSum, comm, stream);
        r != ncclSuccess)
      return nccl("ncclAllReduce", r);
    if (cudaError_t e = cudaMemcpyAsync(data, buffer, bytes,
                                        cudaMemcpyDeviceToHost, stream);
        e != cudaSuccess)
      return cuda("cudaMemcpyAsync", e);
    return finish();
  }

  Status reserve(size_t bytes) {
    if (bytes <= capacity)
      return Status::ok();
    if (buffer)
      cudaFree(buffer);
    buffer = nullptr;
    capacity = 0;
    if (cudaError_t e = cudaMalloc(&buffer, bytes); e != cudaSuccess)
      return cuda("cudaMalloc", e);
    capacity = bytes;
    return Status::ok();
  }

  /// Waits for the stream; a peer lost meanwhile is named.
  Status finish() {
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
      return cuda("cudaStreamSynchronize", e);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess)
      return nccl("a collective", async);
    return Status::ok();
  }

  Status cuda(const char *what, cudaError_t e) {
    return unavailable("rank " + std::to_string(info.rank) + ": " + what +
                       " failed: " + cudaGetErrorString(e));
  }
  Status nccl(const char *what, ncclResult_t r) {
    std::string lost = store->lostRanks(std::chrono::milliseconds(2000));
    return unavailable("rank " + std::to_string(info.rank) + ": " + what +
                       " failed: " + ncclGetErrorString(r) +
                       (lost.empty() ? "" : "; " + lost));
  }

  std::unique_ptr<TcpStore> store;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void *buffer = nullptr;
  size_t capacity = 0;
};

} // namespace

Expected<std::unique_ptr<Communicator>>
rp::runtime::createNcclCommunicator(const Rendezvous &info,
                                    const CommTimeouts &timeouts) {
  auto store = TcpStore::connect(info, timeouts.rendezvous);
  if (!store)
    return store.getStatus();
  auto comm = std::make_unique<NcclCommunicator>(info, std::move(*store));
  if (Status s = comm->init(); s.failed())
    return s;
  return std::unique_ptr<Communicator>(std::move(comm));
}
