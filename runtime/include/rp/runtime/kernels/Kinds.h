//===- Kinds.h - the op kinds the elementwise kernels take ------*- C++ -*-===//
//
// The closed sets a binary, compare, unary or reduce kernel is told which
// op to apply, shared by the host kernels (host/Kernels.h) and the cuda
// kernels (which take them as ints in this order). Which functor each kind
// applies is visitBinaryKind and the others (Elementwise.h,
// ElementwiseGrad.h); which kind a plan's call asks for is OpKinds.h.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_KINDS_H
#define RP_RUNTIME_KERNELS_KINDS_H

#include "rp/contract/MatmulEpilogue.h"

namespace rp::runtime::kernels {

enum class BinaryKind { add, sub, mul, div, pow, max, min };
enum class CmpKind { eq, ne, lt, le, gt, ge };
enum class UnaryKind {
  neg,
  exp,
  log,
  sqrt,
  rsqrt,
  tanh,
  erf,
  sigmoid,
  silu,
  relu,
  gelu,
  geluTanh
};
enum class ReduceKind { sum, mean, max, min };
/// matmul's fused epilogue: the plan's order (rp/contract/MatmulEpilogue.h).
using MatmulEpilogue = rp::plan::MatmulEpilogue;

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_KINDS_H
