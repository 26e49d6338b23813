//===- CudaGemmLt.cpp - GEMMs through cuBLASLt ----------------------------===//
//
// The descriptors are made per call (host work of a few microseconds; the
// algorithm, which is what costs, is cached). Compute in f32 (f64 for
// f64), TF32 only when the run asked (rp-run --tf32). The alpha and beta
// are host scalars of the scale type.
//
//===----------------------------------------------------------------------===//

#include "CudaGemmLt.h"
#include "CudaStatus.h"
#include "CudaTypes.h"

#include <cublasLt.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

/// The fixed workspace a plan may use: the device's cuBLAS workspace
/// (CudaDevice.cpp), shared with cuBLAS on the same stream.
constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

cublasLtEpilogue_t ltEpilogue(GemmEpilogue e) {
  switch (e) {
  case GemmEpilogue::bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case GemmEpilogue::biasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case GemmEpilogue::biasGrad:
    return CUBLASLT_EPILOGUE_BGRADB;
  case GemmEpilogue::dGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  case GemmEpilogue::dGeluBiasGrad:
    return CUBLASLT_EPILOGUE_DGELU_BGRAD;
  default:
    return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

/// The descriptors of one problem, destroyed with it.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Descriptors() {
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }

  Status make(const GemmKey &key, const void *bias, const void *aux) {
    bool f64 = key.type == DType::f64;
    cublasComputeType_t compute = f64        ? CUBLAS_COMPUTE_64F
                                  : key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                             : CUBLAS_COMPUTE_32F;
    if (Status s = fromCublas(cublasLtMatmulDescCreate(
                                  &op, compute, f64 ? CUDA_R_64F : CUDA_R_32F),
                              "cublasLtMatmulDescCreate");
        s.failed())
      return s;
    cublasOperation_t ta = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = ltEpilogue(key.epilogue);
    cudaDataType_t type = cudaDataTypeOf(key.type);
    // The auxiliary matrix (the pre-activation) lies as D: its leading
    // dimension and batch stride are D's.
    const int64_t auxLd = key.ldc, auxStride = key.strideC;
    struct Attribute {
      cublasLtMatmulDescAttributes_t name;
      const void *value;
      size_t size;
    } attributes[] = {
        {CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)},
        {CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)},
        {CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)},
        {CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)},
        {CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)},
        {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)},
        {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof(auxLd)},
        {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &auxStride,
         sizeof(auxStride)},
    };
    // The first three always; the bias's two where the epilogue reads or
    // writes a bias; the auxiliary matrix's three for the gelu gradients.
    const bool gradient = key.epilogue == GemmEpilogue::dGelu ||
                          key.epilogue == GemmEpilogue::dGeluBiasGrad;
    const bool biased = key.epilogue != GemmEpilogue::none &&
                        key.epilogue != GemmEpilogue::dGelu;
    for (size_t i = 0; i < std::size(attributes); ++i) {
      if ((i == 3 || i == 4) && !biased)
        continue;
      if (i >= 5 && (!gradient || (i == 7 && key.batch == 1)))
        continue;
      if (Status s = fromCublas(cublasLtMatmulDescSetAttribute(
                                    op, attributes[i].name, attributes[i].value,
                                    attributes[i].size),
                                "cublasLtMatmulDescSetAttribute");
          s.failed())
        return s;
    }
    auto layout = [&](cublasLtMatrixLayout_t &l, int64_t rows, int64_t cols,
                      int64_t ld, int64_t stride) -> Status {
      if (Status s =
              fromCublas(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows),
                                                    uint64_t(cols), ld),
                         "cublasLtMatrixLayoutCreate");
          s.failed())
        return s;
      if (key.batch == 1)
        return Status::ok();
      int32_t batch = int32_t(key.batch);
      if (Status s = fromCublas(
              cublasLtMatrixLayoutSetAttribute(
                  l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
              "cublasLtMatrixLayoutSetAttribute");
          s.failed())
        return s;
      return fromCublas(cublasLtMatrixLayoutSetAttribute(
                            l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                            &stride, sizeof(stride)),
                        "cublasLtMatrixLayoutSetAttribute");
    };
    if (Status s = layout(a, key.transA ? key.k : key.m,
                          key.transA ? key.m : key.k, key.lda, key.strideA);
        s.failed())
      return s;
    if (Status s = layout(b, key.transB ? key.n : key.k,
                          key.transB ? key.k : key.n, key.ldb, key.strideB);
        s.failed())
      return s;
    return layout(c, key.m, key.n, key.ldc, key.strideC);
  }
};

/// cuBLASLt's heuristic on one device's handle.
class LtHeuristic : public GemmHeuristic {
public:
  explicit LtHeuristic(cublasLtHandle_t handle) : handle(handle) {}

  Expected<std::vector<GemmAlgo>> candidates(const GemmKey &key,
                                             size_t maxWorkspace) override {
    Descriptors d;
    // Placeholder bias and auxiliary pointers: the heuristic looks at the
    // epilogue, not at where they live.
    alignas(256) static const float kPlaceholder[64] = {};
    if (Status s = d.make(key, kPlaceholder, kPlaceholder); s.failed())
      return s;
    cublasLtMatmulPreference_t pref = nullptr;
    if (Status s = fromCublas(cublasLtMatmulPreferenceCreate(&pref),
                              "cublasLtMatmulPreferenceCreate");
        s.failed())
      return s;
    uint64_t workspace = maxWorkspace;
    // Reduction-free only: a split-K reduction's order is not fixed.
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
        sizeof(workspace));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
          sizeof(schemes));
    // Every batch entry's alignment, not only the first's.
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignA},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignB},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignC},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignC}};
    for (const auto &[name, bytes] : aligns)
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, name, &bytes,
                                                  sizeof(bytes));
    cublasLtMatmulHeuristicResult_t results[8] = {};
    int returned = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c,
                                          pref, 8, results, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (Status s = fromCublas(st, "cublasLtMatmulAlgoGetHeuristic"); s.failed())
      return s;
    std::vector<GemmAlgo> out;
    for (int i = 0; i < returned; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS)
        continue;
      GemmAlgo algo;
      static_assert(sizeof(algo.data) == sizeof(results[i].algo.data));
      std::memcpy(algo.data.data(), results[i].algo.data, sizeof(algo.data));
      algo.workspace = results[i].workspaceSize;
      // Checked again on the algorithm itself, not only asked for.
      uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
      size_t written = 0;
      cublasLtMatmulAlgoConfigGetAttribute(
          &results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
          sizeof(scheme), &written);
      algo.reduces = scheme != CUBLASLT_REDUCTION_SCHEME_NONE;
      out.push_back(algo);
    }
    return out;
  }

private:
  cublasLtHandle_t handle;
};

void sayFallback(const std::string &why) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr,
                 "rp cuda: a GEMM runs on cuBLAS's own algorithm, not "
                 "cuBLASLt's plan (said once): %s\n",
                 why.c_str());
}

bool aligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 256 == 0;
}

} // namespace

GemmPlanCache &rp::runtime::cuda::gemmPlans() {
  static GemmPlanCache cache(kLtWorkspaceBytes);
  return cache;
}

Status rp::runtime::cuda::ltMatmul(const DispatchContext &ctx,
                                   const GemmKey &key, const void *a,
                                   const void *b, void *d, const void *bias,
                                   bool &ran, const void *aux) {
  ran = false;
  if (!ctx.lt || !ctx.workspace || ctx.workspaceBytes < kLtWorkspaceBytes)
    return Status::ok();
  if (!aligned(a) || !aligned(b) || !aligned(d) || (aux && !aligned(aux))) {
    sayFallback("an operand of " + describeGemm(key) +
                " is not 256-byte aligned");
    return Status::ok();
  }
  LtHeuristic heuristic(ctx.lt);
  Expected<GemmChoice> choice = gemmPlans().choose(key, heuristic);
  if (!choice)
    return choice.getStatus();
  if (!choice->found) {
    sayFallback(choice->why);
    return Status::ok();
  }
  Descriptors desc;
  if (Status s = desc.make(key, bias, aux); s.failed())
    return s;
  cublasLtMatmulAlgo_t algo;
  std::memcpy(algo.data, choice->algo.data.data(), sizeof(algo.data));
  static const float oneF = 1.0f, zeroF = 0.0f;
  static const double oneD = 1.0, zeroD = 0.0;
  bool f64 = key.type == DType::f64;
  const void *alpha = f64 ? static_cast<const void *>(&oneD) : &oneF;
  const void *beta = f64 ? static_cast<const void *>(&zeroD) : &zeroF;
  cublasStatus_t status = cublasLtMatmul(
      ctx.lt, desc.op, alpha, a, desc.a, b, desc.b, beta, d, desc.c, d, desc.c,
      &algo, ctx.workspace, ctx.workspaceBytes, ctx.stream);
  // Refused before anything ran (the same for the shape on every device,
  // so the results stay bitwise across device counts): cuBLAS runs it.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      status == CUBLAS_STATUS_INVALID_VALUE) {
    sayFallback("cublasLtMatmul refused " + describeGemm(key) + ": " +
                cublasGetStatusName(status));
    return Status::ok();
  }
  if (Status s =
          fromCublas(status, "cublasLtMatmul (" + describeGemm(key) + ")");
      s.failed())
    return s;
  ran = true;
  return Status::ok();
}
