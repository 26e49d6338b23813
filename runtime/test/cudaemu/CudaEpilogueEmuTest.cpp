//===- CudaEpilogueEmuTest.cpp - matmul's epilogue pass on the CPU --------===//
//
// lib/cuda/CudaEpilogue.cu (the bias and activation pass that follows the
// GEMM where cuBLASLt does not fuse them) run on the CPU (CudaEmu.h,
// emulate.py) against host::matmulEpilogue, which is the unfused host
// sequence (matmul, add, gelu). Given the same product, every output and
// the pre-activation must be bitwise the host's, in f32, bf16, f16 and
// f64, for each epilogue, with and without the pre-activation output, in
// place (the GEMM's result in the output) and with the bias already added
// (cuBLASLt's BIAS epilogue, the activation alone); and the backward's
// gelu-gradient pass against the host's matmul + unary_grad.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostKernelsTestUtil.h"

#include "CudaCommon.cuh"

#include "rp/runtime/host/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>

// The kernel and its launcher, launches rewritten by emulate.py.
#include "CudaEpilogue.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::kernels::MatmulEpilogue;
using rp::runtime::testing::Buffer;
using rp::runtime::testing::randomBuffer;
using rp::runtime::testing::Rng;

namespace {

class CudaEpilogueEmu : public ::testing::Test {
protected:
  static void expectSame(const Buffer &got, const Buffer &want,
                         const std::string &what) {
    ASSERT_EQ(got.size(), want.size());
    if (got.sameBits(want))
      return;
    for (int64_t i = 0; i < got.size(); ++i)
      if (got.get(i) != want.get(i)) {
        ADD_FAILURE() << what << " differs from the host at " << i << ": "
                      << got.get(i) << " vs " << want.get(i);
        return;
      }
    ADD_FAILURE() << what << " differs from the host in its bits";
  }

  /// x [rows, k] x w [k, n] + bias, each epilogue, against the host.
  void check(DType dtype, int64_t rows, int64_t k, int64_t n, bool withPre,
             bool biasAdded) {
    Rng rng(uint64_t(rows * 131 + n));
    Buffer x = randomBuffer(dtype, {rows, k}, rng, -2, 2);
    Buffer w = randomBuffer(dtype, {k, n}, rng, -1, 1);
    Buffer bias = randomBuffer(dtype, {n}, rng, -1, 1);
    for (auto e : {MatmulEpilogue::bias, MatmulEpilogue::biasGelu,
                   MatmulEpilogue::biasGeluTanh}) {
      if (withPre && e == MatmulEpilogue::bias)
        continue;
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " epilogue " +
                   std::to_string(int(e)) + (withPre ? " with pre" : "") +
                   (biasAdded ? ", bias added by the GEMM" : ""));
      Buffer want(dtype, {rows, n}), wantPre(dtype, {rows, n});
      ASSERT_TRUE(host::matmulEpilogue(pool, x.ref(), w.ref(), false, false,
                                       bias.ref(), int64_t(e), want.ref(),
                                       withPre ? std::optional(wantPre.ref())
                                               : std::nullopt)
                      .isOk());
      // The GEMM's result where the dispatch has it: the pre-activation
      // buffer when there is one, else the output (in place).
      Buffer got(dtype, {rows, n}), pre(dtype, {rows, n});
      Buffer &product = withPre ? pre : got;
      ASSERT_TRUE(
          host::matmul(pool, x.ref(), w.ref(), false, false, product.ref())
              .isOk());
      if (biasAdded)
        ASSERT_TRUE(host::binary(pool, kernels::BinaryKind::add, product.ref(),
                                 bias.ref(), product.ref())
                        .isOk());
      ASSERT_EQ(
          launchBiasActivation(ctx, dtype, int(e), product.data(),
                               biasAdded ? nullptr : bias.data(),
                               withPre && !biasAdded ? pre.ref().data : nullptr,
                               got.ref().data, rows, n),
          cudaSuccess);
      expectSame(got, want, "the result");
      if (withPre)
        expectSame(pre, wantPre, "the pre-activation");
    }
  }

  /// The backward's gelu gradient (dGelu, dGeluTanh) where cuBLASLt's
  /// DGELU does not run: the GEMM's product, then the pass in place.
  void checkGeluGrad(DType dtype, int64_t rows, int64_t k, int64_t n) {
    Rng rng(uint64_t(rows * 17 + n));
    Buffer x = randomBuffer(dtype, {rows, k}, rng, -2, 2);
    Buffer w = randomBuffer(dtype, {k, n}, rng, -1, 1);
    Buffer pre = randomBuffer(dtype, {rows, n}, rng, -4, 4);
    for (auto e : {MatmulEpilogue::dGelu, MatmulEpilogue::dGeluTanh}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " epilogue " +
                   std::to_string(int(e)));
      Buffer want(dtype, {rows, n}), got(dtype, {rows, n});
      ASSERT_TRUE(host::matmulEpilogue(pool, x.ref(), w.ref(), false, false,
                                       pre.ref(), int64_t(e), want.ref(),
                                       std::nullopt)
                      .isOk());
      ASSERT_TRUE(
          host::matmul(pool, x.ref(), w.ref(), false, false, got.ref()).isOk());
      ASSERT_EQ(launchGeluGradEpilogue(ctx, dtype, int(e), pre.data(),
                                       got.ref().data, got.ref().data,
                                       rows * n),
                cudaSuccess);
      expectSame(got, want, "the gelu gradient");
    }
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 7};
};

TEST_F(CudaEpilogueEmu, BitwiseTheUnfusedHostSequence) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (bool withPre : {false, true})
      for (bool biasAdded : {false, true})
        check(dtype, 37, 24, 19, withPre, biasAdded);
}

// More elements than one grid-stride pass of the emulated launch, and a
// single column (the bias a scalar row).
TEST_F(CudaEpilogueEmu, LongAndNarrow) {
  check(DType::f32, 300, 8, 1, true, false);
  check(DType::bf16, 70, 16, 130, false, false);
}

// The gelu-gradient pass (the fallback of cuBLASLt's DGELU, and the erf
// form's only path) is bitwise unary_grad after the host's product.
TEST_F(CudaEpilogueEmu, GeluGradientBitwiseTheHost) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    checkGeluGrad(dtype, 41, 24, 19);
  checkGeluGrad(DType::bf16, 300, 8, 3);
}

} // namespace
