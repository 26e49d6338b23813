//===- ElementwiseGrad.h - per-element VJPs of the rp unary ops -*- C++ -*-===//
//
// One functor per unary op: `dx = dy * f'(x)`, with f'(x) recomputed from
// x in the compute type (Numeric.h), as the VJP rules of RPComputeOps.td
// state them. GELU follows PyTorch's gelu_backward for both forms, and
// relu's gradient is 0 at x = 0 and at NaN (torch's threshold_backward).
// Also the selection rule of binary max/min, shared with the forward
// functors so that the gradient follows exactly the operand the forward
// returned.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_ELEMENTWISEGRAD_H
#define RP_RUNTIME_KERNELS_ELEMENTWISEGRAD_H

#include "rp/runtime/kernels/Elementwise.h"

namespace rp::runtime::kernels {

struct NegGrad {
  template <typename A> RP_HD A operator()(A, A dy) const { return -dy; }
};

struct ExpGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    return dy * kExp(x);
  }
};

struct LogGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const { return dy / x; }
};

struct SqrtGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    return dy / (A(2) * kSqrt(x));
  }
};

/// -dy / 2 * rsqrt(x)^3.
struct RsqrtGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    A r = A(1) / kSqrt(x);
    return dy * A(-0.5) * (r * r * r);
  }
};

struct TanhGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    A t = kTanh(x);
    return dy * (A(1) - t * t);
  }
};

/// dy * 2 / sqrt(pi) * exp(-x^2).
struct ErfGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    const A kTwoOverSqrtPi = A(1.12837916709551257390);
    return dy * kTwoOverSqrtPi * kExp(-(x * x));
  }
};

struct SigmoidGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    A s = sigmoid(x);
    return dy * s * (A(1) - s);
  }
};

/// dy * s * (1 + x * (1 - s)), s = sigmoid(x).
struct SiluGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    A s = sigmoid(x);
    return dy * s * (A(1) + x * (A(1) - s));
  }
};

/// dy where x > 0, else 0 (also for NaN x).
struct ReluGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    return x > A(0) ? dy : A(0);
  }
};

/// d/dx [x Phi(x)] = Phi(x) + x phi(x), PyTorch's GeluType::None backward.
struct GeluGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    const A kSqrtHalf = A(0.70710678118654752440);
    const A kInvSqrtTwoPi = A(0.39894228040143267794); // 1 / sqrt(2 pi)
    A cdf = A(0.5) * (A(1) + kErf(x * kSqrtHalf));
    A pdf = kInvSqrtTwoPi * kExp(A(-0.5) * (x * x));
    return dy * (cdf + x * pdf);
  }
};

/// PyTorch's GeluType::Tanh backward:
/// 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2),
/// t = tanh(beta (x + kappa x^3)).
struct GeluTanhGrad {
  template <typename A> RP_HD A operator()(A x, A dy) const {
    const A kBeta = A(0.79788456080286535588); // sqrt(2 / pi)
    const A kKappa = A(0.044715);
    A xSquared = x * x;
    A inner = kBeta * (x + kKappa * (xSquared * x));
    A t = kTanh(inner);
    A left = A(0.5) * x;
    A right = A(1) + t;
    A leftDerivative = A(0.5) * right;
    A rightDerivative =
        left * (A(1) - t * t) * (kBeta * (A(1) + A(3) * kKappa * xSquared));
    return dy * (leftDerivative + rightDerivative);
  }
};

/// Whether binary max (isMax) or min returns its lhs for (a, b): exactly
/// the forward's choice (MaxOp / MinOp), so ties and a NaN lhs go to lhs
/// and a NaN rhs against a number goes to rhs.
template <typename A> RP_HD inline bool extremumPicksLhs(bool isMax, A a, A b) {
  return kIsNan(a) || (isMax ? a >= b : a <= b);
}

/// Calls fn(grad) with the gradient functor of unary `kind`.
template <typename Fn> void visitUnaryGradKind(UnaryKind kind, Fn &&fn) {
  switch (kind) {
  case UnaryKind::neg:
    return fn(NegGrad{});
  case UnaryKind::exp:
    return fn(ExpGrad{});
  case UnaryKind::log:
    return fn(LogGrad{});
  case UnaryKind::sqrt:
    return fn(SqrtGrad{});
  case UnaryKind::rsqrt:
    return fn(RsqrtGrad{});
  case UnaryKind::tanh:
    return fn(TanhGrad{});
  case UnaryKind::erf:
    return fn(ErfGrad{});
  case UnaryKind::sigmoid:
    return fn(SigmoidGrad{});
  case UnaryKind::silu:
    return fn(SiluGrad{});
  case UnaryKind::relu:
    return fn(ReluGrad{});
  case UnaryKind::gelu:
    return fn(GeluGrad{});
  case UnaryKind::geluTanh:
    return fn(GeluTanhGrad{});
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_ELEMENTWISEGRAD_H
