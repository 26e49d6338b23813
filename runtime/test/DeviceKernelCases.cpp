//===- DeviceKernelCases.cpp - the kernel conformance cases ---------------===//

#include "DeviceKernelCases.h"
#include "rp/contract/Quantize.h"

namespace rp::runtime::conformance {

namespace {

const char *shortName(DType t) { return dtypeName(t); }

//===----------------------------------------------------------------------===//
// The cases
//===----------------------------------------------------------------------===//

constexpr DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

} // namespace

std::vector<KernelCase> forwardCases(DType t) {
  std::vector<KernelCase> cases;
  const std::string s = shortName(t);
  const Fill positive = uniformIn(0.25, 4);
  struct Named {
    const char *name;
    OpKind op;
  };
  for (Named b : {Named{"add", OpKind::add},
                  {"sub", OpKind::sub},
                  {"mul", OpKind::mul},
                  {"div", OpKind::div},
                  {"max", OpKind::max},
                  {"min", OpKind::min}})
    cases.push_back({std::string(b.name) + "_" + s,
                     b.op,
                     {{t, {2, 3, 4}}, {t, {3, 1}, uniformIn(0.5, 3)}},
                     {{t, {2, 3, 4}}}});
  cases.push_back({"pow_" + s,
                   OpKind::pow,
                   {{t, {2, 3, 4}, positive}, {t, {4}}},
                   {{t, {2, 3, 4}}}});
  cases.push_back(
      {"cmp_lt_" + s,
       OpKind::cmp,
       {{t, {2, 3, 4}, integersIn(-2, 2)}, {t, {4}, integersIn(-2, 2)}},
       {{DType::i1, {2, 3, 4}}},
       {2}});
  cases.push_back({"where_" + s,
                   OpKind::where,
                   {{DType::i1, {3, 4}, kBoolean}, {t, {2, 3, 4}}, {t, {4}}},
                   {{t, {2, 3, 4}}}});
  for (Named u : {Named{"neg", OpKind::neg},
                  {"exp", OpKind::exp},
                  {"tanh", OpKind::tanh},
                  {"erf", OpKind::erf},
                  {"sigmoid", OpKind::sigmoid},
                  {"silu", OpKind::silu},
                  {"relu", OpKind::relu}})
    cases.push_back(
        {std::string(u.name) + "_" + s, u.op, {{t, {1000}}}, {{t, {1000}}}});
  for (Named u : {Named{"log", OpKind::log},
                  {"sqrt", OpKind::sqrt},
                  {"rsqrt", OpKind::rsqrt}})
    cases.push_back({std::string(u.name) + "_" + s,
                     u.op,
                     {{t, {1000}, positive}},
                     {{t, {1000}}}});
  cases.push_back(
      {"gelu_" + s, OpKind::gelu, {{t, {1000}}}, {{t, {1000}}}, {0}});
  cases.push_back(
      {"gelu_tanh_" + s, OpKind::gelu, {{t, {1000}}}, {{t, {1000}}}, {1}});
  cases.push_back(
      {"cast_to_f32_" + s, OpKind::cast, {{t, {300}}}, {{DType::f32, {300}}}});
  cases.push_back({"cast_from_f32_" + s,
                   OpKind::cast,
                   {{DType::f32, {300}, uniformIn(-70000, 70000)}},
                   {{t, {300}}}});
  cases.push_back({"cast_to_i64_" + s,
                   OpKind::cast,
                   {{t, {300}, uniformIn(-50, 50)}},
                   {{DType::i64, {300}}}});
  cases.push_back({"cast_from_i1_" + s,
                   OpKind::cast,
                   {{DType::i1, {300}, kBoolean}},
                   {{t, {300}}}});
  // A quantized weight's blob: bytes below 61 make every stored float
  // (absmax values, the offset) small and finite.
  for (int64_t kind : {0, 1}) {
    int64_t bytes =
        quant::layoutOf(static_cast<quant::QuantKind>(kind), 64 * 300).bytes;
    cases.push_back(
        {std::string(kind ? "dequantize_int8_" : "dequantize_nf4_") + s,
         OpKind::dequantize,
         {{DType::u8, {bytes}, integersIn(0, 60)}},
         {{t, {64, 300}}},
         {kind}});
  }
  // LoRA dropout: the dropout_key row (seed, step, microbatch, on != 0)
  // read on the device; ints [tensor], floats [p].
  cases.push_back({"dropout_" + s,
                   OpKind::dropout,
                   {{t, {6, 50}}, {DType::i64, {1, 4}, integersIn(1, 9)}},
                   {{t, {6, 50}}},
                   {5},
                   {0.3}});
  cases.push_back(
      {"reshape_" + s, OpKind::reshape, {{t, {2, 6}}}, {{t, {3, 4}}}});
  cases.push_back({"transpose_" + s,
                   OpKind::transpose,
                   {{t, {2, 3, 4}}},
                   {{t, {4, 2, 3}}},
                   {2, 0, 1}});
  cases.push_back({"slice_" + s,
                   OpKind::slice,
                   {{t, {5, 6}}},
                   {{t, {2, 2}}},
                   {1, 0, 2, 3}});
  cases.push_back({"concat_" + s,
                   OpKind::concat,
                   {{t, {2, 3}}, {t, {2, 1}}, {t, {2, 2}}},
                   {{t, {2, 6}}},
                   {1}});
  cases.push_back(
      {"broadcast_" + s, OpKind::broadcast, {{t, {3, 1}}}, {{t, {2, 3, 4}}}});
  cases.push_back({"gather_" + s,
                   OpKind::gather,
                   {{t, {10, 8}}, {DType::i64, {2, 3}, integersIn(-10, 10)}},
                   {{t, {2, 3, 8}}},
                   {0}});
  cases.push_back({"gather_axis1_" + s,
                   OpKind::gather,
                   {{t, {3, 10, 4}}, {DType::i32, {5}, integersIn(0, 10)}},
                   {{t, {3, 5, 4}}},
                   {1}});
  cases.push_back({"matmul_shared_" + s,
                   OpKind::matmul,
                   {{t, {2, 5, 70}}, {t, {70, 3}}},
                   {{t, {2, 5, 3}}},
                   {0, 0}});
  cases.push_back({"matmul_tt_" + s,
                   OpKind::matmul,
                   {{t, {2, 7, 5}}, {t, {2, 3, 7}}},
                   {{t, {2, 5, 3}}},
                   {1, 1}});
  // Large enough for the tensor cores: cuBLASLt's plans on cuda
  // (CudaGemmLt.h), one matrix shared by the batch and a strided batch.
  cases.push_back({"matmul_gemm_" + s,
                   OpKind::matmul,
                   {{t, {2, 64, 96}}, {t, {96, 80}}},
                   {{t, {2, 64, 80}}},
                   {0, 0}});
  cases.push_back({"matmul_batched_tb_" + s,
                   OpKind::matmul,
                   {{t, {3, 32, 48}}, {t, {3, 40, 48}}},
                   {{t, {3, 32, 40}}},
                   {0, 1}});
  // matmul's fused epilogues (kernels::MatmulEpilogue: ints [ta, tb, e]):
  // cuBLASLt's BIAS and GELU_BIAS on cuda where it runs the GEMM, else the
  // GEMM and CudaEpilogue.cu's pass; the pre-activation as a second
  // output; the backward's gelu gradient (DGELU) on the product.
  cases.push_back({"matmul_bias_" + s,
                   OpKind::matmul,
                   {{t, {2, 64, 96}}, {t, {96, 80}}, {t, {80}}},
                   {{t, {2, 64, 80}}},
                   {0, 0, 1}});
  cases.push_back({"matmul_bias_gelu_" + s,
                   OpKind::matmul,
                   {{t, {2, 64, 96}}, {t, {80, 96}}, {t, {80}}},
                   {{t, {2, 64, 80}}},
                   {0, 1, 2}});
  cases.push_back({"matmul_bias_gelu_tanh_" + s,
                   OpKind::matmul,
                   {{t, {2, 64, 96}}, {t, {80, 96}}, {t, {80}}},
                   {{t, {2, 64, 80}}},
                   {0, 1, 3}});
  cases.push_back({"matmul_bias_gelu_tanh_pre_" + s,
                   OpKind::matmul,
                   {{t, {128, 96}}, {t, {96, 80}}, {t, {80}}},
                   {{t, {128, 80}}, {t, {128, 80}}},
                   {0, 0, 3}});
  cases.push_back({"matmul_bias_small_" + s,
                   OpKind::matmul,
                   {{t, {2, 5, 7}}, {t, {7, 3}}, {t, {3}}},
                   {{t, {2, 5, 3}}},
                   {0, 0, 1}});
  cases.push_back({"matmul_dgelu_tanh_" + s,
                   OpKind::matmul,
                   {{t, {2, 64, 80}}, {t, {96, 80}}, {t, {2, 64, 96}}},
                   {{t, {2, 64, 96}}},
                   {0, 1, 5}});
  cases.push_back({"matmul_dgelu_" + s,
                   OpKind::matmul,
                   {{t, {2, 9, 8}}, {t, {8, 12}}, {t, {2, 9, 12}}},
                   {{t, {2, 9, 12}}},
                   {0, 0, 4}});
  cases.push_back({"matmul_broadcast_" + s,
                   OpKind::matmul,
                   {{t, {2, 1, 4, 5}}, {t, {1, 3, 5, 6}}},
                   {{t, {2, 3, 4, 6}}},
                   {0, 0}});
  cases.push_back({"reduce_sum_" + s,
                   OpKind::reduce,
                   {{t, {3, 50, 4}}},
                   {{t, {3, 4}}},
                   {0, 0, 1}});
  cases.push_back({"reduce_mean_" + s,
                   OpKind::reduce,
                   {{t, {3, 50, 4}}},
                   {{t, {1, 50, 1}}},
                   {1, 1, 0, 2}});
  cases.push_back({"reduce_max_" + s,
                   OpKind::reduce,
                   {{t, {3, 50, 4}}},
                   {{t, {3, 50}}},
                   {2, 0, 2}});
  cases.push_back({"reduce_min_" + s,
                   OpKind::reduce,
                   {{t, {3, 50, 4}}},
                   {{t, {3, 1, 4}}},
                   {3, 1, 1}});
  cases.push_back({"softmax_" + s,
                   OpKind::softmax,
                   {{t, {3, 40, 5}}},
                   {{t, {3, 40, 5}}},
                   {1}});
  cases.push_back({"log_softmax_" + s,
                   OpKind::log_softmax,
                   {{t, {4, 7, 33}}},
                   {{t, {4, 7, 33}}},
                   {2}});
  cases.push_back({"layer_norm_" + s,
                   OpKind::layer_norm,
                   {{t, {6, 64}}, {t, {64}}, {t, {64}}},
                   {{t, {6, 64}}},
                   {1, 1, 1},
                   {1e-5}});
  cases.push_back({"layer_norm_plain_" + s,
                   OpKind::layer_norm,
                   {{t, {2, 3, 16}}},
                   {{t, {2, 3, 16}}},
                   {1, 0, 0},
                   {1e-5}});
  cases.push_back({"rms_norm_" + s,
                   OpKind::rms_norm,
                   {{t, {6, 64}}, {t, {64}}},
                   {{t, {6, 64}}},
                   {1, 1},
                   {1e-6}});
  // Attention: grouped-query heads (4 over 2), causal, and both masks.
  const Buf q{t, {2, 4, 9, 8}}, k{t, {2, 2, 9, 8}}, v{t, {2, 2, 9, 6}};
  const Buf o{t, {2, 4, 9, 6}};
  cases.push_back(
      {"attention_" + s, OpKind::attention, {q, k, v}, {o}, {0, 0}, {0.35}});
  cases.push_back({"attention_causal_" + s,
                   OpKind::attention,
                   {q, k, v},
                   {o},
                   {1, 0},
                   {0.35}});
  cases.push_back({"attention_bool_mask_" + s,
                   OpKind::attention,
                   {q, k, v, {DType::i1, {9, 9}, kBoolean}},
                   {o},
                   {0, 1},
                   {0.35}});
  cases.push_back({"attention_float_mask_" + s,
                   OpKind::attention,
                   {q, k, v, {t, {2, 1, 9, 9}}},
                   {o},
                   {0, 1},
                   {0.35}});
  // Segments (packed documents): an i64 [batch, keys] id per key, causal.
  cases.push_back({"attention_segments_" + s,
                   OpKind::attention,
                   {q, k, v, {DType::i64, {2, 9}, labelsUpTo(3)}},
                   {o},
                   {1, 1},
                   {0.35}});
  // GPT-OSS's attention sinks (one logit a query head; ints [causal,
  // has_mask, window, has_sinks]): causal, then with segments and a window.
  const Buf sinks{t, {4}};
  cases.push_back({"attention_sinks_" + s,
                   OpKind::attention,
                   {q, k, v, sinks},
                   {o},
                   {1, 0, 0, 1},
                   {0.35}});
  cases.push_back({"attention_sinks_segments_window_" + s,
                   OpKind::attention,
                   {q, k, v, {DType::i64, {2, 9}, labelsUpTo(3)}, sinks},
                   {o},
                   {1, 1, 3, 1},
                   {0.35}});
  cases.push_back({"cross_entropy_" + s,
                   OpKind::cross_entropy,
                   {{t, {4, 50, 11}}, {DType::i64, {4, 50}, labelsUpTo(11)}},
                   {{DType::f32, {}}, {DType::i64, {}}},
                   {-100}});
  // The fused LM head + loss, 3 chunks of 32 rows (the last one short).
  cases.push_back(
      {"linear_cross_entropy_" + s,
       OpKind::linear_cross_entropy,
       {{t, {2, 40, 6}}, {t, {11, 6}}, {DType::i64, {2, 40}, labelsUpTo(11)}},
       {{DType::f32, {}}, {DType::i64, {}}},
       {-100, 32}});
  // A wide vocabulary in one chunk: the cuda row kernel's full block (256
  // threads over 3000 logits).
  const Fill small = uniformIn(-1, 1);
  cases.push_back({"linear_cross_entropy_wide_" + s,
                   OpKind::linear_cross_entropy,
                   {{t, {70, 8}, small},
                    {t, {3000, 8}, small},
                    {DType::i64, {70}, labelsUpTo(3000)}},
                   {{DType::f32, {}}, {DType::i64, {}}},
                   {-100, 128}});
  return cases;
}

std::vector<KernelCase> backwardCases(DType t) {
  std::vector<KernelCase> cases;
  const std::string s = shortName(t);
  const Fill positive = uniformIn(0.25, 4);
  cases.push_back({"cross_entropy_grad_" + s,
                   OpKind::cross_entropy_grad,
                   {{t, {4, 50, 11}},
                    {DType::i32, {4, 50}, labelsUpTo(11)},
                    {DType::f32, {}, uniformIn(0.01, 0.02)}},
                   {{t, {4, 50, 11}}},
                   {-100}});
  cases.push_back({"linear_cross_entropy_grad_" + s,
                   OpKind::linear_cross_entropy_grad,
                   {{t, {2, 40, 6}},
                    {t, {11, 6}},
                    {DType::i32, {2, 40}, labelsUpTo(11)},
                    {DType::f32, {}, uniformIn(0.01, 0.02)}},
                   {{t, {2, 40, 6}}, {t, {11, 6}}},
                   {-100, 32}});
  const Fill small = uniformIn(-1, 1);
  cases.push_back({"linear_cross_entropy_grad_wide_" + s,
                   OpKind::linear_cross_entropy_grad,
                   {{t, {70, 8}, small},
                    {t, {3000, 8}, small},
                    {DType::i32, {70}, labelsUpTo(3000)},
                    {DType::f32, {}, uniformIn(0.01, 0.02)}},
                   {{t, {70, 8}}, {t, {3000, 8}}},
                   {-100, 128}});
  for (int kind = 0; kind <= 10; ++kind) {
    // exp, log, sqrt, rsqrt, tanh, erf, sigmoid, silu, relu, gelu, gelu_tanh
    bool needsPositive = kind >= 1 && kind <= 3;
    cases.push_back(
        {"unary_grad_" + std::to_string(kind) + "_" + s,
         OpKind::unary_grad,
         {{t, {500}, needsPositive ? positive : Fill{}}, {t, {500}}},
         {{t, {500}}},
         {kind}});
  }
  cases.push_back({"softmax_grad_" + s,
                   OpKind::softmax_grad,
                   {{t, {3, 40, 5}, uniformIn(0, 1)}, {t, {3, 40, 5}}},
                   {{t, {3, 40, 5}}},
                   {1, 0}});
  cases.push_back({"log_softmax_grad_" + s,
                   OpKind::softmax_grad,
                   {{t, {4, 33}, uniformIn(-4, 0)}, {t, {4, 33}}},
                   {{t, {4, 33}}},
                   {1, 1}});
  // 300 rows: three blocks of the scale and bias gradients' partial sums.
  cases.push_back({"layer_norm_grad_" + s,
                   OpKind::norm_grad,
                   {{t, {300, 16}}, {t, {16}}, {t, {300, 16}}},
                   {{t, {300, 16}}, {t, {16}}, {t, {16}}},
                   {1, 1, 1, 0},
                   {1e-5}});
  cases.push_back({"rms_norm_grad_" + s,
                   OpKind::norm_grad,
                   {{t, {300, 16}}, {t, {16}}, {t, {300, 16}}},
                   {{t, {300, 16}}, {t, {16}}},
                   {1, 1, 0, 1},
                   {1e-6}});
  cases.push_back({"layer_norm_grad_plain_" + s,
                   OpKind::norm_grad,
                   {{t, {5, 2, 8}}, {t, {5, 2, 8}}},
                   {{t, {5, 2, 8}}},
                   {1, 0, 0, 0},
                   {1e-5}});
  const Buf q{t, {2, 4, 9, 8}}, k{t, {2, 2, 9, 8}}, v{t, {2, 2, 9, 6}};
  const Buf dy{t, {2, 4, 9, 6}};
  cases.push_back({"attention_grad_" + s,
                   OpKind::attention_grad,
                   {q, k, v, dy},
                   {q, k, v},
                   {0, 0},
                   {0.35}});
  cases.push_back({"attention_grad_causal_" + s,
                   OpKind::attention_grad,
                   {q, k, v, dy},
                   {q, k, v},
                   {1, 0},
                   {0.35}});
  cases.push_back({"attention_grad_mask_" + s,
                   OpKind::attention_grad,
                   {q, k, v, {DType::i1, {2, 1, 9, 9}, kBoolean}, dy},
                   {q, k, v},
                   {0, 1},
                   {0.35}});
  cases.push_back({"attention_grad_segments_" + s,
                   OpKind::attention_grad,
                   {q, k, v, {DType::i64, {2, 9}, labelsUpTo(3)}, dy},
                   {q, k, v},
                   {1, 1},
                   {0.35}});
  const Buf sinks{t, {4}};
  cases.push_back({"attention_grad_sinks_" + s,
                   OpKind::attention_grad,
                   {q, k, v, sinks, dy},
                   {q, k, v, sinks},
                   {1, 0, 0, 1},
                   {0.35}});
  cases.push_back({"attention_grad_sinks_segments_window_" + s,
                   OpKind::attention_grad,
                   {q, k, v, {DType::i64, {2, 9}, labelsUpTo(3)}, sinks, dy},
                   {q, k, v, sinks},
                   {1, 1, 3, 1},
                   {0.35}});
  // Twelve indices into six rows: repeats sum in index order.
  cases.push_back({"gather_grad_" + s,
                   OpKind::gather_grad,
                   {{DType::i64, {3, 4}, integersIn(-6, 6)}, {t, {3, 4, 5}}},
                   {{t, {6, 5}}},
                   {0}});
  cases.push_back({"slice_grad_" + s,
                   OpKind::slice_grad,
                   {{t, {2, 2}}},
                   {{t, {5, 6}}},
                   {1, 0, 2, 3}});
  cases.push_back({"reduce_max_grad_" + s,
                   OpKind::extremum_grad,
                   {{t, {3, 50, 4}}, {t, {3, 4}}},
                   {{t, {3, 50, 4}}},
                   {2, 0, 1}});
  cases.push_back({"reduce_min_grad_" + s,
                   OpKind::extremum_grad,
                   {{t, {3, 50, 4}}, {t, {3, 1, 1}}},
                   {{t, {3, 50, 4}}},
                   {3, 1, 1, 2}});
  // Mixture of experts: 7 tokens, 4 experts, top-2; counts of rows
  // rows per expert (1 or 2) fit the 10 rows of the grouped matmuls.
  const Buf experts{DType::i64, {7, 2}, integersIn(0, 4)};
  const Buf counts{DType::i32, {4}, integersIn(1, 3)};
  cases.push_back({"moe_route_before_" + s,
                   OpKind::moe_route,
                   {{t, {7, 4}}},
                   {{t, {7, 2}}, {DType::i64, {7, 2}}},
                   {2, 0, 1}});
  cases.push_back({"moe_route_after_" + s,
                   OpKind::moe_route,
                   {{t, {7, 4}}},
                   {{t, {7, 3}}, {DType::i64, {7, 3}}},
                   {3, 1, 0}});
  cases.push_back({"moe_route_grad_before_" + s,
                   OpKind::moe_route_grad,
                   {{t, {7, 4}}, experts, {t, {7, 2}}},
                   {{t, {7, 4}}},
                   {0, 1}});
  cases.push_back({"moe_route_grad_after_" + s,
                   OpKind::moe_route_grad,
                   {{t, {7, 4}}, experts, {t, {7, 2}}},
                   {{t, {7, 4}}},
                   {1, 0}});
  cases.push_back({"moe_dispatch_" + s,
                   OpKind::moe_dispatch,
                   {{t, {7, 5}}, experts},
                   {{t, {14, 5}}, {DType::i32, {7, 2}}, {DType::i32, {4}}}});
  cases.push_back({"moe_grouped_matmul_" + s,
                   OpKind::moe_grouped_matmul,
                   {{t, {10, 5}}, {t, {4, 6, 5}}, counts},
                   {{t, {10, 6}}},
                   {1}});
  cases.push_back({"moe_grouped_matmul_plain_" + s,
                   OpKind::moe_grouped_matmul,
                   {{t, {10, 5}}, {t, {4, 5, 6}}, counts},
                   {{t, {10, 6}}},
                   {0}});
  cases.push_back({"moe_grouped_matmul_wgrad_" + s,
                   OpKind::moe_grouped_matmul_wgrad,
                   {{t, {10, 5}}, {t, {10, 6}}, counts},
                   {{t, {4, 6, 5}}},
                   {1}});
  cases.push_back(
      {"moe_combine_" + s,
       OpKind::moe_combine,
       {{t, {14, 5}}, {DType::i32, {7, 2}, integersIn(0, 14)}, {t, {7, 2}}},
       {{t, {7, 5}}},
       {1}});
  cases.push_back({"moe_combine_unweighted_" + s,
                   OpKind::moe_combine,
                   {{t, {14, 5}}, {DType::i32, {7, 2}, integersIn(0, 14)}},
                   {{t, {7, 5}}},
                   {0}});
  cases.push_back(
      {"moe_combine_grad_" + s,
       OpKind::moe_combine_grad,
       {{t, {16, 5}}, {DType::i32, {7, 2}, kIota}, {t, {7, 2}}, {t, {7, 5}}},
       {{t, {16, 5}}, {t, {7, 2}}},
       {1}});
  // Larger MoE shapes, for the cuda kernels' tiling: 400 choices (two
  // blocks of the dispatch scan), 64 experts with top-1 (the host's
  // partial_sort), groups of 100..139 rows (full 128-row tiles of the
  // grouped matmul beside partial ones, unused rows at the end, weight
  // gradient tiles cut at 20 and 18 columns).
  const Buf manyExperts{DType::i64, {200, 2}, integersIn(0, 5)};
  const Buf bigCounts{DType::i32, {2}, integersIn(100, 140)};
  cases.push_back({"moe_route_wide_" + s,
                   OpKind::moe_route,
                   {{t, {130, 64}}},
                   {{t, {130, 1}}, {DType::i64, {130, 1}}},
                   {1, 0, 0}});
  cases.push_back({"moe_dispatch_large_" + s,
                   OpKind::moe_dispatch,
                   {{t, {200, 3}}, manyExperts},
                   {{t, {400, 3}}, {DType::i32, {200, 2}}, {DType::i32, {5}}}});
  cases.push_back({"moe_grouped_matmul_large_" + s,
                   OpKind::moe_grouped_matmul,
                   {{t, {300, 20}}, {t, {2, 18, 20}}, bigCounts},
                   {{t, {300, 18}}},
                   {1}});
  cases.push_back({"moe_grouped_matmul_wgrad_large_" + s,
                   OpKind::moe_grouped_matmul_wgrad,
                   {{t, {300, 20}}, {t, {300, 18}}, bigCounts},
                   {{t, {2, 20, 18}}},
                   {0}});
  return cases;
}

std::vector<KernelCase> allCases() {
  std::vector<KernelCase> cases;
  for (DType t : kFloatTypes) {
    for (KernelCase &c : forwardCases(t))
      cases.push_back(std::move(c));
    for (KernelCase &c : backwardCases(t))
      cases.push_back(std::move(c));
    for (KernelCase &c : cudnnAttentionCases(t))
      cases.push_back(std::move(c));
    for (KernelCase &c : libraryGemmCases(t))
      cases.push_back(std::move(c));
  }
  // Integer arithmetic and data movement of integers.
  cases.push_back({"add_i64",
                   OpKind::add,
                   {{DType::i64, {4, 5}, integersIn(-100, 100)},
                    {DType::i64, {5}, integersIn(-100, 100)}},
                   {{DType::i64, {4, 5}}}});
  cases.push_back({"div_i32",
                   OpKind::div,
                   {{DType::i32, {40}, integersIn(-100, 100)},
                    {DType::i32, {40}, integersIn(1, 9)}},
                   {{DType::i32, {40}}}});
  cases.push_back({"neg_i64",
                   OpKind::neg,
                   {{DType::i64, {40}, integersIn(-100, 100)}},
                   {{DType::i64, {40}}}});
  cases.push_back({"transpose_i1",
                   OpKind::transpose,
                   {{DType::i1, {3, 5}, kBoolean}},
                   {{DType::i1, {5, 3}}},
                   {1, 0}});
  cases.push_back({"reduce_sum_i64",
                   OpKind::reduce,
                   {{DType::i64, {6, 7}, integersIn(-9, 9)}},
                   {{DType::i64, {7}}},
                   {0, 0, 0}});
  return cases;
}

} // namespace rp::runtime::conformance
