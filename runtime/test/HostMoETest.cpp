//===- HostMoETest.cpp - mixture-of-experts host kernel tests -------------===//
//
// The dispatch layout (grouped by expert, then token, then slot) and the
// counts; grouped matmul against a per-row f64 reference with an expert no
// row reaches and rows past the groups; the whole block (route, dispatch,
// grouped matmuls and their weight gradients, combine and its gradient,
// the route's gradient) bitwise identical at 1 and 4 threads on enough
// tokens for several chunks; and the messages of bad routing data.
// (The gradients' values are checked against PyTorch in float64 by
// test/Runtime/moe-vjp-rules.test, the top-k tie order too.)
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTestUtil.h"

#include "rp/runtime/host/MoE.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

Buffer experts(const std::vector<std::vector<int64_t>> &rows) {
  Buffer b(DType::i64, {int64_t(rows.size()), int64_t(rows[0].size())});
  int64_t i = 0;
  for (const auto &r : rows)
    for (int64_t e : r)
      b.set(i++, double(e));
  return b;
}

TEST(HostMoETest, DispatchGroupsByExpertThenToken) {
  ThreadPool pool(2);
  Rng rng(1);
  Buffer x = randomBuffer(DType::f32, {4, 3}, rng);
  Buffer e = experts({{2, 0}, {0, 3}, {3, 2}, {0, 2}});
  Buffer rows(DType::f32, {8, 3}), pos(DType::i32, {4, 2}),
      counts(DType::i32, {4});
  ASSERT_TRUE(
      moeDispatch(pool, x.ref(), e.ref(), rows.ref(), pos.ref(), counts.ref())
          .isOk());
  // Expert 0: (0,1) (1,0) (3,0); expert 1: none; expert 2: (0,0) (2,1)
  // (3,1); expert 3: (1,1) (2,0).
  EXPECT_EQ(counts.values(), (std::vector<double>{3, 0, 3, 2}));
  EXPECT_EQ(pos.values(), (std::vector<double>{3, 0, 1, 6, 7, 4, 2, 5}));
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t h = 0; h < 3; ++h)
      EXPECT_EQ(rows.get(int64_t(pos.get(i)) * 3 + h), x.get((i / 2) * 3 + h));
}

TEST(HostMoETest, GroupedMatmulMatchesPerRowProducts) {
  ThreadPool pool(3);
  Rng rng(2);
  const int64_t E = 3, K = 5, N = 4, R = 9;
  Buffer x = randomBuffer(DType::f32, {R, K}, rng);
  Buffer counts(DType::i32, {E});
  const double c[] = {4, 0, 3}; // rows 7 and 8 belong to no group
  for (int64_t e = 0; e < E; ++e)
    counts.set(e, c[e]);
  for (bool transposeB : {false, true}) {
    Shape ws = transposeB ? Shape{E, N, K} : Shape{E, K, N};
    Buffer w = randomBuffer(DType::f32, ws, rng);
    Buffer y(DType::f32, {R, N});
    for (int64_t i = 0; i < y.size(); ++i)
      y.set(i, 7.0); // stale contents must not survive
    ASSERT_TRUE(moeGroupedMatmul(pool, x.ref(), w.ref(), counts.ref(),
                                 transposeB, y.ref())
                    .isOk());
    int64_t row = 0;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < c[e]; ++r, ++row)
        for (int64_t n = 0; n < N; ++n) {
          double ref = 0;
          for (int64_t k = 0; k < K; ++k)
            ref += x.get(row * K + k) * w.get(transposeB ? (e * N + n) * K + k
                                                         : (e * K + k) * N + n);
          EXPECT_NEAR(y.get(row * N + n), ref, 1e-5);
        }
    for (int64_t i = 7 * N; i < R * N; ++i)
      EXPECT_EQ(y.get(i), 0.0);
    // The weight gradient of the expert without rows is zero.
    Buffer dw(DType::f32, ws);
    ASSERT_TRUE(moeGroupedMatmulWGrad(pool, x.ref(), y.ref(), counts.ref(),
                                      transposeB, dw.ref())
                    .isOk());
    for (int64_t i = K * N; i < 2 * K * N; ++i)
      EXPECT_EQ(dw.get(i), 0.0);
  }
}

/// Every kernel of a block's forward and backward; returns the outputs.
std::vector<Buffer> runBlock(int threads) {
  ThreadPool pool(threads);
  Rng rng(3);
  const int64_t T = 1500, H = 64, E = 8, K = 2, F = 48;
  Buffer logits = randomBuffer(DType::f32, {T, E}, rng, -2, 2);
  Buffer x = randomBuffer(DType::f32, {T, H}, rng);
  Buffer w1 = randomBuffer(DType::f32, {E, F, H}, rng);
  Buffer dy = randomBuffer(DType::f32, {T, H}, rng);
  Buffer wts(DType::f32, {T, K}), ex(DType::i64, {T, K});
  Buffer rows(DType::f32, {T * K, H}), pos(DType::i32, {T, K}),
      counts(DType::i32, {E});
  Buffer h(DType::f32, {T * K, F}), back(DType::f32, {T * K, H});
  Buffer out(DType::f32, {T, H}), drows(DType::f32, {T * K, H}),
      dwts(DType::f32, {T, K}), dlogits(DType::f32, {T, E}),
      dw1(DType::f32, {E, F, H});
  EXPECT_TRUE(moeRoute(pool, logits.ref(), MoESoftmax::before, true, wts.ref(),
                       ex.ref())
                  .isOk());
  EXPECT_TRUE(
      moeDispatch(pool, x.ref(), ex.ref(), rows.ref(), pos.ref(), counts.ref())
          .isOk());
  EXPECT_TRUE(
      moeGroupedMatmul(pool, rows.ref(), w1.ref(), counts.ref(), true, h.ref())
          .isOk());
  EXPECT_TRUE(
      moeGroupedMatmul(pool, h.ref(), w1.ref(), counts.ref(), false, back.ref())
          .isOk());
  EXPECT_TRUE(
      moeCombine(pool, back.ref(), pos.ref(), wts.ref(), out.ref()).isOk());
  EXPECT_TRUE(moeCombineGrad(pool, back.ref(), pos.ref(), wts.ref(), dy.ref(),
                             drows.ref(), dwts.ref())
                  .isOk());
  EXPECT_TRUE(moeGroupedMatmulWGrad(pool, rows.ref(), h.ref(), counts.ref(),
                                    true, dw1.ref())
                  .isOk());
  EXPECT_TRUE(moeRouteGrad(pool, logits.ref(), ex.ref(), dwts.ref(),
                           MoESoftmax::before, true, dlogits.ref())
                  .isOk());
  return {wts, ex, rows, pos, counts, h, out, drows, dwts, dw1, dlogits};
}

TEST(HostMoETest, SameBitsForAnyThreadCount) {
  std::vector<Buffer> one = runBlock(1), four = runBlock(4);
  ASSERT_EQ(one.size(), four.size());
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_TRUE(one[i].sameBits(four[i])) << "output " << i;
}

TEST(HostMoETest, BadRoutingDataIsNamed) {
  ThreadPool pool(1);
  Rng rng(4);
  Buffer x = randomBuffer(DType::f32, {2, 3}, rng);
  Buffer e = experts({{0, 1}, {4, 1}});
  Buffer rows(DType::f32, {4, 3}), pos(DType::i32, {2, 2}),
      counts(DType::i32, {4});
  Status s =
      moeDispatch(pool, x.ref(), e.ref(), rows.ref(), pos.ref(), counts.ref());
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.getMessage().find("moe_dispatch: expert 4 of token 1 is outside "
                                "[0, 4)"),
            std::string::npos)
      << s.getMessage();

  // Two choices writing one row of the rows' gradient.
  Buffer dup(DType::i32, {2, 2});
  for (int64_t i = 0; i < 4; ++i)
    dup.set(i, i == 3 ? 0.0 : double(i));
  Buffer dy = randomBuffer(DType::f32, {2, 3}, rng);
  Buffer drows(DType::f32, {4, 3});
  s = moeCombineGrad(pool, rows.ref(), dup.ref(), std::nullopt, dy.ref(),
                     drows.ref(), std::nullopt);
  EXPECT_NE(s.getMessage().find("row 0 is named by two choices"),
            std::string::npos)
      << s.getMessage();

  // Groups larger than the rows.
  Buffer w = randomBuffer(DType::f32, {4, 3, 3}, rng);
  Buffer big(DType::i32, {4});
  for (int64_t i = 0; i < 4; ++i)
    big.set(i, 2);
  Buffer y(DType::f32, {4, 3});
  s = moeGroupedMatmul(pool, rows.ref(), w.ref(), big.ref(), false, y.ref());
  EXPECT_NE(
      s.getMessage().find("expert 2 has 2 rows; the groups must fit in the "
                          "4 rows"),
      std::string::npos)
      << s.getMessage();
}

} // namespace
