//===- TcpStore.h - the rendezvous store of a job ---------------*- C++ -*-===//
//
// A small key-value store over TCP that rank 0 hosts at MASTER_ADDR:
// MASTER_PORT: the ranks exchange their transport addresses through it
// (Gloo's full-mesh connect, NCCL's unique id). Each rank keeps its
// connection for the whole run, so the store also knows which ranks are
// gone: a connection that closes before the rank said goodbye is a lost
// rank, which is how a failed collective names the rank it lost.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_COMM_TCPSTORE_H
#define RP_RUNTIME_COMM_TCPSTORE_H

#include "rp/runtime/Comm.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace rp::runtime::comm {

class TcpStoreServer;

class TcpStore {
public:
  /// Joins the store of `info`'s job (rank 0 starts it first); checks that
  /// every rank has the same world size.
  static Expected<std::unique_ptr<TcpStore>>
  connect(const Rendezvous &info, std::chrono::milliseconds timeout);
  ~TcpStore();

  Status set(const std::string &key, const std::vector<char> &value);
  /// Waits up to `timeout` for `key`.
  Expected<std::vector<char>> get(const std::string &key,
                                  std::chrono::milliseconds timeout);
  /// The ranks whose connection closed without a goodbye, as "rank 1" or
  /// "ranks 1, 2"; else the ranks whose heartbeat stopped; "rank 0 (the
  /// master)" when the store itself is gone; empty when every rank is
  /// still there. Waits up to `grace` for a lost
  /// connection to be noticed.
  std::string lostRanks(std::chrono::milliseconds grace);
  /// Says goodbye: this rank's connection closing is no longer a loss.
  void goodbye();

private:
  TcpStore() = default;
  /// `bound`: how long to wait for the reply (else the op's own wait).
  Status request(char op, const std::string &key, const std::string &value,
                 std::string &reply,
                 std::optional<std::chrono::milliseconds> bound = {});
  int fd = -1;
  Rendezvous info;
  std::unique_ptr<TcpStoreServer> server;
  /// One request at a time on the connection (the heartbeat's and the
  /// communicator's).
  std::mutex requestMutex;
  std::thread heart;
  std::mutex heartMutex;
  std::condition_variable heartCv;
  bool heartStop = false;
};

} // namespace rp::runtime::comm

#endif // RP_RUNTIME_COMM_TCPSTORE_H
