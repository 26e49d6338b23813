//===- HostMoE.cpp - mixture-of-experts kernels on the host ---------------===//
//
// Determinism: routing works row by row (one chunk owns a token); the
// dispatch layout is a counting sort in one sequential pass (expert order,
// then token, then slot), so positions and counts depend on the experts
// alone; grouped matmuls run the host GEMM (fixed tiles) once per group;
// combine sums each token's K rows in slot order, and its gradient writes
// every row from exactly one (token, slot). Nothing depends on the thread
// count.
//
// Top-k follows PyTorch's CPU topk: (value, index) pairs ordered by a
// "greater, NaN first" comparison, std::partial_sort when k * 64 <= E and
// otherwise std::nth_element at k - 1 and std::sort of the first k - 1.
// Equal scores then come out in the same order as PyTorch's, since both
// run the same standard-library algorithms on the same sequence.
//
// Shapes and dtypes are checked by the kernels' shared checks (lib/kernels/
// MoEChecks.cpp, as on the cuda device); what needs the data (experts in
// range, counts that fit, positions in range and unique) is checked here.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/MoE.h"

#include <cmath>
#include <cstring>
#include <utility>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Every expert index (row-major [tokens, k] i64) names one of `n` experts.
Status checkExpertRange(const char *op, const TensorRef &experts, int64_t k,
                        int64_t n) {
  const int64_t *e = experts.as<const int64_t>();
  for (int64_t i = 0; i < experts.size(); ++i)
    if (e[i] < 0 || e[i] >= n)
      return invalidArgument(std::string(op) + ": expert " +
                             std::to_string(e[i]) + " of token " +
                             std::to_string(i / std::max<int64_t>(1, k)) +
                             " is outside [0, " + std::to_string(n) + ")");
  return {};
}

/// The first `k` (value, index) pairs of `row` in PyTorch's CPU topk order.
void topK(const double *row, int64_t n, int64_t k,
          std::vector<std::pair<double, int64_t>> &queue) {
  queue.resize(n);
  for (int64_t j = 0; j < n; ++j)
    queue[j] = {row[j], j};
  auto greater = [](const std::pair<double, int64_t> &x,
                    const std::pair<double, int64_t> &y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (k * 64 <= n) {
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), greater);
  } else {
    std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(),
                     greater);
    std::sort(queue.begin(), queue.begin() + k - 1, greater);
  }
}

/// softmax of `n` values into `out`, in double.
void softmaxRow(const double *x, int64_t n, double *out) {
  double max = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    max = std::max(max, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += out[j] = std::exp(x[j] - max);
  for (int64_t j = 0; j < n; ++j)
    out[j] /= sum;
}

template <typename T> void loadRow(const T *src, int64_t n, double *dst) {
  for (int64_t j = 0; j < n; ++j)
    dst[j] = double(load(src[j]));
}

/// Group sizes (counts [E] i32, checked): non-negative, summing to at
/// most `rows`; gives each group's first row.
Status groupOffsets(const char *op, const TensorRef &counts, int64_t experts,
                    int64_t rows, std::vector<int64_t> &offsets) {
  offsets.assign(experts + 1, 0);
  const int32_t *c = counts.as<const int32_t>();
  for (int64_t e = 0; e < experts; ++e) {
    if (c[e] < 0 || offsets[e] + c[e] > rows)
      return invalidArgument(std::string(op) + ": expert " + std::to_string(e) +
                             " has " + std::to_string(c[e]) +
                             " rows; the groups must " + "fit in the " +
                             std::to_string(rows) + " rows");
    offsets[e + 1] = offsets[e] + c[e];
  }
  return {};
}

/// Rows [begin, end) of a row-major matrix, or matrix `index` of a stack.
TensorRef rowsOf(const TensorRef &t, int64_t begin, int64_t end) {
  int64_t width = t.size() / std::max<int64_t>(1, t.shape[0]);
  return TensorRef{static_cast<char *>(t.data) +
                       begin * width * int64_t(dtypeSize(t.dtype)),
                   t.dtype,
                   {end - begin, width}};
}

TensorRef matrixOf(const TensorRef &stack, int64_t index) {
  int64_t inner = stack.shape[1] * stack.shape[2];
  return TensorRef{static_cast<char *>(stack.data) +
                       index * inner * int64_t(dtypeSize(stack.dtype)),
                   stack.dtype,
                   {stack.shape[1], stack.shape[2]}};
}

/// positions (i32, checked) name rows of `rows`; with `unique`, none twice.
Status checkPositions(const char *op, const TensorRef &positions,
                      int64_t numRows, bool unique) {
  std::vector<char> seen(unique ? numRows : 0, 0);
  const int32_t *p = positions.as<const int32_t>();
  for (int64_t i = 0; i < positions.size(); ++i) {
    if (p[i] < 0 || p[i] >= numRows)
      return invalidArgument(std::string(op) + ": position " +
                             std::to_string(p[i]) + " of choice " +
                             std::to_string(i) + " is outside [0, " +
                             std::to_string(numRows) + ")");
    if (unique && seen[p[i]]++)
      return invalidArgument(std::string(op) + ": row " + std::to_string(p[i]) +
                             " is named by two choices");
  }
  return {};
}

} // namespace

Status moeRoute(ThreadPool &pool, const TensorRef &logits, MoESoftmax softmax,
                bool normalize, const TensorRef &weights,
                const TensorRef &experts) {
  if (Status s = checkMoERoute(logits, weights, experts); s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = weights.shape[1];
  visitFloat(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *l = logits.as<const T>();
    T *w = weights.as<T>();
    int64_t *e = experts.as<int64_t>();
    parallelRanges(pool, tokens, rowGrain(n), [&](int64_t begin, int64_t end) {
      std::vector<double> x(n), p(n), chosen(k), soft(k);
      std::vector<std::pair<double, int64_t>> queue;
      for (int64_t t = begin; t < end; ++t) {
        loadRow(l + t * n, n, x.data());
        if (softmax == MoESoftmax::before) {
          // PyTorch picks among the probabilities as stored, so near-equal
          // logits that round to one probability tie here as there.
          softmaxRow(x.data(), n, p.data());
          for (int64_t j = 0; j < n; ++j)
            p[j] = double(load(store<T>(Compute<T>(p[j]))));
          topK(p.data(), n, k, queue);
          double sum = 0;
          for (int64_t j = 0; j < k; ++j)
            sum += chosen[j] = queue[j].first;
          for (int64_t j = 0; j < k; ++j)
            w[t * k + j] =
                store<T>(Compute<T>(normalize ? chosen[j] / sum : chosen[j]));
        } else {
          topK(x.data(), n, k, queue);
          for (int64_t j = 0; j < k; ++j)
            chosen[j] = queue[j].first;
          softmaxRow(chosen.data(), k, soft.data());
          for (int64_t j = 0; j < k; ++j)
            w[t * k + j] = store<T>(Compute<T>(soft[j]));
        }
        for (int64_t j = 0; j < k; ++j)
          e[t * k + j] = queue[j].second;
      }
    });
  });
  return {};
}

Status moeRouteGrad(ThreadPool &pool, const TensorRef &logits,
                    const TensorRef &experts, const TensorRef &dweights,
                    MoESoftmax softmax, bool normalize,
                    const TensorRef &dlogits) {
  if (Status s = checkMoERouteGrad(logits, experts, dweights, dlogits);
      s.failed())
    return s;
  const int64_t tokens = logits.shape[0], n = logits.shape[1];
  const int64_t k = experts.shape[1];
  if (Status s = checkExpertRange("moe_route_grad", experts, k, n); s.failed())
    return s;
  const int64_t *e = experts.as<const int64_t>();
  visitFloat(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *l = logits.as<const T>();
    const T *dw = dweights.as<const T>();
    T *dl = dlogits.as<T>();
    parallelRanges(pool, tokens, rowGrain(n), [&](int64_t begin, int64_t end) {
      std::vector<double> x(n), p(n), dp(n), g(k), chosen(k), soft(k);
      for (int64_t t = begin; t < end; ++t) {
        const int64_t *et = e + t * k;
        loadRow(l + t * n, n, x.data());
        loadRow(dw + t * k, k, g.data());
        std::fill(dp.begin(), dp.end(), 0.0);
        if (softmax == MoESoftmax::before) {
          softmaxRow(x.data(), n, p.data());
          if (normalize) {
            // w = q / S: dq = (dw - sum(dw * w)) / S.
            double sum = 0, dot = 0;
            for (int64_t j = 0; j < k; ++j)
              sum += p[et[j]];
            for (int64_t j = 0; j < k; ++j)
              dot += g[j] * p[et[j]] / sum;
            for (int64_t j = 0; j < k; ++j)
              g[j] = (g[j] - dot) / sum;
          }
          for (int64_t j = 0; j < k; ++j)
            dp[et[j]] += g[j];
          double dot = 0;
          for (int64_t i = 0; i < n; ++i)
            dot += dp[i] * p[i];
          for (int64_t i = 0; i < n; ++i)
            dl[t * n + i] = store<T>(Compute<T>(p[i] * (dp[i] - dot)));
        } else {
          for (int64_t j = 0; j < k; ++j)
            chosen[j] = x[et[j]];
          softmaxRow(chosen.data(), k, soft.data());
          double dot = 0;
          for (int64_t j = 0; j < k; ++j)
            dot += g[j] * soft[j];
          for (int64_t j = 0; j < k; ++j)
            dp[et[j]] += soft[j] * (g[j] - dot);
          for (int64_t i = 0; i < n; ++i)
            dl[t * n + i] = store<T>(Compute<T>(dp[i]));
        }
      }
    });
  });
  return {};
}

Status moeDispatch(ThreadPool &pool, const TensorRef &x,
                   const TensorRef &experts, const TensorRef &rows,
                   const TensorRef &positions, const TensorRef &counts) {
  if (Status s = checkMoEDispatch(x, experts, rows, positions, counts);
      s.failed())
    return s;
  const int64_t tokens = x.shape[0], hidden = x.shape[1];
  const int64_t k = experts.shape[1];
  const int64_t numExperts = counts.shape[0];
  const int64_t *e = experts.as<const int64_t>();
  int32_t *c = counts.as<int32_t>();
  int32_t *pos = positions.as<int32_t>();
  if (Status s = checkExpertRange("moe_dispatch", experts, k, numExperts);
      s.failed())
    return s;
  std::vector<int64_t> next(numExperts + 1, 0);
  for (int64_t i = 0; i < tokens * k; ++i)
    ++next[e[i] + 1];
  for (int64_t j = 0; j < numExperts; ++j) {
    c[j] = static_cast<int32_t>(next[j + 1]);
    next[j + 1] += next[j];
  }
  for (int64_t i = 0; i < tokens * k; ++i)
    pos[i] = static_cast<int32_t>(next[e[i]]++);
  const size_t rowBytes = hidden * dtypeSize(x.dtype);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(rows.data);
  parallelRanges(pool, tokens * k, rowGrain(hidden),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i)
                     std::memcpy(dst + pos[i] * rowBytes,
                                 src + (i / k) * rowBytes, rowBytes);
                 });
  return {};
}

Status moeGroupedMatmul(ThreadPool &pool, const TensorRef &x,
                        const TensorRef &weight, const TensorRef &counts,
                        bool transposeB, const TensorRef &out) {
  if (Status s = checkMoEGroupedMatmul(x, weight, counts, transposeB, out);
      s.failed())
    return s;
  const int64_t numRows = x.shape[0], experts = weight.shape[0];
  std::vector<int64_t> offsets;
  if (Status s =
          groupOffsets("moe_grouped_matmul", counts, experts, numRows, offsets);
      s.failed())
    return s;
  for (int64_t e = 0; e < experts; ++e) {
    if (offsets[e + 1] == offsets[e])
      continue;
    if (Status s = matmul(pool, rowsOf(x, offsets[e], offsets[e + 1]),
                          matrixOf(weight, e), false, transposeB,
                          rowsOf(out, offsets[e], offsets[e + 1]));
        s.failed())
      return s;
  }
  // Rows past the groups (a capacity's unused rows) read as zero.
  TensorRef tail = rowsOf(out, offsets[experts], numRows);
  if (tail.size() > 0)
    std::memset(tail.data, 0, tail.bytes());
  return {};
}

Status moeGroupedMatmulWGrad(ThreadPool &pool, const TensorRef &x,
                             const TensorRef &dy, const TensorRef &counts,
                             bool transposeB, const TensorRef &dweight) {
  if (Status s = checkMoEGroupedMatmulWGrad(x, dy, counts, transposeB, dweight);
      s.failed())
    return s;
  const int64_t numRows = x.shape[0], experts = dweight.shape[0];
  std::vector<int64_t> offsets;
  if (Status s = groupOffsets("moe_grouped_matmul_wgrad", counts, experts,
                              numRows, offsets);
      s.failed())
    return s;
  for (int64_t e = 0; e < experts; ++e) {
    TensorRef xs = rowsOf(x, offsets[e], offsets[e + 1]);
    TensorRef gs = rowsOf(dy, offsets[e], offsets[e + 1]);
    // An empty group is an empty sum: matmul writes zeros.
    Status s = transposeB
                   ? matmul(pool, gs, xs, true, false, matrixOf(dweight, e))
                   : matmul(pool, xs, gs, true, false, matrixOf(dweight, e));
    if (s.failed())
      return s;
  }
  return {};
}

Status moeCombine(ThreadPool &pool, const TensorRef &rows,
                  const TensorRef &positions,
                  const std::optional<TensorRef> &weights,
                  const TensorRef &out) {
  if (Status s = checkMoECombine(rows, positions, weights, out); s.failed())
    return s;
  if (Status s = checkPositions("moe_combine", positions, rows.shape[0], false);
      s.failed())
    return s;
  const int64_t tokens = positions.shape[0], k = positions.shape[1];
  const int64_t hidden = rows.shape[1];
  const int32_t *pos = positions.as<const int32_t>();
  visitFloat(rows.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *r = rows.as<const T>();
    const T *w = weights ? weights->as<const T>() : nullptr;
    T *y = out.as<T>();
    parallelRanges(pool, tokens, rowGrain(hidden * k),
                   [&](int64_t begin, int64_t end) {
                     std::vector<C> acc(hidden);
                     for (int64_t t = begin; t < end; ++t) {
                       std::fill(acc.begin(), acc.end(), C(0));
                       for (int64_t j = 0; j < k; ++j) {
                         C wt = w ? load(w[t * k + j]) : C(1);
                         const T *row = r + pos[t * k + j] * hidden;
                         for (int64_t h = 0; h < hidden; ++h)
                           acc[h] += wt * load(row[h]);
                       }
                       for (int64_t h = 0; h < hidden; ++h)
                         y[t * hidden + h] = store<T>(acc[h]);
                     }
                   });
  });
  return {};
}

Status moeCombineGrad(ThreadPool &pool, const TensorRef &rows,
                      const TensorRef &positions,
                      const std::optional<TensorRef> &weights,
                      const TensorRef &dy, const TensorRef &drows,
                      const std::optional<TensorRef> &dweights) {
  if (Status s =
          checkMoECombineGrad(rows, positions, weights, dy, drows, dweights);
      s.failed())
    return s;
  if (Status s =
          checkPositions("moe_combine_grad", positions, rows.shape[0], true);
      s.failed())
    return s;
  const int64_t tokens = positions.shape[0], k = positions.shape[1];
  const int64_t hidden = rows.shape[1];
  // Rows no token reads (past the dispatched ones) get zero.
  if (drows.size() > 0)
    std::memset(drows.data, 0, drows.bytes());
  const int32_t *pos = positions.as<const int32_t>();
  visitFloat(rows.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *r = rows.as<const T>();
    const T *w = weights ? weights->as<const T>() : nullptr;
    const T *g = dy.as<const T>();
    T *dr = drows.as<T>();
    T *dw = dweights ? dweights->as<T>() : nullptr;
    parallelRanges(pool, tokens, rowGrain(hidden * k),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t t = begin; t < end; ++t) {
                       const T *gt = g + t * hidden;
                       for (int64_t j = 0; j < k; ++j) {
                         int64_t p = pos[t * k + j];
                         C wt = w ? load(w[t * k + j]) : C(1);
                         C dot = 0;
                         for (int64_t h = 0; h < hidden; ++h) {
                           dr[p * hidden + h] = store<T>(wt * load(gt[h]));
                           dot += load(gt[h]) * load(r[p * hidden + h]);
                         }
                         if (dw)
                           dw[t * k + j] = store<T>(dot);
                       }
                     }
                   });
  });
  return {};
}

} // namespace rp::runtime::host
