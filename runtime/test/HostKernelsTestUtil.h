//===- HostKernelsTestUtil.h - helpers of the host kernel tests -*- C++ -*-===//
//
// Owned tensors with random contents, values read back as double, and the
// error measure of DESIGN.md ("equal within t": max|a - b| / max|ref|). The
// references of the tests are plain loops in double over the values the
// kernel actually saw (inputs already rounded to their storage type), so
// the only error measured is the kernel's own.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_HOSTKERNELSTESTUTIL_H
#define RP_RUNTIME_TEST_HOSTKERNELSTESTUTIL_H

#include "rp/runtime/Half.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/kernels/Cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace rp::runtime::testing {

/// The tolerances of the kernel tests, per output dtype (DESIGN.md,
/// "Tolerances"). 16-bit outputs are computed in f32 and rounded once at the
/// end, which alone costs up to half an ulp: 2^-11 = 4.9e-4 (f16) and
/// 2^-8 = 3.9e-3 (bf16) relative; the bounds are about 4x and 2.5x that,
/// room for the f32 arithmetic before the rounding. f32 and f64 leave room
/// for accumulation over the test sizes (up to a few hundred terms) in
/// orders other than the reference's.
inline double tolerance(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return 1e-5;
  case DType::f16:
    return 2e-3;
  case DType::bf16:
    return 1e-2;
  case DType::f64:
    return 1e-12;
  default:
    return 0.0; // Integers and i1 are exact.
  }
}

constexpr DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16,
                                 DType::f64};

/// A small, library-independent generator (splitmix64), so that the test
/// data is the same with every standard library.
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
  int64_t integer(int64_t lo, int64_t hi) {
    return lo +
           static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

private:
  uint64_t state;
};

/// A tensor that owns its (8-byte aligned) storage.
class Buffer {
public:
  Buffer(DType dtype, Shape shape) : dtype(dtype), shape(std::move(shape)) {
    size_t bytes = numElements(this->shape) * dtypeSize(dtype);
    storage.assign((bytes + 7) / 8 + 1, 0);
  }

  TensorRef ref() const {
    TensorRef t;
    t.data = const_cast<uint64_t *>(storage.data());
    t.dtype = dtype;
    t.shape = shape;
    return t;
  }
  int64_t size() const { return numElements(shape); }
  size_t bytes() const { return size() * dtypeSize(dtype); }
  const void *data() const { return storage.data(); }

  double get(int64_t i) const {
    double value = 0;
    visit([&](auto *p) { value = toDouble(p[i]); });
    return value;
  }
  /// Stores `v` rounded (or truncated, for integers) to the dtype.
  void set(int64_t i, double v) {
    visit([&](auto *p) {
      using T = std::remove_pointer_t<decltype(p)>;
      p[i] = kernels::castValue<T>(v);
    });
  }
  std::vector<double> values() const {
    std::vector<double> out(size());
    for (int64_t i = 0; i < size(); ++i)
      out[i] = get(i);
    return out;
  }
  bool sameBits(const Buffer &other) const {
    return bytes() == other.bytes() &&
           std::memcmp(data(), other.data(), bytes()) == 0;
  }

  DType dtype;
  Shape shape;

private:
  template <typename Fn> void visit(Fn &&fn) const {
    void *p = const_cast<uint64_t *>(storage.data());
    switch (dtype) {
    case DType::f32:
      return fn(static_cast<float *>(p));
    case DType::f16:
      return fn(static_cast<f16 *>(p));
    case DType::bf16:
      return fn(static_cast<bf16 *>(p));
    case DType::f64:
      return fn(static_cast<double *>(p));
    case DType::i32:
      return fn(static_cast<int32_t *>(p));
    case DType::i64:
      return fn(static_cast<int64_t *>(p));
    case DType::i1:
      return fn(static_cast<kernels::Bool8 *>(p));
    case DType::u8: // quantized blobs: HostQuantTest holds its own
      return;
    }
  }
  template <typename T> static double toDouble(T v) {
    if constexpr (std::is_same_v<T, kernels::Bool8>)
      return static_cast<bool>(v) ? 1.0 : 0.0;
    else
      return static_cast<double>(v);
  }

  std::vector<uint64_t> storage;
};

/// Uniform values in [lo, hi] (integers), [lo, hi) (floats) or fair coins
/// (i1), stored in `dtype`.
inline Buffer randomBuffer(DType dtype, const Shape &shape, Rng &rng,
                           double lo = -1.0, double hi = 1.0) {
  Buffer b(dtype, shape);
  for (int64_t i = 0; i < b.size(); ++i) {
    if (dtype == DType::i1)
      b.set(i, static_cast<double>(rng.next() & 1));
    else if (isFloat(dtype))
      b.set(i, rng.uniform(lo, hi));
    else
      b.set(i, static_cast<double>(rng.integer(static_cast<int64_t>(lo),
                                               static_cast<int64_t>(hi))));
  }
  return b;
}

inline Buffer fromValues(DType dtype, const Shape &shape,
                         const std::vector<double> &values) {
  Buffer b(dtype, shape);
  for (int64_t i = 0; i < b.size(); ++i)
    b.set(i, values[i]);
  return b;
}

/// max|got - ref| / max|ref| (DESIGN.md). NaN in ref must be NaN in got;
/// infinities must match exactly and are left out of the maxima.
inline double relativeError(const Buffer &got, const std::vector<double> &ref) {
  EXPECT_EQ(got.size(), static_cast<int64_t>(ref.size()));
  double maxDiff = 0, maxRef = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double g = got.get(static_cast<int64_t>(i)), r = ref[i];
    if (std::isnan(r) || std::isinf(r)) {
      if (std::isnan(r) ? !std::isnan(g) : g != r)
        return INFINITY;
      continue;
    }
    maxDiff = std::max(maxDiff, std::fabs(g - r));
    maxRef = std::max(maxRef, std::fabs(r));
  }
  if (maxRef == 0)
    return maxDiff;
  return maxDiff / maxRef;
}

/// Expects `got` to equal `ref` within the tolerance of its dtype.
#define EXPECT_CLOSE(got, ref)                                                 \
  EXPECT_LE(::rp::runtime::testing::relativeError((got), (ref)),               \
            ::rp::runtime::testing::tolerance((got).dtype))                    \
      << "dtype " << dtypeName((got).dtype)

/// Row-major index of the element of `in` that broadcasting reads at
/// position `linear` of `out`.
inline int64_t broadcastIndex(const Shape &out, const Shape &in,
                              int64_t linear) {
  int64_t index = 0, stride = 1;
  size_t lead = out.size() - in.size();
  for (size_t d = out.size(); d-- > 0;) {
    int64_t coord = linear % out[d];
    linear /= out[d];
    if (d < lead)
      continue;
    int64_t size = in[d - lead];
    index += (size == 1 ? 0 : coord) * stride;
    stride *= size;
  }
  return index;
}

/// Runs `run(pool)` with pools of 1, 2 and 3 threads and expects the
/// outputs it returns to be bitwise identical.
template <typename Fn> void expectSameBitsForAnyThreadCount(Fn &&run) {
  std::unique_ptr<Buffer> first;
  for (unsigned threads : {1u, 2u, 3u}) {
    ThreadPool pool(threads);
    Buffer out = run(pool);
    if (!first)
      first = std::make_unique<Buffer>(std::move(out));
    else
      EXPECT_TRUE(first->sameBits(out))
          << "output differs with " << threads << " threads";
  }
}

} // namespace rp::runtime::testing

#endif // RP_RUNTIME_TEST_HOSTKERNELSTESTUTIL_H
