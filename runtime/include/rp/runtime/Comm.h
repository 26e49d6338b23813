//===- Comm.h - the communicator of a data-parallel run ---------*- C++ -*-===//
//
// Several processes (one per box) train one model data-parallel: each runs
// the same plan on its slice of the global batch, and they sum their
// gradients before the host optimizer (docs/multi-box.md). A Communicator
// is what they sum with: Gloo over TCP for the host backend, NCCL for cuda.
//
// Sums are deterministic: every rank gets the same bits, the sum of the
// ranks' values in rank order ((r0 + r1) + r2 ...), whatever the timing.
// Every call is bounded by the communicator's timeout; a rank that dies or
// stops answering fails the call on the others with a message naming it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_COMM_H
#define RP_RUNTIME_COMM_H

#include "rp/runtime/Status.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace rp::runtime {

/// Where a process stands in its job, read from the launcher's environment.
struct Rendezvous {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  /// Where rank 0 listens for the others (its store).
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  /// "torchrun" (RANK, WORLD_SIZE, ...) or "mpirun" (OMPI_COMM_WORLD_*).
  std::string launcher;
};

/// The job's rendezvous from the environment: torchrun's RANK, WORLD_SIZE,
/// LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or OpenMPI's OMPI_COMM_WORLD_RANK,
/// _SIZE, _LOCAL_RANK with MASTER_ADDR / MASTER_PORT (defaults 127.0.0.1
/// and 29500). None of them: std::nullopt (one process). A malformed or
/// inconsistent variable is an error naming it.
Expected<std::optional<Rendezvous>> rendezvousFromEnvironment();

/// Sums across the ranks of a job.
class Communicator {
public:
  virtual ~Communicator();
  int rank() const { return info.rank; }
  int size() const { return info.worldSize; }
  const Rendezvous &rendezvous() const { return info; }
  /// "gloo (tcp, rank 0 of 2, master 127.0.0.1:29500, torchrun)".
  virtual std::string describe() const = 0;

  /// Replaces `data[0..count)` on every rank by its sum over the ranks, in
  /// rank order (the same bits on every rank).
  virtual Status sum(float *data, size_t count) = 0;
  virtual Status sum(double *data, size_t count) = 0;
  /// `data` holds size() chunks of `chunk` elements: this rank's chunk
  /// (data[rank() * chunk ..)) is replaced by its sum over the ranks, the
  /// bits sum() gives it; the other chunks are left undefined. What crosses
  /// the network is half a sum's: each rank sends every other rank its
  /// chunk of them (ZeRO-1's gradients, docs/multi-box.md).
  virtual Status reduceScatter(float *data, size_t chunk) = 0;
  /// Every rank's `bytes` bytes at `mine`, in rank order, into `all`
  /// (size() * bytes).
  virtual Status allGather(const void *mine, void *all, size_t bytes) = 0;
  /// Payload bytes this rank has sent through its collectives so far
  /// (what crosses the network from it; the transport's own not counted).
  size_t bytesSent() const { return sent; }
  /// Says this rank is done with every collective: its process ending is
  /// then no loss to the others. A rank that ends without it (an error, a
  /// kill) is named as lost by the others' next collective.
  virtual void leave() {}

protected:
  explicit Communicator(Rendezvous info) : info(std::move(info)) {}
  Rendezvous info;
  size_t sent = 0;
};

/// How long rendezvous and every collective may wait for the other ranks.
struct CommTimeouts {
  std::chrono::milliseconds rendezvous{60000};
  std::chrono::milliseconds collective{60000};
};

/// Joins the job over Gloo's TCP transport (rank 0 hosts the rendezvous
/// store at MASTER_ADDR:MASTER_PORT). A wrong world size, a port in use or
/// a master that cannot be reached is an error saying what to fix.
Expected<std::unique_ptr<Communicator>>
createGlooCommunicator(const Rendezvous &info, const CommTimeouts &timeouts);

/// Joins the job over NCCL (GPU 0 of each box; the unique id travels
/// through the same rendezvous store). Defined in the cuda driver's library
/// (lib/comm/nccl/ is compiled into it), reached through
/// createDriverCommunicator("cuda", ...) (Driver.h), so that only a cuda
/// run maps NCCL and the CUDA runtime.
Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(const Rendezvous &info, const CommTimeouts &timeouts);

/// Whether createGlooCommunicator can work in this build.
bool glooBuiltIn();

} // namespace rp::runtime

#endif // RP_RUNTIME_COMM_H
