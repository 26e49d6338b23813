//===- DeviceKernelCases.h - the kernel conformance cases ---------*- C++
//-*-===//
//
// The one-call programs DeviceKernelConformanceTest runs on every backend:
// each op of plan.fbs's OpKind, forward and backward, per float dtype, and
// the integer and i1 cases the ops allow. Kept apart from the harness so
// that each file stays under 600 lines.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_DEVICEKERNELCASES_H
#define RP_RUNTIME_TEST_DEVICEKERNELCASES_H

#include "rp/runtime/Plan.h"

#include <string>
#include <vector>

namespace rp::runtime::conformance {

/// How an input buffer is filled.
struct Fill {
  enum Kind { uniform, integers, boolean, labels, iota } kind = uniform;
  double lo = -3, hi = 3;
};

inline Fill uniformIn(double lo, double hi) { return {Fill::uniform, lo, hi}; }
inline Fill integersIn(double lo, double hi) {
  return {Fill::integers, lo, hi};
}
inline const Fill kBoolean{Fill::boolean, 0, 0};
/// Class labels in [0, classes), every fifth the ignore index -100.
inline Fill labelsUpTo(int64_t classes) {
  return {Fill::labels, 0, double(classes)};
}
/// 0, 1, 2, ...: distinct rows (the positions of a dispatch).
inline const Fill kIota{Fill::iota, 0, 0};

struct Buf {
  DType dtype;
  Shape shape;
  Fill fill = {};
};

struct KernelCase {
  std::string name;
  OpKind op = OpKind::add;
  std::vector<Buf> inputs = {}, outputs = {};
  std::vector<int64_t> ints = {};
  std::vector<double> floats = {};
};

/// The forward and backward cases of one float dtype.
std::vector<KernelCase> forwardCases(DType t);
std::vector<KernelCase> backwardCases(DType t);
/// Attention at shapes cuDNN's fused SDPA takes (f32: the same shapes on
/// the CUDA-core kernel).
std::vector<KernelCase> cudnnAttentionCases(DType t);
/// The MoE weight gradient and the gelu-gradient matmul at shapes the
/// library paths take (CUTLASS's grouped GEMM, cuBLASLt's DGELU).
std::vector<KernelCase> libraryGemmCases(DType t);

/// Every case, in a fixed order (the test is parameterized by its name).
std::vector<KernelCase> allCases();

} // namespace rp::runtime::conformance

#endif // RP_RUNTIME_TEST_DEVICEKERNELCASES_H
