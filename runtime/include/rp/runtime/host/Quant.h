//===- Quant.h - the host's dequantize kernel -------------------*- C++ -*-===//

#ifndef RP_RUNTIME_HOST_QUANT_H
#define RP_RUNTIME_HOST_QUANT_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/ThreadPool.h"

namespace rp::runtime::host {

/// A quantized weight's blob (kind 0 nf4, 1 int8) into `out`'s float type:
/// contract/include/rp/contract/Quantize.h's reference arithmetic, each
/// value rounded once to the output type. Pure per value, so the bits do
/// not depend on the thread count; the cuda kernel matches them.
Status dequantize(ThreadPool &pool, const TensorRef &blob, int64_t kind,
                  const TensorRef &out);

} // namespace rp::runtime::host

#endif // RP_RUNTIME_HOST_QUANT_H
