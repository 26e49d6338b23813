//===- CudaGatherEmuTest.cpp - cuda gather_grad on the CPU vs the host ----===//
//
// lib/cuda/CudaMovement.cu compiled as host C++ (CudaEmu.h, emulate.py); its
// gather_grad (the embedding gradient) run against host/HostGradients.cpp's
// on the same data. The parallel counting sort must list each axis
// position's index positions in increasing order, as the host's loop does,
// so dx is bitwise the host's; the emulated threads of a block run at once,
// so the atomics of the fill step do interleave. A bad index is reported
// with the lowest bad position, as the host names it.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostKernelsTestUtil.h"

#include "CudaCommon.cuh"

#include "rp/runtime/host/Gradients.h"

#include <gtest/gtest.h>

// The kernels and launchers, launches rewritten by emulate.py.
#include "CudaMovement.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::testing::Buffer;
using rp::runtime::testing::fromValues;
using rp::runtime::testing::randomBuffer;
using rp::runtime::testing::Rng;

namespace {

class CudaGatherGradEmu : public ::testing::Test {
protected:
  /// dx [outer, axisSize, inner] from dy [outer, indices, inner] on both
  /// devices; expects the host's bits.
  void check(DType dtype, const Buffer &indices, int64_t outer,
             int64_t axisSize, int64_t inner, uint64_t seed) {
    SCOPED_TRACE(::testing::Message()
                 << dtypeName(dtype) << " axis " << axisSize << " indices "
                 << indices.size() << " " << dtypeName(indices.dtype));
    Rng rng(seed);
    const int64_t numIndices = indices.size();
    Buffer dy = randomBuffer(dtype, {outer, numIndices, inner}, rng, -1, 1);
    Buffer want(dtype, {outer, axisSize, inner});
    Buffer got(dtype, {outer, axisSize, inner});
    for (int64_t i = 0; i < got.size(); ++i)
      got.set(i, 777.0);
    ASSERT_TRUE(
        host::gatherGrad(pool, indices.ref(), 1, dy.ref(), want.ref()).isOk());
    std::vector<int64_t> scratch(
        gatherGradScratchBytes(axisSize, numIndices) / 8, -5);
    ASSERT_EQ(launchGatherGrad(ctx, dtype, indices.data(),
                               indices.dtype == DType::i64, outer, axisSize,
                               numIndices, inner, dy.data(), got.ref().data,
                               scratch.data()),
              cudaSuccess);
    EXPECT_EQ(record.code, 0);
    EXPECT_TRUE(got.sameBits(want));
    for (int64_t i = 0; i < got.size(); ++i)
      if (got.get(i) != want.get(i)) {
        ADD_FAILURE() << "dx differs from the host at " << i << ": "
                      << got.get(i) << " vs " << want.get(i);
        break;
      }
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 9};
};

// An embedding's gradient: 300 tokens over a vocabulary of 50, most of them
// among the first 6 (buckets of about 40, summed in token order), some
// negative (counted from the end), positions nobody reads (zero).
TEST_F(CudaGatherGradEmu, RepeatedTokensInOrder) {
  Rng rng(21);
  const int64_t vocab = 50, tokens = 300;
  for (DType indexType : {DType::i32, DType::i64}) {
    Buffer indices(indexType, {tokens});
    for (int64_t i = 0; i < tokens; ++i) {
      int64_t v = rng.integer(0, 3) != 0 ? rng.integer(0, 5)
                                         : rng.integer(-vocab, vocab - 1);
      indices.set(i, double(v));
    }
    uint64_t seed = 30;
    for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
      check(dtype, indices, 1, vocab, 17, ++seed);
    check(DType::f32, indices, 3, vocab, 5, ++seed);
  }
}

// Every index the same: one bucket of 300, whose order is all that the
// rank step decides.
TEST_F(CudaGatherGradEmu, OneBucket) {
  Buffer indices = fromValues(DType::i64, {300}, std::vector<double>(300, 4));
  check(DType::f32, indices, 1, 9, 3, 41);
  check(DType::bf16, indices, 2, 9, 3, 42);
}

// More axis positions than the scan's threads (runs of 3 positions a
// thread, the last threads idle), one index, no index at all.
TEST_F(CudaGatherGradEmu, LongAxisAndFewIndices) {
  Rng rng(51);
  Buffer many = randomBuffer(DType::i32, {100}, rng, 0, 1299);
  check(DType::f32, many, 1, 1300, 2, 52);
  Buffer one = fromValues(DType::i32, {1}, {1299});
  check(DType::f16, one, 1, 1300, 2, 53);
  Buffer none(DType::i64, {0});
  check(DType::f32, none, 2, 10, 4, 54);
}

// Two bad indices: the lower position is the one reported (with its value
// and the axis size), on every run.
TEST_F(CudaGatherGradEmu, FirstBadIndexIsReported) {
  std::vector<double> values(40, 1);
  values[31] = 50;
  values[7] = -51;
  Buffer indices = fromValues(DType::i64, {40}, values);
  Buffer dy(DType::f32, {1, 40, 2}), dx(DType::f32, {1, 50, 2});
  std::vector<int64_t> scratch(gatherGradScratchBytes(50, 40) / 8, 0);
  ASSERT_EQ(launchGatherGrad(ctx, DType::f32, indices.data(), true, 1, 50, 40,
                             2, dy.data(), dx.ref().data, scratch.data()),
            cudaSuccess);
  EXPECT_EQ(record.code, kIndexOutOfRange);
  EXPECT_EQ(record.site, 9);
  EXPECT_EQ(record.position, 7);
  EXPECT_EQ(record.value, -51);
  EXPECT_EQ(record.limit, 50);
}

} // namespace
