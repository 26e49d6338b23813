//===- CudaQuantEmuTest.cpp - the cuda dequantize kernel on the CPU -------===//
//
// lib/cuda/CudaQuant.cu (a frozen base's nf4 or int8 blob into the compute
// dtype) run on the CPU (CudaEmu.h, emulate.py) against host::dequantize,
// the reference every device matches (DESIGN.md, Quantized base): bitwise,
// in f32, bf16, f16 and f64, over blobs the quantizer wrote (an outlier, a
// short last block, an odd count that leaves half a code byte, two blocks
// of NF4's second scale level) and over blobs whose scale codes take every
// entry of the dynamic map. The device conformance suite holds the GPU to
// the same bits; this is what checks the kernel where no GPU is attached.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostKernelsTestUtil.h"

#include "CudaCommon.cuh"

#include "rp/contract/Quantize.h"
#include "rp/runtime/host/Quant.h"

#include <gtest/gtest.h>

#include <random>

// The kernels and their launcher, launches rewritten by emulate.py.
#include "CudaQuant.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::testing::Buffer;
namespace quant = rp::quant;

namespace {

/// 260 blocks of 64 (two blocks of 256 absmax values, the second short),
/// less 27: a short last block and an odd count.
constexpr int64_t kValues = 260 * quant::kBlock - 27;

std::vector<uint8_t> quantizedWeights(quant::QuantKind kind, int64_t n,
                                      uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n));
  for (float &v : w)
    v = normal(gen);
  if (n > 3) {
    w[3] = 1.5f;       // an outlier in the first block
    w[n - 1] = -0.75f; // and in the short last one
  }
  std::vector<uint8_t> blob(
      static_cast<size_t>(quant::layoutOf(kind, n).bytes));
  quant::quantize(kind, w.data(), n, blob.data());
  return blob;
}

class CudaQuantEmu : public ::testing::Test {
protected:
  /// The blob dequantized by the emulated kernel and by the host kernel
  /// into `dtype`: the same bits.
  void expectHostBits(quant::QuantKind kind, std::vector<uint8_t> &blob,
                      DType dtype, int64_t n) {
    SCOPED_TRACE(std::string(kind == quant::QuantKind::nf4 ? "nf4" : "int8") +
                 " into " + dtypeName(dtype));
    TensorRef bytes{blob.data(), DType::u8, {int64_t(blob.size())}};
    Buffer want(dtype, {n}), got(dtype, {n});
    ASSERT_TRUE(
        host::dequantize(pool, bytes, int64_t(kind), want.ref()).isOk());
    ASSERT_EQ(launchDequantize(ctx, int(kind), tables, blob.data(), dtype,
                               got.ref().data, n),
              cudaSuccess);
    if (got.sameBits(want))
      return;
    for (int64_t i = 0; i < n; ++i)
      if (std::memcmp(
              static_cast<const char *>(got.data()) + i * dtypeSize(dtype),
              static_cast<const char *>(want.data()) + i * dtypeSize(dtype),
              dtypeSize(dtype)) != 0) {
        ADD_FAILURE() << "value " << i << " (block " << i / quant::kBlock
                      << ") differs from the host's: " << got.get(i) << " vs "
                      << want.get(i);
        return;
      }
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 3};
  DequantTables tables = dequantTables();
};

TEST_F(CudaQuantEmu, NF4BitwiseTheHostKernel) {
  std::vector<uint8_t> blob =
      quantizedWeights(quant::QuantKind::nf4, kValues, 1);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    expectHostBits(quant::QuantKind::nf4, blob, dtype, kValues);
}

// int8 has one scale level: a few blocks, the last short, will do.
TEST_F(CudaQuantEmu, Int8BitwiseTheHostKernel) {
  const int64_t n = 5 * quant::kBlock - 27;
  std::vector<uint8_t> blob = quantizedWeights(quant::QuantKind::int8, n, 2);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    expectHostBits(quant::QuantKind::int8, blob, dtype, n);
}

// Every 8-bit scale code (the dynamic map's 256 entries, the negative ones
// included, which a quantizer never writes for an absmax above the mean
// alone) and every nibble of the codes, each product rounded apart: a
// kernel that fused the scale's product and sum, or read the nibbles in
// the other order, differs here in the last bit.
TEST_F(CudaQuantEmu, NF4EveryScaleCodeAndNibble) {
  std::vector<uint8_t> blob =
      quantizedWeights(quant::QuantKind::nf4, kValues, 3);
  quant::Layout at = quant::layoutOf(quant::QuantKind::nf4, kValues);
  std::mt19937 gen(4);
  for (int64_t i = at.codes; i < at.scales; ++i)
    blob[size_t(i)] = uint8_t(gen());
  for (int64_t b = 0; b < at.scales2 - at.scales; ++b)
    blob[size_t(at.scales + b)] = uint8_t(b * 7 + 3); // all 256, shuffled
  for (DType dtype : {DType::f32, DType::bf16})
    expectHostBits(quant::QuantKind::nf4, blob, dtype, kValues);
}

// One value and an empty weight: the grid's edges.
TEST_F(CudaQuantEmu, TinyAndEmpty) {
  for (auto kind : {quant::QuantKind::nf4, quant::QuantKind::int8}) {
    std::vector<uint8_t> one = quantizedWeights(kind, 1, 5);
    expectHostBits(kind, one, DType::bf16, 1);
    EXPECT_EQ(launchDequantize(ctx, int(kind), tables, nullptr, DType::f32,
                               nullptr, 0),
              cudaSuccess);
  }
}

} // namespace
