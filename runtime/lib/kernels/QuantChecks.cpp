//===- QuantChecks.cpp - dequantize's argument checks ---------------------===//

#include "rp/runtime/kernels/QuantChecks.h"
#include "rp/contract/Quantize.h"
#include "rp/runtime/kernels/Checks.h"

#include <string>

using namespace rp::runtime;

Status rp::runtime::kernels::checkDequantize(const TensorRef &blob,
                                             int64_t kind,
                                             const TensorRef &out) {
  const char *op = "dequantize";
  if (kind != 0 && kind != 1)
    return invalidArgument("dequantize: unknown quantized format " +
                           std::to_string(kind) + " (0 nf4, 1 int8)");
  if (Status s = checkTensorOf(blob, DType::u8, "blob", op); s.failed())
    return s;
  if (Status s = checkTensor(out, "output", op); s.failed())
    return s;
  if (!isFloat(out.dtype))
    return invalidArgument(std::string("dequantize: the output is ") +
                           dtypeName(out.dtype) + ", not a float type");
  int64_t want =
      quant::layoutOf(static_cast<quant::QuantKind>(kind), out.size()).bytes;
  if (blob.size() != want)
    return invalidArgument("dequantize: a blob of " +
                           std::to_string(blob.size()) + " bytes for " +
                           std::to_string(out.size()) + " values, which take " +
                           std::to_string(want));
  return {};
}
