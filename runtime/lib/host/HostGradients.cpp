//===- HostGradients.cpp - elementwise and data movement backward ---------===//
//
// unaryGrad, maxMinGrad, sumToShape, reduceExtremumGrad, gatherGrad and
// sliceGrad. Every output element is written by exactly one chunk, and
// the ones that sum (sumToShape, gatherGrad) sum in an order fixed by the
// shapes and the indices alone:
// - sumToShape is a sum reduce (HostNN.cpp) over the stretched dimensions,
//   folding in row-major order of the reduced indices;
// - gatherGrad first lists, for every position along the axis, the index
//   positions that point at it, in increasing order (a counting sort, one
//   sequential pass); chunks then own rows of dx, (outer, axis position)
//   pairs, and each row adds its dy rows in that list's order, in the
//   compute type, storing once. Repeated indices therefore accumulate in
//   index order whatever the thread count, without atomics.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/kernels/ElementwiseGrad.h"

#include <cstring>
#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Sets the bytes of `t` to zero, which is +0 in every dtype.
void zeroFill(ThreadPool &pool, const TensorRef &t) {
  const size_t elementSize = dtypeSize(t.dtype);
  auto *bytes = static_cast<char *>(t.data);
  parallelRanges(pool, t.size(), kElementGrain,
                 [&](int64_t begin, int64_t end) {
                   std::memset(bytes + begin * elementSize, 0,
                               (end - begin) * elementSize);
                 });
}

/// Dimensions of a tensor split into the kept and the reduced ones, each
/// with its size and its stride in the tensor.
struct SplitDims {
  std::vector<int64_t> keptSize, keptStride, reducedSize, reducedStride;
};

} // namespace

Status unaryGrad(ThreadPool &pool, UnaryKind kind, const TensorRef &x,
                 const TensorRef &dy, const TensorRef &dx) {
  const char *op = "unary_grad";
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (!isFloat(x.dtype))
    return unsupportedDType(op, x.dtype);
  if (Status s = checkLike(op, "output gradient", dy, x); s.failed())
    return s;
  if (Status s = checkLike(op, "input gradient", dx, x); s.failed())
    return s;
  visitFloat(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitUnaryGradKind(kind, [&](auto fn) {
      const T *xd = x.as<const T>(), *dyd = dy.as<const T>();
      T *dxd = dx.as<T>();
      parallelRanges(pool, x.size(), kElementGrain,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i)
                         dxd[i] = store<T>(fn(load(xd[i]), load(dyd[i])));
                     });
    });
  });
  return {};
}

Status maxMinGrad(ThreadPool &pool, bool isMax, const TensorRef &lhs,
                  const TensorRef &rhs, const TensorRef &dy,
                  const TensorRef &dlhs, const TensorRef &drhs) {
  const char *op = isMax ? "max_grad" : "min_grad";
  if (Status s = checkTensor(lhs, "lhs", op); s.failed())
    return s;
  if (!isFloat(lhs.dtype))
    return unsupportedDType(op, lhs.dtype);
  if (Status s = checkTensorOf(rhs, lhs.dtype, "rhs", op); s.failed())
    return s;
  if (Status s = checkTensorOf(dy, lhs.dtype, "output gradient", op);
      s.failed())
    return s;
  Shape expected;
  if (!broadcastShapes({&lhs.shape, &rhs.shape}, expected))
    return invalidArgument(std::string(op) + ": operand shapes " +
                           describeShape(lhs.shape) + " " +
                           describeShape(rhs.shape) + " do not broadcast");
  if (dy.shape != expected)
    return invalidArgument(std::string(op) + ": output gradient " +
                           describe(dy) + " should have the broadcast shape " +
                           describeShape(expected));
  if (Status s = checkLike(op, "lhs gradient", dlhs, dy); s.failed())
    return s;
  if (Status s = checkLike(op, "rhs gradient", drhs, dy); s.failed())
    return s;
  if (dy.size() == 0)
    return {};
  StridedPlan plan;
  if (Status s = makeBroadcastPlan(dy.shape, {&lhs, &rhs, &dy}, plan, op);
      s.failed())
    return s;
  visitFloat(lhs.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *a = lhs.as<const T>(), *b = rhs.as<const T>(),
            *g = dy.as<const T>();
    T *ga = dlhs.as<T>(), *gb = drhs.as<T>();
    const T zero = store<T>(Compute<T>(0));
    const int64_t sa = plan.innerStride(0), sb = plan.innerStride(1);
    parallelRanges(
        pool, dy.size(), kElementGrain, [&](int64_t begin, int64_t end) {
          forEachRun(plan, begin, end,
                     [&](int64_t o, const int64_t *offsets, int64_t count) {
                       const T *pa = a + offsets[0], *pb = b + offsets[1];
                       for (int64_t i = 0; i < count; ++i) {
                         // dy itself is contiguous: offsets[2] == o.
                         bool left = extremumPicksLhs(isMax, load(pa[i * sa]),
                                                      load(pb[i * sb]));
                         ga[o + i] = left ? g[o + i] : zero;
                         gb[o + i] = left ? zero : g[o + i];
                       }
                     });
        });
  });
  return {};
}

Status sumToShape(ThreadPool &pool, const TensorRef &x, const TensorRef &out) {
  const char *op = "sum_to_shape";
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (Status s = checkTensorOf(out, x.dtype, "output", op); s.failed())
    return s;
  if (x.dtype == DType::i1)
    return unsupportedDType(op, x.dtype);
  const size_t rank = x.shape.size(), outRank = out.shape.size();
  bool broadcasts = outRank <= rank;
  const size_t lead = broadcasts ? rank - outRank : 0;
  for (size_t d = 0; broadcasts && d < outRank; ++d)
    broadcasts = out.shape[d] == x.shape[lead + d] || out.shape[d] == 1;
  if (!broadcasts)
    return invalidArgument(std::string(op) + ": output " + describe(out) +
                           " does not broadcast to the input " + describe(x));
  // The stretched dimensions, and the output seen with x's rank (reduced
  // dimensions kept as 1): the same elements in the same order.
  std::vector<int64_t> dims;
  Shape keptShape = x.shape;
  for (size_t d = 0; d < rank; ++d) {
    bool stretched = d < lead || (out.shape[d - lead] == 1 && x.shape[d] != 1);
    if (stretched) {
      dims.push_back(static_cast<int64_t>(d));
      keptShape[d] = 1;
    }
  }
  TensorRef view = out;
  view.shape = keptShape;
  if (dims.empty())
    return copy(pool, x, view);
  return reduce(pool, ReduceKind::sum, x, dims, /*keepDims=*/true, view);
}

Status reduceExtremumGrad(ThreadPool &pool, bool isMax, const TensorRef &x,
                          const std::vector<int64_t> &dims, bool keepDims,
                          const TensorRef &dy, const TensorRef &dx) {
  const char *op = isMax ? "reduce_max_grad" : "reduce_min_grad";
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (!isFloat(x.dtype))
    return unsupportedDType(op, x.dtype);
  if (Status s = checkTensorOf(dy, x.dtype, "output gradient", op); s.failed())
    return s;
  if (Status s = checkLike(op, "input gradient", dx, x); s.failed())
    return s;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (Status s = checkReduceDims(op, dims, x); s.failed())
    return s;
  Shape expected;
  SplitDims split;
  std::vector<int64_t> strides(rank);
  kernels::contiguousStrides(x.shape.data(), static_cast<int>(rank),
                             strides.data());
  for (int64_t d = 0, i = 0; d < rank; ++d) {
    bool reduced = i < static_cast<int64_t>(dims.size()) && dims[i] == d;
    if (reduced) {
      ++i;
      split.reducedSize.push_back(x.shape[d]);
      split.reducedStride.push_back(strides[d]);
      if (keepDims)
        expected.push_back(1);
    } else {
      split.keptSize.push_back(x.shape[d]);
      split.keptStride.push_back(strides[d]);
      expected.push_back(x.shape[d]);
    }
  }
  if (dy.shape != expected)
    return invalidArgument(std::string(op) + ": output gradient " +
                           describe(dy) + " should have shape " +
                           describeShape(expected));
  if (x.size() == 0)
    return {};
  const int64_t numOut = dy.size(), reducedCount = x.size() / numOut;
  visitFloat(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *xd = x.as<const T>(), *g = dy.as<const T>();
    T *gx = dx.as<T>();
    const T zero = store<T>(C(0));
    const size_t numKept = split.keptSize.size(),
                 numReduced = split.reducedSize.size();
    parallelRanges(
        pool, numOut, rowGrain(reducedCount), [&](int64_t begin, int64_t end) {
          std::vector<int64_t> index(numReduced);
          for (int64_t o = begin; o < end; ++o) {
            int64_t base = 0, linear = o;
            for (size_t k = numKept; k-- > 0;) {
              base += (linear % split.keptSize[k]) * split.keptStride[k];
              linear /= split.keptSize[k];
            }
            // The forward's fold (MaxOp / MinOp) over the reduced indices
            // in row-major order, remembering where the kept value came
            // from: ties keep the first, NaN wins and the first NaN stays.
            std::fill(index.begin(), index.end(), 0);
            int64_t offset = 0, best = base;
            C acc = load(xd[base]);
            for (int64_t r = 0; r < reducedCount; ++r) {
              int64_t at = base + offset;
              gx[at] = zero;
              C value = load(xd[at]);
              if (!extremumPicksLhs(isMax, acc, value)) {
                acc = value;
                best = at;
              }
              for (size_t k = numReduced; k-- > 0;) {
                offset += split.reducedStride[k];
                if (++index[k] < split.reducedSize[k])
                  break;
                offset -= index[k] * split.reducedStride[k];
                index[k] = 0;
              }
            }
            gx[best] = g[o];
          }
        });
  });
  return {};
}

Status gatherGrad(ThreadPool &pool, const TensorRef &indices, int64_t axis,
                  const TensorRef &dy, const TensorRef &dx) {
  const char *op = "gather_grad";
  if (Status s = checkTensor(dx, "input gradient", op); s.failed())
    return s;
  if (!isFloat(dx.dtype))
    return unsupportedDType(op, dx.dtype);
  if (Status s = checkTensorOf(dy, dx.dtype, "output gradient", op); s.failed())
    return s;
  std::vector<int64_t> normalized;
  if (Status s = gatherIndices(op, dx, indices, axis, dy, "output gradient",
                               normalized);
      s.failed())
    return s;
  const int64_t rank = static_cast<int64_t>(dx.shape.size());

  // Bucket the index positions by the axis position they read (in
  // increasing order within a bucket).
  const int64_t axisSize = dx.shape[axis], numIndices = indices.size();
  std::vector<int64_t> start(axisSize + 1, 0);
  for (int64_t i = 0; i < numIndices; ++i)
    ++start[normalized[i] + 1];
  for (int64_t a = 0; a < axisSize; ++a)
    start[a + 1] += start[a];
  std::vector<int64_t> bucket(numIndices), fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < numIndices; ++i)
    bucket[fill[normalized[i]]++] = i;
  if (dx.size() == 0)
    return {};

  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= dx.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= dx.shape[d];
  visitFloat(dx.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *g = dy.as<const T>();
    T *gx = dx.as<T>();
    parallelRanges(pool, outer * axisSize, rowGrain(inner),
                   [&](int64_t begin, int64_t end) {
                     std::vector<C> acc(inner);
                     for (int64_t item = begin; item < end; ++item) {
                       int64_t o = item / axisSize, a = item % axisSize;
                       std::fill(acc.begin(), acc.end(), C(0));
                       for (int64_t b = start[a]; b < start[a + 1]; ++b) {
                         const T *row =
                             g + (o * numIndices + bucket[b]) * inner;
                         for (int64_t c = 0; c < inner; ++c)
                           acc[c] += load(row[c]);
                       }
                       T *out = gx + item * inner;
                       for (int64_t c = 0; c < inner; ++c)
                         out[c] = store<T>(acc[c]);
                     }
                   });
  });
  return {};
}

Status sliceGrad(ThreadPool &pool, const TensorRef &dy,
                 const std::vector<int64_t> &offsets,
                 const std::vector<int64_t> &strides, const TensorRef &dx) {
  const char *op = "slice_grad";
  if (Status s = checkTensor(dx, "input gradient", op); s.failed())
    return s;
  if (Status s = checkTensorOf(dy, dx.dtype, "output gradient", op); s.failed())
    return s;
  int64_t base = 0;
  std::vector<int64_t> writeStrides;
  if (Status s = sliceWindow(op, dx, dy, "output gradient", offsets, strides,
                             base, writeStrides);
      s.failed())
    return s;
  zeroFill(pool, dx);
  if (dy.size() == 0)
    return {};
  StridedPlan plan;
  if (Status s = makeStridedPlan(dy.shape, {writeStrides}, plan, op);
      s.failed())
    return s;
  const size_t elementSize = dtypeSize(dx.dtype);
  visitElementSize(elementSize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *src = dy.as<const U>();
    U *dst = dx.as<U>() + base;
    const int64_t stride = plan.innerStride(0);
    parallelRanges(
        pool, dy.size(), kElementGrain, [&](int64_t begin, int64_t end) {
          forEachRun(plan, begin, end,
                     [&](int64_t o, const int64_t *offs, int64_t count) {
                       U *out = dst + offs[0];
                       for (int64_t i = 0; i < count; ++i)
                         out[i * stride] = src[o + i];
                     });
        });
  });
  return {};
}

} // namespace rp::runtime::host
