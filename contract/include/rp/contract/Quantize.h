//===- Quantize.h - the quantized frozen base's format ----------*- C++ -*-===//
//
// A frozen weight of a LoRA model stored quantized (rp-compile
// --quantize-base): the compiler quantizes it once into the plan's weights
// file, the devices dequantize it into the compute dtype before its GEMMs.
// Both sides read the blob through this header, so that its layout and
// arithmetic have one definition.
//
// nf4: QLoRA's 4-bit NormalFloat (arXiv 2305.14314) as bitsandbytes computes
// it (quantize_4bit, blocksize 64, compress_statistics=True): the absmax of
// each block of 64 values; every value times the reciprocal of its block's
// absmax, clamped to [-1, 1], takes the nearest of the 16 NF4 levels
// (bucketized on the float midpoints, a tie to the lower level), two codes a
// byte, the first in the high nibble. The absmax values, less their mean
// (the offset), are quantized again to 8 bits in blocks of 256 with
// bitsandbytes' signed dynamic map, the same way. Dequantized:
//   absmax[b] = dynamic[qabsmax[b]] * absmax2[b / 256] + offset
//   w[i]      = nf4[code[i]] * absmax[i / 64]
// in f32, each product and sum rounded (never fused), then rounded to the
// compute dtype.
//
// int8: per block of 64, the absmax; q = round-half-even(x * (1 / absmax) *
// 127), w = q * (absmax / 127).
//
// The blob of n values, in this order, each part at a 4-byte boundary:
//   nf4:  codes ceil(n/2) B | qabsmax ceil(n/64) B | absmax2 f32 x
//         ceil(n/64/256) | offset f32
//   int8: codes n B (int8) | absmax f32 x ceil(n/64)
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_QUANTIZE_H
#define RP_CONTRACT_QUANTIZE_H

#include <cstdint>

namespace rp::quant {

/// The closed set of formats (the dialect's #rp.quant_kind has the same
/// values, and so does a dequantize call's first int in a plan).
enum class QuantKind : uint8_t { nf4 = 0, int8 = 1 };

/// Values per absmax block.
inline constexpr int64_t kBlock = 64;
/// nf4: absmax values per block of the second (8-bit) level.
inline constexpr int64_t kScaleBlock = 256;

/// Byte offsets of the parts of an n-value blob, and its size.
struct Layout {
  int64_t codes = 0;
  int64_t scales = 0;  ///< nf4: qabsmax (u8); int8: absmax (f32)
  int64_t scales2 = 0; ///< nf4: absmax2 (f32); int8: unused
  int64_t offset = 0;  ///< nf4: the offset (f32); int8: unused
  int64_t bytes = 0;
};
Layout layoutOf(QuantKind kind, int64_t n);

/// The NF4 levels (16) and bitsandbytes' signed dynamic 8-bit map (256),
/// as bitsandbytes 0.50 builds them, bit for bit.
const float *nf4Levels();
const float *dynamicMap();

/// Quantizes `x` (n values) into `out` (layoutOf(kind, n).bytes, written
/// whole, padding zeroed).
void quantize(QuantKind kind, const float *x, int64_t n, uint8_t *out);

/// Dequantizes values [begin, end) of an n-value blob into `out` (end -
/// begin f32 values): the reference every device matches.
void dequantize(QuantKind kind, const uint8_t *blob, int64_t n, int64_t begin,
                int64_t end, float *out);

/// The absmax of block b as dequantization uses it (nf4: from the 8-bit
/// level; int8: stored) and the factor a code's level is multiplied by.
float blockScale(QuantKind kind, const uint8_t *blob, int64_t n, int64_t b);

} // namespace rp::quant

#endif // RP_CONTRACT_QUANTIZE_H
