//===- CommTest.cpp - the communicator of data-parallel runs --------------===//
//
// Ranks as threads of one process on loopback (so that the ThreadSanitizer
// build runs them too): Gloo's sums are the rank-order sum on every rank,
// the gradient reducer sums whatever order the gradients land in, and the
// rendezvous reads the launchers' variables.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Comm.h"
#include "../lib/exec/GradientReducer.h"
#include "rp/runtime/sim/AllReduce.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace rp::runtime;

namespace {

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof(a);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &n) == 0;
  ::close(fd);
  EXPECT_TRUE(ok) << "no free port on 127.0.0.1";
  return ntohs(a.sin_port);
}

/// Runs `body(comm)` on `world` ranks, each a thread with its communicator.
void onRanks(int world, const std::function<void(Communicator &)> &body) {
  int port = freePort();
  std::vector<std::thread> ranks;
  ranks.reserve(world);
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      Rendezvous info;
      info.rank = r;
      info.worldSize = world;
      info.masterPort = port;
      info.launcher = "test";
      CommTimeouts t;
      t.rendezvous = t.collective = std::chrono::milliseconds(20000);
      auto comm = createGlooCommunicator(info, t);
      ASSERT_TRUE(comm) << comm.getStatus().toString();
      body(**comm);
      (*comm)->leave();
    });
  for (std::thread &t : ranks)
    t.join();
}

TEST(CommTest, SumsInRankOrderOnEveryRank) {
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  // Values whose sum depends on the order: rank order gives
  // ((1e8 + 1) + -1e8) = 0 in f32, other orders 1.
  const float v[3] = {1e8f, 1.0f, -1e8f};
  onRanks(3, [&](Communicator &c) {
    std::vector<float> x(7, v[c.rank()]);
    x[6] = float(c.rank());
    ASSERT_TRUE(c.sum(x.data(), x.size()).isOk());
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(x[i], (v[0] + v[1]) + v[2]);
    EXPECT_EQ(x[6], 3.0f);
    double d = 0.5 * c.rank();
    ASSERT_TRUE(c.sum(&d, 1).isOk());
    EXPECT_EQ(d, 1.5);
    int mine = 10 + c.rank(), all[3] = {};
    ASSERT_TRUE(c.allGather(&mine, all, sizeof(int)).isOk());
    EXPECT_EQ(all[0], 10);
    EXPECT_EQ(all[2], 12);
  });
}

TEST(CommTest, ARankThatFinishedIsNamedAsFinishedNotAsSilent) {
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  // Rank 1 ends its run cleanly (a shorter --steps) while rank 0 sums on:
  // rank 0's sum fails naming rank 1 as finished, not as lost or hung.
  int port = freePort();
  std::string message;
  std::vector<std::thread> ranks;
  ranks.reserve(2);
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      Rendezvous info;
      info.rank = r;
      info.worldSize = 2;
      info.masterPort = port;
      info.launcher = "test";
      CommTimeouts t;
      t.rendezvous = std::chrono::milliseconds(20000);
      t.collective = std::chrono::milliseconds(1500);
      auto comm = createGlooCommunicator(info, t);
      ASSERT_TRUE(comm) << comm.getStatus().toString();
      int mine = r, all[2] = {};
      ASSERT_TRUE((*comm)->allGather(&mine, all, sizeof(int)).isOk());
      if (r == 1) {
        (*comm)->leave();
        return;
      }
      float x = 1;
      Status s = (*comm)->sum(&x, 1);
      ASSERT_TRUE(s.failed());
      message = s.getMessage();
      (*comm)->leave();
    });
  for (std::thread &t : ranks)
    t.join();
  EXPECT_NE(message.find("rank 1 has finished its run cleanly and left the "
                         "job (not lost: the ranks ran different numbers of "
                         "steps?)"),
            std::string::npos)
      << message;
}

TEST(CommTest, ReducerSumsGradientsThatLandInAnyOrder) {
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  onRanks(2, [&](Communicator &c) {
    std::vector<std::vector<float>> grads = {{1.0f, 2.0f}, {3.0f}, {4.0f}};
    for (auto &g : grads)
      for (float &x : g)
        x *= float(c.rank() + 1);
    detail::GradientReducer reducer(c, {2, 0, 1}, 5, nullptr);
    // Rank 0 hands its gradients over in one order, rank 1 in another, from
    // another thread: the reducer's own order decides the collectives.
    std::thread lander([&] {
      for (size_t i : c.rank() ? std::vector<size_t>{1, 0, 2}
                               : std::vector<size_t>{0, 1, 2})
        reducer.ready(5, i, grads[i].data(), grads[i].size());
    });
    double loss = 1.0 + c.rank();
    Status s = reducer.finishStep(5, loss);
    lander.join();
    ASSERT_TRUE(s.isOk()) << s.toString();
    EXPECT_EQ(loss, 3.0);
    EXPECT_EQ(grads[0], (std::vector<float>{3.0f, 6.0f}));
    EXPECT_EQ(grads[1], (std::vector<float>{9.0f}));
    EXPECT_EQ(grads[2], (std::vector<float>{12.0f}));
  });
}

TEST(CommTest, ReducerBucketsSmallGradientsWithTheSameBits) {
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  // Items 0..5: sizes 3, 5, 100, 2, 4, 1 (items 4 and 5 are epilogue
  // uses). Buckets of items of at most 8 elements, 12 in all: {0, 1}, {2},
  // {3}: a use never shares with a parameter, {4, 5}: 4 collectives.
  // Each element gets order-sensitive values, so the bits tell whether the
  // bucketed sum added in rank order.
  const float v[3] = {1e8f, 1.0f, -1e8f};
  const size_t sizes[6] = {3, 5, 100, 2, 4, 1};
  for (bool bucketed : {false, true})
    onRanks(3, [&](Communicator &c) {
      std::vector<std::vector<float>> grads;
      for (size_t i = 0; i < 6; ++i)
        grads.emplace_back(sizes[i], v[c.rank()] + float(i));
      detail::Bucketing b;
      b.smallItem = bucketed ? 8 : 0;
      b.bucket = 12;
      detail::GradientReducer reducer(c, {0, 1, 2, 3, 4, 5}, 0, nullptr, false,
                                      4, b);
      for (size_t i = 0; i < 6; ++i)
        reducer.ready(0, i, grads[i].data(), grads[i].size());
      double loss = 0;
      ASSERT_TRUE(reducer.finishStep(0, loss).isOk());
      EXPECT_EQ(reducer.sumCollectives(), bucketed ? 4u : 6u);
      for (size_t i = 0; i < 6; ++i)
        for (float x : grads[i])
          EXPECT_EQ(x,
                    ((v[0] + float(i)) + (v[1] + float(i))) + (v[2] + float(i)))
              << "item " << i;
    });
}

TEST(CommTest, ReduceScatterGivesEachRankItsChunkOfTheSumWithHalfTheBytes) {
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  // 3 chunks of 5 elements with order-sensitive values: each rank's chunk
  // is the bits sum() gives it, and the rank sent (N - 1)/N of the buffer
  // where a sum sends twice that.
  const float v[3] = {1e8f, 1.0f, -1e8f};
  onRanks(3, [&](Communicator &c) {
    std::vector<float> x(15), whole;
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = v[(size_t(c.rank()) + i) % 3] + float(i);
    whole = x;
    size_t before = c.bytesSent();
    ASSERT_TRUE(c.sum(whole.data(), whole.size()).isOk());
    size_t summed = c.bytesSent() - before;
    ASSERT_TRUE(c.reduceScatter(x.data(), 5).isOk());
    size_t scattered = c.bytesSent() - before - summed;
    EXPECT_EQ(summed, 2 * 2 * 5 * sizeof(float));
    EXPECT_EQ(scattered, 2 * 5 * sizeof(float));
    for (size_t i = 5 * size_t(c.rank()); i < 5 * size_t(c.rank() + 1); ++i)
      EXPECT_EQ(x[i], whole[i]) << "element " << i;
  });
}

TEST(CommTest, ReducerScattersEachRanksShardsWithTheBitsOfTheSum) {
  if (!glooBuiltIn())
    GTEST_SKIP() << "built without Gloo (libgloo-dev)";
  // Items 0..3 of sizes 7, 100, 2, 4 (item 3 an epilogue use) in the
  // order 0, 2, 1, 3; bucketed (items of at most 8 elements, 12 in all)
  // {0, 2}, {1}, {3}. Step 0 is scattered, step 1 summed whole: each rank's
  // shard of a parameter (setShard's) has the bits of the whole sum, with
  // chunks that do not divide the bucket evenly; the use is whole in both
  // steps; step 0 sent less.
  const float v[3] = {1e8f, 1.0f, -1e8f};
  const size_t sizes[4] = {7, 100, 2, 4};
  for (bool bucketed : {false, true})
    onRanks(3, [&](Communicator &c) {
      detail::Bucketing b;
      b.smallItem = bucketed ? 8 : 0;
      b.bucket = 12;
      detail::GradientReducer reducer(c, {0, 2, 1, 3}, 0, nullptr, false, 3, b,
                                      [](unsigned step) { return !step; });
      std::vector<std::vector<float>> grads[2];
      size_t sent[2];
      for (unsigned step : {0u, 1u}) {
        for (size_t i = 0; i < 4; ++i) {
          grads[step].emplace_back(sizes[i]);
          for (size_t e = 0; e < sizes[i]; ++e)
            grads[step][i][e] = v[(size_t(c.rank()) + e) % 3] + float(i + e);
        }
        size_t before = c.bytesSent();
        for (size_t i = 0; i < 4; ++i)
          reducer.ready(step, i, grads[step][i].data(), sizes[i]);
        double loss = 0;
        ASSERT_TRUE(reducer.finishStep(step, loss).isOk());
        sent[step] = c.bytesSent() - before;
      }
      // Step 0: {0, 2} bucketed (or 0 and 2 apart) and 1 scattered.
      EXPECT_EQ(reducer.scatterCollectives(), bucketed ? 2u : 3u);
      EXPECT_LT(sent[0], sent[1]);
      for (size_t i = 0; i < 4; ++i) {
        detail::Param p;
        detail::setShard(p, sizes[i], unsigned(c.rank()), 3);
        if (i == 3) {
          EXPECT_EQ(grads[0][i], grads[1][i]);
          continue;
        }
        for (size_t e = p.shardBegin; e < p.shardEnd; ++e)
          EXPECT_EQ(grads[0][i][e], grads[1][i][e])
              << "item " << i << " element " << e;
      }
    });
}

/// Sets the variables of `vars` (a null value unsets) for one test.
struct Env {
  explicit Env(const std::vector<std::pair<const char *, const char *>> &vars) {
    clear();
    for (auto [n, v] : vars)
      ::setenv(n, v, 1);
  }
  ~Env() { clear(); }
  static void clear() {
    for (const char *n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                          "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"})
      ::unsetenv(n);
  }
};

TEST(CommTest, RendezvousFromTheLaunchersEnvironment) {
  {
    Env e({});
    auto r = rendezvousFromEnvironment();
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_value());
  }
  {
    Env e({{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", "1234"}});
    auto r = rendezvousFromEnvironment();
    ASSERT_TRUE(r && r->has_value());
    EXPECT_EQ((*r)->rank, 1);
    EXPECT_EQ((*r)->worldSize, 3);
    EXPECT_EQ((*r)->masterPort, 1234);
    EXPECT_EQ((*r)->masterAddr, "127.0.0.1");
    EXPECT_EQ((*r)->launcher, "torchrun");
  }
  {
    Env e({{"OMPI_COMM_WORLD_RANK", "0"},
           {"OMPI_COMM_WORLD_SIZE", "2"},
           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
           {"MASTER_ADDR", "box0"}});
    auto r = rendezvousFromEnvironment();
    ASSERT_TRUE(r && r->has_value());
    EXPECT_EQ((*r)->launcher, "mpirun");
    EXPECT_EQ((*r)->masterAddr, "box0");
  }
  {
    // One process under a launcher: no communicator.
    Env e({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    auto r = rendezvousFromEnvironment();
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_value());
  }
  {
    Env e({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}});
    auto r = rendezvousFromEnvironment();
    ASSERT_FALSE(r);
    EXPECT_NE(r.getStatus().getMessage().find("MASTER_PORT='0'"),
              std::string::npos);
  }
}

TEST(CommTest, SimTimesTheAllReduceOnANetwork) {
  using namespace rp::runtime::sim;
  Expected<NetworkProfile> net = networkProfile("25gbe");
  ASSERT_TRUE(net);
  EXPECT_DOUBLE_EQ(net->gbps, 25 * 0.9 / 8);
  // Ring: 2 (N-1) messages of B/N; tree: 2 log2 N latencies and 2 B.
  double perMs = 1e-6 / net->gbps;
  EXPECT_DOUBLE_EQ(allReduceMs(1e9, 2, *net), 2 * (0.01 + 0.5e9 * perMs));
  EXPECT_DOUBLE_EQ(allReduceMs(1e9, 4, *net), 6 * (0.01 + 0.25e9 * perMs));
  EXPECT_EQ(allReduceMs(1e9, 1, *net), 0.0);
  net->algorithm = AllReduceAlgorithm::tree;
  EXPECT_DOUBLE_EQ(allReduceMs(1e9, 4, *net), 4 * 0.01 + 2e9 * perMs);
  EXPECT_FALSE(networkProfile("10gbe"));

  // One parameter of 10 M elements whose gradient lands at 5 ms of a
  // step whose jobs end at 10 ms; 1 GB/s and no latency: the ring sum of
  // 40 MB over 2 boxes takes 40 ms, 35 past the jobs (sync); async hides a
  // step (12 ms) of it.
  Plan plan;
  BufferDesc g;
  g.shape = {10000000};
  plan.buffers.push_back(g);
  plan.outputs.push_back({"grad:w", 0, 0});
  JobDesc copy;
  copy.kind = JobKind::copy;
  copy.copies.push_back(CopyDesc{});
  plan.jobs.push_back(copy);
  SimReport report;
  report.jobsMs = 10;
  report.stepMs = 12;
  report.jobEndMs = {5};
  report.tokens = 120;
  report.tokensPerSecond = 120 / 0.012;
  NetworkProfile flat{"flat", 1, 0, AllReduceAlgorithm::ring};
  AllReducePrediction sync = predictAllReduce(plan, report, 2, flat, true);
  EXPECT_DOUBLE_EQ(sync.gradientBytes, 4e7);
  EXPECT_NEAR(sync.allReduceMs, 40, 1e-9);
  EXPECT_NEAR(sync.exposedMs, 35, 1e-9);
  EXPECT_NEAR(sync.stepMs, 47, 1e-9);
  EXPECT_NEAR(sync.efficiency, 12.0 / 47, 1e-9);
  AllReducePrediction async = predictAllReduce(plan, report, 2, flat, false);
  EXPECT_NEAR(async.exposedMs, 23, 1e-9);
  EXPECT_EQ(predictAllReduce(plan, report, 1, flat, true).exposedMs, 0.0);
}

} // namespace
