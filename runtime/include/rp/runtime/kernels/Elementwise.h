//===- Elementwise.h - per-element math of the rp elementwise ops -*- C++ -*-=//
//
// One functor per op, applied to values already loaded into the compute type
// (Numeric.h). The semantics are those of the rp dialect (RPComputeOps.td),
// with these choices where it leaves them open:
// - integer add/sub/mul/neg wrap around (two's complement) instead of being
//   undefined on overflow; integer division truncates toward zero, INT_MIN /
//   -1 wraps to INT_MIN and x / 0 gives 0 here (the host kernel reports a
//   zero divisor as an error before computing);
// - float max/min propagate NaN and return lhs on ties, as torch.maximum /
//   torch.minimum (and the VJP rule "dy goes to lhs on ties");
// - pow is C's pow: a negative base with a non-integer exponent is NaN,
//   pow(x, 0) is 1 (as torch.pow);
// - sigmoid and SiLU never overflow exp; GELU matches PyTorch's formulas.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_ELEMENTWISE_H
#define RP_RUNTIME_KERNELS_ELEMENTWISE_H

#include "rp/runtime/kernels/Kinds.h"
#include "rp/runtime/kernels/Numeric.h"

#include <type_traits>

namespace rp::runtime::kernels {

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

template <typename T> using UnsignedOf = std::make_unsigned_t<T>;

struct AddOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<UnsignedOf<T>>(a) +
                            static_cast<UnsignedOf<T>>(b));
    else
      return a + b;
  }
};

struct SubOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<UnsignedOf<T>>(a) -
                            static_cast<UnsignedOf<T>>(b));
    else
      return a - b;
  }
};

struct MulOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<UnsignedOf<T>>(a) *
                            static_cast<UnsignedOf<T>>(b));
    else
      return a * b;
  }
};

struct DivOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0)
        return 0;
      if (b == -1) // INT_MIN / -1 overflows; wrap like neg.
        return static_cast<T>(UnsignedOf<T>(0) - static_cast<UnsignedOf<T>>(a));
      return a / b; // C++ truncates toward zero.
    } else {
      return a / b;
    }
  }
};

struct PowOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    static_assert(std::is_floating_point_v<T>, "pow is float only");
    return kPow(a, b);
  }
};

struct MaxOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (kIsNan(a) || a >= b) ? a : b;
    else
      return a >= b ? a : b;
  }
};

struct MinOp {
  template <typename T> RP_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return (kIsNan(a) || a <= b) ? a : b;
    else
      return a <= b ? a : b;
  }
};

//===----------------------------------------------------------------------===//
// Compare: C++'s operators are already ordered (NaN: only != is true).
//===----------------------------------------------------------------------===//

struct EqOp {
  template <typename T> RP_HD bool operator()(T a, T b) const { return a == b; }
};
struct NeOp {
  template <typename T> RP_HD bool operator()(T a, T b) const { return a != b; }
};
struct LtOp {
  template <typename T> RP_HD bool operator()(T a, T b) const { return a < b; }
};
struct LeOp {
  template <typename T> RP_HD bool operator()(T a, T b) const { return a <= b; }
};
struct GtOp {
  template <typename T> RP_HD bool operator()(T a, T b) const { return a > b; }
};
struct GeOp {
  template <typename T> RP_HD bool operator()(T a, T b) const { return a >= b; }
};

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

struct NegOp {
  template <typename T> RP_HD T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(0) - static_cast<UnsignedOf<T>>(x));
    else
      return -x;
  }
};

struct ExpOp {
  template <typename A> RP_HD A operator()(A x) const { return kExp(x); }
};
struct LogOp {
  template <typename A> RP_HD A operator()(A x) const { return kLog(x); }
};
struct SqrtOp {
  template <typename A> RP_HD A operator()(A x) const { return kSqrt(x); }
};
struct RsqrtOp {
  template <typename A> RP_HD A operator()(A x) const {
    return A(1) / kSqrt(x);
  }
};
struct TanhOp {
  template <typename A> RP_HD A operator()(A x) const { return kTanh(x); }
};
struct ErfOp {
  template <typename A> RP_HD A operator()(A x) const { return kErf(x); }
};

/// 1 / (1 + e^-x), evaluated so that exp only sees non-positive arguments.
template <typename A> RP_HD inline A sigmoid(A x) {
  if (x >= A(0))
    return A(1) / (A(1) + kExp(-x));
  A e = kExp(x); // Also the NaN path: x >= 0 is false for NaN.
  return e / (A(1) + e);
}

struct SigmoidOp {
  template <typename A> RP_HD A operator()(A x) const { return sigmoid(x); }
};
struct SiluOp {
  template <typename A> RP_HD A operator()(A x) const { return x * sigmoid(x); }
};
struct ReluOp {
  /// max(x, 0) that keeps NaN, as torch.relu.
  template <typename A> RP_HD A operator()(A x) const {
    return (x > A(0) || kIsNan(x)) ? x : A(0);
  }
};

/// x * Phi(x) in PyTorch's form: x * 0.5 * (1 + erf(x / sqrt(2))).
struct GeluOp {
  template <typename A> RP_HD A operator()(A x) const {
    const A kSqrtHalf = A(0.70710678118654752440);
    return x * A(0.5) * (A(1) + kErf(x * kSqrtHalf));
  }
};

/// PyTorch's gelu(approximate='tanh'):
/// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
struct GeluTanhOp {
  template <typename A> RP_HD A operator()(A x) const {
    const A kBeta = A(0.79788456080286535588); // sqrt(2 / pi)
    const A kKappa = A(0.044715);
    A inner = kBeta * (x + kKappa * (x * x * x));
    return A(0.5) * x * (A(1) + kTanh(inner));
  }
};

//===----------------------------------------------------------------------===//
// Kinds to functors (Kinds.h), for host code and kernel launchers alike
//===----------------------------------------------------------------------===//

/// Calls fn(op) with the functor of `kind`.
template <typename Fn> void visitBinaryKind(BinaryKind kind, Fn &&fn) {
  switch (kind) {
  case BinaryKind::add:
    return fn(AddOp{});
  case BinaryKind::sub:
    return fn(SubOp{});
  case BinaryKind::mul:
    return fn(MulOp{});
  case BinaryKind::div:
    return fn(DivOp{});
  case BinaryKind::pow:
    return fn(PowOp{});
  case BinaryKind::max:
    return fn(MaxOp{});
  case BinaryKind::min:
    return fn(MinOp{});
  }
}

template <typename Fn> void visitCmpKind(CmpKind kind, Fn &&fn) {
  switch (kind) {
  case CmpKind::eq:
    return fn(EqOp{});
  case CmpKind::ne:
    return fn(NeOp{});
  case CmpKind::lt:
    return fn(LtOp{});
  case CmpKind::le:
    return fn(LeOp{});
  case CmpKind::gt:
    return fn(GtOp{});
  case CmpKind::ge:
    return fn(GeOp{});
  }
}

template <typename Fn> void visitUnaryKind(UnaryKind kind, Fn &&fn) {
  switch (kind) {
  case UnaryKind::neg:
    return fn(NegOp{});
  case UnaryKind::exp:
    return fn(ExpOp{});
  case UnaryKind::log:
    return fn(LogOp{});
  case UnaryKind::sqrt:
    return fn(SqrtOp{});
  case UnaryKind::rsqrt:
    return fn(RsqrtOp{});
  case UnaryKind::tanh:
    return fn(TanhOp{});
  case UnaryKind::erf:
    return fn(ErfOp{});
  case UnaryKind::sigmoid:
    return fn(SigmoidOp{});
  case UnaryKind::silu:
    return fn(SiluOp{});
  case UnaryKind::relu:
    return fn(ReluOp{});
  case UnaryKind::gelu:
    return fn(GeluOp{});
  case UnaryKind::geluTanh:
    return fn(GeluTanhOp{});
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_ELEMENTWISE_H
