//===- TcpStore.cpp - the rendezvous store of a job -----------------------===//
//
// Messages are an op byte, a key and a value, each length-prefixed; replies
// a status byte and a value. One thread per connected rank on rank 0: jobs
// have a handful of ranks, and a blocked get must not hold the others up.
//
//===----------------------------------------------------------------------===//

#include "TcpStore.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace rp::runtime;
using namespace rp::runtime::comm;

namespace {

/// Each rank tells the store it is alive this often; one not heard from for
/// kSilentMs is named when a collective fails.
constexpr int kBeatMs = 500, kSilentMs = 2500;

/// What rank 0's store answers a rank's hello with: a process on the port
/// that answers anything else, or nothing within the rendezvous window, is
/// not rp's store.
const char *const kStoreHello = "rp-store 1";

bool writeAll(int fd, const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool readAll(int fd, void *data, size_t n) {
  char *p = static_cast<char *>(data);
  while (n) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool writeString(int fd, const std::string &s) {
  uint32_t n = uint32_t(s.size());
  return writeAll(fd, &n, 4) && writeAll(fd, s.data(), s.size());
}

bool readString(int fd, std::string &s) {
  uint32_t n = 0;
  if (!readAll(fd, &n, 4) || n > (64u << 20))
    return false;
  s.resize(n);
  return readAll(fd, s.data(), n);
}

void setTimeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = long(t.count() / 1000);
  tv.tv_usec = long(t.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/// The addresses of `host`:`port` (numeric or a name).
Expected<addrinfo *> resolve(const std::string &host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc =
      ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0)
    return invalidArgument("MASTER_ADDR '" + host + "' does not resolve: " +
                           gai_strerror(rc) + "; set it to rank 0's address");
  return res;
}

} // namespace

namespace rp::runtime::comm {

class TcpStoreServer {
public:
  static Expected<std::unique_ptr<TcpStoreServer>>
  start(const Rendezvous &info) {
    auto res = resolve(info.masterAddr, info.masterPort);
    if (!res)
      return res.getStatus();
    std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
    s->world = info.worldSize;
    std::string why = "no address";
    for (addrinfo *a = *res; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0)
        continue;
      int one = 1;
      // Lets a job restart at once on the port of one that just ended
      // (TIME_WAIT), yet refuses a port another process listens on.
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
        s->listenFd = fd;
        break;
      }
      why = std::strerror(errno);
      bool inUse = errno == EADDRINUSE;
      ::close(fd);
      if (inUse) {
        ::freeaddrinfo(*res);
        return unavailable(
            "rank 0 cannot listen on MASTER_ADDR:MASTER_PORT " +
            info.masterAddr + ":" + std::to_string(info.masterPort) +
            ": the port is in use (another job?); pick a free MASTER_PORT "
            "for every rank");
      }
    }
    ::freeaddrinfo(*res);
    if (s->listenFd < 0)
      return unavailable("rank 0 cannot listen on MASTER_ADDR:MASTER_PORT " +
                         info.masterAddr + ":" +
                         std::to_string(info.masterPort) + ": " + why +
                         "; MASTER_ADDR must be an address of rank 0's box");
    s->acceptor = std::thread([p = s.get()] { p->acceptLoop(); });
    return s;
  }

  ~TcpStoreServer() {
    {
      std::lock_guard<std::mutex> lock(m);
      stopping = true;
      for (int fd : clients)
        ::shutdown(fd, SHUT_RDWR);
    }
    cv.notify_all();
    // A server that failed to listen has no acceptor.
    if (acceptor.joinable())
      acceptor.join();
    for (std::thread &t : threads)
      t.join();
    for (int fd : clients)
      ::close(fd);
    if (listenFd >= 0)
      ::close(listenFd);
  }

private:
  TcpStoreServer() = default;

  void acceptLoop() {
    for (;;) {
      pollfd p{listenFd, POLLIN, 0};
      int rc = ::poll(&p, 1, 50);
      std::lock_guard<std::mutex> lock(m);
      if (stopping)
        return;
      if (rc <= 0)
        continue;
      int fd = ::accept(listenFd, nullptr, nullptr);
      if (fd < 0)
        continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      clients.push_back(fd);
      threads.emplace_back([this, fd] { serve(fd); });
    }
  }

  void reply(int fd, char status, const std::string &value) {
    if (writeAll(fd, &status, 1))
      writeString(fd, value);
  }

  void serve(int fd) {
    int rank = -1;
    bool left = false;
    for (;;) {
      char op = 0;
      std::string key, value;
      if (!readAll(fd, &op, 1) || !readString(fd, key) ||
          !readString(fd, value))
        break;
      std::unique_lock<std::mutex> lock(m);
      if (op == 'P') {
        lastBeat[rank] = std::chrono::steady_clock::now();
        lock.unlock();
        reply(fd, 'o', "");
      } else if (op == 'H') {
        int r = std::atoi(key.c_str()), w = std::atoi(value.c_str());
        std::string bad;
        if (w != world)
          bad = "rank " + key + " was started with a world size of " + value +
                " and rank 0 with " + std::to_string(world) +
                "; give every rank the same WORLD_SIZE (or mpirun -np)";
        else if (ranks.count(r))
          bad = "two processes say they are rank " + key +
                "; give each process its own RANK";
        if (!bad.empty()) {
          if (error.empty())
            error = bad;
          cv.notify_all();
          lock.unlock();
          reply(fd, 'e', bad);
          continue;
        }
        rank = r;
        ranks.insert(r);
        // Heard from now: a rank that hangs before its first beat is
        // silent too.
        lastBeat[r] = std::chrono::steady_clock::now();
        lock.unlock();
        reply(fd, 'o', kStoreHello);
      } else if (op == 'S') {
        kv[key] = value;
        cv.notify_all();
        lock.unlock();
        reply(fd, 'o', "");
      } else if (op == 'G') {
        auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(std::atol(value.c_str()));
        cv.wait_until(lock, until, [&] {
          return stopping || kv.count(key) || !error.empty() || !lost.empty();
        });
        if (kv.count(key)) {
          std::string v = kv[key];
          lock.unlock();
          reply(fd, 'o', v);
        } else {
          std::string why = !error.empty() ? error : lostList();
          lock.unlock();
          reply(fd, error.empty() && why.empty() ? 'n' : 'e', why);
        }
      } else if (op == 'L') {
        std::string v = lostList();
        if (v.empty())
          v = silentList();
        if (v.empty())
          v = finishedList();
        lock.unlock();
        reply(fd, 'o', v);
      } else if (op == 'B') {
        left = true;
        lastBeat.erase(rank);
        finished.insert(rank);
        lock.unlock();
        reply(fd, 'o', "");
      } else {
        break;
      }
    }
    std::lock_guard<std::mutex> lock(m);
    if (rank >= 0 && !left && !stopping) {
      lost.insert(rank);
      cv.notify_all();
    }
  }

  /// "rank 1" / "ranks 1, 2" lost; empty if none. Holds `m`.
  std::string lostList() {
    if (lost.empty())
      return "";
    std::string s = lost.size() == 1 ? "rank " : "ranks ";
    bool firstRank = true;
    for (int r : lost) {
      s += (firstRank ? "" : ", ") + std::to_string(r);
      firstRank = false;
    }
    return s + " lost (its process ended or its connection closed)";
  }

  /// Ranks whose heartbeat stopped: alive (connected) but hung, stopped or
  /// cut off. Holds `m`.
  std::string silentList() {
    auto now = std::chrono::steady_clock::now();
    std::string s;
    for (auto [r, at] : lastBeat) {
      double silent = std::chrono::duration<double>(now - at).count();
      if (silent * 1000 < kSilentMs)
        continue;
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.1f", silent);
      s += (s.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
           " silent for " + secs + " s (hung, stopped or cut off)";
    }
    return s;
  }

  /// Ranks that said goodbye: done with their run, not lost. A collective
  /// that fails for want of one of them is a rank that ran fewer steps.
  std::string finishedList() {
    if (finished.empty())
      return "";
    std::vector<int> ranks(finished.begin(), finished.end());
    std::string s = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i)
      s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s + (ranks.size() == 1 ? " has" : " have") +
           " finished its run cleanly and left the job (not lost: the "
           "ranks ran different numbers of steps?)";
  }

  int listenFd = -1;
  int world = 1;
  std::map<int, std::chrono::steady_clock::time_point> lastBeat;
  std::mutex m;
  std::condition_variable cv;
  bool stopping = false;
  std::map<std::string, std::string> kv;
  std::set<int> ranks, lost, finished;
  std::string error;
  std::vector<int> clients;
  std::vector<std::thread> threads;
  std::thread acceptor;
};

} // namespace rp::runtime::comm

Expected<std::unique_ptr<TcpStore>>
TcpStore::connect(const Rendezvous &info, std::chrono::milliseconds timeout) {
  std::unique_ptr<TcpStore> store(new TcpStore());
  store->info = info;
  if (info.rank == 0) {
    auto server = TcpStoreServer::start(info);
    if (!server)
      return server.getStatus();
    store->server = std::move(*server);
  }
  std::string where = info.masterAddr + ":" + std::to_string(info.masterPort);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  // Rank 0 may start after the others: retry until the deadline.
  while (store->fd < 0) {
    auto res = resolve(info.masterAddr, info.masterPort);
    if (!res)
      return res.getStatus();
    for (addrinfo *a = *res; a && store->fd < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0)
        continue;
      setTimeout(fd, std::chrono::milliseconds(2000));
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        store->fd = fd;
        break;
      }
      why = std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(*res);
    if (store->fd >= 0)
      break;
    if (std::chrono::steady_clock::now() > deadline)
      return unavailable(
          "rank " + std::to_string(info.rank) +
          " could not reach the master at MASTER_ADDR:MASTER_PORT " + where +
          " within " + std::to_string(timeout.count() / 1000) + " s (" + why +
          "); start rank 0, or fix MASTER_ADDR/MASTER_PORT (rank 0's "
          "address and a port it can listen on)");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int one = 1;
  ::setsockopt(store->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string reply;
  // The hello is bounded by what is left of the window: a program on the
  // port that accepts and never answers must not hold the rank for longer.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  left = std::max(left, std::chrono::milliseconds(100));
  std::string foreign =
      "rank " + std::to_string(info.rank) + " reached " + where +
      " (MASTER_ADDR:MASTER_PORT), but what listens there is not rank 0's "
      "rendezvous store: ";
  Status hello = store->request('H', std::to_string(info.rank),
                                std::to_string(info.worldSize), reply, left);
  if (hello.getCode() == StatusCode::Unavailable)
    return unavailable(foreign + "it did not answer as the store within " +
                       std::to_string((left.count() + 999) / 1000) +
                       " s; another program holds the port? pick a free "
                       "MASTER_PORT for every rank");
  if (hello.failed())
    return hello;
  if (reply != kStoreHello)
    return unavailable(foreign +
                       "it answered something else; another program holds "
                       "the port? pick a free MASTER_PORT for every rank");
  TcpStore *self = store.get();
  store->heart = std::thread([self] {
    std::unique_lock<std::mutex> lock(self->heartMutex);
    while (!self->heartStop) {
      self->heartCv.wait_for(lock, std::chrono::milliseconds(kBeatMs));
      if (self->heartStop)
        break;
      lock.unlock();
      std::string reply;
      bool alive = self->request('P', "", "", reply).isOk();
      lock.lock();
      // The store is gone: nothing to tell; a collective will say so.
      if (!alive)
        break;
    }
  });
  return store;
}

TcpStore::~TcpStore() {
  {
    std::lock_guard<std::mutex> lock(heartMutex);
    heartStop = true;
  }
  heartCv.notify_all();
  if (heart.joinable())
    heart.join();
  if (fd >= 0)
    ::close(fd);
  server.reset();
}

Status TcpStore::request(char op, const std::string &key,
                         const std::string &value, std::string &reply,
                         std::optional<std::chrono::milliseconds> bound) {
  std::lock_guard<std::mutex> lock(requestMutex);
  // A master that is alive answers at once; one that does not is gone or
  // hung, which a failed collective's question must learn promptly.
  std::chrono::milliseconds wait(bound ? *bound
                                 : op == 'L'
                                     ? std::chrono::milliseconds(3000)
                                     : std::chrono::milliseconds(10000));
  if (op == 'G')
    wait += std::chrono::milliseconds(std::atol(value.c_str()));
  setTimeout(fd, wait);
  char status = 0;
  if (!writeAll(fd, &op, 1) || !writeString(fd, key) ||
      !writeString(fd, value) || !readAll(fd, &status, 1) ||
      !readString(fd, reply))
    return unavailable("the rendezvous store of rank 0 at " + info.masterAddr +
                       ":" + std::to_string(info.masterPort) +
                       " stopped answering: rank 0 (the master) is lost");
  if (status == 'e')
    return invalidArgument(reply);
  if (status == 'n')
    return deadlineExceeded("rank " + std::to_string(info.rank) +
                            " waited in vain for '" + key +
                            "' at the rendezvous: some rank never joined; "
                            "start all WORLD_SIZE ranks");
  return Status::ok();
}

Status TcpStore::set(const std::string &key, const std::vector<char> &value) {
  std::string reply;
  return request('S', key, std::string(value.begin(), value.end()), reply);
}

Expected<std::vector<char>> TcpStore::get(const std::string &key,
                                          std::chrono::milliseconds timeout) {
  std::string reply;
  if (Status s = request('G', key, std::to_string(timeout.count()), reply);
      s.failed())
    return s;
  return std::vector<char>(reply.begin(), reply.end());
}

std::string TcpStore::lostRanks(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    std::string reply;
    if (request('L', "", "", reply).failed())
      return "rank 0 (the master) lost";
    if (!reply.empty() || std::chrono::steady_clock::now() > deadline)
      return reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void TcpStore::goodbye() {
  std::string reply;
  (void)request('B', "", "", reply);
}
