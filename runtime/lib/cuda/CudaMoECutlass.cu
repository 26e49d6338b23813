//===- CudaMoECutlass.cu - the MoE weight gradient on CUTLASS -------------===//
//
// dW[e] = P_e^T Q_e for every expert e in one launch of CUTLASS's grouped
// GEMM (CUTLASS 2.x API, GemmGrouped), which reads each problem's size and
// pointers from device memory (GroupScheduleMode::kDeviceOnly: the
// threadblocks walk the problems themselves), so the per-expert counts
// never travel to the host; cuBLAS's grouped GEMM takes its sizes in host
// arrays and made the dispatch copy the counts back and wait. bf16 and f16
// on tensor cores (sm_80's mma.sync, which sm_89 and sm_90 run) with f32
// accumulation, rows 16-byte aligned (8 elements); f32 on CUDA cores
// (CUTLASS's SIMT kernel, any width, no TF32). No split-K and one fixed
// tile order per problem: the same bits run after run and on any device
// count. Compiled only where CUTLASS's headers are found
// (runtime/lib/cuda/CMakeLists.txt); elsewhere CudaMoEDispatch.cpp keeps
// cuBLAS's grouped GEMM and the tiled kernel.
//
//===----------------------------------------------------------------------===//

#include "CudaMoE.h"

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_grouped.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/default_gemm_grouped.h"

#include <climits>
#include <cstdint>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

using cutlass::gemm::GemmShape;

/// A = P_e^T (P_e row-major is A column-major), B = Q_e, D = dW[e].
template <typename Element, typename OpClass, int Align, typename Block,
          typename Warp, typename Instruction, int Stages>
using GroupedGemm = cutlass::gemm::device::GemmGrouped<
    typename cutlass::gemm::kernel::DefaultGemmGrouped<
        Element, cutlass::layout::ColumnMajor, cutlass::ComplexTransform::kNone,
        Align, Element, cutlass::layout::RowMajor,
        cutlass::ComplexTransform::kNone, Align, Element,
        cutlass::layout::RowMajor, float, OpClass, cutlass::arch::Sm80, Block,
        Warp, Instruction,
        cutlass::epilogue::thread::LinearCombination<Element, Align, float,
                                                     float>,
        cutlass::gemm::threadblock::GemmBatchedIdentityThreadblockSwizzle,
        Stages,
        cutlass::gemm::kernel::GroupScheduleMode::kDeviceOnly>::GemmKernel>;

/// 16-bit inputs: 128 x 128 x 32 tiles of four 64 x 64 warps, 4 stages
/// (CUTLASS's grouped-GEMM example's sm_80 choice).
template <typename Element>
using TensorCoreGemm =
    GroupedGemm<Element, cutlass::arch::OpClassTensorOp, 8,
                GemmShape<128, 128, 32>, GemmShape<64, 64, 32>,
                GemmShape<16, 8, 16>, 4>;

/// f32: CUDA cores, one element at a time (no alignment asked), 3 stages.
using SimtGemm =
    GroupedGemm<float, cutlass::arch::OpClassSimt, 1, GemmShape<128, 128, 8>,
                GemmShape<32, 64, 8>, GemmShape<1, 1, 1>, 3>;

template <typename Gemm>
cudaError_t runGrouped(const LaunchContext &ctx, int64_t experts,
                       const MoEGroupedProblems &l, void *scratch) {
  using Kernel = typename Gemm::GemmKernel;
  using EA = typename Kernel::ElementA;
  using EB = typename Kernel::ElementB;
  using EC = typename Kernel::ElementC;
  char *base = static_cast<char *>(scratch);
  auto *sizes = reinterpret_cast<cutlass::gemm::GemmCoord *>(base + l.sizesAt);
  void **ptrs = reinterpret_cast<void **>(base + l.pointersAt);
  int64_t *lds = reinterpret_cast<int64_t *>(base + l.ldsAt);
  static_assert(sizeof(cutlass::gemm::GemmCoord) == 3 * sizeof(int32_t),
                "the problems are three int32 each (CudaMoE.h)");
  // One wave of threadblocks at full occupancy: the problems' tile counts
  // are on the device, and the kernel's blocks walk them all.
  // cudaErrorNotSupported: refused before anything was launched (the
  // caller runs the tiled kernel instead).
  const int blocks = Gemm::sufficient();
  if (blocks <= 0) {
    (void)cudaGetLastError();
    return cudaErrorNotSupported;
  }
  EC **d = reinterpret_cast<EC **>(ptrs + 2 * experts);
  typename Gemm::Arguments args(
      sizes, int(experts), blocks, {1.0f, 0.0f}, reinterpret_cast<EA **>(ptrs),
      reinterpret_cast<EB **>(ptrs + experts), d, d, lds, lds + experts,
      lds + 2 * experts, lds + 2 * experts);
  Gemm gemm;
  if (gemm.initialize(args, nullptr, ctx.stream) != cutlass::Status::kSuccess) {
    (void)cudaGetLastError();
    return cudaErrorNotSupported;
  }
  if (gemm.run(ctx.stream) != cutlass::Status::kSuccess) {
    const cudaError_t error = cudaGetLastError();
    return error != cudaSuccess ? error : cudaErrorLaunchFailure;
  }
  return cudaGetLastError();
}

bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

} // namespace

bool rp::runtime::cuda::moeCutlassTakes(DType dtype, int64_t pCols,
                                        int64_t qCols, const void *p,
                                        const void *q, const void *dweight,
                                        const char *&why) {
  why = nullptr;
  if (pCols > INT_MAX || qCols > INT_MAX)
    why = "a width over 2^31";
  else if (dtype == DType::f32)
    return true;
  else if (dtype != DType::bf16 && dtype != DType::f16)
    why = "not bf16, f16 or f32";
  else if (pCols % 8 || qCols % 8)
    why = "widths not a multiple of 8 (16-byte rows)";
  else if (!aligned16(p) || !aligned16(q) || !aligned16(dweight))
    why = "an operand not 16-byte aligned";
  return why == nullptr;
}

cudaError_t rp::runtime::cuda::launchMoECutlassWGrad(
    const LaunchContext &ctx, DType dtype, int64_t experts,
    const MoEGroupedProblems &layout, void *scratch) {
  if (experts == 0)
    return cudaSuccess;
  switch (dtype) {
  case DType::bf16:
    return runGrouped<TensorCoreGemm<cutlass::bfloat16_t>>(ctx, experts, layout,
                                                           scratch);
  case DType::f16:
    return runGrouped<TensorCoreGemm<cutlass::half_t>>(ctx, experts, layout,
                                                       scratch);
  case DType::f32:
    return runGrouped<SimtGemm>(ctx, experts, layout, scratch);
  default:
    return cudaErrorInvalidValue;
  }
}
