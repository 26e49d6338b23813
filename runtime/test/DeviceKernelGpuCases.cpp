//===- DeviceKernelGpuCases.cpp - cases at the library paths' shapes ------===//
//
// The cases shaped for the cuda device's library paths, which the small
// cases of DeviceKernelCases.cpp fall back from: cuDNN's fused attention,
// CUTLASS's grouped GEMM of the MoE weight gradient and cuBLASLt's gelu
// gradient epilogue. On the host (and the sim) they are more cases of the
// same kernels; scripts/gpu-test.sh runs them on a GPU against the host.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernelCases.h"

namespace rp::runtime::conformance {

namespace {

const char *shortName(DType t) { return dtypeName(t); }

} // namespace

std::vector<KernelCase> cudnnAttentionCases(DType t) {
  // Shapes cuDNN's fused SDPA takes (head width 64, a multiple of 8; 4
  // query heads over 2), so that a cuda device with cuDNN runs them there
  // (AttentionPath.h); 80 rows, not a multiple of cuDNN's tiles. The
  // additive mask is [1, 1, S, T], a bias broadcast over batch and heads.
  std::vector<KernelCase> cases;
  const std::string s = shortName(t);
  const Buf q{t, {2, 4, 80, 64}}, k{t, {2, 2, 80, 64}}, v{t, {2, 2, 80, 64}};
  const Buf o{t, {2, 4, 80, 64}};
  const Buf bias{t, {1, 1, 80, 80}, uniformIn(-2, 0)};
  const double scale = 0.125;
  cases.push_back(
      {"sdpa_" + s, OpKind::attention, {q, k, v}, {o}, {0, 0}, {scale}});
  cases.push_back(
      {"sdpa_causal_" + s, OpKind::attention, {q, k, v}, {o}, {1, 0}, {scale}});
  cases.push_back({"sdpa_bias_" + s,
                   OpKind::attention,
                   {q, k, v, bias},
                   {o},
                   {0, 1},
                   {scale}});
  cases.push_back({"sdpa_grad_" + s,
                   OpKind::attention_grad,
                   {q, k, v, o},
                   {q, k, v},
                   {0, 0},
                   {scale}});
  cases.push_back({"sdpa_grad_causal_" + s,
                   OpKind::attention_grad,
                   {q, k, v, o},
                   {q, k, v},
                   {1, 0},
                   {scale}});
  cases.push_back({"sdpa_grad_bias_" + s,
                   OpKind::attention_grad,
                   {q, k, v, bias, o},
                   {q, k, v},
                   {0, 1},
                   {scale}});
  // rp.attention's sliding window (cuDNN's left bound), causal over more
  // keys than queries (its bottom-right diagonal) and Gemma 2's soft-cap
  // (CUDA cores: cuDNN has no cap), forward and backward.
  const Buf q48{t, {2, 4, 48, 64}}, o48{t, {2, 4, 48, 64}};
  for (bool grad : {false, true}) {
    OpKind op = grad ? OpKind::attention_grad : OpKind::attention;
    std::string g = grad ? "grad_" : "";
    auto ins = [&](const Buf &query, const Buf &dy) {
      return grad ? std::vector<Buf>{query, k, v, dy}
                  : std::vector<Buf>{query, k, v};
    };
    auto outs = [&](const Buf &query, const Buf &out) {
      return grad ? std::vector<Buf>{query, k, v} : std::vector<Buf>{out};
    };
    cases.push_back({"sdpa_" + g + "window_" + s,
                     op,
                     ins(q, o),
                     outs(q, o),
                     {1, 0, 24},
                     {scale}});
    cases.push_back({"sdpa_" + g + "bottom_right_" + s,
                     op,
                     ins(q48, o48),
                     outs(q48, o48),
                     {1, 0, 0},
                     {scale}});
    cases.push_back({"sdpa_" + g + "bottom_right_window_" + s,
                     op,
                     ins(q48, o48),
                     outs(q48, o48),
                     {1, 0, 20},
                     {scale}});
    cases.push_back({"sdpa_" + g + "softcap_" + s,
                     op,
                     ins(q, o),
                     outs(q, o),
                     {1, 0},
                     {scale, 2.0}});
  }
  return cases;
}

std::vector<KernelCase> libraryGemmCases(DType t) {
  std::vector<KernelCase> cases;
  const std::string s = shortName(t);
  // The MoE weight gradient at widths CUTLASS's grouped GEMM takes (16-byte
  // rows: multiples of 8), eight experts whose counts (0..40, so some may
  // be empty) leave rows unused, both weight layouts; 24 columns: one
  // partial 128-wide tile.
  const Buf counts{DType::i32, {8}, integersIn(0, 40)};
  cases.push_back({"moe_grouped_matmul_wgrad_cutlass_" + s,
                   OpKind::moe_grouped_matmul_wgrad,
                   {{t, {336, 64}}, {t, {336, 24}}, counts},
                   {{t, {8, 64, 24}}},
                   {0}});
  cases.push_back({"moe_grouped_matmul_wgrad_cutlass_tb_" + s,
                   OpKind::moe_grouped_matmul_wgrad,
                   {{t, {336, 64}}, {t, {336, 24}}, counts},
                   {{t, {8, 24, 64}}},
                   {1}});
  // Longer groups (k up to 299 rows, several k tiles) at 128 x 136.
  const Buf bigCounts{DType::i32, {2}, integersIn(150, 300)};
  cases.push_back({"moe_grouped_matmul_wgrad_cutlass_long_" + s,
                   OpKind::moe_grouped_matmul_wgrad,
                   {{t, {600, 128}}, {t, {600, 136}}, bigCounts},
                   {{t, {2, 128, 136}}},
                   {0}});
  // cuBLASLt's DGELU (the tanh form; its pre-activation the auxiliary
  // matrix) at a GEMM of several tiles, batched and not.
  cases.push_back({"matmul_dgelu_tanh_lt_" + s,
                   OpKind::matmul,
                   {{t, {256, 128}}, {t, {128, 192}}, {t, {256, 192}}},
                   {{t, {256, 192}}},
                   {0, 0, 5}});
  cases.push_back({"matmul_dgelu_tanh_lt_batched_" + s,
                   OpKind::matmul,
                   {{t, {3, 64, 96}}, {t, {3, 128, 96}}, {t, {3, 64, 128}}},
                   {{t, {3, 64, 128}}},
                   {0, 1, 5}});
  cases.push_back({"matmul_dgelu_erf_wide_" + s,
                   OpKind::matmul,
                   {{t, {256, 128}}, {t, {128, 192}}, {t, {256, 192}}},
                   {{t, {256, 192}}},
                   {0, 0, 4}});
  return cases;
}

} // namespace rp::runtime::conformance
