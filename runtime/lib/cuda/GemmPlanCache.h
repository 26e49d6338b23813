//===- GemmPlanCache.h - one cuBLASLt algorithm per GEMM shape --*- C++ -*-===//
//
// The cuda device's GEMMs go through cuBLASLt (CudaGemmLt.cpp): for each
// problem (sizes, leading dimensions, batch strides, transposes, storage
// type, TF32 or not, epilogue) one algorithm is chosen once, from the
// library's heuristic, and kept for the process. Every device asks the same
// cache, so the first device's choice is every device's: a plan split over
// G GPUs of one model runs the very algorithm one GPU runs, and its results
// stay bitwise equal to one device's (DESIGN.md). The choice takes the
// heuristic's first candidate that needs no reduction across split-K
// slices (whose order could vary) and fits the fixed workspace.
//
// No CUDA header here: the heuristic is behind GemmHeuristic, so the key
// and the choice are tested without a GPU (runtime/test, a fake heuristic).
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_CUDA_GEMMPLANCACHE_H
#define RP_LIB_CUDA_GEMMPLANCACHE_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace rp::runtime::cuda {

/// What cuBLASLt fuses after the product (rp's graph: a matmul's bias, bias
/// then GELU, and the bias gradient as the column sums of the output
/// gradient; the backward of bias + GELU: the product times GELU's
/// derivative at an auxiliary matrix, the forward's pre-activation, and
/// with dGeluBiasGrad that result's column sums too). cuBLASLt's GELU is
/// the tanh form.
enum class GemmEpilogue : uint8_t {
  none,
  bias,
  biasGelu,
  biasGrad,
  dGelu,
  dGeluBiasGrad
};

/// One GEMM problem as cuBLASLt sees it (column-major, D = op(A) op(B)).
struct GemmKey {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  bool transA = false, transB = false;
  DType type = DType::f32;
  /// f32 inputs rounded to TF32 on the tensor cores (rp-run --tf32).
  bool tf32 = false;
  GemmEpilogue epilogue = GemmEpilogue::none;
  /// The bytes every batch entry's A, B and C start on (a power of two up
  /// to 256; gemmAlignment): the heuristic offers only algorithms that work
  /// with them. A function of the shape, since plan buffers start on 256.
  uint32_t alignA = 256, alignB = 256, alignC = 256;

  bool operator==(const GemmKey &o) const;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey &key) const;
};

/// The largest power of two up to 256 dividing `bytes` (256 for 0): the
/// alignment of every batch entry of a matrix whose entries are `bytes`
/// apart, its first entry on 256.
uint32_t gemmAlignment(int64_t bytes);

/// "m x n x k, batch b, A^T, bf16, bias": for messages.
std::string describeGemm(const GemmKey &key);

/// One algorithm the heuristic offers: cuBLASLt's opaque
/// cublasLtMatmulAlgo_t (eight 64-bit words), the workspace it needs and
/// whether it reduces split-K partial sums (a reduction's order may vary).
struct GemmAlgo {
  std::array<uint64_t, 8> data{};
  size_t workspace = 0;
  bool reduces = false;
};

/// cuBLASLt's cublasLtMatmulAlgoGetHeuristic behind an interface: the
/// candidates for `key` in the library's order of preference.
class GemmHeuristic {
public:
  virtual ~GemmHeuristic() = default;
  virtual Expected<std::vector<GemmAlgo>> candidates(const GemmKey &key,
                                                     size_t maxWorkspace) = 0;
};

/// The algorithm of a problem, or none (`found` false, `why` saying it):
/// the caller then runs cuBLAS's own GEMM.
struct GemmChoice {
  bool found = false;
  GemmAlgo algo;
  std::string why;
};

class GemmPlanCache {
public:
  explicit GemmPlanCache(size_t workspaceBytes)
      : workspaceBytes(workspaceBytes) {}

  /// `key`'s choice: the first call asks `heuristic` once and keeps its
  /// first reduction-free candidate that fits the workspace; every later
  /// call, from any device or thread, returns that. A failed query is kept
  /// as "none" too, so it is not asked again.
  Expected<GemmChoice> choose(const GemmKey &key, GemmHeuristic &heuristic);

  size_t getWorkspaceBytes() const { return workspaceBytes; }
  /// Heuristic queries so far (one per distinct key).
  size_t queries() const;
  size_t size() const;

private:
  const size_t workspaceBytes;
  mutable std::mutex mutex;
  std::unordered_map<GemmKey, GemmChoice, GemmKeyHash> plans;
  size_t asked = 0;
};

} // namespace rp::runtime::cuda

#endif // RP_LIB_CUDA_GEMMPLANCACHE_H
