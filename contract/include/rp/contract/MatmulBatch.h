//===- MatmulBatch.h - a matmul's GEMMs on the cuda device -*- C++ -*-===//
//
// The cuda device runs a batched matmul as one strided GEMM where each
// operand's matrices advance by a constant step over the broadcast batch
// (a full batch, one matrix shared by every entry, a shared B whose batch
// folds into A's rows), and as one GEMM per batch entry otherwise
// (runtime/lib/cuda/CudaMatmul.cpp). The device tests the offsets it
// computed (constantBatchStride); the compiler's launch count
// (timing::kernelLaunches) has the shapes alone (matmulGemms): both rules
// live here, and rp-runtime-tests holds the second to the first over
// broadcast shapes, so the count cannot drift from the device
// (docs/architecture.md, "the wall").
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_MATMULBATCH_H
#define RP_CONTRACT_MATMULBATCH_H

#include <climits>
#include <cstdint>
#include <vector>

namespace rp::plan {

/// Whether `offsets` are entry i at i * step from 0 (`step` set either
/// way from the first two): one strided GEMM covers them.
inline bool constantBatchStride(const std::vector<int64_t> &offsets,
                                int64_t &step) {
  step = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] != int64_t(i) * step)
      return false;
  return true;
}

/// The GEMM calls rp's cuda device makes for [aBatch..., M, K] x
/// [bBatch..., K, N] (numpy-broadcast batch dimensions; `m` A's rows,
/// `transposeA` whether A is transposed): 1 where the batch is one strided
/// GEMM, the batch's entries otherwise. Batch shapes that do not broadcast
/// give 1 (the plan verifier refuses them).
inline int64_t matmulGemms(const std::vector<int64_t> &aBatch,
                           const std::vector<int64_t> &bBatch, int64_t m,
                           bool transposeA) {
  const size_t rank =
      aBatch.size() > bBatch.size() ? aBatch.size() : bBatch.size();
  // Right-aligned: an operand's missing leading dimensions are size 1.
  auto dim = [&](const std::vector<int64_t> &s, size_t d) -> int64_t {
    size_t lead = rank - s.size();
    return d < lead ? 1 : s[d - lead];
  };
  std::vector<int64_t> batch(rank);
  int64_t entries = 1, aEntries = 1;
  for (size_t d = 0; d < rank; ++d) {
    int64_t a = dim(aBatch, d), b = dim(bBatch, d);
    if (a != b && a != 1 && b != 1)
      return 1;
    batch[d] = a == 1 ? b : a;
    entries *= batch[d];
    aEntries *= a;
  }
  // Each operand's step per batch dimension, in matrices: 0 where it
  // broadcasts, its own contiguous stride elsewhere.
  auto strides = [&](const std::vector<int64_t> &s) {
    std::vector<int64_t> st(rank, 0);
    int64_t run = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t n = dim(s, d);
      st[d] = n == 1 ? 0 : run;
      run *= n;
    }
    return st;
  };
  std::vector<int64_t> as = strides(aBatch), bs = strides(bBatch);
  bool bShared = true;
  for (int64_t s : bs)
    bShared = bShared && s == 0;
  // planMatmul folds a full A's batch over a shared B into its rows.
  if (bShared && !transposeA && aEntries == entries && entries > 1 &&
      m * entries <= INT_MAX)
    return 1;
  if (entries > INT_MAX)
    return entries;
  // Entry i's offset is sum_d i_d * st[d]; it is i * step for every i
  // exactly when each dimension of size > 1 steps by step times the
  // entries inside it (step: the innermost such dimension's stride).
  auto progression = [&](const std::vector<int64_t> &st) {
    int64_t step = 0, inner = 1;
    bool first = true;
    for (size_t d = rank; d-- > 0;) {
      if (batch[d] == 1)
        continue;
      if (first)
        step = st[d], first = false;
      if (st[d] != step * inner)
        return false;
      inner *= batch[d];
    }
    return true;
  };
  return progression(as) && progression(bs) ? 1 : entries;
}

} // namespace rp::plan

#endif // RP_CONTRACT_MATMULBATCH_H
