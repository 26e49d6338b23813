//===- Quantize.cpp - quantizing and dequantizing the frozen base ---------===//
//
// Quantize.h has the format. The arithmetic follows bitsandbytes' portable
// (PyTorch) backend operation by operation, so that a blob is bit for bit
// what bitsandbytes gives for the same weight: the reciprocal of the absmax
// times the value, a clamp, then a bucketize on float midpoints.
//
//===----------------------------------------------------------------------===//

#include "rp/contract/Quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

using namespace rp::quant;

namespace {

const float kNF4[16] = {
    -0x1p+0f,        -0x1.647362p-1f, -0x1.0cd66p-1f,  -0x1.94654p-2f,
    -0x1.23449ap-2f, -0x1.7a6a7ep-3f, -0x1.74f0e2p-4f, 0x0p+0f,
    0x1.45f5fep-4f,  0x1.4995c6p-3f,  0x1.f809bap-3f,  0x1.5a0674p-2f,
    0x1.c3497p-2f,   0x1.200f56p-1f,  0x1.722766p-1f,  0x1p+0f,
};

const float kDynamic[256] = {
    -0x1.fc6666p-1f,  -0x1.f53334p-1f,  -0x1.eep-1f,      -0x1.e6ccccp-1f,
    -0x1.df999ap-1f,  -0x1.d86666p-1f,  -0x1.d13334p-1f,  -0x1.cap-1f,
    -0x1.c2ccccp-1f,  -0x1.bb999ap-1f,  -0x1.b46666p-1f,  -0x1.ad3334p-1f,
    -0x1.a6p-1f,      -0x1.9eccccp-1f,  -0x1.97999ap-1f,  -0x1.906666p-1f,
    -0x1.893334p-1f,  -0x1.82p-1f,      -0x1.7accccp-1f,  -0x1.73999ap-1f,
    -0x1.6c6668p-1f,  -0x1.653334p-1f,  -0x1.5ep-1f,      -0x1.56ccccp-1f,
    -0x1.4f999ap-1f,  -0x1.486668p-1f,  -0x1.413334p-1f,  -0x1.3ap-1f,
    -0x1.32ccccp-1f,  -0x1.2b999ap-1f,  -0x1.246668p-1f,  -0x1.1d3334p-1f,
    -0x1.16p-1f,      -0x1.0eccccp-1f,  -0x1.079998p-1f,  -0x1.006666p-1f,
    -0x1.f26664p-2f,  -0x1.e4p-2f,      -0x1.d59998p-2f,  -0x1.c73334p-2f,
    -0x1.b8ccccp-2f,  -0x1.aa6666p-2f,  -0x1.9cp-2f,      -0x1.8d9998p-2f,
    -0x1.7f3334p-2f,  -0x1.70ccccp-2f,  -0x1.626666p-2f,  -0x1.54p-2f,
    -0x1.459998p-2f,  -0x1.373334p-2f,  -0x1.28ccccp-2f,  -0x1.1a6668p-2f,
    -0x1.0cp-2f,      -0x1.fb3332p-3f,  -0x1.de6666p-3f,  -0x1.c1999ap-3f,
    -0x1.a4ccccp-3f,  -0x1.88p-3f,      -0x1.6b3334p-3f,  -0x1.4e6666p-3f,
    -0x1.31999ap-3f,  -0x1.14ccccp-3f,  -0x1.fp-4f,       -0x1.b66668p-4f,
    -0x1.93d70ap-4f,  -0x1.8851eep-4f,  -0x1.7ccccep-4f,  -0x1.7147aep-4f,
    -0x1.65c29p-4f,   -0x1.5a3d7p-4f,   -0x1.4eb854p-4f,  -0x1.433334p-4f,
    -0x1.37ae14p-4f,  -0x1.2c28f6p-4f,  -0x1.20a3d6p-4f,  -0x1.151ebap-4f,
    -0x1.09999ap-4f,  -0x1.fc28f6p-5f,  -0x1.e51ebap-5f,  -0x1.ce147ap-5f,
    -0x1.b70a3ep-5f,  -0x1.ap-5f,       -0x1.88f5c2p-5f,  -0x1.71eb86p-5f,
    -0x1.5ae146p-5f,  -0x1.43d70ap-5f,  -0x1.2ccccep-5f,  -0x1.15c29p-5f,
    -0x1.fd70a4p-6f,  -0x1.cf5c2ap-6f,  -0x1.a147aep-6f,  -0x1.733334p-6f,
    -0x1.451ebap-6f,  -0x1.170a3ep-6f,  -0x1.d1eb86p-7f,  -0x1.75c29p-7f,
    -0x1.3e76c8p-7f,  -0x1.2c083p-7f,   -0x1.19999ap-7f,  -0x1.072b02p-7f,
    -0x1.e978d4p-8f,  -0x1.c49ba6p-8f,  -0x1.9fbe76p-8f,  -0x1.7ae148p-8f,
    -0x1.56041ap-8f,  -0x1.3126e8p-8f,  -0x1.0c49bap-8f,  -0x1.ced914p-9f,
    -0x1.851eb8p-9f,  -0x1.3b645ap-9f,  -0x1.e353f8p-10f, -0x1.4fdf3ap-10f,
    -0x1.eecbfep-11f, -0x1.b3d07cp-11f, -0x1.78d5p-11f,   -0x1.3dd982p-11f,
    -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f,
    -0x1.040bfep-17f, -0x1.b43528p-19f, -0x1.27476ep-21f, 0x0p+0f,
    0x1.27476ep-21f,  0x1.b43528p-19f,  0x1.040bfep-17f,  0x1.64840cp-16f,
    0x1.6f0068p-15f,  0x1.15df66p-14f,  0x1.743e96p-14f,  0x1.47ae16p-13f,
    0x1.19ce0ap-12f,  0x1.8fc506p-12f,  0x1.02de02p-11f,  0x1.3dd982p-11f,
    0x1.78d5p-11f,    0x1.b3d07cp-11f,  0x1.eecbfep-11f,  0x1.4fdf3ap-10f,
    0x1.e353f8p-10f,  0x1.3b645ap-9f,   0x1.851eb8p-9f,   0x1.ced914p-9f,
    0x1.0c49bap-8f,   0x1.3126e8p-8f,   0x1.56041ap-8f,   0x1.7ae148p-8f,
    0x1.9fbe76p-8f,   0x1.c49ba6p-8f,   0x1.e978d4p-8f,   0x1.072b02p-7f,
    0x1.19999ap-7f,   0x1.2c083p-7f,    0x1.3e76c8p-7f,   0x1.75c29p-7f,
    0x1.d1eb86p-7f,   0x1.170a3ep-6f,   0x1.451ebap-6f,   0x1.733334p-6f,
    0x1.a147aep-6f,   0x1.cf5c2ap-6f,   0x1.fd70a4p-6f,   0x1.15c29p-5f,
    0x1.2ccccep-5f,   0x1.43d70ap-5f,   0x1.5ae146p-5f,   0x1.71eb86p-5f,
    0x1.88f5c2p-5f,   0x1.ap-5f,        0x1.b70a3ep-5f,   0x1.ce147ap-5f,
    0x1.e51ebap-5f,   0x1.fc28f6p-5f,   0x1.09999ap-4f,   0x1.151ebap-4f,
    0x1.20a3d6p-4f,   0x1.2c28f6p-4f,   0x1.37ae14p-4f,   0x1.433334p-4f,
    0x1.4eb854p-4f,   0x1.5a3d7p-4f,    0x1.65c29p-4f,    0x1.7147aep-4f,
    0x1.7ccccep-4f,   0x1.8851eep-4f,   0x1.93d70ap-4f,   0x1.b66668p-4f,
    0x1.fp-4f,        0x1.14ccccp-3f,   0x1.31999ap-3f,   0x1.4e6666p-3f,
    0x1.6b3334p-3f,   0x1.88p-3f,       0x1.a4ccccp-3f,   0x1.c1999ap-3f,
    0x1.de6666p-3f,   0x1.fb3332p-3f,   0x1.0cp-2f,       0x1.1a6668p-2f,
    0x1.28ccccp-2f,   0x1.373334p-2f,   0x1.459998p-2f,   0x1.54p-2f,
    0x1.626666p-2f,   0x1.70ccccp-2f,   0x1.7f3334p-2f,   0x1.8d9998p-2f,
    0x1.9cp-2f,       0x1.aa6666p-2f,   0x1.b8ccccp-2f,   0x1.c73334p-2f,
    0x1.d59998p-2f,   0x1.e4p-2f,       0x1.f26664p-2f,   0x1.006666p-1f,
    0x1.079998p-1f,   0x1.0eccccp-1f,   0x1.16p-1f,       0x1.1d3334p-1f,
    0x1.246668p-1f,   0x1.2b999ap-1f,   0x1.32ccccp-1f,   0x1.3ap-1f,
    0x1.413334p-1f,   0x1.486668p-1f,   0x1.4f999ap-1f,   0x1.56ccccp-1f,
    0x1.5ep-1f,       0x1.653334p-1f,   0x1.6c6668p-1f,   0x1.73999ap-1f,
    0x1.7accccp-1f,   0x1.82p-1f,       0x1.893334p-1f,   0x1.906666p-1f,
    0x1.97999ap-1f,   0x1.9eccccp-1f,   0x1.a6p-1f,       0x1.ad3334p-1f,
    0x1.b46666p-1f,   0x1.bb999ap-1f,   0x1.c2ccccp-1f,   0x1.cap-1f,
    0x1.d13334p-1f,   0x1.d86666p-1f,   0x1.df999ap-1f,   0x1.e6ccccp-1f,
    0x1.eep-1f,       0x1.f53334p-1f,   0x1.fc6666p-1f,   0x1p+0f,
};

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t align4(int64_t a) { return (a + 3) & ~int64_t(3); }

/// The float midpoints between adjacent levels, as bitsandbytes computes
/// them ((a + b) / 2 in f32).
template <int N> struct Bounds {
  float at[N - 1];
  explicit Bounds(const float *levels) {
    for (int i = 0; i + 1 < N; ++i)
      at[i] = (levels[i] + levels[i + 1]) / 2.0f;
  }
  /// torch.bucketize(x, bounds): how many bounds lie below x (a value on a
  /// midpoint takes the lower level). std::end, not at + N - 1: that is
  /// (at + N) - 1, a pointer past the array's end before it comes back
  /// (undefined; clang's UBSan reports it).
  int bucket(float x) const {
    return int(std::lower_bound(std::begin(at), std::end(at), x) - at);
  }
};

/// Blockwise absmax quantization of `x` (n values, blocks of `block`) onto
/// `levels` (N of them): the codes, and each block's absmax.
template <int N>
void quantizeBlocks(const float *x, int64_t n, int64_t block,
                    const Bounds<N> &bounds, uint8_t *codes, float *absmax) {
  for (int64_t b = 0; b * block < n; ++b) {
    int64_t begin = b * block, end = std::min(n, begin + block);
    float m = 0.0f;
    for (int64_t i = begin; i < end; ++i)
      m = std::max(m, std::fabs(x[i]));
    float clamped = std::max(m, 1e-38f);
    // Full blocks multiply by the reciprocal and keep their absmax; a last
    // partial block divides and keeps the clamped one (bitsandbytes does
    // both, so both are kept).
    bool full = end - begin == block;
    absmax[b] = full ? m : clamped;
    float reciprocal = 1.0f / clamped;
    for (int64_t i = begin; i < end; ++i) {
      float s = full ? x[i] * reciprocal : x[i] / clamped;
      s = std::min(1.0f, std::max(-1.0f, s));
      codes[i] = uint8_t(bounds.bucket(s));
    }
  }
}

} // namespace

const float *rp::quant::nf4Levels() { return kNF4; }
const float *rp::quant::dynamicMap() { return kDynamic; }

Layout rp::quant::layoutOf(QuantKind kind, int64_t n) {
  Layout l;
  int64_t blocks = ceilDiv(n, kBlock);
  if (kind == QuantKind::int8) {
    l.scales = align4(n);
    l.bytes = l.scales + 4 * blocks;
    return l;
  }
  l.scales = align4(ceilDiv(n, 2));
  l.scales2 = align4(l.scales + blocks);
  l.offset = l.scales2 + 4 * ceilDiv(blocks, kScaleBlock);
  l.bytes = l.offset + 4;
  return l;
}

void rp::quant::quantize(QuantKind kind, const float *x, int64_t n,
                         uint8_t *out) {
  Layout l = layoutOf(kind, n);
  std::memset(out, 0, size_t(l.bytes));
  int64_t blocks = ceilDiv(n, kBlock);
  std::vector<float> absmax(static_cast<size_t>(blocks));
  if (kind == QuantKind::int8) {
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
      float m = 0.0f;
      for (int64_t i = begin; i < end; ++i)
        m = std::max(m, std::fabs(x[i]));
      absmax[b] = m;
      float reciprocal = 1.0f / std::max(m, 1e-38f);
      for (int64_t i = begin; i < end; ++i) {
        float s = std::min(1.0f, std::max(-1.0f, x[i] * reciprocal));
        out[i] = uint8_t(int8_t(std::nearbyint(s * 127.0f)));
      }
    }
    std::memcpy(out + l.scales, absmax.data(), 4 * size_t(blocks));
    return;
  }
  static const Bounds<16> nf4(kNF4);
  static const Bounds<256> dynamic(kDynamic);
  // An odd count pads the last byte with the code of 0.0, as bitsandbytes
  // pads the values.
  std::vector<uint8_t> codes(static_cast<size_t>(n) + 1,
                             uint8_t(nf4.bucket(0.0f)));
  quantizeBlocks(x, n, kBlock, nf4, codes.data(), absmax.data());
  for (int64_t i = 0; i < n; i += 2)
    out[i / 2] = uint8_t(codes[i] << 4 | codes[i + 1]);
  // Double quantization: the absmax values less their mean, in 8 bits.
  // The mean is taken in double and rounded once (bitsandbytes' torch
  // mean sums in f32, in an order of its own: the two may differ in the
  // last bit; the codes are then computed from this offset).
  double sum = 0;
  for (float a : absmax)
    sum += a;
  float offset = float(sum / double(blocks));
  std::vector<float> centered(absmax.size());
  std::vector<float> absmax2(static_cast<size_t>(ceilDiv(blocks, kScaleBlock)));
  for (size_t b = 0; b < absmax.size(); ++b)
    centered[b] = absmax[b] - offset;
  quantizeBlocks(centered.data(), blocks, kScaleBlock, dynamic, out + l.scales,
                 absmax2.data());
  std::memcpy(out + l.scales2, absmax2.data(), 4 * absmax2.size());
  std::memcpy(out + l.offset, &offset, 4);
}

float rp::quant::blockScale(QuantKind kind, const uint8_t *blob, int64_t n,
                            int64_t b) {
  Layout l = layoutOf(kind, n);
  float a;
  if (kind == QuantKind::int8) {
    std::memcpy(&a, blob + l.scales + 4 * b, 4);
    return a / 127.0f;
  }
  float a2, offset;
  std::memcpy(&a2, blob + l.scales2 + 4 * (b / kScaleBlock), 4);
  std::memcpy(&offset, blob + l.offset, 4);
  // Two roundings, as bitsandbytes: the product, then the sum.
  volatile float product = kDynamic[blob[l.scales + b]] * a2;
  return product + offset;
}

void rp::quant::dequantize(QuantKind kind, const uint8_t *blob, int64_t n,
                           int64_t begin, int64_t end, float *out) {
  for (int64_t i = begin; i < end;) {
    int64_t b = i / kBlock, stop = std::min(end, (b + 1) * kBlock);
    float scale = blockScale(kind, blob, n, b);
    for (; i < stop; ++i) {
      float level = kind == QuantKind::int8
                        ? float(int8_t(blob[i]))
                        : kNF4[(blob[i / 2] >> (i % 2 ? 0 : 4)) & 15];
      out[i - begin] = level * scale;
    }
  }
}
