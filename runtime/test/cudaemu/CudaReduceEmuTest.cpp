//===- CudaReduceEmuTest.cpp - the cuda reduce on the CPU vs the host -----===//
//
// lib/cuda/CudaNN.cu compiled as host C++ (CudaEmu.h, emulate.py); its
// `reduce` run against host/HostNN.cpp's on the same data. Few outputs
// with many elements each take the two-level path (partials per chunk of
// rows, then the chunks in order), whose sums are in another order than the
// host's single fold, so sums and means agree within rounding; max and min
// are exact. On a GPU the conformance suite runs the real kernels.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostKernelsTestUtil.h"

#include "CudaCommon.cuh"
#include "CudaDispatchChecks.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/host/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>

// The kernels and launchers, launches rewritten by emulate.py.
#include "CudaNN.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::testing::Buffer;
using rp::runtime::testing::randomBuffer;
using rp::runtime::testing::Rng;

namespace {

using kernels::ReduceKind;

class CudaReduceEmu : public ::testing::Test {
protected:
  /// Reduces `x` over `dims` on both devices; returns the scratch the
  /// emulated device asked for (0: one level).
  size_t check(const Buffer &x, ReduceKind kind, std::vector<int64_t> dims,
               double tolerance) {
    ReduceMap map;
    Shape shape;
    EXPECT_TRUE(
        cuda::detail::reduceMap("reduce", x.ref(), dims, false, map, shape)
            .isOk());
    Buffer want(x.dtype, shape), got(x.dtype, shape);
    EXPECT_TRUE(
        host::reduce(pool, kind, x.ref(), dims, false, want.ref()).isOk());
    const size_t bytes = reduceScratchBytes(map, got.size());
    std::vector<uint64_t> scratch(bytes / 8 + 1, 0x7ff4dead7ff4deadull);
    EXPECT_EQ(launchReduce(ctx, x.dtype, int(kind), map, x.data(),
                           got.ref().data, got.size(), scratch.data()),
              cudaSuccess);
    for (int64_t i = 0; i < want.size(); ++i) {
      double w = want.get(i), g = got.get(i);
      EXPECT_NEAR(g, w, tolerance * std::max(1.0, std::fabs(w)))
          << "output " << i << " of " << int(kind);
    }
    return bytes;
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 42};
};

// A bias gradient's shape, [rows, columns] -> [columns]: two levels.
TEST_F(CudaReduceEmu, LeadingRowsTwoLevels) {
  Rng rng(11);
  Buffer x = randomBuffer(DType::f32, {300, 40}, rng, -2, 2);
  for (ReduceKind kind :
       {ReduceKind::sum, ReduceKind::mean, ReduceKind::max, ReduceKind::min})
    EXPECT_GT(check(x, kind, {0}, kind <= ReduceKind::mean ? 1e-5 : 0), 0u);
}

// Reduced dimensions around a kept one, and 16-bit storage: the chunks
// start in the middle of a reduced index.
TEST_F(CudaReduceEmu, SplitDimensions) {
  Rng rng(12);
  for (DType dtype : {DType::f32, DType::bf16}) {
    Buffer x = randomBuffer(dtype, {7, 3, 45}, rng, -2, 2);
    double tolerance = dtype == DType::f32 ? 1e-5 : 1e-2;
    EXPECT_GT(check(x, ReduceKind::sum, {0, 2}, tolerance), 0u);
    EXPECT_GT(check(x, ReduceKind::mean, {0, 2}, tolerance), 0u);
    EXPECT_GT(check(x, ReduceKind::max, {0, 2}, 0), 0u);
  }
  Buffer ints = randomBuffer(DType::i32, {130, 2}, rng, -50, 50);
  EXPECT_GT(check(ints, ReduceKind::sum, {0}, 0), 0u);
}

// Few elements per output, or many outputs: one level, no scratch.
TEST_F(CudaReduceEmu, ShortRowsOneLevel) {
  Rng rng(13);
  Buffer x = randomBuffer(DType::f32, {5, 40}, rng, -2, 2);
  EXPECT_EQ(check(x, ReduceKind::sum, {0}, 1e-6), 0u);
  EXPECT_EQ(check(x, ReduceKind::max, {1}, 0), 0u);
}

// The unfused cross_entropy and its gradient (CudaNN.cu over the fused
// loss's row kernels): a block per row, so the row sums are in a tree
// order, not the host's 8 lanes; the loss total in the host's blocks of 64
// rows. 140 rows (three blocks), ignored labels, i32 and i64 labels.
TEST_F(CudaReduceEmu, UnfusedCrossEntropyIsTheHostsWithinRounding) {
  Rng rng(14);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (DType labelType : {DType::i64, DType::i32}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " logits, " +
                   dtypeName(labelType) + " labels");
      const int64_t rows = 140, classes = 300, ignore = -100;
      Buffer logits = randomBuffer(dtype, {rows, classes}, rng, -6, 6);
      Buffer labels(labelType, {rows});
      for (int64_t r = 0; r < rows; ++r)
        labels.set(r, r % 7 == 3 ? ignore : (r * 37) % classes);
      Buffer wantSum(DType::f32, {1}), gotSum(DType::f32, {1});
      Buffer wantCount(DType::i64, {1}), gotCount(DType::i64, {1});
      ASSERT_TRUE(host::crossEntropy(pool, logits.ref(), labels.ref(), ignore,
                                     wantSum.ref(), wantCount.ref())
                      .isOk());
      std::vector<uint64_t> scratch(crossEntropyScratchBytes(rows) / 8 + 1,
                                    0x7ff4dead7ff4deadull);
      ASSERT_EQ(launchCrossEntropy(ctx, dtype, logits.data(), labels.data(),
                                   labelType == DType::i64, ignore, rows,
                                   classes, gotSum.ref().data,
                                   gotCount.ref().data, scratch.data()),
                cudaSuccess);
      EXPECT_EQ(gotCount.get(0), wantCount.get(0));
      EXPECT_EQ(gotCount.get(0), rows - 20);
      EXPECT_NEAR(gotSum.get(0), wantSum.get(0), 1e-5 * wantSum.get(0));

      const float scale = 0.125f;
      Buffer want(dtype, {rows, classes}), got(dtype, {rows, classes});
      for (int64_t i = 0; i < got.size(); ++i)
        got.set(i, 99); // Ignored rows must be written too.
      ASSERT_TRUE(host::crossEntropyGrad(pool, logits.ref(), labels.ref(),
                                         ignore, scale, want.ref())
                      .isOk());
      ASSERT_EQ(launchCrossEntropyGrad(ctx, dtype, logits.data(), labels.data(),
                                       labelType == DType::i64, ignore, rows,
                                       classes, DType::f32, &scale,
                                       got.ref().data),
                cudaSuccess);
      const double tolerance = dtype == DType::f32 ? 1e-7 : 1e-3;
      for (int64_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got.get(i), want.get(i), tolerance) << "element " << i;
    }
  }
  EXPECT_EQ(record.code, 0);
}

// softmax and log_softmax over the last dimension, forward and backward:
// 8 threads a row, one per orderedSum lane (CudaNN.cu's lane kernels), so
// every output is bitwise the host's: rows not a multiple of a block's 16,
// widths not a multiple of 8 and narrower than 8, a -inf in a row, in f32,
// bf16, f16 and f64. Over a middle dimension the one-thread rows run.
TEST_F(CudaReduceEmu, SoftmaxRowsAreTheHostsBitwise) {
  Rng rng(21);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (Shape shape : {Shape{37, 50}, Shape{3, 5, 3}, Shape{1, 1},
                        Shape{17, 8}, Shape{2, 4, 1000}}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                     describeShape(shape) + (log ? " log" : ""));
        Buffer x = randomBuffer(dtype, shape, rng, -8, 8);
        if (x.size() > 3)
          x.set(3, -INFINITY);
        const int64_t n = shape.back(), rows = x.size() / n;
        const int64_t dim = int64_t(shape.size()) - 1;
        Buffer want(dtype, shape), got(dtype, shape);
        ASSERT_TRUE(host::softmax(pool, x.ref(), dim, log, want.ref()).isOk());
        ASSERT_EQ(launchSoftmax(ctx, dtype, log, x.data(), got.ref().data, rows,
                                n, 1),
                  cudaSuccess);
        EXPECT_TRUE(got.sameBits(want)) << "forward";
        Buffer dy = randomBuffer(dtype, shape, rng, -1, 1);
        Buffer wantDx(dtype, shape), gotDx(dtype, shape);
        ASSERT_TRUE(host::softmaxGrad(pool, want.ref(), dy.ref(), dim, log,
                                      wantDx.ref())
                        .isOk());
        ASSERT_EQ(launchSoftmaxGrad(ctx, dtype, log, want.data(), dy.data(),
                                    gotDx.ref().data, rows, n, 1),
                  cudaSuccess);
        EXPECT_TRUE(gotDx.sameBits(wantDx)) << "backward";
      }
    }
  // The middle dimension of [4, 9, 6]: strided rows, one thread each.
  Buffer x = randomBuffer(DType::f32, {4, 9, 6}, rng, -8, 8);
  Buffer want(DType::f32, {4, 9, 6}), got(DType::f32, {4, 9, 6});
  ASSERT_TRUE(host::softmax(pool, x.ref(), 1, false, want.ref()).isOk());
  ASSERT_EQ(
      launchSoftmax(ctx, DType::f32, false, x.data(), got.ref().data, 4, 9, 6),
      cudaSuccess);
  EXPECT_TRUE(got.sameBits(want));
  EXPECT_EQ(record.code, 0);
}

} // namespace
