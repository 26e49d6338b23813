//===- MatmulEpilogue.h - a plan matmul's fused epilogue --------*- C++ -*-===//
//
// The plan's third matmul integer (absent: none), written by the exporter and
// read by every device: the compiler and the runtime both need its order, so
// it lives in the contract (docs/architecture.md, "the wall").
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_MATMULEPILOGUE_H
#define RP_CONTRACT_MATMULEPILOGUE_H

namespace rp::plan {

/// bias adds a [N] vector (the third input) to every row; the gelu forms
/// apply gelu after it; the dGelu forms multiply the product (a gradient)
/// by gelu's derivative at the third input, the forward's pre-activation,
/// as rp.unary_grad does.
enum class MatmulEpilogue {
  none,
  bias,
  biasGelu,
  biasGeluTanh,
  dGelu,
  dGeluTanh
};

} // namespace rp::plan

#endif // RP_CONTRACT_MATMULEPILOGUE_H
