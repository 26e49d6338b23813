//===- InitializerKinds.cpp - which initializers are buffers --------------===//
//
// The tests the importer applies to a large initializer to tell a buffer
// (a mask, a name matching a frozen pattern) from a trained weight: a scan
// of its bytes for masking values and a match of its name against regular
// expressions. Split out of Importer.cpp to keep each file to one job.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "llvm/Support/Regex.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::rp;

/// Whether the raw little-endian `data` of `element`s holds a masking
/// value: an infinity, a NaN, or a value at or below -1e4 (finfo.min, the
/// -1e4 of older exports), which no trained weight holds.
bool onnx_import::holdsMaskValue(StringRef data, Type element) {
  constexpr double kMaskValue = -1e4;
  auto masks = [&](double x) { return !std::isfinite(x) || x <= kMaskValue; };
  auto scan = [&](auto word, auto toDouble) {
    using Word = decltype(word);
    for (size_t i = 0; i + sizeof(Word) <= data.size(); i += sizeof(Word)) {
      Word bits;
      std::memcpy(&bits, data.data() + i, sizeof(Word));
      if (masks(toDouble(bits)))
        return true;
    }
    return false;
  };
  if (element.isF32())
    return scan(uint32_t(), [](uint32_t b) {
      float f;
      std::memcpy(&f, &b, 4);
      return double(f);
    });
  if (element.isF64())
    return scan(uint64_t(), [](uint64_t b) {
      double d;
      std::memcpy(&d, &b, 8);
      return d;
    });
  if (element.isBF16())
    return scan(uint16_t(), [](uint16_t b) {
      uint32_t w = uint32_t(b) << 16;
      float f;
      std::memcpy(&f, &w, 4);
      return double(f);
    });
  if (element.isF16())
    return scan(uint16_t(), [](uint16_t b) {
      int exponent = (b >> 10) & 0x1f, mantissa = b & 0x3ff;
      double sign = (b & 0x8000) ? -1.0 : 1.0;
      if (exponent == 0x1f)
        return mantissa ? std::nan("") : sign * HUGE_VAL;
      if (exponent == 0)
        return sign * std::ldexp(mantissa, -24);
      return sign * std::ldexp(1024 + mantissa, exponent - 25);
    });
  return false;
}

bool onnx_import::matchesAny(StringRef name, ArrayRef<std::string> patterns) {
  return llvm::any_of(patterns, [&](const std::string &p) {
    return llvm::Regex(p).match(name);
  });
}
