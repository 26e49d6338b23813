//===- HostShape.cpp - data movement host kernels -------------------------===//
//
// copy (reshape), transpose, slice, concat, broadcast and gather. None of
// them computes: they move elements of any dtype by size, so every dtype is
// supported and the results are trivially identical for any thread count.
// transpose, slice and broadcast are one strided copy whose strides differ.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Kernels.h"

#include <cstring>

namespace rp::runtime::host {

using namespace detail;

namespace {

/// Input and output share a dtype and are valid tensors.
Status checkMovement(const char *op, const TensorRef &x, const TensorRef &out) {
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  return checkTensorOf(out, x.dtype, "output", op);
}

} // namespace

Status copy(ThreadPool &pool, const TensorRef &x, const TensorRef &out) {
  const char *op = "copy";
  if (Status s = checkMovement(op, x, out); s.failed())
    return s;
  if (x.size() != out.size())
    return invalidArgument(std::string(op) + ": " + describe(x) + " and " +
                           describe(out) + " differ in element count");
  const auto *src = static_cast<const char *>(x.data);
  auto *dst = static_cast<char *>(out.data);
  const size_t elementSize = dtypeSize(x.dtype);
  parallelRanges(
      pool, x.size(), kElementGrain, [&](int64_t begin, int64_t end) {
        std::memcpy(dst + begin * elementSize, src + begin * elementSize,
                    (end - begin) * elementSize);
      });
  return {};
}

Status transpose(ThreadPool &pool, const TensorRef &x,
                 const std::vector<int64_t> &permutation,
                 const TensorRef &out) {
  const char *op = "transpose";
  if (Status s = checkMovement(op, x, out); s.failed())
    return s;
  const size_t rank = x.shape.size();
  std::vector<bool> seen(rank, false);
  bool valid = permutation.size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) {
    int64_t p = permutation[i];
    valid = p >= 0 && p < static_cast<int64_t>(rank) && !seen[p];
    if (valid)
      seen[p] = true;
  }
  if (!valid)
    return invalidArgument(std::string(op) + ": " + describeShape(permutation) +
                           " is not a permutation of the dimensions of " +
                           describe(x));
  Shape expected(rank);
  std::vector<int64_t> inStrides(rank), strides(rank);
  kernels::contiguousStrides(x.shape.data(), static_cast<int>(rank),
                             inStrides.data());
  for (size_t i = 0; i < rank; ++i) {
    expected[i] = x.shape[permutation[i]];
    strides[i] = inStrides[permutation[i]];
  }
  if (expected != out.shape)
    return invalidArgument(std::string(op) + ": output " + describe(out) +
                           " should have shape " + describeShape(expected));
  if (out.size() == 0)
    return {};
  StridedPlan plan;
  if (Status s = makeStridedPlan(out.shape, {strides}, plan, op); s.failed())
    return s;
  stridedCopy(pool, plan, dtypeSize(x.dtype), x.data, out.data, out.size());
  return {};
}

Status slice(ThreadPool &pool, const TensorRef &x,
             const std::vector<int64_t> &offsets,
             const std::vector<int64_t> &strides, const TensorRef &out) {
  const char *op = "slice";
  if (Status s = checkMovement(op, x, out); s.failed())
    return s;
  int64_t base = 0;
  std::vector<int64_t> readStrides;
  if (Status s = sliceWindow(op, x, out, "output", offsets, strides, base,
                             readStrides);
      s.failed())
    return s;
  if (out.size() == 0)
    return {};
  StridedPlan plan;
  if (Status s = makeStridedPlan(out.shape, {readStrides}, plan, op);
      s.failed())
    return s;
  const size_t elementSize = dtypeSize(x.dtype);
  stridedCopy(pool, plan, elementSize,
              static_cast<const char *>(x.data) + base * elementSize, out.data,
              out.size());
  return {};
}

Status concat(ThreadPool &pool, const std::vector<TensorRef> &inputs,
              int64_t dim, const TensorRef &out) {
  int64_t outer = 0, inner = 0;
  if (Status s = checkConcat(inputs, dim, out, outer, inner); s.failed())
    return s;
  // Viewed as [outer, dim * inner]: each input contributes one contiguous
  // block per outer row, laid end to end.
  const size_t elementSize = dtypeSize(out.dtype);
  const int64_t outRow = out.shape[dim] * inner;
  std::vector<int64_t> blockStart;
  int64_t start = 0;
  for (const TensorRef &in : inputs) {
    blockStart.push_back(start);
    start += in.shape[dim] * inner;
  }
  const int64_t numInputs = static_cast<int64_t>(inputs.size());
  parallelRanges(
      pool, outer * numInputs, rowGrain(outRow / numInputs + 1),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          int64_t row = item / numInputs, i = item % numInputs;
          int64_t block = inputs[i].shape[dim] * inner;
          if (block == 0)
            continue; // An empty input may have no data pointer at all.
          std::memcpy(static_cast<char *>(out.data) +
                          (row * outRow + blockStart[i]) * elementSize,
                      static_cast<const char *>(inputs[i].data) +
                          row * block * elementSize,
                      block * elementSize);
        }
      });
  return {};
}

Status broadcast(ThreadPool &pool, const TensorRef &x, const TensorRef &out) {
  const char *op = "broadcast";
  if (Status s = checkMovement(op, x, out); s.failed())
    return s;
  if (out.size() == 0)
    return {};
  StridedPlan plan;
  if (Status s = makeBroadcastPlan(out.shape, {&x}, plan, op); s.failed())
    return s;
  stridedCopy(pool, plan, dtypeSize(x.dtype), x.data, out.data, out.size());
  return {};
}

Status gather(ThreadPool &pool, const TensorRef &x, const TensorRef &indices,
              int64_t axis, const TensorRef &out) {
  const char *op = "gather";
  if (Status s = checkMovement(op, x, out); s.failed())
    return s;
  std::vector<int64_t> normalized;
  if (Status s = gatherIndices(op, x, indices, axis, out, "output", normalized);
      s.failed())
    return s;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axisSize = x.shape[axis], numIndices = indices.size();
  if (out.size() == 0)
    return {};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  const size_t rowBytes = inner * dtypeSize(x.dtype);
  const auto *src = static_cast<const char *>(x.data);
  auto *dst = static_cast<char *>(out.data);
  // One item per (outer, index) pair copies one contiguous row of `inner`.
  parallelRanges(pool, outer * numIndices, rowGrain(inner),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t item = begin; item < end; ++item) {
                     int64_t o = item / numIndices, i = item % numIndices;
                     std::memcpy(dst + item * rowBytes,
                                 src +
                                     (o * axisSize + normalized[i]) * rowBytes,
                                 rowBytes);
                   }
                 });
  return {};
}

} // namespace rp::runtime::host
