//===- GlooCommunicator.cpp - sums across hosts over Gloo's TCP -----------===//
//
// A sum is a reduce-scatter then an all-gather, both by exchanges whose
// arithmetic is ours: each rank receives every rank's copy of its chunk
// (Gloo's all-to-all), adds them in rank order, and the reduced chunks are
// all-gathered. Every element is then (r0 + r1) + r2 ... on every rank, the
// same bits whatever the timing; Gloo's ring all-reduce adds in an order
// that depends on the element's chunk and the rank, so its results differ
// between ranks' positions in the ring. The bytes sent per rank are those
// of the ring (2 (N-1)/N of the buffer).
//
//===----------------------------------------------------------------------===//

#include "../TcpStore.h"

#include <gloo/allgather.h>
#include <gloo/alltoall.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <csignal>
#include <cstring>
#include <vector>

using namespace rp::runtime;
using namespace rp::runtime::comm;

namespace {

/// Gloo's view of the job's store.
class StoreAdapter : public gloo::rendezvous::Store {
public:
  StoreAdapter(TcpStore &store, std::chrono::milliseconds timeout)
      : store(store), timeout(timeout) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    if (Status s = store.set(key, data); s.failed())
      throw std::runtime_error(s.getMessage());
  }
  std::vector<char> get(const std::string &key) override {
    auto v = store.get(key, timeout);
    if (!v)
      throw std::runtime_error(v.getStatus().getMessage());
    return *v;
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &t) override {
    for (const std::string &k : keys) {
      auto v = store.get(k, t);
      if (!v)
        throw std::runtime_error(v.getStatus().getMessage());
    }
  }

private:
  TcpStore &store;
  std::chrono::milliseconds timeout;
};

class GlooCommunicator : public Communicator {
public:
  GlooCommunicator(Rendezvous info, std::unique_ptr<TcpStore> store,
                   std::shared_ptr<gloo::rendezvous::Context> context,
                   std::chrono::milliseconds timeout)
      : Communicator(std::move(info)), store(std::move(store)),
        context(std::move(context)), timeout(timeout) {}

  void leave() override { store->goodbye(); }

  std::string describe() const override {
    return "gloo (tcp), rank " + std::to_string(info.rank) + " of " +
           std::to_string(info.worldSize) + ", master " + info.masterAddr +
           ":" + std::to_string(info.masterPort) + " (" + info.launcher + ")";
  }

  Status sum(float *data, size_t count) override { return sumOf(data, count); }
  Status sum(double *data, size_t count) override { return sumOf(data, count); }

  Status reduceScatter(float *data, size_t chunk) override {
    if (chunk == 0)
      return Status::ok();
    size_t n = size_t(info.worldSize);
    std::vector<float> recv(chunk * n);
    sent += (n - 1) * chunk * sizeof(float);
    return guarded("a gradient sum", [&] {
      gloo::AlltoallOptions a(context);
      a.setInput(data, chunk * n);
      a.setOutput(recv.data(), recv.size());
      a.setTimeout(timeout);
      gloo::alltoall(a);
      addChunks(recv.data(), data + size_t(info.rank) * chunk, chunk);
    });
  }

  Status allGather(const void *mine, void *all, size_t bytes) override {
    sent += (size_t(info.worldSize) - 1) * bytes;
    return guarded("an all-gather", [&] {
      gloo::AllgatherOptions o(context);
      o.setInput(const_cast<char *>(static_cast<const char *>(mine)), bytes);
      o.setOutput(static_cast<char *>(all), bytes * size_t(info.worldSize));
      o.setTimeout(timeout);
      gloo::allgather(o);
    });
  }

private:
  template <typename T> Status sumOf(T *data, size_t count) {
    if (count == 0)
      return Status::ok();
    size_t n = size_t(info.worldSize);
    size_t chunk = (count + n - 1) / n;
    std::vector<T> send(chunk * n, T(0)), recv(chunk * n), mine(chunk);
    std::memcpy(send.data(), data, count * sizeof(T));
    sent += 2 * (n - 1) * chunk * sizeof(T);
    return guarded("a gradient sum", [&] {
      gloo::AlltoallOptions a(context);
      a.setInput(send.data(), send.size());
      a.setOutput(recv.data(), recv.size());
      a.setTimeout(timeout);
      gloo::alltoall(a);
      addChunks(recv.data(), mine.data(), chunk);
      gloo::AllgatherOptions g(context);
      g.setInput(mine.data(), chunk);
      g.setOutput(send.data(), send.size());
      g.setTimeout(timeout);
      gloo::allgather(g);
      std::memcpy(data, send.data(), count * sizeof(T));
    });
  }

  /// `recv` holds every rank's copy of this rank's chunk, in rank order:
  /// their sum, added in rank order, into `mine`.
  template <typename T> void addChunks(const T *recv, T *mine, size_t chunk) {
    size_t n = size_t(info.worldSize);
    for (size_t i = 0; i < chunk; ++i) {
      T s = recv[i];
      for (size_t r = 1; r < n; ++r)
        s += recv[r * chunk + i];
      mine[i] = s;
    }
  }

  /// Runs a collective; a failure names the lost rank when there is one.
  template <typename F> Status guarded(const char *what, F &&f) {
    if (failed.failed())
      return failed;
    try {
      f();
      return Status::ok();
    } catch (const std::exception &e) {
      std::string lost = store->lostRanks(std::chrono::milliseconds(2000));
      std::string msg =
          "rank " + std::to_string(info.rank) + ": " + what + " across " +
          std::to_string(info.worldSize) + " ranks failed: " +
          (lost.empty() ? std::string("no rank is known lost; a rank stopped "
                                      "answering within the watchdog window "
                                      "(--watchdog-ms)")
                        : lost) +
          " (gloo: " + e.what() + ")";
      failed = unavailable(msg);
      return failed;
    }
  }

  std::unique_ptr<TcpStore> store;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::chrono::milliseconds timeout;
  Status failed;
};

} // namespace

bool rp::runtime::glooBuiltIn() { return true; }

Expected<std::unique_ptr<Communicator>>
rp::runtime::createGlooCommunicator(const Rendezvous &info,
                                    const CommTimeouts &timeouts) {
  // A peer that dies mid-send must fail the send, not kill this process.
  std::signal(SIGPIPE, SIG_IGN);
  auto store = TcpStore::connect(info, timeouts.rendezvous);
  if (!store)
    return store.getStatus();
  // This box's address for the others: loopback jobs stay on loopback;
  // RP_COMM_IFACE (or GLOO_SOCKET_IFNAME) picks the network interface,
  // else the box's hostname is resolved.
  gloo::transport::tcp::attr attr;
  const char *iface = std::getenv("RP_COMM_IFACE");
  if (!iface)
    iface = std::getenv("GLOO_SOCKET_IFNAME");
  if (iface && *iface)
    attr.iface = iface;
  else if (info.masterAddr == "127.0.0.1" || info.masterAddr == "localhost")
    attr.hostname = "127.0.0.1";
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
    context =
        std::make_shared<gloo::rendezvous::Context>(info.rank, info.worldSize);
    context->setTimeout(timeouts.rendezvous);
    StoreAdapter adapter(**store, timeouts.rendezvous);
    context->connectFullMesh(adapter, device);
    context->setTimeout(timeouts.collective);
  } catch (const std::exception &e) {
    return unavailable("rank " + std::to_string(info.rank) +
                       " could not join the job's Gloo mesh: " + e.what());
  }
  auto comm = std::make_unique<GlooCommunicator>(
      info, std::move(*store), std::move(context), timeouts.collective);
  return std::unique_ptr<Communicator>(std::move(comm));
}
