//===- CudaQuant.h - the cuda dequantize kernel -----------------*- C++ -*-===//

#ifndef RP_RUNTIME_CUDA_CUDAQUANT_H
#define RP_RUNTIME_CUDA_CUDAQUANT_H

#include "CudaKernels.h"
#include "rp/contract/Quantize.h"

namespace rp::runtime::cuda {

/// The levels, passed by value with each launch (1 KiB of kernel
/// parameters): no device state to set up or to keep in step with the host.
struct DequantTables {
  float nf4[16];
  float dynamic[256];
};

/// The contract's tables (quant::nf4Levels, quant::dynamicMap).
DequantTables dequantTables();

/// A quantized blob (kind 0 nf4, 1 int8) of n values into `out` of the
/// float dtype `dtype`.
cudaError_t launchDequantize(const LaunchContext &ctx, int kind,
                             const DequantTables &tables, const void *blob,
                             DType dtype, void *out, int64_t n);

} // namespace rp::runtime::cuda

#endif // RP_RUNTIME_CUDA_CUDAQUANT_H
