//===- HostNN.cpp - reduce, softmax and normalization host kernels --------===//
//
// Row kernels: every output element (reduce) or row (softmax, norms) is
// computed whole by one chunk, in an order fixed by the shape alone, so the
// thread count never changes a rounding. The row math is in kernels/*.h.
//
// reduce folds the reduced elements of each output in row-major order of
// the reduced indices, starting from the first element (so max/min need no
// identity and a sum of one -0.0 stays -0.0). When the last dimension is
// kept, a chunk folds a block of neighbouring outputs together, which reads
// memory contiguously; each output's order stays the same.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/kernels/Elementwise.h"
#include "rp/runtime/kernels/Norms.h"
#include "rp/runtime/kernels/Softmax.h"

#include <limits>
#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Outputs folded together when the innermost dimension is kept.
constexpr int64_t kReduceInnerBlock = 256;

/// A run of merged input dimensions, all reduced or all kept.
struct DimGroup {
  int64_t size, stride;
};

/// The reduction of a contiguous input, split into kept dimensions (outputs
/// in row-major order, the last kept group contiguous as `inner` when it is
/// innermost) and reduced ones.
struct ReducePlan {
  std::vector<DimGroup> kept, reduced;
  int64_t inner = 1;
  int64_t numOuter = 1, reducedCount = 1;
};

ReducePlan planReduce(const Shape &shape, const std::vector<int64_t> &dims) {
  std::vector<std::pair<int64_t, bool>> groups; // (size, reduced)
  for (size_t d = 0; d < shape.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(),
                             static_cast<int64_t>(d)) != dims.end();
    if (shape[d] == 1)
      continue;
    if (!groups.empty() && groups.back().second == reduced)
      groups.back().first *= shape[d];
    else
      groups.emplace_back(shape[d], reduced);
  }
  ReducePlan plan;
  int64_t stride = 1;
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) {
    DimGroup group{it->first, stride};
    stride *= it->first;
    if (it->second)
      plan.reduced.insert(plan.reduced.begin(), group);
    else if (it == groups.rbegin())
      plan.inner = group.size; // Innermost and kept: stride 1.
    else
      plan.kept.insert(plan.kept.begin(), group);
  }
  for (const DimGroup &g : plan.kept)
    plan.numOuter *= g.size;
  for (const DimGroup &g : plan.reduced)
    plan.reducedCount *= g.size;
  return plan;
}

/// Offset of position `linear` of the row-major index space of `groups`.
int64_t groupOffset(int64_t linear, const std::vector<DimGroup> &groups) {
  int64_t offset = 0;
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) {
    offset += (linear % it->size) * it->stride;
    linear /= it->size;
  }
  return offset;
}

/// Calls fn(offset) for every index of `groups` in row-major order.
template <typename Fn>
void forEachOffset(const std::vector<DimGroup> &groups, Fn &&fn) {
  const size_t rank = groups.size();
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (;;) {
    fn(offset);
    size_t d = rank;
    for (; d > 0; --d) {
      DimGroup g = groups[d - 1];
      offset += g.stride;
      if (++index[d - 1] < g.size)
        break;
      offset -= index[d - 1] * g.stride;
      index[d - 1] = 0;
    }
    if (d == 0)
      return;
  }
}

template <typename T, typename Combine>
void runReduce(ThreadPool &pool, const ReducePlan &plan, bool mean, const T *x,
               T *y, Combine combine) {
  using C = Compute<T>;
  auto finish = [&](C value) {
    if constexpr (std::is_floating_point_v<C>) {
      if (mean)
        value /= static_cast<C>(plan.reducedCount);
    }
    return store<T>(value);
  };
  if (plan.inner > 1) {
    const int64_t block = std::min(plan.inner, kReduceInnerBlock);
    const int64_t blocks = (plan.inner + block - 1) / block;
    parallelRanges(pool, plan.numOuter * blocks,
                   rowGrain(plan.reducedCount * block),
                   [&](int64_t begin, int64_t end) {
                     C acc[kReduceInnerBlock];
                     for (int64_t item = begin; item < end; ++item) {
                       int64_t o = item / blocks, i0 = (item % blocks) * block;
                       int64_t count = std::min(block, plan.inner - i0);
                       const T *base = x + groupOffset(o, plan.kept) + i0;
                       bool first = true;
                       forEachOffset(plan.reduced, [&](int64_t offset) {
                         const T *row = base + offset;
                         if (first) {
                           for (int64_t j = 0; j < count; ++j)
                             acc[j] = load(row[j]);
                           first = false;
                           return;
                         }
                         for (int64_t j = 0; j < count; ++j)
                           acc[j] = combine(acc[j], load(row[j]));
                       });
                       for (int64_t j = 0; j < count; ++j)
                         y[o * plan.inner + i0 + j] = finish(acc[j]);
                     }
                   });
    return;
  }
  // The innermost group is reduced (stride 1): fold it as a contiguous run.
  std::vector<DimGroup> outerReduced(plan.reduced.begin(),
                                     plan.reduced.end() - 1);
  const int64_t run = plan.reduced.back().size;
  parallelRanges(pool, plan.numOuter, rowGrain(plan.reducedCount),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t o = begin; o < end; ++o) {
                     const T *base = x + groupOffset(o, plan.kept);
                     C acc = load(base[0]);
                     bool first = true;
                     forEachOffset(outerReduced, [&](int64_t offset) {
                       const T *row = base + offset;
                       for (int64_t j = first ? 1 : 0; j < run; ++j)
                         acc = combine(acc, load(row[j]));
                       first = false;
                     });
                     y[o] = finish(acc);
                   }
                 });
}

Status checkNorm(const char *op, const TensorRef &x, int64_t axis,
                 double epsilon, const TensorRef &out) {
  if (Status s = checkRowOp(op, x, out); s.failed())
    return s;
  return checkNormAxis(op, x, axis, epsilon);
}

} // namespace

Status reduce(ThreadPool &pool, ReduceKind kind, const TensorRef &x,
              const std::vector<int64_t> &dims, bool keepDims,
              const TensorRef &out) {
  const char *op = "reduce";
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (Status s = checkTensorOf(out, x.dtype, "output", op); s.failed())
    return s;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (Status s = checkReduceDims(op, dims, x); s.failed())
    return s;
  if (x.dtype == DType::i1 || (kind == ReduceKind::mean && !isFloat(x.dtype)))
    return unsupportedDType(op, x.dtype,
                            kind == ReduceKind::mean ? "mean" : "reduction");
  Shape expected;
  for (int64_t d = 0, i = 0; d < rank; ++d) {
    bool reduced = i < static_cast<int64_t>(dims.size()) && dims[i] == d;
    if (reduced)
      ++i;
    if (!reduced)
      expected.push_back(x.shape[d]);
    else if (keepDims)
      expected.push_back(1);
  }
  if (expected != out.shape)
    return invalidArgument(std::string(op) + ": output " + describe(out) +
                           " should have shape " + describeShape(expected));
  if (out.size() == 0)
    return {};
  ReducePlan plan = planReduce(x.shape, dims);
  if (x.size() == 0) {
    // Reducing nothing: a sum is 0 and a mean 0 / 0; max and min have no
    // value to give.
    if (kind == ReduceKind::max || kind == ReduceKind::min)
      return invalidArgument(std::string(op) +
                             ": max/min over no elements "
                             "of " +
                             describe(x));
    visitDType(x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, Bool8>) {
        using C = Compute<T>;
        C value = C(0);
        if constexpr (std::is_floating_point_v<C>)
          if (kind == ReduceKind::mean)
            value = std::numeric_limits<C>::quiet_NaN();
        std::fill(out.as<T>(), out.as<T>() + out.size(), store<T>(value));
      }
    });
    return {};
  }
  if (plan.reduced.empty()) // Every reduced dimension has size 1.
    plan.reduced.push_back({1, 0});
  visitDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, Bool8>) {
      const T *in = x.as<const T>();
      T *y = out.as<T>();
      bool mean = kind == ReduceKind::mean;
      if (kind == ReduceKind::sum || mean)
        runReduce(pool, plan, mean, in, y, AddOp{});
      else if (kind == ReduceKind::max)
        runReduce(pool, plan, false, in, y, MaxOp{});
      else
        runReduce(pool, plan, false, in, y, MinOp{});
    }
  });
  return {};
}

Status softmax(ThreadPool &pool, const TensorRef &x, int64_t dim, bool log,
               const TensorRef &out) {
  SoftmaxRows rows;
  if (Status s = checkSoftmax(log, x, dim, out, rows); s.failed())
    return s;
  const int64_t outer = rows.outer, n = rows.n, inner = rows.inner;
  visitFloat(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = x.as<const T>();
    T *y = out.as<T>();
    parallelRanges(pool, outer * inner, rowGrain(n),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       int64_t base = (row / inner) * n * inner + row % inner;
                       if (log)
                         logSoftmaxRow(in + base, y + base, n, inner);
                       else
                         softmaxRow(in + base, y + base, n, inner);
                     }
                   });
  });
  return {};
}

/// The checks and row loop of both norms; `normRow(in, scale, bias, out, n,
/// eps)` normalizes one row (rms_norm passes no bias).
template <typename RowFn>
Status normalize(ThreadPool &pool, const char *op, const TensorRef &x,
                 const std::optional<TensorRef> &scale,
                 const std::optional<TensorRef> &bias, int64_t axis,
                 double epsilon, const TensorRef &out, RowFn normRow) {
  if (Status s = checkNorm(op, x, axis, epsilon, out); s.failed())
    return s;
  if (Status s = checkNormalized(op, "scale", scale, x, axis); s.failed())
    return s;
  if (Status s = checkNormalized(op, "bias", bias, x, axis); s.failed())
    return s;
  int64_t n = numElements(Shape(x.shape.begin() + axis, x.shape.end()));
  int64_t rows = n ? x.size() / n : 0;
  visitFloat(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = x.as<const T>();
    const T *g = scale ? scale->as<const T>() : nullptr;
    const T *b = bias ? bias->as<const T>() : nullptr;
    T *y = out.as<T>();
    auto eps = static_cast<Compute<T>>(epsilon);
    parallelRanges(pool, rows, rowGrain(n), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        normRow(in + row * n, g, b, y + row * n, n, eps);
    });
  });
  return {};
}

Status layerNorm(ThreadPool &pool, const TensorRef &x,
                 const std::optional<TensorRef> &scale,
                 const std::optional<TensorRef> &bias, int64_t axis,
                 double epsilon, const TensorRef &out) {
  return normalize(pool, "layer_norm", x, scale, bias, axis, epsilon, out,
                   [](auto *in, auto *g, auto *b, auto *y, int64_t n,
                      auto eps) { layerNormRow(in, g, b, y, n, eps); });
}

Status rmsNorm(ThreadPool &pool, const TensorRef &x,
               const std::optional<TensorRef> &scale, int64_t axis,
               double epsilon, const TensorRef &out) {
  return normalize(pool, "rms_norm", x, scale, std::nullopt, axis, epsilon, out,
                   [](auto *in, auto *g, auto *, auto *y, int64_t n, auto eps) {
                     rmsNormRow(in, g, y, n, eps);
                   });
}

} // namespace rp::runtime::host
