//===- CudaMoEEmuTest.cpp - the cuda MoE kernels on the CPU vs the host ---===//
//
// lib/cuda/CudaMoE.cu and CudaMoEGemm.cu compiled as host C++ (CudaEmu.h,
// emulate.py) and run against host/HostMoE.cpp on the same data, so that the
// kernels' logic is tested where no GPU is attached. The grouped matmul's
// cuBLAS call is replaced by a plain column-major batched GEMM given the same
// arguments as CudaMoEDispatch.cpp's cublasGemmBatchedEx, and the weight
// gradient's CUTLASS grouped GEMM by a loop over the problems the kernels
// write for it. On a GPU the
// conformance suite (DeviceKernelConformanceTest) runs the real thing.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "CudaCommon.cuh"
#include "CudaMoE.h"

#include "rp/runtime/Half.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/host/MoE.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

// The kernels and launchers, launches rewritten by emulate.py.
#include "CudaMoE.emu.inc"
#include "CudaMoEGemm.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

class CudaMoEEmu : public ::testing::Test {
protected:
  std::vector<float> random(int64_t n) {
    std::uniform_real_distribution<double> d(-3, 3);
    std::vector<float> v(n);
    for (float &x : v)
      x = float(d(rng));
    return v;
  }
  template <typename T>
  static TensorRef ref(std::vector<T> &v, DType dtype, Shape shape) {
    return TensorRef{v.data(), dtype, shape};
  }
  static double maxDiff(const std::vector<float> &a,
                        const std::vector<float> &b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i)
      m = std::max(m, double(std::fabs(a[i] - b[i])));
    return m;
  }

  std::mt19937_64 rng{7};
  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 42};
};

/// cublasGemmBatchedEx in f32: C = op(A) B, column-major.
void batchedGemm(bool transposeA, int m, int n, int k, void *const *a, int lda,
                 void *const *b, int ldb, void *const *c, int ldc, int count) {
  for (int e = 0; e < count; ++e) {
    const float *A = static_cast<const float *>(a[e]);
    const float *B = static_cast<const float *>(b[e]);
    float *C = static_cast<float *>(c[e]);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float s = 0;
        for (int l = 0; l < k; ++l)
          s += (transposeA ? A[i * lda + l] : A[l * lda + i]) * B[j * ldb + l];
        C[j * ldc + i] = s;
      }
  }
}

TEST_F(CudaMoEEmu, RouteAndItsGradientAreTheHosts) {
  struct Mode {
    bool before, normalize;
    int64_t n, k;
  };
  // Softmax first (renormalised or not), top-k first, and 64 experts top-1.
  for (Mode m : {Mode{true, false, 6, 3}, Mode{true, true, 6, 3},
                 Mode{false, false, 6, 3}, Mode{true, false, 64, 1}}) {
    SCOPED_TRACE(std::to_string(m.n) + " experts, top-" + std::to_string(m.k) +
                 (m.before ? ", softmax first" : ", top-k first"));
    const int64_t T = 9, n = m.n, k = m.k;
    const host::MoESoftmax softmax =
        m.before ? host::MoESoftmax::before : host::MoESoftmax::after;
    std::vector<float> x = random(T * n), w(T * k), wCuda(T * k, 9);
    std::vector<int64_t> e(T * k), eCuda(T * k, -1);
    ASSERT_TRUE(host::moeRoute(pool, ref(x, DType::f32, {T, n}), softmax,
                               m.normalize, ref(w, DType::f32, {T, k}),
                               ref(e, DType::i64, {T, k}))
                    .isOk());
    launchMoERoute(ctx, DType::f32, m.before, m.normalize, x.data(), T, n, k,
                   wCuda.data(), eCuda.data());
    EXPECT_EQ(eCuda, e);
    EXPECT_EQ(wCuda, w);
    std::vector<float> g = random(T * k), dl(T * n), dlCuda(T * n, 9);
    ASSERT_TRUE(host::moeRouteGrad(pool, ref(x, DType::f32, {T, n}),
                                   ref(e, DType::i64, {T, k}),
                                   ref(g, DType::f32, {T, k}), softmax,
                                   m.normalize, ref(dl, DType::f32, {T, n}))
                    .isOk());
    launchMoERouteGrad(ctx, DType::f32, m.before, m.normalize, x.data(),
                       e.data(), g.data(), T, n, k, dlCuda.data());
    EXPECT_EQ(dlCuda, dl);
  }
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaMoEEmu, DispatchAndCombineAreTheHosts) {
  // 400 choices: two blocks of the dispatch's scan.
  const int64_t T = 200, k = 2, H = 3, E = 5;
  std::vector<float> x = random(T * H);
  std::vector<int64_t> experts(T * k);
  for (int64_t &e : experts)
    e = int64_t(rng() % E);
  std::vector<float> rows(T * k * H), rowsCuda(T * k * H, 9);
  std::vector<int32_t> pos(T * k), posCuda(T * k), counts(E), countsCuda(E);
  ASSERT_TRUE(host::moeDispatch(pool, ref(x, DType::f32, {T, H}),
                                ref(experts, DType::i64, {T, k}),
                                ref(rows, DType::f32, {T * k, H}),
                                ref(pos, DType::i32, {T, k}),
                                ref(counts, DType::i32, {E}))
                  .isOk());
  std::vector<int64_t> offsets(moeDispatchScratchBytes(E) / sizeof(int64_t));
  launchMoEDispatch(ctx, sizeof(float), x.data(), experts.data(), T, k, H, E,
                    rowsCuda.data(), posCuda.data(), countsCuda.data(),
                    offsets.data());
  EXPECT_EQ(posCuda, pos);
  EXPECT_EQ(countsCuda, counts);
  EXPECT_EQ(rowsCuda, rows);

  std::vector<float> w = random(T * k), y(T * H), yCuda(T * H, 9);
  ASSERT_TRUE(host::moeCombine(pool, ref(rows, DType::f32, {T * k, H}),
                               ref(pos, DType::i32, {T, k}),
                               ref(w, DType::f32, {T, k}),
                               ref(y, DType::f32, {T, H}))
                  .isOk());
  launchMoECombine(ctx, DType::f32, rows.data(), T * k, pos.data(), w.data(), T,
                   k, H, yCuda.data());
  EXPECT_EQ(yCuda, y);

  std::vector<float> dy = random(T * H), dr(T * k * H), drCuda(T * k * H, 9);
  std::vector<float> dw(T * k), dwCuda(T * k, 9);
  ASSERT_TRUE(host::moeCombineGrad(
                  pool, ref(rows, DType::f32, {T * k, H}),
                  ref(pos, DType::i32, {T, k}), ref(w, DType::f32, {T, k}),
                  ref(dy, DType::f32, {T, H}), ref(dr, DType::f32, {T * k, H}),
                  ref(dw, DType::f32, {T, k}))
                  .isOk());
  std::vector<int32_t> seen(moeCombineGradScratchBytes(T * k) / 4);
  launchMoECombineGrad(ctx, DType::f32, rows.data(), T * k, pos.data(),
                       w.data(), dy.data(), T, k, H, drCuda.data(),
                       dwCuda.data(), seen.data());
  EXPECT_EQ(drCuda, dr);
  EXPECT_EQ(dwCuda, dw);
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaMoEEmu, GroupedMatmulAndItsWeightGradientAreTheHosts) {
  for (int layout = 0; layout < 4; ++layout) {
    // Small groups (partial tiles only), then groups of 100..139 rows in
    // 300 (full 128-row tiles, partial ones, unused rows at the end).
    const bool transposeB = layout & 1, big = layout & 2;
    SCOPED_TRACE(std::string(big ? "large" : "small") +
                 (transposeB ? ", transposed" : ""));
    const int64_t N = big ? 300 : 10, E = big ? 2 : 4;
    const int64_t kIn = big ? 20 : 5, nOut = big ? 18 : 6;
    std::vector<int32_t> counts(E);
    for (int32_t &c : counts)
      c = big ? 100 + int32_t(rng() % 40) : 1 + int32_t(rng() % 2);
    const Shape ws = transposeB ? Shape{E, nOut, kIn} : Shape{E, kIn, nOut};
    std::vector<float> x = random(N * kIn), w = random(E * kIn * nOut);
    std::vector<float> y(N * nOut), yCuda(N * nOut, 9);
    ASSERT_TRUE(host::moeGroupedMatmul(pool, ref(x, DType::f32, {N, kIn}),
                                       ref(w, DType::f32, ws),
                                       ref(counts, DType::i32, {E}), transposeB,
                                       ref(y, DType::f32, {N, nOut}))
                    .isOk());
    const MoEGemmTiles tiles = moeGemmTiles(N, E, nOut, sizeof(float));
    std::vector<char> scratch(tiles.bytes);
    launchMoEGemmPlan(ctx, tiles, counts.data(), E, N, x.data(), kIn, w.data(),
                      kIn * nOut, yCuda.data(), nOut, sizeof(float),
                      scratch.data());
    void *const *p =
        reinterpret_cast<void *const *>(scratch.data() + tiles.pointersAt);
    const int count = int(tiles.numTiles);
    batchedGemm(transposeB, int(nOut), int(tiles.tileRows), int(kIn), p,
                int(transposeB ? kIn : nOut), p + count, int(kIn),
                p + 2 * count, int(nOut), count);
    launchMoEGemmFinish(ctx, tiles, E, N, nOut, sizeof(float), yCuda.data(),
                        scratch.data());
    EXPECT_LE(maxDiff(yCuda, y), 1e-4);

    std::vector<float> dy = random(N * nOut), dw(E * kIn * nOut);
    std::vector<float> dwCuda(E * kIn * nOut, 9);
    ASSERT_TRUE(host::moeGroupedMatmulWGrad(pool, ref(x, DType::f32, {N, kIn}),
                                            ref(dy, DType::f32, {N, nOut}),
                                            ref(counts, DType::i32, {E}),
                                            transposeB, ref(dw, DType::f32, ws))
                    .isOk());
    std::vector<int64_t> offsets(E + 1);
    launchMoEWGrad(ctx, DType::f32, counts.data(), E, N,
                   transposeB ? dy.data() : x.data(), transposeB ? nOut : kIn,
                   transposeB ? x.data() : dy.data(), transposeB ? kIn : nOut,
                   dwCuda.data(), offsets.data());
    EXPECT_LE(maxDiff(dwCuda, dw), 1e-4);
  }
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaMoEEmu, HalfStorageIsTheHosts) {
  // bf16 and f16 storage (f32 arithmetic): route rounds the probabilities
  // it picks among to storage, combine and its gradient store once.
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtypeName(dtype));
    const int64_t T = 11, n = 8, k = 2, H = 5;
    const size_t es = dtypeSize(dtype);
    auto buffer = [&](int64_t count, bool fill) {
      std::vector<uint8_t> b(count * es);
      std::vector<float> v = random(count);
      for (int64_t i = 0; fill && i < count; ++i) {
        if (dtype == DType::bf16)
          reinterpret_cast<bf16 *>(b.data())[i] = bf16(v[i]);
        else
          reinterpret_cast<f16 *>(b.data())[i] = f16(v[i]);
      }
      return b;
    };
    std::vector<uint8_t> logits = buffer(T * n, true), w = buffer(T * k, false);
    std::vector<uint8_t> wCuda = w;
    std::vector<int64_t> e(T * k), eCuda(T * k, -1);
    ASSERT_TRUE(host::moeRoute(
                    pool, ref(logits, dtype, {T, n}), host::MoESoftmax::before,
                    true, ref(w, dtype, {T, k}), ref(e, DType::i64, {T, k}))
                    .isOk());
    launchMoERoute(ctx, dtype, true, true, logits.data(), T, n, k, wCuda.data(),
                   eCuda.data());
    // In bf16 equal probabilities are common: both pick the same experts
    // with the same weights, but order an exact tie differently (the host
    // as PyTorch's CPU topk, the cuda kernel lowest expert first).
    EXPECT_EQ(wCuda, w);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<std::pair<double, int64_t>> host, cuda;
      for (int64_t j = 0; j < k; ++j) {
        double v = dtype == DType::bf16
                       ? double(reinterpret_cast<bf16 *>(w.data())[t * k + j])
                       : double(reinterpret_cast<f16 *>(w.data())[t * k + j]);
        host.emplace_back(v, e[t * k + j]);
        cuda.emplace_back(v, eCuda[t * k + j]);
      }
      std::sort(host.begin(), host.end());
      std::sort(cuda.begin(), cuda.end());
      EXPECT_EQ(cuda, host) << "token " << t;
    }

    std::vector<uint8_t> rows = buffer(T * k * H, true),
                         y = buffer(T * H, false);
    std::vector<uint8_t> yCuda = y;
    std::vector<int32_t> pos(T * k);
    for (int64_t i = 0; i < T * k; ++i)
      pos[i] = int32_t((i * 7) % (T * k)); // A permutation: 7 is coprime.
    ASSERT_TRUE(host::moeCombine(pool, ref(rows, dtype, {T * k, H}),
                                 ref(pos, DType::i32, {T, k}),
                                 ref(w, dtype, {T, k}), ref(y, dtype, {T, H}))
                    .isOk());
    launchMoECombine(ctx, dtype, rows.data(), T * k, pos.data(), w.data(), T, k,
                     H, yCuda.data());
    EXPECT_EQ(yCuda, y);

    std::vector<uint8_t> dy = buffer(T * H, true),
                         dr = buffer(T * k * H, false);
    std::vector<uint8_t> dw = buffer(T * k, false), drCuda = dr, dwCuda = dw;
    ASSERT_TRUE(
        host::moeCombineGrad(pool, ref(rows, dtype, {T * k, H}),
                             ref(pos, DType::i32, {T, k}),
                             ref(w, dtype, {T, k}), ref(dy, dtype, {T, H}),
                             ref(dr, dtype, {T * k, H}), ref(dw, dtype, {T, k}))
            .isOk());
    std::vector<int32_t> seen(T * k);
    launchMoECombineGrad(ctx, dtype, rows.data(), T * k, pos.data(), w.data(),
                         dy.data(), T, k, H, drCuda.data(), dwCuda.data(),
                         seen.data());
    EXPECT_EQ(drCuda, dr);
    EXPECT_EQ(dwCuda, dw);
  }
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaMoEEmu, BadDataIsReportedNotUsed) {
  // Counts that overflow the rows: reported, and every group left empty.
  std::vector<int32_t> counts{6, 6};
  std::vector<int64_t> offsets(3);
  std::vector<float> a(10 * 5, 1), b(10 * 6, 1), dw(2 * 5 * 6, 9);
  launchMoEWGrad(ctx, DType::f32, counts.data(), 2, 10, a.data(), 5, b.data(),
                 6, dw.data(), offsets.data());
  EXPECT_EQ(record.code, kGroupsOverflow);
  EXPECT_EQ(record.position, 1);
  EXPECT_EQ(record.value, 6);
  EXPECT_EQ(dw, std::vector<float>(dw.size(), 0.0f));

  // An expert out of range: reported, its row not written.
  record = {};
  std::vector<float> x(2 * 3, 1), rows(4 * 3, 9);
  std::vector<int64_t> experts{0, 7, 1, 0};
  std::vector<int32_t> pos(4, 0), c(2);
  std::vector<int64_t> scratch(3);
  launchMoEDispatch(ctx, sizeof(float), x.data(), experts.data(), 2, 2, 3, 2,
                    rows.data(), pos.data(), c.data(), scratch.data());
  EXPECT_EQ(record.code, kExpertOutOfRange);
  EXPECT_EQ(record.position, 1);
  EXPECT_EQ(record.value, 7);
  EXPECT_EQ(record.limit, 2);

  // A position named twice in combine_grad.
  record = {};
  std::vector<int32_t> twice{0, 0}, seen(2);
  std::vector<float> r(2 * 3, 1), g(1 * 3, 1), dr(2 * 3);
  launchMoECombineGrad(ctx, DType::f32, r.data(), 2, twice.data(), nullptr,
                       g.data(), 1, 2, 3, dr.data(), nullptr, seen.data());
  EXPECT_EQ(record.code, kDuplicatePosition);
  EXPECT_EQ(record.value, 0);
}

/// What CUTLASS's grouped GEMM computes from the problems
/// launchMoEGroupedProblems wrote (CudaMoE.h's layout): per problem, A
/// column-major, B and D row-major, k summed in order.
void groupedGemmOfProblems(const MoEGroupedProblems &l, int64_t experts,
                           const char *base) {
  auto *sizes = reinterpret_cast<const int32_t *>(base + l.sizesAt);
  auto *ptrs = reinterpret_cast<void *const *>(base + l.pointersAt);
  auto *lds = reinterpret_cast<const int64_t *>(base + l.ldsAt);
  for (int64_t e = 0; e < experts; ++e) {
    const auto *a = static_cast<const float *>(ptrs[e]);
    const auto *b = static_cast<const float *>(ptrs[experts + e]);
    auto *d = static_cast<float *>(ptrs[2 * experts + e]);
    for (int32_t i = 0; i < sizes[3 * e]; ++i)
      for (int32_t j = 0; j < sizes[3 * e + 1]; ++j) {
        float acc = 0;
        for (int32_t r = 0; r < sizes[3 * e + 2]; ++r)
          acc += a[i + r * lds[e]] * b[r * lds[experts + e] + j];
        d[i * lds[2 * experts + e] + j] = acc;
      }
  }
}

// The weight gradient's grouped-GEMM problems (CudaMoECutlass.cu reads them
// on the device): an empty expert is a 0 x 0 x 0 problem over the zeroed
// gradient, the others the host's sums; both layouts of the weight.
TEST_F(CudaMoEEmu, GroupedGemmProblemsAreTheHostsWeightGradient) {
  const int64_t N = 14, E = 4, kIn = 5, nOut = 6;
  std::vector<int32_t> counts{3, 0, 5, 4};
  const MoEGroupedProblems l = moeGroupedProblems(E);
  for (bool transposeB : {false, true}) {
    SCOPED_TRACE(transposeB ? "transposed" : "plain");
    const Shape ws = transposeB ? Shape{E, nOut, kIn} : Shape{E, kIn, nOut};
    std::vector<float> x = random(N * kIn), dy = random(N * nOut);
    std::vector<float> dw(E * kIn * nOut), dwCuda(E * kIn * nOut, 0);
    ASSERT_TRUE(host::moeGroupedMatmulWGrad(pool, ref(x, DType::f32, {N, kIn}),
                                            ref(dy, DType::f32, {N, nOut}),
                                            ref(counts, DType::i32, {E}),
                                            transposeB, ref(dw, DType::f32, ws))
                    .isOk());
    std::vector<int64_t> scratch(l.bytes / sizeof(int64_t) + 1);
    char *base = reinterpret_cast<char *>(scratch.data());
    launchMoEGroupedProblems(
        ctx, l, counts.data(), E, N, transposeB ? dy.data() : x.data(),
        transposeB ? nOut : kIn, transposeB ? x.data() : dy.data(),
        transposeB ? kIn : nOut, dwCuda.data(), sizeof(float), base);
    const auto *sizes = reinterpret_cast<const int32_t *>(base + l.sizesAt);
    EXPECT_EQ(sizes[3 * 1] + sizes[3 * 1 + 1] + sizes[3 * 1 + 2], 0);
    EXPECT_EQ(sizes[3 * 2 + 2], 5);
    groupedGemmOfProblems(l, E, base);
    EXPECT_LE(maxDiff(dwCuda, dw), 1e-4);
    for (int64_t i = kIn * nOut; i < 2 * kIn * nOut; ++i) // Expert 1: empty.
      EXPECT_EQ(dwCuda[size_t(i)], 0.0f);
  }
  EXPECT_EQ(record.code, 0);
  // Counts past the rows: reported, every problem empty.
  std::vector<int32_t> bad{9, 9, 0, 0};
  std::vector<int64_t> scratch(l.bytes / sizeof(int64_t) + 1);
  std::vector<float> p(N * kIn), q(N * nOut), dw(E * kIn * nOut);
  launchMoEGroupedProblems(ctx, l, bad.data(), E, N, p.data(), kIn, q.data(),
                           nOut, dw.data(), sizeof(float), scratch.data());
  EXPECT_EQ(record.code, kGroupsOverflow);
  const auto *sizes = reinterpret_cast<const int32_t *>(
      reinterpret_cast<char *>(scratch.data()) + l.sizesAt);
  for (int64_t i = 0; i < 3 * E; ++i)
    EXPECT_EQ(sizes[i], 0);
}

} // namespace
