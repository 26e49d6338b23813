//===- CudaNormEmuTest.cpp - the cuda norms on the CPU vs the host --------===//
//
// lib/cuda/CudaNorms.cu's layer norm and RMS norm, forward and backward,
// run on the CPU (CudaEmu.h, emulate.py) against host/HostNN.cpp and
// HostGradientsNN.cpp on the same data. A row's kRowLanes threads fold
// orderedSum's lanes and combine them in its tree, and the scale and bias
// gradients sum blocks of 128 rows in order, so every output must be
// bitwise the host's: rows that are not a multiple of a block's rows, widths
// that are not a multiple of the lanes (and narrower than them), one row,
// several scale-gradient row blocks, in f32, bf16, f16 and f64.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostKernelsTestUtil.h"

#include "CudaCommon.cuh"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/host/Kernels.h"

#include <gtest/gtest.h>

#include <optional>

// The kernels and launchers, launches rewritten by emulate.py.
#include "CudaNorms.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::testing::Buffer;
using rp::runtime::testing::randomBuffer;
using rp::runtime::testing::Rng;

namespace {

struct NormCase {
  bool centered, withScale, withBias;
};

class CudaNormEmu : public ::testing::Test {
protected:
  /// Garbage where a kernel must write everything.
  static void poison(Buffer &b) {
    for (int64_t i = 0; i < b.size(); ++i)
      b.set(i, 12345.0);
  }

  static void expectSame(const Buffer &got, const Buffer &want,
                         const char *what) {
    ASSERT_EQ(got.size(), want.size());
    if (got.sameBits(want))
      return;
    for (int64_t i = 0; i < got.size(); ++i)
      if (got.get(i) != want.get(i) &&
          !(std::isnan(got.get(i)) && std::isnan(want.get(i)))) {
        ADD_FAILURE() << what << " differs from the host at " << i << ": "
                      << got.get(i) << " vs " << want.get(i);
        return;
      }
  }

  /// Runs forward and backward of one norm on both devices, expecting the
  /// host's bits.
  void check(DType dtype, int64_t rows, int64_t n, NormCase c, uint64_t seed) {
    SCOPED_TRACE(::testing::Message()
                 << dtypeName(dtype) << " rows " << rows << " n " << n
                 << (c.centered ? " layer" : " rms") << " scale " << c.withScale
                 << " bias " << c.withBias);
    Rng rng(seed);
    const double epsilon = 1e-5;
    Buffer x = randomBuffer(dtype, {rows, n}, rng, -2, 3);
    Buffer dy = randomBuffer(dtype, {rows, n}, rng, -1, 1);
    Buffer scale = randomBuffer(dtype, {n}, rng, 0.5, 1.5);
    Buffer bias = randomBuffer(dtype, {n}, rng, -1, 1);
    std::optional<TensorRef> scaleRef, biasRef;
    if (c.withScale)
      scaleRef = scale.ref();
    if (c.withBias)
      biasRef = bias.ref();

    // Forward.
    Buffer want(dtype, {rows, n}), got(dtype, {rows, n});
    poison(got);
    if (c.centered)
      ASSERT_TRUE(host::layerNorm(pool, x.ref(), scaleRef, biasRef, 1, epsilon,
                                  want.ref())
                      .isOk());
    else
      ASSERT_TRUE(host::rmsNorm(pool, x.ref(), scaleRef, 1, epsilon, want.ref())
                      .isOk());
    ASSERT_EQ(launchNorm(ctx, dtype, c.centered, x.data(),
                         c.withScale ? scale.data() : nullptr,
                         c.withBias ? bias.data() : nullptr, got.ref().data,
                         rows, n, epsilon),
              cudaSuccess);
    expectSame(got, want, "y");

    // Backward, with the parameter gradients the forward had.
    Buffer wantDx(dtype, {rows, n}), gotDx(dtype, {rows, n});
    Buffer wantDs(dtype, {n}), gotDs(dtype, {n});
    Buffer wantDb(dtype, {n}), gotDb(dtype, {n});
    poison(gotDx);
    poison(gotDs);
    poison(gotDb);
    std::optional<TensorRef> ds, db;
    if (c.withScale)
      ds = wantDs.ref();
    if (c.withBias)
      db = wantDb.ref();
    if (c.centered)
      ASSERT_TRUE(host::layerNormGrad(pool, x.ref(), scaleRef, 1, epsilon,
                                      dy.ref(), wantDx.ref(), ds, db)
                      .isOk());
    else
      ASSERT_TRUE(host::rmsNormGrad(pool, x.ref(), scaleRef, 1, epsilon,
                                    dy.ref(), wantDx.ref(), ds)
                      .isOk());
    const size_t bytes = normGradScratchBytes(dtype, rows, n);
    std::vector<uint64_t> scratch(bytes / 8 + 1, 0x7ff4dead7ff4deadull);
    ASSERT_EQ(launchNormGrad(ctx, dtype, c.centered, x.data(),
                             c.withScale ? scale.data() : nullptr, dy.data(),
                             gotDx.ref().data,
                             c.withScale ? gotDs.ref().data : nullptr,
                             c.withBias ? gotDb.ref().data : nullptr, rows, n,
                             epsilon, scratch.data()),
              cudaSuccess);
    expectSame(gotDx, wantDx, "dx");
    if (c.withScale)
      expectSame(gotDs, wantDs, "dscale");
    if (c.withBias)
      expectSame(gotDb, wantDb, "dbias");
    EXPECT_EQ(record.code, 0);
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 7};
};

// Layer norm with scale and bias (and neither), in every float type: 37
// rows (two blocks of 16, one partial), widths of 259 (not a multiple of
// the 8 lanes), 8 and 5 (fewer elements than lanes).
TEST_F(CudaNormEmu, LayerNormMatchesHostBitwise) {
  uint64_t seed = 100;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (int64_t n : {259, 8, 5}) {
      check(dtype, 37, n, {true, true, true}, ++seed);
      check(dtype, 37, n, {true, false, false}, ++seed);
    }
}

TEST_F(CudaNormEmu, RmsNormMatchesHostBitwise) {
  uint64_t seed = 200;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (int64_t n : {259, 8, 5}) {
      check(dtype, 37, n, {false, true, false}, ++seed);
      check(dtype, 37, n, {false, false, false}, ++seed);
    }
}

// One row (one block, 15 of its 16 row slots idle), one element.
TEST_F(CudaNormEmu, OneRow) {
  uint64_t seed = 300;
  for (DType dtype : {DType::f32, DType::bf16})
    for (bool centered : {true, false}) {
      check(dtype, 1, 300, {centered, true, centered}, ++seed);
      check(dtype, 1, 1, {centered, true, centered}, ++seed);
    }
}

// 300 rows: three 128-row blocks of the scale and bias gradients (the
// last partial), summed in block order.
TEST_F(CudaNormEmu, ManyRowsParamGradients) {
  uint64_t seed = 400;
  for (DType dtype : {DType::f32, DType::f16})
    for (bool centered : {true, false})
      check(dtype, 300, 40, {centered, true, centered}, ++seed);
}

// A NaN in one row stays in that row: the other rows of its block, which
// share the block's barriers and shared memory, are the host's.
TEST_F(CudaNormEmu, NaNStaysInItsRow) {
  Rng rng(500);
  const int64_t rows = 20, n = 24;
  Buffer x = randomBuffer(DType::f32, {rows, n}, rng, -2, 2);
  x.set(3 * n + 5, NAN);
  Buffer want(DType::f32, {rows, n}), got(DType::f32, {rows, n});
  ASSERT_TRUE(
      host::rmsNorm(pool, x.ref(), std::nullopt, 1, 1e-6, want.ref()).isOk());
  ASSERT_EQ(launchNorm(ctx, DType::f32, false, x.data(), nullptr, nullptr,
                       got.ref().data, rows, n, 1e-6),
            cudaSuccess);
  expectSame(got, want, "y");
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(std::isnan(got.get(r * n)), r == 3) << "row " << r;
}

} // namespace
