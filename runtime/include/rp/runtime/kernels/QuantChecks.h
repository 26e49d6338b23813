//===- QuantChecks.h - dequantize's argument checks -------------*- C++ -*-===//
//
// Shared by the host kernel and the cuda driver, so that both refuse the
// same calls with the same message.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_QUANTCHECKS_H
#define RP_RUNTIME_KERNELS_QUANTCHECKS_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

namespace rp::runtime::kernels {

/// A known kind (0 nf4, 1 int8), a u8 blob of exactly the contract's size
/// for the output's element count, and a float output.
Status checkDequantize(const TensorRef &blob, int64_t kind,
                       const TensorRef &out);

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_QUANTCHECKS_H
