//===- CudaElementwise.cu - elementwise kernels of the cuda device --------===//
//
// binary, compare, where, unary, cast and unary_grad: one thread per output
// element, the functors of kernels/Elementwise.h, ElementwiseGrad.h and
// Cast.h applied to values loaded into the compute type, exactly as the
// host kernels (host/HostElementwise.cpp, HostGradients.cpp) apply them.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

#include "rp/runtime/kernels/Cast.h"
#include "rp/runtime/kernels/ElementwiseGrad.h"
#include "rp/runtime/kernels/Philox.h"

namespace rp::runtime::cuda {

using namespace kernels;

namespace {

template <typename T, typename Op>
__global__ void binaryKernel(LaunchContext ctx, ElementMap map, const T *a,
                             const T *b, T *out, int64_t n, Op op) {
  RP_GRID_LOOP(i, n) {
    T rhs = b[mapOffset(map, 1, i)];
    // The host refuses an integer zero divisor before computing; here the
    // first one found is reported and DivOp's 0 written.
    if constexpr (std::is_same_v<Op, DivOp> && std::is_integral_v<T>)
      if (rhs == 0)
        reportError(ctx, kDivisionByZero, i, 0, 0);
    out[i] = store<T>(op(load(a[mapOffset(map, 0, i)]), load(rhs)));
  }
}

template <typename T, typename Op>
__global__ void compareKernel(ElementMap map, const T *a, const T *b,
                              Bool8 *out, int64_t n, Op op) {
  RP_GRID_LOOP(i, n) {
    out[i] =
        Bool8(op(load(a[mapOffset(map, 0, i)]), load(b[mapOffset(map, 1, i)])));
  }
}

template <typename U>
__global__ void whereKernel(ElementMap map, const Bool8 *cond, const U *onTrue,
                            const U *onFalse, U *out, int64_t n) {
  RP_GRID_LOOP(i, n) {
    out[i] = cond[mapOffset(map, 0, i)] ? onTrue[mapOffset(map, 1, i)]
                                        : onFalse[mapOffset(map, 2, i)];
  }
}

template <typename T, typename Op>
__global__ void unaryKernel(const T *x, T *out, int64_t n, Op op) {
  RP_GRID_LOOP(i, n) { out[i] = store<T>(op(load(x[i]))); }
}

template <typename T, typename Op>
__global__ void unaryGradKernel(const T *x, const T *dy, T *dx, int64_t n,
                                Op op) {
  RP_GRID_LOOP(i, n) { dx[i] = store<T>(op(load(x[i]), load(dy[i]))); }
}

// Each element's keep bit from its global index alone (kernels/Philox.h),
// as host/HostDropout.cpp computes it. The key row (seed, step, microbatch,
// on) is in device memory, filled by the trainer's upload: read in the
// kernel, so the launch does not wait for it.
template <typename T>
__global__ void dropoutKernel(const int64_t *row, uint32_t tensor, float p,
                              const T *x, T *out, int64_t n) {
  DropoutKey key = dropoutKeyOfRow(row, tensor, p, uint64_t(n));
  bool on = row[3] != 0;
  uint64_t threshold = dropoutThreshold(p);
  float scale = dropoutScale(p);
  RP_GRID_LOOP(i, n) {
    bool keep = !on || dropoutBits(key, key.offset + uint64_t(i)) >= threshold;
    out[i] = on ? store<T>(keep ? float(load(x[i])) * scale : 0.0f) : x[i];
  }
}

template <typename To, typename From>
__global__ void castKernel(const From *x, To *out, int64_t n) {
  RP_GRID_LOOP(i, n) { out[i] = castValue<To>(x[i]); }
}

} // namespace

cudaError_t launchBinary(const LaunchContext &ctx, DType dtype, int kind,
                         const ElementMap &map, const void *a, const void *b,
                         void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Bool8>) {
      visitBinaryKind(static_cast<BinaryKind>(kind), [&](auto op) {
        using Op = decltype(op);
        if constexpr (!std::is_same_v<Op, PowOp> ||
                      std::is_floating_point_v<Compute<T>>)
          binaryKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
              ctx, map, static_cast<const T *>(a), static_cast<const T *>(b),
              static_cast<T *>(out), n, op);
      });
    }
  });
  return lastLaunchError();
}

cudaError_t launchCompare(const LaunchContext &ctx, DType dtype, int kind,
                          const ElementMap &map, const void *a, const void *b,
                          void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitCmpKind(static_cast<CmpKind>(kind), [&](auto op) {
      compareKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          map, static_cast<const T *>(a), static_cast<const T *>(b),
          static_cast<Bool8 *>(out), n, op);
    });
  });
  return lastLaunchError();
}

cudaError_t launchWhere(const LaunchContext &ctx, size_t elementSize,
                        const ElementMap &map, const void *cond,
                        const void *onTrue, const void *onFalse, void *out,
                        int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitElementSize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    whereKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        map, static_cast<const Bool8 *>(cond), static_cast<const U *>(onTrue),
        static_cast<const U *>(onFalse), static_cast<U *>(out), n);
  });
  return lastLaunchError();
}

cudaError_t launchUnary(const LaunchContext &ctx, DType dtype, int kind,
                        const void *x, void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<Compute<T>>) {
      visitUnaryKind(static_cast<UnaryKind>(kind), [&](auto op) {
        unaryKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
            static_cast<const T *>(x), static_cast<T *>(out), n, op);
      });
    } else if constexpr (std::is_integral_v<T>) {
      unaryKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          static_cast<const T *>(x), static_cast<T *>(out), n, NegOp{});
    }
  });
  return lastLaunchError();
}

cudaError_t launchDropout(const LaunchContext &ctx, DType dtype,
                          const int64_t *row, uint32_t tensor, float p,
                          const void *x, void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropoutKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
        row, tensor, p, static_cast<const T *>(x), static_cast<T *>(out), n);
  });
  return lastLaunchError();
}

cudaError_t launchUnaryGrad(const LaunchContext &ctx, DType dtype, int kind,
                            const void *x, const void *dy, void *dx,
                            int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitUnaryGradKind(static_cast<UnaryKind>(kind), [&](auto op) {
      unaryGradKernel<<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          static_cast<const T *>(x), static_cast<const T *>(dy),
          static_cast<T *>(dx), n, op);
    });
  });
  return lastLaunchError();
}

cudaError_t launchCast(const LaunchContext &ctx, DType from, DType to,
                       const void *x, void *out, int64_t n) {
  if (n == 0)
    return cudaSuccess;
  visitDType(from, [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    visitDType(to, [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      castKernel<To, From><<<blocksFor(n), kThreadsPerBlock, 0, ctx.stream>>>(
          static_cast<const From *>(x), static_cast<To *>(out), n);
    });
  });
  return lastLaunchError();
}

} // namespace rp::runtime::cuda
