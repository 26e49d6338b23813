//===- CudaAttentionEmuTest.cpp - cuda attention on the CPU vs the host ---===//
//
// lib/cuda/CudaAttention.cu compiled as host C++ (CudaEmu.h, emulate.py)
// and run against host/HostAttention.cpp and HostGradientsAttention.cpp on
// the same data: forward, dq, dk and dv (and GPT-OSS sinks' gradient), with
// no mask, causal, boolean and additive masks, sinks, grouped-query heads,
// sequences that are not a multiple of the tile, query and key lengths that
// differ, a NaN, the three head-width buckets, and f32, f16, bf16 and f64.
// The tiled kernels sum in another order than the host's key-at-a-time
// loops, so results agree within the conformance suite's bound,
// max|dev - host| / max|host|. On a GPU the conformance suite
// (DeviceKernelConformanceTest) runs the real kernels.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostGradientsTestUtil.h"

#include "CudaCommon.cuh"
#include "CudaDispatchChecks.h"

#include "rp/runtime/host/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

// The kernels and launchers, launches rewritten by emulate.py.
#include "CudaAttention.emu.inc"
#include "CudaAttentionGrad.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::testing::Buffer;
using rp::runtime::testing::randomBuffer;
using rp::runtime::testing::Rng;

namespace {

enum class Mask { none, boolean, additive };

struct Case {
  int64_t b, h, hkv, s, t, d, dv;
  bool causal = false;
  Mask mask = Mask::none;
  /// The mask's shape: [B, 1, S, T] when true, [S, T] when false.
  bool perBatch = true;
  /// rp.attention's sliding window (causal only) and soft-cap; 0: none.
  int64_t window = 0;
  double softcap = 0;
  /// GPT-OSS's attention sinks, one logit a query head.
  bool sinks = false;
};

/// max|got - want| / max|want|; a NaN of `want` must be a NaN of `got`.
double relativeError(const Buffer &got, const Buffer &want) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double w = want.get(i), g = got.get(i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g))
        return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  return scale > 0 ? worst / scale : worst;
}

/// The conformance suite's bound for the tiled kernels' other order.
double bound(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return 2e-5;
  case DType::f16:
    return 2e-3;
  case DType::bf16:
    return 1e-2;
  default:
    return 1e-12;
  }
}

struct Problem {
  Buffer q, k, v, dy;
  std::optional<Buffer> mask;
  std::optional<Buffer> sinks;
};

Problem makeProblem(DType dtype, const Case &c, uint64_t seed) {
  Rng rng(seed);
  Problem p{randomBuffer(dtype, {c.b, c.h, c.s, c.d}, rng, -1.5, 1.5),
            randomBuffer(dtype, {c.b, c.hkv, c.t, c.d}, rng, -1.5, 1.5),
            randomBuffer(dtype, {c.b, c.hkv, c.t, c.dv}, rng, -2, 2),
            randomBuffer(dtype, {c.b, c.h, c.s, c.dv}, rng, -1, 1),
            std::nullopt,
            std::nullopt};
  if (c.sinks)
    p.sinks = randomBuffer(dtype, {c.h}, rng, -1, 2);
  if (c.mask == Mask::none)
    return p;
  Shape shape = c.perBatch ? Shape{c.b, 1, c.s, c.t} : Shape{c.s, c.t};
  Buffer mask(c.mask == Mask::boolean ? DType::i1 : dtype, shape);
  const double kNegInf = -std::numeric_limits<double>::infinity();
  for (int64_t e = 0; e < mask.size(); ++e) {
    const int64_t i = (e / c.t) % c.s;
    // Row 2 of every batch masks every key: its output is zeros and it
    // passes no gradient.
    bool drop = i == 2 || rng.uniform(0, 1) < 0.3;
    if (c.mask == Mask::boolean)
      mask.set(e, drop ? 0 : 1);
    else
      mask.set(e, drop ? kNegInf : rng.uniform(-2, 2));
  }
  p.mask = std::move(mask);
  return p;
}

std::optional<TensorRef> maskRef(const Problem &p) {
  if (!p.mask)
    return std::nullopt;
  return p.mask->ref();
}

class CudaAttentionEmu : public ::testing::TestWithParam<DType> {
protected:
  /// Forward and backward on the emulated device and the host; every
  /// output within bound(dtype) of the host's.
  void check(const Case &c, DType dtype, uint64_t seed,
             void (*edit)(Problem &) = nullptr) {
    Problem p = makeProblem(dtype, c, seed);
    if (edit)
      edit(p);
    const double scale = 1.0 / std::sqrt(double(c.d));
    kernels::AttentionExtras extras;
    extras.window = c.window;
    extras.softcap = c.softcap;
    std::optional<TensorRef> sinks;
    if (p.sinks)
      extras.sinks = &sinks.emplace(p.sinks->ref());
    const Shape outShape{c.b, c.h, c.s, c.dv};
    Buffer hostOut(dtype, outShape), devOut(dtype, outShape);
    ASSERT_TRUE(host::attention(pool, p.q.ref(), p.k.ref(), p.v.ref(),
                                maskRef(p), c.causal, scale, hostOut.ref(),
                                extras)
                    .isOk());
    AttentionShape shape;
    ASSERT_TRUE(cuda::detail::attentionShape(
                    p.q.ref(), p.k.ref(), p.v.ref(), maskRef(p), c.causal,
                    scale, devOut.ref(), nullptr, shape, extras)
                    .isOk());
    const void *mask = p.mask ? p.mask->data() : nullptr;
    ASSERT_EQ(launchAttention(ctx, dtype, shape, p.q.data(), p.k.data(),
                              p.v.data(), mask, devOut.ref().data),
              cudaSuccess);
    EXPECT_LE(relativeError(devOut, hostOut), bound(dtype)) << "forward";

    Buffer hostDq(dtype, p.q.shape), hostDk(dtype, p.k.shape),
        hostDv(dtype, p.v.shape), hostDs(dtype, {c.h}), devDs(dtype, {c.h});
    TensorRef hostDsRef = hostDs.ref(), devDsRef = devDs.ref();
    if (p.sinks)
      extras.sinksGrad = &hostDsRef;
    ASSERT_TRUE(host::attentionGrad(pool, p.q.ref(), p.k.ref(), p.v.ref(),
                                    maskRef(p), c.causal, scale, p.dy.ref(),
                                    hostDq.ref(), hostDk.ref(), hostDv.ref(),
                                    extras)
                    .isOk());
    // Outputs and scratch start as garbage: the kernels write every element.
    Buffer devDq(dtype, p.q.shape), devDk(dtype, p.k.shape),
        devDv(dtype, p.v.shape);
    for (Buffer *g : {&devDq, &devDk, &devDv})
      for (int64_t i = 0; i < g->size(); ++i)
        g->set(i, 1e3);
    if (p.sinks) {
      // The backward's shape carries where the sinks' gradient goes.
      extras.sinksGrad = &devDsRef;
      for (int64_t i = 0; i < devDs.size(); ++i)
        devDs.set(i, 1e3);
      const TensorRef dq = devDq.ref(), dk = devDk.ref(), dv = devDv.ref();
      const AttentionGradRefs grads{dq, dk, dv};
      ASSERT_TRUE(cuda::detail::attentionShape(
                      p.q.ref(), p.k.ref(), p.v.ref(), maskRef(p), c.causal,
                      scale, p.dy.ref(), &grads, shape, extras)
                      .isOk());
    }
    std::vector<uint64_t> scratch(
        attentionGradScratchBytes(dtype, shape) / 8 + 1, 0x7ff4dead7ff4deadull);
    ASSERT_EQ(launchAttentionGrad(ctx, dtype, shape, p.q.data(), p.k.data(),
                                  p.v.data(), mask, p.dy.data(),
                                  devDq.ref().data, devDk.ref().data,
                                  devDv.ref().data, scratch.data()),
              cudaSuccess);
    EXPECT_LE(relativeError(devDq, hostDq), bound(dtype)) << "dq";
    EXPECT_LE(relativeError(devDk, hostDk), bound(dtype)) << "dk";
    EXPECT_LE(relativeError(devDv, hostDv), bound(dtype)) << "dv";
    if (p.sinks)
      EXPECT_LE(relativeError(devDs, hostDs), bound(dtype)) << "dsinks";
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 42};
};

// Head width 8: the 64-column bucket, whose f32 tiles have 32 rows (16 in
// f64), so 37 rows make a partial last tile.
TEST_P(CudaAttentionEmu, NoMask) {
  check({2, 2, 2, 37, 37, 8, 6}, GetParam(), 1);
}

TEST_P(CudaAttentionEmu, CausalGroupedQuery) {
  Case c{1, 4, 2, 37, 37, 8, 8};
  c.causal = true;
  check(c, GetParam(), 2);
}

TEST_P(CudaAttentionEmu, BooleanMask) {
  Case c{2, 2, 1, 21, 35, 8, 8};
  c.mask = Mask::boolean;
  check(c, GetParam(), 3);
}

TEST_P(CudaAttentionEmu, AdditiveMaskBroadcast) {
  Case c{2, 2, 2, 20, 20, 8, 8};
  c.mask = Mask::additive;
  c.perBatch = false;
  c.causal = true;
  check(c, GetParam(), 4);
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, CudaAttentionEmu,
                         ::testing::ValuesIn(rp::runtime::testing::kFloatTypes),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

class CudaAttentionEmuShapes : public CudaAttentionEmu {};

// Query and key lengths that differ: more keys than queries, then more
// queries than keys, each a partial tile; causal with more keys than
// queries aligns bottom-right.
TEST_F(CudaAttentionEmuShapes, LengthsDiffer) {
  check({1, 2, 1, 13, 40, 8, 8}, DType::f32, 5);
  check({1, 2, 2, 40, 13, 8, 8}, DType::f32, 6);
  Case c{1, 2, 1, 13, 75, 8, 8};
  c.causal = true;
  check(c, DType::f32, 10);
}

// rp.attention's sliding window (narrower and wider than a tile, with
// bottom-right alignment and grouped-query heads) and Gemma 2's soft-cap,
// alone and together, against the host in every float dtype.
TEST_P(CudaAttentionEmu, WindowAndSoftcap) {
  Case w{1, 4, 2, 70, 70, 8, 8};
  w.causal = true;
  w.window = 5;
  check(w, GetParam(), 11);
  w.window = 40;
  check(w, GetParam(), 12);
  Case br{1, 2, 2, 21, 90, 8, 8};
  br.causal = true;
  br.window = 33;
  check(br, GetParam(), 13);
  Case cap{1, 2, 2, 37, 37, 8, 8};
  cap.causal = true;
  cap.softcap = 0.8;
  check(cap, GetParam(), 14);
  cap.window = 9;
  check(cap, GetParam(), 15);
}

// GPT-OSS's attention sinks: with causal and grouped heads, a window, a
// boolean mask whose row 2 drops every key (the sink takes the whole row:
// output 0), over more keys than queries; the sinks' gradient too.
TEST_P(CudaAttentionEmu, Sinks) {
  Case c{2, 4, 2, 37, 37, 8, 8};
  c.causal = true;
  c.sinks = true;
  check(c, GetParam(), 16);
  c.window = 6;
  check(c, GetParam(), 17);
  Case m{2, 2, 1, 21, 35, 8, 8};
  m.mask = Mask::boolean;
  m.sinks = true;
  check(m, GetParam(), 18);
}

// The 128- and 256-column buckets (16- and 8-row tiles in f32, 8 and 4 in
// f64, with idle threads); d and dv differ.
TEST_F(CudaAttentionEmuShapes, WideHeads) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    Case c{1, 2, 1, 19, 19, 80, 72};
    c.causal = true;
    check(c, dtype, 7);
    Case d{1, 1, 1, 11, 17, 130, 256};
    d.mask = Mask::boolean;
    check(d, dtype, 8);
  }
}

// A NaN in one query row: that row's output, dq and (through its
// statistics) every dk/dv it reaches come out NaN, as on the host.
TEST_F(CudaAttentionEmuShapes, NaNQueryRow) {
  check({1, 1, 1, 9, 9, 8, 8}, DType::f32, 9,
        [](Problem &p) { p.q.set(3 * 8 + 1, std::nan("")); });
}

} // namespace
