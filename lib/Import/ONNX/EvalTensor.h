//===- EvalTensor.h - the constant evaluator's tensors ----------*- C++ -*-===//
//
// Private to the constant evaluator (ConstantEvaluator.cpp and
// EvalMovement.cpp). A tensor holds its elements in one of two vectors:
// doubles for floats (each the exact value of its element type) and int64
// for integers and bools, so that every kernel is written once per kind.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_EVALTENSOR_H
#define RP_LIB_IMPORT_ONNX_EVALTENSOR_H

#include "NodeImporter.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mlir::rp::onnx_import::eval {

inline int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The element count of `shape`, or nullopt when a dimension is negative or
/// the product overflows int64: a shape read from a model is checked with
/// this before anything of its size is allocated.
inline std::optional<int64_t> checkedNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  return n;
}

/// `v` as a message shows a number: "0", "1e+18", "0.5" (diagnostics print
/// doubles as 0.000000e+00).
inline std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

struct Tensor {
  Type element;
  SmallVector<int64_t> shape;
  std::vector<double> f;  // float elements
  std::vector<int64_t> i; // integer and bool elements
  bool present = false;   // false for a skipped optional input

  bool isFloat() const { return isa<FloatType>(element); }
  bool isBool() const { return element.isInteger(1); }
  int64_t size() const { return numElements(shape); }
  int64_t rank() const { return shape.size(); }
  /// An empty tensor of `element` and `shape`, with its storage sized.
  static Tensor make(Type element, ArrayRef<int64_t> shape);
  /// Element `k` as a double (integers converted).
  double asDouble(int64_t k) const { return isFloat() ? f[k] : double(i[k]); }
};

/// The state of one evaluation: the node, its inputs and its outputs.
struct Eval {
  NodeImporter &n;
  SmallVector<Tensor> in;
  SmallVector<Tensor> out;

  /// Input 0: evaluateNode checked that it is present (the first input of
  /// every evaluated op is required), so evaluators read it without a
  /// failure path of their own.
  const Tensor &first() const { return in[0]; }
  /// Input `k`, or an error when it is missing.
  FailureOr<const Tensor *> input(int k);
  /// Every input of the node (the variadic ops), or an error naming the
  /// first one missing.
  FailureOr<SmallVector<const Tensor *>> inputs();
  /// Integer elements of input `k` (`what` names its role).
  FailureOr<SmallVector<int64_t>> ints(int k, StringRef what);
  /// An error unless a result of `shape` (computed from the model's values)
  /// has no negative dimension and at most kMaxEvalElements elements:
  /// checked before the result or its index is allocated.
  LogicalResult fits(ArrayRef<int64_t> shape);
  /// An error unless `steps` multiply-adds (a fold's work, each factor
  /// already within kMaxEvalElements) stay under kMaxEvalWork: a fold is
  /// done at import and must not take minutes.
  LogicalResult affordable(ArrayRef<int64_t> factors);
};

/// Rounds `v` to the nearest value of the float type `element`.
double roundTo(Type element, double v);

/// For each element of a tensor of shape `out`, in row-major order, the
/// offset `base + sum(coord[d] * strides[d])` into a source tensor.
std::vector<int64_t> affineIndex(ArrayRef<int64_t> out,
                                 ArrayRef<int64_t> strides, int64_t base = 0);
/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape);
/// Offsets into a tensor of shape `in` broadcast (numpy rules) to `out`.
std::vector<int64_t> broadcastIndex(ArrayRef<int64_t> in,
                                    ArrayRef<int64_t> out);
/// The elements of `x` at `index`, as a tensor of `shape`.
Tensor take(const Tensor &x, const std::vector<int64_t> &index,
            ArrayRef<int64_t> shape);

/// Wraps an integer result to the width and signedness of `element`, as C++
/// kernels on that type do (bools and 64-bit integers are left alone).
inline int64_t wrapInt(Type element, int64_t v) {
  auto integer = dyn_cast<IntegerType>(element);
  unsigned width = integer ? integer.getWidth() : 64;
  if (width <= 1 || width >= 64)
    return v;
  uint64_t bits = uint64_t(v) & ((uint64_t(1) << width) - 1);
  if (integer.isUnsigned())
    return int64_t(bits);
  uint64_t sign = uint64_t(1) << (width - 1);
  return int64_t(bits ^ sign) - int64_t(sign);
}

/// A float cast to the integer type `to`, truncated toward zero, or nullopt
/// where implementations disagree. C++ leaves NaN and values out of range
/// undefined. For INT32 and INT64, values below the range (-inf: CPM-Ant's
/// position buckets cast log(0) so) give the type's minimum everywhere:
/// x86's truncating conversion (PyTorch's and onnxruntime's CPU kernels),
/// CUDA's saturating one and rp's runtime (kernels/Cast.h) agree. Above the
/// range and NaN they do not (x86 gives the minimum, CUDA and rp the
/// maximum, NaN 0): refused. Narrower targets keep the low bits of the
/// int64 value, as before; values beyond int64 are refused.
inline std::optional<int64_t> floatToInt(Type to, double f) {
  auto integer = dyn_cast<IntegerType>(to);
  if (!integer || std::isnan(f))
    return std::nullopt;
  double v = std::trunc(f);
  bool wide = !integer.isUnsigned() &&
              (integer.getWidth() == 32 || integer.getWidth() == 64);
  double lowest = integer.getWidth() == 32 ? -2147483648.0 : -0x1p63;
  if (wide && v < lowest)
    return integer.getWidth() == 32 ? std::numeric_limits<int32_t>::min()
                                    : std::numeric_limits<int64_t>::min();
  if (wide && v >= -lowest)
    return std::nullopt;
  if (!(v >= -0x1p63 && v < 0x1p63))
    return std::nullopt;
  return wrapInt(to, int64_t(v));
}

/// A float function of `a` and `b` computed in float for f32, f16 and bf16
/// and in double for f64, as onnxruntime's kernels do; callers round the
/// result to the element type.
#define FLOAT_FN2(EXPR)                                                        \
  [](double x, double y, bool wide) -> double {                                \
    if (wide) {                                                                \
      double a = x, b = y;                                                     \
      return EXPR;                                                             \
    }                                                                          \
    float a = float(x), b = float(y);                                          \
    return double(EXPR);                                                       \
  }
using EvalFn = LogicalResult (*)(Eval &);
/// Data movement, shapes and generators (EvalMovement.cpp).
void registerMovementEvaluators(llvm::StringMap<EvalFn> &table);
/// Reductions, CumSum, Trilu, MatMul, Einsum, Pad and scatters
/// (EvalCompute.cpp).
void registerComputeEvaluators(llvm::StringMap<EvalFn> &table);
/// NonZero of a constant (EvalNonZero.cpp).
void registerNonZeroEvaluator(llvm::StringMap<EvalFn> &table);

} // namespace mlir::rp::onnx_import::eval

#endif // RP_LIB_IMPORT_ONNX_EVALTENSOR_H
