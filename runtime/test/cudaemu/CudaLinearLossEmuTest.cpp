//===- CudaLinearLossEmuTest.cpp - the cuda fused loss on the CPU ---------===//
//
// lib/cuda/CudaLinearLoss.cu compiled as host C++ (CudaEmu.h, emulate.py),
// with the chunk loops of CudaLinearLossLoop.cpp as they are, against
// host/HostLinearLoss.cpp on the same data. cuBLAS is replaced by a plain
// GEMM given the same operands (PlainGemms), which also records the rows of
// each logits GEMM, so the test sees the chunking. The row kernels reduce a
// row over a block of threads in a tree, not in the host's 8 lanes, so f32
// agrees within 1e-6 (relative) and 16-bit types within about one rounding
// step of their storage. On a GPU the conformance suite
// (DeviceKernelConformanceTest) runs the real kernels and cuBLAS.
//
//===----------------------------------------------------------------------===//

#include "CudaEmu.h"

#include "../HostGradientsTestUtil.h"

#include "CudaCommon.cuh"
#include "CudaLinearLoss.h"

#include <gtest/gtest.h>

// The kernels and launchers, launches rewritten by emulate.py.
#include "CudaLinearLoss.emu.inc"

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using rp::runtime::testing::Buffer;
using rp::runtime::testing::kFloatTypes;
using rp::runtime::testing::randomBuffer;
using rp::runtime::testing::Rng;

namespace {

constexpr int64_t kIgnore = -100;

/// The loops' GEMMs in the compute type, one dot product per output in
/// index order: rp.matmul's row-major definition, and cublasGemmEx's
/// column-major one given the loop's arguments. Records the rows of every
/// logits GEMM (transposed weight) and which GEMMs accumulate.
class PlainGemms final : public LinearLossGemms {
public:
  Status matmul(const TensorRef &a, const TensorRef &b, bool transposeB,
                const TensorRef &out) override {
    const int64_t m = a.shape[0], k = a.shape[1], n = out.shape[1];
    if (transposeB)
      logitsRows.push_back(m);
    visitFloat(a.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = kernels::Compute<T>;
      const T *A = a.as<const T>(), *B = b.as<const T>();
      T *O = out.as<T>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          C s = C(0);
          for (int64_t l = 0; l < k; ++l)
            s += kernels::load(A[i * k + l]) *
                 kernels::load(transposeB ? B[j * k + l] : B[l * n + j]);
          O[i * n + j] = kernels::store<T>(s);
        }
    });
    return {};
  }

  /// cublasGemmEx's column-major definition, from the same arguments.
  Status gemm(const ColumnMajorGemm &g) override {
    accumulated.push_back(g.accumulate);
    visitFloat(g.abType, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = kernels::Compute<T>;
      const T *A = static_cast<const T *>(g.a),
              *B = static_cast<const T *>(g.b);
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          C s = C(0);
          for (int64_t l = 0; l < g.k; ++l)
            s += kernels::load(g.transposeA ? A[l + i * g.lda]
                                            : A[i + l * g.lda]) *
                 kernels::load(g.transposeB ? B[j + l * g.ldb]
                                            : B[l + j * g.ldb]);
          if (g.cType == g.abType) {
            T &o = static_cast<T *>(g.c)[i + j * g.ldc];
            o = kernels::store<T>(g.accumulate ? kernels::load(o) + s : s);
          } else {
            float &o = static_cast<float *>(g.c)[i + j * g.ldc];
            o = g.accumulate ? o + float(s) : float(s);
          }
        }
    });
    return {};
  }

  std::vector<int64_t> logitsRows;
  std::vector<bool> accumulated;
};

struct Problem {
  Buffer hidden, weight, labels;
  int64_t rows, k, classes;
};

/// hidden [3, rows / 3, k] in [-2, 2), weight [classes, k], labels i32 or
/// i64 with every fifth ignored.
Problem makeProblem(DType dtype, DType labelType, int64_t rows, int64_t k,
                    int64_t classes, uint64_t seed) {
  Rng rng(seed);
  Problem p{randomBuffer(dtype, {3, rows / 3, k}, rng, -2, 2),
            randomBuffer(dtype, {classes, k}, rng, -2, 2),
            randomBuffer(labelType, {3, rows / 3}, rng, 0, classes - 1),
            rows,
            k,
            classes};
  for (int64_t i = 3; i < rows; i += 5)
    p.labels.set(i, kIgnore);
  return p;
}

LinearLossArgs argsOf(const Problem &p, int64_t chunk) {
  LinearLossArgs a;
  a.hidden = p.hidden.ref();
  a.weight = p.weight.ref();
  a.labels = p.labels.ref();
  a.ignoreIndex = kIgnore;
  a.chunk = chunk;
  a.rows = p.rows;
  a.k = p.k;
  a.classes = p.classes;
  return a;
}

/// Scratch as the pool would give it: not zeroed.
std::vector<uint64_t> garbageScratch(size_t bytes) {
  return std::vector<uint64_t>(bytes / 8 + 1, 0x7ff4dead7ff4deadull);
}

DType sumType(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

/// The emulated device's loss sum, count and the logits GEMMs' rows.
struct Forward {
  Buffer loss{DType::f32, {}}, count{DType::i64, {}};
  std::vector<int64_t> logitsRows;
};

class CudaLinearLossEmu : public ::testing::Test {
protected:
  Forward forward(const Problem &p, int64_t chunk) {
    Forward f{Buffer(sumType(p.hidden.dtype), {}), Buffer(DType::i64, {}), {}};
    PlainGemms gemms;
    const LinearLossArgs args = argsOf(p, chunk);
    const LinearLossScratch layout = linearLossScratch(args, false);
    std::vector<uint64_t> scratch = garbageScratch(layout.bytes);
    EXPECT_TRUE(linearCrossEntropyChunks(ctx, gemms, args, layout,
                                         scratch.data(), f.loss.ref().data,
                                         f.count.ref().as<int64_t>())
                    .isOk());
    f.logitsRows = gemms.logitsRows;
    return f;
  }

  /// dhidden, dweight of the emulated device; the scale is f32.
  std::pair<Buffer, Buffer> backward(const Problem &p, int64_t chunk,
                                     float scale,
                                     std::vector<bool> *accumulated = nullptr) {
    Buffer dh(p.hidden.dtype, p.hidden.shape),
        dw(p.hidden.dtype, p.weight.shape);
    for (int64_t i = 0; i < dw.size(); ++i)
      dw.set(i, 1e3); // The loop must write every element.
    PlainGemms gemms;
    const LinearLossArgs args = argsOf(p, chunk);
    const LinearLossScratch layout = linearLossScratch(args, true);
    std::vector<uint64_t> scratch = garbageScratch(layout.bytes);
    EXPECT_TRUE(linearCrossEntropyGradChunks(ctx, gemms, args, layout,
                                             scratch.data(), DType::f32, &scale,
                                             dh.ref(), dw.ref())
                    .isOk());
    if (accumulated)
      *accumulated = gemms.accumulated;
    return {std::move(dh), std::move(dw)};
  }

  ThreadPool pool{2};
  KernelErrorRecord record{};
  LaunchContext ctx{nullptr, &record, 42};
};

/// The loss tolerance: f32 sums a row in another order than the host.
double lossTolerance(DType dtype) {
  switch (dtype) {
  case DType::f64:
    return 1e-12;
  case DType::f32:
    return 1e-6;
  default:
    // Logits rounded to 16 bits: the plain GEMM may round one of them the
    // other way from the host's GEMM, which moves that row's loss by up to
    // the logit's ulp (about 4e-5 of this sum in bf16).
    return 1e-3;
  }
}

TEST_F(CudaLinearLossEmu, LossIsTheHostsForAnyChunk) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    // 111 tokens (89 counted), 50 classes; chunks of 32 (three full, one of
    // 15), 7 and one chunk.
    Problem p = makeProblem(dtype, DType::i64, 111, 16, 50, 11);
    Buffer loss(sumType(dtype), {}), count(DType::i64, {});
    ASSERT_TRUE(host::linearCrossEntropy(pool, p.hidden.ref(), p.weight.ref(),
                                         p.labels.ref(), kIgnore, 128,
                                         loss.ref(), count.ref())
                    .isOk());
    ASSERT_EQ(count.get(0), 89);
    Forward f32 = forward(p, 32);
    EXPECT_EQ(f32.logitsRows, (std::vector<int64_t>{32, 32, 32, 15}));
    EXPECT_EQ(f32.count.get(0), 89);
    EXPECT_LE(std::fabs(f32.loss.get(0) - loss.get(0)),
              lossTolerance(dtype) * std::fabs(loss.get(0)))
        << f32.loss.get(0) << " against the host's " << loss.get(0);
    // The per-row losses are summed in fixed blocks of tokens, so the chunk
    // does not change a bit.
    for (int64_t chunk : {7, 1000}) {
      Forward other = forward(p, chunk);
      EXPECT_EQ(other.logitsRows.size(), size_t((111 + chunk - 1) / chunk));
      EXPECT_TRUE(other.loss.sameBits(f32.loss)) << "chunk " << chunk;
      EXPECT_EQ(other.count.get(0), 89);
    }
  }
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaLinearLossEmu, GradientIsTheHostsForAnyChunk) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    Problem p = makeProblem(dtype, DType::i32, 111, 16, 50, 12);
    const float scale = 1.0f / 89;
    Buffer dh(dtype, p.hidden.shape), dw(dtype, p.weight.shape);
    ASSERT_TRUE(host::linearCrossEntropyGrad(
                    pool, p.hidden.ref(), p.weight.ref(), p.labels.ref(),
                    kIgnore, 128, scale, dh.ref(), dw.ref())
                    .isOk());
    // 32: four chunks summed into dweight (in f32 scratch for 16-bit
    // types); 1000: one chunk, dweight written by one GEMM.
    for (int64_t chunk : {32, 1000}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk));
      std::vector<bool> accumulated;
      auto [gotDh, gotDw] = backward(p, chunk, scale, &accumulated);
      EXPECT_EQ(accumulated.size(), chunk == 32 ? 4u : 1u);
      EXPECT_FALSE(accumulated.at(0)) << "the first chunk writes dweight";
      EXPECT_CLOSE(gotDh, dh.values());
      EXPECT_CLOSE(gotDw, dw.values());
      // Ignored tokens have no gradient at all.
      for (int64_t row = 3; row < p.rows; row += 5)
        for (int64_t j = 0; j < p.k; ++j)
          ASSERT_EQ(gotDh.get(row * p.k + j), 0.0) << "row " << row;
    }
  }
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaLinearLossEmu, RowKernelsAreTheHostRowsOnLongRows) {
  // 3000 classes: 256 threads a row, each over 11 or 12 logits; one row
  // holds a NaN, which the loss and every gradient element must carry.
  Rng rng(5);
  Buffer logits = randomBuffer(DType::f32, {4, 3000}, rng, -8, 8);
  const int64_t rows = logits.shape[0], classes = logits.shape[1];
  ASSERT_EQ(rowThreads(classes), 256);
  ASSERT_EQ(rowThreads(50), 32);
  logits.set(2 * classes + 1234, NAN);
  std::vector<int64_t> labels = {17, 2999, 0, 1500};
  std::vector<double> rowLoss(rows, -1);
  ASSERT_EQ(launchLinearLossRows(ctx, DType::f32, logits.data(), labels.data(),
                                 true, kIgnore, 0, rows, classes,
                                 rowLoss.data()),
            cudaSuccess);
  const float scale = 0.25f;
  Buffer grad = logits;
  ASSERT_EQ(launchLinearLossGradRows(ctx, DType::f32, grad.ref().data,
                                     labels.data(), true, kIgnore, 0, rows,
                                     classes, DType::f32, &scale),
            cudaSuccess);
  const float *x = logits.ref().as<const float>();
  for (int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    float want = kernels::crossEntropyRow(x + r * classes, classes, labels[r]);
    std::vector<float> wantGrad(classes);
    kernels::crossEntropyGradRow(x + r * classes, wantGrad.data(), classes,
                                 labels[r], scale);
    if (r == 2) {
      EXPECT_TRUE(std::isnan(rowLoss[r]));
      for (int64_t i = 0; i < classes; ++i)
        ASSERT_TRUE(std::isnan(grad.get(r * classes + i))) << i;
      continue;
    }
    EXPECT_NEAR(rowLoss[r], want, 1e-6 * std::fabs(want));
    for (int64_t i = 0; i < classes; ++i)
      ASSERT_NEAR(grad.get(r * classes + i), wantGrad[i], 1e-7) << i;
  }
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaLinearLossEmu, IgnoredAndEmptyBatches) {
  // Every label ignored: no loss, no count, zero gradients.
  Problem p = makeProblem(DType::f32, DType::i64, 30, 8, 20, 3);
  for (int64_t i = 0; i < p.rows; ++i)
    p.labels.set(i, kIgnore);
  Forward f = forward(p, 8);
  EXPECT_EQ(f.loss.get(0), 0.0);
  EXPECT_EQ(f.count.get(0), 0);
  auto [dh, dw] = backward(p, 8, 1.0f);
  for (double v : dh.values())
    ASSERT_EQ(v, 0.0);
  for (double v : dw.values())
    ASSERT_EQ(v, 0.0);
  // No tokens at all (the 1000 in the weight gradient is overwritten).
  Problem none = makeProblem(DType::bf16, DType::i64, 0, 8, 20, 3);
  Forward g = forward(none, 8);
  EXPECT_EQ(g.count.get(0), 0);
  EXPECT_TRUE(g.logitsRows.empty());
  auto [dhNone, dwNone] = backward(none, 8, 1.0f);
  for (double v : dwNone.values())
    ASSERT_EQ(v, 0.0);
  EXPECT_EQ(record.code, 0);
}

TEST_F(CudaLinearLossEmu, ALabelOutOfRangeIsReported) {
  for (bool grad : {false, true}) {
    SCOPED_TRACE(grad ? "gradient" : "loss");
    record = KernelErrorRecord{};
    Problem p = makeProblem(DType::f32, DType::i64, 30, 8, 20, 4);
    p.labels.set(13, 20); // [0, 20) is the range.
    if (grad)
      backward(p, 8, 1.0f);
    else
      forward(p, 8);
    EXPECT_EQ(record.code, kLabelOutOfRange);
    EXPECT_EQ(record.site, 42);
    EXPECT_EQ(record.position, 13);
    EXPECT_EQ(record.value, 20);
    EXPECT_EQ(record.limit, 20);
  }
}

TEST_F(CudaLinearLossEmu, RefusesWhatTheHostRefusesWithItsMessage) {
  // Each call as the plan's buffers give it: the device's check must fail
  // as the host kernel does, word for word.
  struct Bad {
    const char *what;
    Shape hidden, weight, labels;
    DType labelType = DType::i64, lossType = DType::f32,
          weightType = DType::f32;
    int64_t chunk = 8;
    Shape dweight = {};
  };
  const Bad bads[] = {
      {"weight's K", {4, 6}, {9, 5}, {4}},
      {"weight's rank", {4, 6}, {9, 6, 1}, {4}},
      {"labels' shape", {2, 2, 6}, {9, 6}, {4}},
      {"labels' dtype", {4, 6}, {9, 6}, {4}, DType::f32},
      {"chunk", {4, 6}, {9, 6}, {4}, DType::i64, DType::f32, DType::f32, 0},
      {"loss sum's dtype", {4, 6}, {9, 6}, {4}, DType::i64, DType::f64},
      {"weight's dtype",
       {4, 6},
       {9, 6},
       {4},
       DType::i64,
       DType::f32,
       DType::bf16},
      {"weight gradient's shape",
       {4, 6},
       {9, 6},
       {4},
       DType::i64,
       DType::f32,
       DType::f32,
       8,
       {6, 9}},
  };
  for (const Bad &bad : bads) {
    SCOPED_TRACE(bad.what);
    Buffer hidden(DType::f32, bad.hidden), weight(bad.weightType, bad.weight),
        labels(bad.labelType, bad.labels), loss(bad.lossType, {}),
        count(DType::i64, {}), scale(DType::f32, {}),
        dh(DType::f32, bad.hidden),
        dw(DType::f32, bad.dweight.empty() ? bad.weight : bad.dweight);
    const bool grad = !bad.dweight.empty();
    Status host =
        grad ? host::linearCrossEntropyGrad(pool, hidden.ref(), weight.ref(),
                                            labels.ref(), kIgnore, bad.chunk,
                                            1.0, dh.ref(), dw.ref())
             : host::linearCrossEntropy(pool, hidden.ref(), weight.ref(),
                                        labels.ref(), kIgnore, bad.chunk,
                                        loss.ref(), count.ref());
    ASSERT_TRUE(host.failed());
    LinearLossArgs args;
    args.ignoreIndex = kIgnore;
    args.chunk = bad.chunk;
    Status cuda =
        grad ? checkLinearLoss(
                   "linear_cross_entropy_grad",
                   {hidden.ref(), weight.ref(), labels.ref(), scale.ref()},
                   {dh.ref(), dw.ref()}, true, args)
             : checkLinearLoss("linear_cross_entropy",
                               {hidden.ref(), weight.ref(), labels.ref()},
                               {loss.ref(), count.ref()}, false, args);
    EXPECT_EQ(cuda.getCode(), host.getCode());
    EXPECT_EQ(cuda.getMessage(), host.getMessage());
  }
  // What the host accepts, the device's check accepts, and it gives the
  // loops their sizes.
  Problem p = makeProblem(DType::bf16, DType::i32, 12, 5, 7, 1);
  Buffer loss(DType::f32, {}), count(DType::i64, {});
  LinearLossArgs args;
  args.ignoreIndex = kIgnore;
  args.chunk = 4;
  ASSERT_TRUE(checkLinearLoss("linear_cross_entropy",
                              {p.hidden.ref(), p.weight.ref(), p.labels.ref()},
                              {loss.ref(), count.ref()}, false, args)
                  .isOk());
  EXPECT_EQ(args.rows, 12);
  EXPECT_EQ(args.k, 5);
  EXPECT_EQ(args.classes, 7);
}

} // namespace
