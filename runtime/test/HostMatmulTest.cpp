//===- HostMatmulTest.cpp - batched matmul host kernel tests --------------===//
//
// Every transpose-flag combination, broadcast batch dimensions, shapes that
// cross the GEMM tile boundaries, every float dtype, and bitwise identical
// results for any thread count.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTestUtil.h"
#include "rp/contract/MatmulBatch.h"
#include "rp/runtime/kernels/Checks.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

struct MatmulCase {
  Shape aBatch, bBatch;
  int64_t m, k, n;
};

const MatmulCase kCases[] = {
    {{}, {}, 1, 1, 1},       {{}, {}, 7, 17, 3}, {{3}, {3}, 33, 7, 17},
    {{2, 1}, {3}, 7, 17, 5}, // Batch [2, 3] by broadcasting.
    {{3}, {}, 33, 17, 9},    // Shared rhs: rows of all batches together.
    {{}, {4}, 5, 3, 7},      // Shared lhs.
    {{2}, {}, 130, 9, 260},  // Crosses the 128 x 256 tiles.
};

Shape matrixShape(const Shape &batch, int64_t rows, int64_t cols) {
  Shape s = batch;
  s.push_back(rows);
  s.push_back(cols);
  return s;
}

/// numpy broadcast of two batch shapes (the cases are valid).
Shape broadcastBatch(const Shape &a, const Shape &b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = std::max(x, y);
  }
  return out;
}

/// Reference C = op(A) op(B) in double, with batch broadcasting.
std::vector<double> referenceMatmul(const Buffer &a, const Buffer &b, bool ta,
                                    bool tb, const MatmulCase &c,
                                    const Shape &batch) {
  int64_t numBatch = numElements(batch);
  std::vector<double> ref(numBatch * c.m * c.n);
  for (int64_t bi = 0; bi < numBatch; ++bi) {
    int64_t ai = broadcastIndex(batch, c.aBatch, bi);
    int64_t bj = broadcastIndex(batch, c.bBatch, bi);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          double x = a.get(ai * c.m * c.k + (ta ? p * c.m + i : i * c.k + p));
          double y = b.get(bj * c.k * c.n + (tb ? j * c.k + p : p * c.n + j));
          sum += x * y;
        }
        ref[(bi * c.m + i) * c.n + j] = sum;
      }
  }
  return ref;
}

TEST(HostMatmulTest, MatchesReference) {
  ThreadPool pool(3);
  Rng rng(20);
  for (DType dtype : kFloatTypes) {
    for (const MatmulCase &c : kCases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          Buffer a = randomBuffer(
              dtype, matrixShape(c.aBatch, ta ? c.k : c.m, ta ? c.m : c.k),
              rng);
          Buffer b = randomBuffer(
              dtype, matrixShape(c.bBatch, tb ? c.n : c.k, tb ? c.k : c.n),
              rng);
          Shape batch = broadcastBatch(c.aBatch, c.bBatch);
          Buffer out(dtype, matrixShape(batch, c.m, c.n));
          ASSERT_TRUE(matmul(pool, a.ref(), b.ref(), ta, tb, out.ref()).isOk())
              << describe(a.ref()) << " x " << describe(b.ref());
          EXPECT_CLOSE(out, referenceMatmul(a, b, ta, tb, c, batch))
              << " ta " << ta << " tb " << tb << " m " << c.m;
        }
      }
    }
  }
}

TEST(HostMatmulTest, EmptyContractionGivesZeros) {
  ThreadPool pool(2);
  Buffer a(DType::f32, {3, 0}), b(DType::f32, {0, 4});
  Buffer out = fromValues(DType::f32, {3, 4}, std::vector<double>(12, 7.0));
  ASSERT_TRUE(matmul(pool, a.ref(), b.ref(), false, false, out.ref()).isOk());
  EXPECT_EQ(out.values(), std::vector<double>(12, 0.0));
}

TEST(HostMatmulTest, ShapeErrors) {
  ThreadPool pool(1);
  Buffer a(DType::f32, {3, 4}), b(DType::f32, {5, 6}), out(DType::f32, {3, 6});
  EXPECT_FALSE(matmul(pool, a.ref(), b.ref(), false, false, out.ref()).isOk());
  Buffer v(DType::f32, {4});
  EXPECT_FALSE(matmul(pool, v.ref(), b.ref(), false, false, out.ref()).isOk());
  Buffer b2(DType::f32, {4, 6}), wrong(DType::f32, {6, 3});
  EXPECT_FALSE(
      matmul(pool, a.ref(), b2.ref(), false, false, wrong.ref()).isOk());
  Buffer ai(DType::i32, {3, 4}), bi(DType::i32, {4, 6}), oi(DType::i32, {3, 6});
  EXPECT_EQ(matmul(pool, ai.ref(), bi.ref(), false, false, oi.ref()).getCode(),
            StatusCode::InvalidArgument);
}

TEST(HostMatmulTest, SameBitsForAnyThreadCount) {
  Rng rng(21);
  for (DType dtype : kFloatTypes) {
    Buffer a = randomBuffer(dtype, {2, 300, 65}, rng);
    Buffer b = randomBuffer(dtype, {2, 300, 65}, rng);
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, {2, 300, 300});
      EXPECT_TRUE(
          matmul(pool, a.ref(), b.ref(), false, true, out.ref()).isOk());
      return out;
    });
  }
}

TEST(HostMatmulTest, UsesTheGemmTheBuildChose) {
  // RP_USE_OPENBLAS=ON once built the plain GEMM without a word (its
  // definition never reached the library): 13 times slower training.
  EXPECT_STREQ(gemmName(), RP_EXPECT_GEMM);
}

// The compiler counts the cuda device's GEMMs for a matmul from its shapes
// (rp/contract/MatmulBatch.h's matmulGemms, read by timing::kernelLaunches);
// the device decides from the offsets planMatmul computes
// (constantBatchStride, CudaMatmul.cpp). The two agree on every pair of
// broadcast batch shapes of rank 0 to 3 with sizes 1 to 3, both transpose
// flags of A and a row count of 1 or 5, and several have no constant
// stride (one GEMM per entry).
TEST(HostMatmulTest, TheCompilersGemmCountIsTheCudaDevices) {
  std::vector<Shape> batches{{}};
  for (size_t rank = 1; rank <= 3; ++rank) {
    size_t count = batches.size();
    for (size_t i = 0; i < count; ++i)
      if (batches[i].size() == rank - 1)
        for (int64_t d : {1, 2, 3}) {
          Shape s = batches[i];
          s.insert(s.begin(), d);
          batches.push_back(s);
        }
  }
  const int64_t k = 4, n = 2;
  unsigned checked = 0, perEntry = 0;
  for (const Shape &ab : batches)
    for (const Shape &bb : batches) {
      bool fits = true;
      for (size_t i = 0; i < std::min(ab.size(), bb.size()); ++i) {
        int64_t x = ab[ab.size() - 1 - i], y = bb[bb.size() - 1 - i];
        fits = fits && (x == y || x == 1 || y == 1);
      }
      if (!fits)
        continue;
      for (int64_t m : {1, 5})
        for (bool ta : {false, true}) {
          Buffer a(DType::f32, matrixShape(ab, ta ? k : m, ta ? m : k));
          Buffer b(DType::f32, matrixShape(bb, k, n));
          Buffer out(DType::f32, matrixShape(broadcastBatch(ab, bb), m, n));
          kernels::MatmulProblem p;
          ASSERT_TRUE(
              kernels::planMatmul(a.ref(), b.ref(), ta, false, out.ref(), p)
                  .isOk());
          int64_t step = 0;
          bool strided = rp::plan::constantBatchStride(p.aOffset, step) &&
                         rp::plan::constantBatchStride(p.bOffset, step);
          int64_t device = strided ? 1 : p.batch;
          EXPECT_EQ(rp::plan::matmulGemms(ab, bb, m, ta), device)
              << describe(a.ref()) << (ta ? " (transposed)" : "") << " x "
              << describe(b.ref());
          ++checked;
          perEntry += device > 1;
        }
    }
  EXPECT_GT(checked, 1000u);
  EXPECT_GT(perEntry, 50u);
}

} // namespace
