//===- HostQuant.cpp - dequantizing a frozen weight on the host -----------===//

#include "HostCommon.h"
#include "rp/contract/Quantize.h"
#include "rp/runtime/host/Quant.h"
#include "rp/runtime/kernels/Cast.h"
#include "rp/runtime/kernels/QuantChecks.h"
#include "rp/runtime/kernels/Visit.h"

#include <vector>

using namespace rp::runtime;
using namespace rp::runtime::kernels;
using namespace rp::runtime::host::detail;

Status rp::runtime::host::dequantize(ThreadPool &pool, const TensorRef &blob,
                                     int64_t kind, const TensorRef &out) {
  if (Status s = checkDequantize(blob, kind, out); s.failed())
    return s;
  auto format = static_cast<quant::QuantKind>(kind);
  const uint8_t *bytes = blob.as<const uint8_t>();
  int64_t n = out.size();
  int64_t blocks = (n + quant::kBlock - 1) / quant::kBlock;
  visitDType(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *y = out.as<T>();
    // Whole blocks per chunk: each reads its scale once.
    parallelRanges(pool, blocks, kElementGrain / quant::kBlock,
                   [&](int64_t first, int64_t last) {
                     int64_t begin = first * quant::kBlock;
                     int64_t end = std::min(n, last * quant::kBlock);
                     std::vector<float> values(size_t(end - begin));
                     quant::dequantize(format, bytes, n, begin, end,
                                       values.data());
                     for (int64_t i = begin; i < end; ++i)
                       y[i] = castValue<T>(values[size_t(i - begin)]);
                   });
  });
  return {};
}
