//===- HostElementwise.cpp - elementwise host kernels ---------------------===//
//
// binary, compare, where, unary and cast. Each output element depends on
// its inputs only, so any chunking gives the same bits; chunks are still
// fixed (kElementGrain) like everywhere else. The per-element math is in
// kernels/Elementwise.h and kernels/Cast.h; this file maps broadcasting
// operands onto it with inner loops specialized for the stride patterns
// that dominate (both contiguous, one side a scalar along the run).
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/kernels/Cast.h"
#include "rp/runtime/kernels/Elementwise.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// out[i] = store(fn(load(a[i]), load(b[i]))) over broadcast operands.
template <typename T, typename R, typename Fn>
void runBinaryLoop(ThreadPool &pool, const StridedPlan &plan, const T *a,
                   const T *b, R *out, int64_t n, Fn fn) {
  const int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
  parallelRanges(pool, n, kElementGrain, [&](int64_t begin, int64_t end) {
    forEachRun(plan, begin, end,
               [&](int64_t o, const int64_t *offsets, int64_t count) {
                 const T *pa = a + offsets[0];
                 const T *pb = b + offsets[1];
                 R *py = out + o;
                 if (sa == 1 && sb == 1) {
                   for (int64_t i = 0; i < count; ++i)
                     py[i] = fn(load(pa[i]), load(pb[i]));
                 } else if (sa == 1 && sb == 0) {
                   auto vb = load(*pb);
                   for (int64_t i = 0; i < count; ++i)
                     py[i] = fn(load(pa[i]), vb);
                 } else if (sa == 0 && sb == 1) {
                   auto va = load(*pa);
                   for (int64_t i = 0; i < count; ++i)
                     py[i] = fn(va, load(pb[i]));
                 } else {
                   for (int64_t i = 0; i < count; ++i)
                     py[i] = fn(load(pa[i * sa]), load(pb[i * sb]));
                 }
               });
  });
}

/// Whether an integer divisor tensor holds a zero, by its dtype.
bool hasZero(const TensorRef &t) {
  bool zero = false;
  visitDType(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      const T *data = t.as<T>();
      for (int64_t i = 0, n = t.size(); i < n && !zero; ++i)
        zero = data[i] == 0;
    }
  });
  return zero;
}

} // namespace

Status binary(ThreadPool &pool, BinaryKind kind, const TensorRef &a,
              const TensorRef &b, const TensorRef &out) {
  const char *op = "binary";
  if (a.dtype != b.dtype || a.dtype != out.dtype)
    return invalidArgument(std::string(op) +
                           ": element types differ: " + describe(a) + ", " +
                           describe(b) + " -> " + describe(out));
  DType dtype = a.dtype;
  if (dtype == DType::i1)
    return unsupportedDType(op, dtype, "arithmetic");
  if (kind == BinaryKind::pow && !isFloat(dtype))
    return unsupportedDType(op, dtype, "pow");
  StridedPlan plan;
  if (Status s = planBroadcastOp(op, {&a, &b}, out, plan); s.failed())
    return s;
  // A zero divisor would trap (SIGFPE) in C++; the dialect calls it an error.
  if (kind == BinaryKind::div && isInteger(dtype) && out.size() > 0 &&
      hasZero(b))
    return invalidArgument(std::string(op) +
                           ": integer division by zero (divisor " +
                           describe(b) + " holds a 0)");
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Bool8>) {
      visitBinaryKind(kind, [&](auto fn) {
        using Fn = decltype(fn);
        if constexpr (std::is_same_v<Fn, PowOp> &&
                      !std::is_floating_point_v<Compute<T>>) {
          return; // Refused above.
        } else {
          runBinaryLoop(
              pool, plan, a.as<const T>(), b.as<const T>(), out.as<T>(),
              out.size(),
              [fn](Compute<T> x, Compute<T> y) { return store<T>(fn(x, y)); });
        }
      });
    }
  });
  return {};
}

Status compare(ThreadPool &pool, CmpKind kind, const TensorRef &a,
               const TensorRef &b, const TensorRef &out) {
  const char *op = "compare";
  if (a.dtype != b.dtype)
    return invalidArgument(std::string(op) +
                           ": operand element types differ: " + describe(a) +
                           ", " + describe(b));
  if (out.dtype != DType::i1)
    return invalidArgument(std::string(op) + ": output " + describe(out) +
                           " should have element type i1");
  StridedPlan plan;
  if (Status s = planBroadcastOp(op, {&a, &b}, out, plan); s.failed())
    return s;
  visitDType(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitCmpKind(kind, [&](auto fn) {
      runBinaryLoop(
          pool, plan, a.as<const T>(), b.as<const T>(), out.as<Bool8>(),
          out.size(),
          [fn](Compute<T> x, Compute<T> y) { return Bool8(fn(x, y)); });
    });
  });
  return {};
}

Status where(ThreadPool &pool, const TensorRef &cond, const TensorRef &onTrue,
             const TensorRef &onFalse, const TensorRef &out) {
  const char *op = "where";
  if (cond.dtype != DType::i1)
    return invalidArgument(std::string(op) + ": condition " + describe(cond) +
                           " should have element type i1");
  if (onTrue.dtype != onFalse.dtype || onTrue.dtype != out.dtype)
    return invalidArgument(std::string(op) +
                           ": element types differ: " + describe(onTrue) +
                           ", " + describe(onFalse) + " -> " + describe(out));
  StridedPlan plan;
  if (Status s = planBroadcastOp(op, {&cond, &onTrue, &onFalse}, out, plan);
      s.failed())
    return s;
  // Selection moves values unchanged, so only the element size matters.
  visitElementSize(dtypeSize(out.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const Bool8 *c = cond.as<const Bool8>();
    const U *t = onTrue.as<const U>(), *f = onFalse.as<const U>();
    U *y = out.as<U>();
    const int64_t sc = plan.innerStride(0), st = plan.innerStride(1),
                  sf = plan.innerStride(2);
    parallelRanges(
        pool, out.size(), kElementGrain, [&](int64_t begin, int64_t end) {
          forEachRun(plan, begin, end,
                     [&](int64_t o, const int64_t *offsets, int64_t count) {
                       const Bool8 *pc = c + offsets[0];
                       const U *pt = t + offsets[1];
                       const U *pf = f + offsets[2];
                       for (int64_t i = 0; i < count; ++i)
                         y[o + i] = pc[i * sc] ? pt[i * st] : pf[i * sf];
                     });
        });
  });
  return {};
}

Status unary(ThreadPool &pool, UnaryKind kind, const TensorRef &x,
             const TensorRef &out) {
  const char *op = "unary";
  if (Status s = checkUnaryOutput(op, x, out); s.failed())
    return s;
  if (!isFloat(x.dtype) && !(kind == UnaryKind::neg && isInteger(x.dtype)))
    return unsupportedDType(op, x.dtype,
                            kind == UnaryKind::neg ? "neg" : "float math");
  visitDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitUnaryKind(kind, [&](auto fn) {
      using Fn = decltype(fn);
      constexpr bool kFloat = std::is_floating_point_v<Compute<T>>;
      constexpr bool kIntNeg =
          std::is_integral_v<T> && std::is_same_v<Fn, NegOp>;
      if constexpr (kFloat || kIntNeg) {
        const T *in = x.as<const T>();
        T *y = out.as<T>();
        forEachElement(pool, x.size(),
                       [&](int64_t i) { y[i] = store<T>(fn(load(in[i]))); });
      }
    });
  });
  return {};
}

Status cast(ThreadPool &pool, const TensorRef &x, const TensorRef &out) {
  const char *op = "cast";
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (Status s = checkTensor(out, "output", op); s.failed())
    return s;
  if (Status s = checkSameShape(x, out, op); s.failed())
    return s;
  visitDType(x.dtype, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    visitDType(out.dtype, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      const From *in = x.as<const From>();
      To *y = out.as<To>();
      forEachElement(pool, x.size(),
                     [&](int64_t i) { y[i] = castValue<To>(in[i]); });
    });
  });
  return {};
}

} // namespace rp::runtime::host
