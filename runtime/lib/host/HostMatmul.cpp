//===- HostMatmul.cpp - batched matmul on OpenBLAS or the plain GEMM ------===//
//
// The output [batch..., M, N] is cut into tiles of kRowBlock x kColBlock per
// batch entry, and each tile is one single-threaded GEMM call on a pool
// worker. The tiling depends on the shapes only, and a tile's result depends
// on nothing but its call, so the bits are the same for any thread count
// (DESIGN.md, Determinism). OpenBLAS is told once to run on one thread: its
// own threads would both oversubscribe the pool and escape ThreadSanitizer.
//
// f16 and bf16 operands are widened to f32 once, multiplied with sgemm
// (accumulating in f32, as rp.matmul specifies) and each tile is rounded
// into the output.
//
// Without OpenBLAS (RP_USE_OPENBLAS=OFF: the ThreadSanitizer build, GPU
// machines without it) each tile is the plain GEMM below: every output
// element sums its K products in order, which rounds differently from
// OpenBLAS's kernels but is as deterministic.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/host/Kernels.h"

#ifdef RP_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <climits>
#include <cstring>
#include <mutex>
#include <type_traits>

#ifdef RP_HAVE_OPENBLAS
// Declared again because cblas.h may be the reference (netlib) header, which
// lacks OpenBLAS's extensions; the library linked is OpenBLAS either way.
// NOLINTNEXTLINE(readability-redundant-declaration)
extern "C" void openblas_set_num_threads(int numThreads);
#endif

namespace rp::runtime::host {

using namespace detail;

namespace {

/// Output tile of one GEMM call. Fixed: part of the numerics.
constexpr int64_t kRowBlock = 128;
constexpr int64_t kColBlock = 256;

#ifdef RP_HAVE_OPENBLAS
void useSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void gemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda,
          const float *b, int ldb, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
              0.0f, c, ldc);
}

void gemm(bool ta, bool tb, int m, int n, int k, const double *a, int lda,
          const double *b, int ldb, double *c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0,
              c, ldc);
}
#else
void useSingleThreadedBlas() {}

/// Row-major C = op(A) op(B) as cblas_?gemm with alpha 1, beta 0. The i-p-j
/// order streams rows of B and C (vectorizable) while each C element still
/// adds its products in p order.
template <typename C>
void gemm(bool ta, bool tb, int m, int n, int k, const C *a, int lda,
          const C *b, int ldb, C *c, int ldc) {
  for (int i = 0; i < m; ++i) {
    C *row = c + int64_t(i) * ldc;
    for (int j = 0; j < n; ++j)
      row[j] = C(0);
    for (int p = 0; p < k; ++p) {
      const C av = ta ? a[int64_t(p) * lda + i] : a[int64_t(i) * lda + p];
      if (tb) {
        for (int j = 0; j < n; ++j)
          row[j] += av * b[int64_t(j) * ldb + p];
      } else {
        const C *bRow = b + int64_t(p) * ldb;
        for (int j = 0; j < n; ++j)
          row[j] += av * bRow[j];
      }
    }
  }
}
#endif

/// Runs every tile of `p` as one GEMM on `a` and `b` (GEMM type C). Tiles go
/// straight into `out` when it has type C, else through a C buffer rounded
/// into OutT.
template <typename C, typename OutT>
void runTiles(ThreadPool &pool, const MatmulProblem &p, const C *a, const C *b,
              OutT *out) {
  const int64_t rowBlocks = (p.m + kRowBlock - 1) / kRowBlock;
  const int64_t colBlocks = (p.n + kColBlock - 1) / kColBlock;
  const int64_t tilesPerBatch = rowBlocks * colBlocks;
  const int lda = static_cast<int>(p.ta ? p.m : p.k);
  const int ldb = static_cast<int>(p.tb ? p.k : p.n);
  parallelRanges(pool, p.batch * tilesPerBatch, 1, [&](int64_t tile, int64_t) {
    int64_t batch = tile / tilesPerBatch, rest = tile % tilesPerBatch;
    int64_t r0 = (rest / colBlocks) * kRowBlock;
    int64_t c0 = (rest % colBlocks) * kColBlock;
    int rows = static_cast<int>(std::min(kRowBlock, p.m - r0));
    int cols = static_cast<int>(std::min(kColBlock, p.n - c0));
    const C *aTile = a + p.aOffset[batch] + (p.ta ? r0 : r0 * p.k);
    const C *bTile = b + p.bOffset[batch] + (p.tb ? c0 * p.k : c0);
    OutT *outTile = out + (batch * p.m + r0) * p.n + c0;
    if constexpr (std::is_same_v<C, OutT>) {
      gemm(p.ta, p.tb, rows, cols, static_cast<int>(p.k), aTile, lda, bTile,
           ldb, outTile, static_cast<int>(p.n));
    } else {
      std::vector<C> buffer(static_cast<size_t>(rows) * cols);
      gemm(p.ta, p.tb, rows, cols, static_cast<int>(p.k), aTile, lda, bTile,
           ldb, buffer.data(), cols);
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
          outTile[r * p.n + c] = OutT(buffer[r * cols + c]);
    }
  });
}

/// f16/bf16 -> f32 for the whole operand.
template <typename T>
std::vector<float> widen(ThreadPool &pool, const TensorRef &t) {
  std::vector<float> wide(t.size());
  const T *data = t.as<const T>();
  parallelRanges(pool, t.size(), kElementGrain,
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i)
                     wide[i] = static_cast<float>(data[i]);
                 });
  return wide;
}

} // namespace

const char *gemmName() {
#ifdef RP_HAVE_OPENBLAS
  return "openblas";
#else
  return "plain";
#endif
}

Status matmul(ThreadPool &pool, const TensorRef &a, const TensorRef &b,
              bool transposeA, bool transposeB, const TensorRef &out) {
  MatmulProblem p;
  if (Status s = planMatmul(a, b, transposeA, transposeB, out, p); s.failed())
    return s;
  if (out.size() == 0)
    return {};
  if (p.k == 0) {
    // An empty sum; BLAS would also reject the zero leading dimension.
    std::memset(out.data, 0, out.bytes()); // +0.0 in every float type.
    return {};
  }
  useSingleThreadedBlas();
  switch (a.dtype) {
  case DType::f32:
    runTiles(pool, p, a.as<const float>(), b.as<const float>(),
             out.as<float>());
    break;
  case DType::f64:
    runTiles(pool, p, a.as<const double>(), b.as<const double>(),
             out.as<double>());
    break;
  case DType::f16: {
    std::vector<float> wa = widen<f16>(pool, a), wb = widen<f16>(pool, b);
    runTiles(pool, p, wa.data(), wb.data(), out.as<f16>());
    break;
  }
  case DType::bf16: {
    std::vector<float> wa = widen<bf16>(pool, a), wb = widen<bf16>(pool, b);
    runTiles(pool, p, wa.data(), wb.data(), out.as<bf16>());
    break;
  }
  default:
    return unsupportedDType("matmul", a.dtype); // Checked by planMatmul.
  }
  return {};
}

} // namespace rp::runtime::host

namespace rp::runtime::host {

Status matmulEpilogue(ThreadPool &pool, const TensorRef &a, const TensorRef &b,
                      bool transposeA, bool transposeB, const TensorRef &extra,
                      int64_t epilogue, const TensorRef &out,
                      const std::optional<TensorRef> &pre) {
  using kernels::MatmulEpilogue;
  auto e = static_cast<MatmulEpilogue>(epilogue);
  if (e == MatmulEpilogue::none)
    return matmul(pool, a, b, transposeA, transposeB, out);
  if (e == MatmulEpilogue::dGelu || e == MatmulEpilogue::dGeluTanh) {
    // The product is dy; unary_grad reads and writes each element once.
    if (Status s = matmul(pool, a, b, transposeA, transposeB, out); s.failed())
      return s;
    return unaryGrad(pool,
                     e == MatmulEpilogue::dGeluTanh ? UnaryKind::geluTanh
                                                    : UnaryKind::gelu,
                     extra, out, out);
  }
  const TensorRef &bias = extra;
  bool act = e != MatmulEpilogue::bias;
  // The product and the sum go where the unfused plan keeps a x b + bias:
  // `pre` when the gradient needs it, else `out` itself (the activation
  // reads and writes each element once, so in place is the same result).
  TensorRef sum = pre ? *pre : out;
  if (Status s = matmul(pool, a, b, transposeA, transposeB, sum); s.failed())
    return s;
  if (Status s = binary(pool, kernels::BinaryKind::add, sum, bias, sum);
      s.failed())
    return s;
  if (!act)
    return {};
  return unary(pool,
               e == MatmulEpilogue::biasGeluTanh ? UnaryKind::geluTanh
                                                 : UnaryKind::gelu,
               sum, out);
}

} // namespace rp::runtime::host
