//===- OpKinds.h - which kernel kind a plan's call asks for -----*- C++ -*-===//
//
// The host and cuda dispatches read a kernel call of the plan the same
// way, through these: its tensors at the device's buffer addresses, and the
// kind its kernel takes (Kinds.h) from its OpKind and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_OPKINDS_H
#define RP_RUNTIME_KERNELS_OPKINDS_H

#include "rp/runtime/Plan.h"
#include "rp/runtime/kernels/Kinds.h"

#include <cstdint>
#include <vector>

namespace rp::runtime::kernels {

/// The tensors a call reads and writes, in the call's order.
struct CallTensors {
  std::vector<TensorRef> in, outs;
};

/// `c`'s tensors with their data at `buffers` (by plan buffer index).
inline CallTensors callTensors(const Plan &plan, const KernelCallDesc &c,
                               const std::vector<uint8_t *> &buffers) {
  auto buffer = [&](uint32_t b) {
    const BufferDesc &desc = plan.buffers[b];
    return TensorRef{buffers[b], desc.dtype, desc.shape};
  };
  CallTensors t;
  for (uint32_t b : c.inputs)
    t.in.push_back(buffer(b));
  for (uint32_t b : c.outputs)
    t.outs.push_back(buffer(b));
  return t;
}

/// The case labels of the binary arithmetic ops (binaryKindOf) and of the
/// unary ops but gelu (unaryKindOf), for the switches over OpKind: the
/// host's and the cuda device's dispatches and the plan loader's signatures
/// (Plan.cpp) list them from here, so that a new op of either family is
/// listed once (and mapped below).
#define RP_BINARY_OP_CASES                                                     \
  case ::rp::runtime::OpKind::add:                                             \
  case ::rp::runtime::OpKind::sub:                                             \
  case ::rp::runtime::OpKind::mul:                                             \
  case ::rp::runtime::OpKind::div:                                             \
  case ::rp::runtime::OpKind::pow:                                             \
  case ::rp::runtime::OpKind::max:                                             \
  case ::rp::runtime::OpKind::min
#define RP_UNARY_OP_CASES                                                      \
  case ::rp::runtime::OpKind::neg:                                             \
  case ::rp::runtime::OpKind::exp:                                             \
  case ::rp::runtime::OpKind::log:                                             \
  case ::rp::runtime::OpKind::sqrt:                                            \
  case ::rp::runtime::OpKind::rsqrt:                                           \
  case ::rp::runtime::OpKind::tanh:                                            \
  case ::rp::runtime::OpKind::erf:                                             \
  case ::rp::runtime::OpKind::sigmoid:                                         \
  case ::rp::runtime::OpKind::silu:                                            \
  case ::rp::runtime::OpKind::relu

/// add, sub, mul, div, pow, max, min; add for any other op.
inline BinaryKind binaryKindOf(OpKind op) {
  switch (op) {
  case OpKind::sub:
    return BinaryKind::sub;
  case OpKind::mul:
    return BinaryKind::mul;
  case OpKind::div:
    return BinaryKind::div;
  case OpKind::pow:
    return BinaryKind::pow;
  case OpKind::max:
    return BinaryKind::max;
  case OpKind::min:
    return BinaryKind::min;
  default:
    return BinaryKind::add;
  }
}

/// The unary ops but gelu, whose attribute picks its form (unaryKindOfGelu);
/// neg for any other op.
inline UnaryKind unaryKindOf(OpKind op) {
  switch (op) {
  case OpKind::exp:
    return UnaryKind::exp;
  case OpKind::log:
    return UnaryKind::log;
  case OpKind::sqrt:
    return UnaryKind::sqrt;
  case OpKind::rsqrt:
    return UnaryKind::rsqrt;
  case OpKind::tanh:
    return UnaryKind::tanh;
  case OpKind::erf:
    return UnaryKind::erf;
  case OpKind::sigmoid:
    return UnaryKind::sigmoid;
  case OpKind::silu:
    return UnaryKind::silu;
  case OpKind::relu:
    return UnaryKind::relu;
  default:
    return UnaryKind::neg;
  }
}

/// rp.gelu's kind: its attribute is 1 for the tanh approximation.
inline UnaryKind unaryKindOfGelu(int64_t approximateTanh) {
  return approximateTanh ? UnaryKind::geluTanh : UnaryKind::gelu;
}

/// rp.unary_grad's kinds (UnaryGradKind: exp, log, ..., geluTanh) are
/// UnaryKind's without neg; the caller has checked the range
/// (kNumUnaryGradKinds).
constexpr int64_t kNumUnaryGradKinds = 11;
inline UnaryKind unaryGradKindOf(int64_t kind) {
  return static_cast<UnaryKind>(kind + 1);
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_OPKINDS_H
