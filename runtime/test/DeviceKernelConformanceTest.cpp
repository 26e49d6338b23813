//===- DeviceKernelConformanceTest.cpp - every kernel against the host ----===//
//
// The kernel half of the device-conformance suite: for every op of the plan
// format (plan.fbs's OpKind), forward and backward, in f32, bf16 and f16
// (and the integer and i1 cases the ops allow), a one-call program runs on
// a backend's device through Queue::launch, with device memory filled and
// read back through copies, and its outputs are compared with the host
// kernel's (host::runProgram) on the same random inputs.
//
// Tolerances (DESIGN.md's "equal within t": max|a - b| / max|ref| per
// output) are per dtype: a GPU's exp/log/erf differ from glibc's by an ulp
// or two and cuBLAS sums a GEMM in another order, so an f32 result moves in
// its last bits and a 16-bit result by at most one rounding step. NaN and
// infinity must sit at the same places, integers and i1 must be equal.
// The host backend, whose launch runs the very host kernels, must match
// bitwise: that is how the harness itself is tested on machines without a
// GPU, where the cuda instantiation is skipped with the backend's reason.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Device.h"
#include "rp/runtime/Half.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/host/Dispatch.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace rp::runtime;
using ::testing::HasSubstr;

namespace {

/// BackendOptions for `devices` devices sharing `threads` threads.
inline BackendOptions devicesAndThreads(uint32_t devices, unsigned threads) {
  BackendOptions options;
  options.devices = devices;
  options.threads = threads;
  return options;
}

/// How an input buffer is filled.
struct Fill {
  enum Kind { uniform, integers, boolean, labels, iota } kind = uniform;
  double lo = -3, hi = 3;
};

Fill uniformIn(double lo, double hi) { return {Fill::uniform, lo, hi}; }
Fill integersIn(double lo, double hi) { return {Fill::integers, lo, hi}; }
const Fill kBoolean{Fill::boolean, 0, 0};
/// Class labels in [0, classes), every fifth the ignore index -100.
Fill labelsUpTo(int64_t classes) { return {Fill::labels, 0, double(classes)}; }
/// 0, 1, 2, ...: distinct rows (the positions of a dispatch).
const Fill kIota{Fill::iota, 0, 0};

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

const char *shortName(DType t) { return dtypeName(t); }

/// The relative tolerance of an output of `dtype`.
double tolerance(DType dtype) {
  switch (dtype) {
  case DType::f64:
    return 1e-12;
  case DType::f32:
    return 2e-5;
  case DType::f16:
    return 2e-3; // A little over one rounding step (2^-11).
  case DType::bf16:
    return 1e-2; // A little over one rounding step (2^-8).
  default:
    return 0;
  }
}

void fillBuffer(const Buf &b, uint8_t *data, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = numElements(b.shape);
  for (int64_t i = 0; i < n; ++i) {
    double u = double(rng() >> 11) / double(1ull << 53);
    double v = b.fill.lo + u * (b.fill.hi - b.fill.lo);
    if (b.fill.kind == Fill::integers)
      v = std::floor(v);
    if (b.fill.kind == Fill::boolean)
      v = (rng() & 1) ? 1 : 0;
    if (b.fill.kind == Fill::iota)
      v = double(i);
    if (b.fill.kind == Fill::labels)
      v = i % 5 == 4 ? -100 : std::floor(v);
    switch (b.dtype) {
    case DType::f32:
      reinterpret_cast<float *>(data)[i] = float(v);
      break;
    case DType::f64:
      reinterpret_cast<double *>(data)[i] = v;
      break;
    case DType::f16:
      reinterpret_cast<f16 *>(data)[i] = f16(v);
      break;
    case DType::bf16:
      reinterpret_cast<bf16 *>(data)[i] = bf16(v);
      break;
    case DType::i32:
      reinterpret_cast<int32_t *>(data)[i] = int32_t(v);
      break;
    case DType::i64:
      reinterpret_cast<int64_t *>(data)[i] = int64_t(v);
      break;
    case DType::i1:
      data[i] = v != 0 ? 1 : 0;
      break;
    }
  }
}

double valueAt(DType dtype, const uint8_t *data, int64_t i) {
  switch (dtype) {
  case DType::f32:
    return reinterpret_cast<const float *>(data)[i];
  case DType::f64:
    return reinterpret_cast<const double *>(data)[i];
  case DType::f16:
    return float(reinterpret_cast<const f16 *>(data)[i]);
  case DType::bf16:
    return float(reinterpret_cast<const bf16 *>(data)[i]);
  case DType::i32:
    return reinterpret_cast<const int32_t *>(data)[i];
  case DType::i64:
    return double(reinterpret_cast<const int64_t *>(data)[i]);
  case DType::i1:
    return data[i] != 0;
  }
  return 0;
}

/// The program of `c` on device 0, its inputs then its outputs as buffers.
Plan planOf(const KernelCase &c) {
  Plan plan;
  plan.devices = 1;
  plan.staged = true;
  KernelCallDesc call;
  call.op = c.op;
  call.ints = c.ints;
  call.floats = c.floats;
  call.loc = c.name;
  auto add = [&](const Buf &b, std::vector<uint32_t> &to) {
    BufferDesc d;
    d.dtype = b.dtype;
    d.shape = b.shape;
    d.device = 0;
    d.name = c.name + "#" + std::to_string(plan.buffers.size());
    plan.buffers.push_back(d);
    to.push_back(uint32_t(plan.buffers.size() - 1));
  };
  for (const Buf &b : c.inputs)
    add(b, call.inputs);
  for (const Buf &b : c.outputs)
    add(b, call.outputs);
  plan.programs.push_back({c.name, {call}});
  return plan;
}

//===----------------------------------------------------------------------===//
// The cases
//===----------------------------------------------------------------------===//

constexpr DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

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
  cases.push_back({"cross_entropy_" + s,
                   OpKind::cross_entropy,
                   {{t, {4, 50, 11}}, {DType::i64, {4, 50}, labelsUpTo(11)}},
                   {{DType::f32, {}}, {DType::i64, {}}},
                   {-100}});
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
  return cases;
}

std::vector<KernelCase> allCases() {
  std::vector<KernelCase> cases;
  for (DType t : kFloatTypes) {
    for (KernelCase &c : forwardCases(t))
      cases.push_back(std::move(c));
    for (KernelCase &c : backwardCases(t))
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

//===----------------------------------------------------------------------===//
// The harness
//===----------------------------------------------------------------------===//

class DeviceKernelConformance : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    Expected<std::unique_ptr<Backend>> opened =
        createBackend(GetParam(), devicesAndThreads(1, 2));
    if (!opened && opened.getStatus().getCode() == StatusCode::Unavailable)
      GTEST_SKIP() << "backend '" << GetParam()
                   << "' not run: " << opened.getStatus().getMessage();
    ASSERT_TRUE(opened) << opened.getStatus().toString();
    backend = std::move(*opened);
  }

  /// Runs `plan`'s program 0 on device 0 with `inputs` (host bytes per
  /// input buffer); returns the bytes of every buffer after the launch.
  Status runOnDevice(const Plan &plan,
                     const std::vector<std::vector<uint8_t>> &contents,
                     std::vector<std::vector<uint8_t>> &after) {
    Device &device = backend->getDevice(0);
    BufferAddresses at(plan.buffers.size(), nullptr);
    std::vector<void *> staging;
    auto release = [&] {
      for (void *p : at)
        device.deallocate(p);
      for (void *p : staging)
        backend->deallocateHost(p);
    };
    Queue &up = device.getQueue(QueueKind::activationH2D);
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      size_t bytes = plan.buffers[b].bytes();
      Expected<void *> d = device.allocate(bytes);
      Expected<void *> h = backend->allocateHost(bytes);
      if (!d || !h) {
        release();
        return !d ? d.getStatus() : h.getStatus();
      }
      at[b] = static_cast<uint8_t *>(*d);
      staging.push_back(*h);
      std::memcpy(*h, contents[b].data(), bytes);
      if (Status s = up.copy(*d, *h, bytes, CopyKind::hostToDevice);
          s.failed()) {
        release();
        return s;
      }
    }
    Status s = up.synchronize();
    Queue &compute = device.getQueue(QueueKind::compute);
    if (s.isOk())
      s = compute.launch(plan, 0, at);
    Status synced = compute.synchronize();
    if (s.isOk())
      s = synced;
    Queue &down = device.getQueue(QueueKind::d2h);
    for (size_t b = 0; s.isOk() && b < plan.buffers.size(); ++b)
      s = down.copy(staging[b], at[b], plan.buffers[b].bytes(),
                    CopyKind::deviceToHost);
    if (s.isOk())
      s = down.synchronize();
    after.resize(plan.buffers.size());
    for (size_t b = 0; s.isOk() && b < plan.buffers.size(); ++b) {
      const uint8_t *h = static_cast<const uint8_t *>(staging[b]);
      after[b].assign(h, h + plan.buffers[b].bytes());
    }
    release();
    return s;
  }

  std::unique_ptr<Backend> backend;
};

/// The host kernels on host memory: the reference.
Status runOnHost(const Plan &plan, std::vector<std::vector<uint8_t>> &data) {
  static ThreadPool pool(2);
  BufferAddresses at;
  for (std::vector<uint8_t> &d : data)
    at.push_back(d.data());
  return host::runProgram(pool, plan, 0, at);
}

TEST_P(DeviceKernelConformance, EveryKernelMatchesTheHostKernel) {
  const bool exact = std::string(GetParam()) == "host";
  std::vector<bool> covered(kNumOpKinds, false);
  std::vector<KernelCase> cases = allCases();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const KernelCase &c = cases[ci];
    SCOPED_TRACE(c.name);
    covered[static_cast<int>(c.op)] = true;
    Plan plan = planOf(c);
    std::vector<std::vector<uint8_t>> data(plan.buffers.size());
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      data[b].assign(plan.buffers[b].bytes(), 0);
      if (b < c.inputs.size())
        fillBuffer(c.inputs[b], data[b].data(), ci * 131 + b);
    }
    std::vector<std::vector<uint8_t>> reference = data, got;
    Status hostStatus = runOnHost(plan, reference);
    ASSERT_TRUE(hostStatus.isOk()) << hostStatus.toString();
    Status s = runOnDevice(plan, data, got);
    ASSERT_TRUE(s.isOk()) << s.toString();
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      size_t b = c.inputs.size() + o;
      const BufferDesc &desc = plan.buffers[b];
      SCOPED_TRACE("output " + std::to_string(o) + " " + dtypeName(desc.dtype));
      // Outputs start as zeros; random inputs never give all zeros back, so
      // this shows that the reference kernel ran.
      ASSERT_NE(reference[b], data[b]) << "the host kernel wrote nothing";
      if (exact) {
        EXPECT_EQ(got[b], reference[b]) << "the host device runs the host "
                                           "kernels: bitwise equal";
        continue;
      }
      double maxRef = 0, maxDiff = 0;
      for (int64_t i = 0; i < desc.size(); ++i) {
        double r = valueAt(desc.dtype, reference[b].data(), i);
        double g = valueAt(desc.dtype, got[b].data(), i);
        ASSERT_EQ(std::isnan(r), std::isnan(g)) << "element " << i;
        if (std::isnan(r))
          continue;
        if (std::isinf(r) || std::isinf(g)) {
          ASSERT_EQ(r, g) << "element " << i;
          continue;
        }
        maxRef = std::max(maxRef, std::fabs(r));
        maxDiff = std::max(maxDiff, std::fabs(r - g));
      }
      double t = tolerance(desc.dtype);
      EXPECT_LE(maxDiff, t * std::max(maxRef, 1e-30))
          << "max |device - host| " << maxDiff << " against max |host| "
          << maxRef << " (tolerance " << t << ")";
    }
  }
  for (int op = 0; op < kNumOpKinds; ++op)
    EXPECT_TRUE(covered[op])
        << "no case runs " << opKindName(static_cast<OpKind>(op));
}

TEST_P(DeviceKernelConformance, ABadIndexIsAnErrorNamingTheCall) {
  KernelCase c{"gather_bad",
               OpKind::gather,
               {{DType::f32, {4, 3}}, {DType::i64, {2}, integersIn(7, 8)}},
               {{DType::f32, {2, 3}}},
               {0}};
  Plan plan = planOf(c);
  std::vector<std::vector<uint8_t>> data(plan.buffers.size()), got;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    data[b].assign(plan.buffers[b].bytes(), 0);
    if (b < c.inputs.size())
      fillBuffer(c.inputs[b], data[b].data(), b);
  }
  // On the host the launch fails; on a GPU the kernel reports it and the
  // compute queue's synchronize does. Either way the step fails, saying
  // which call and which index.
  Status s = runOnDevice(plan, data, got);
  EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << s.toString();
  EXPECT_THAT(s.getMessage(), HasSubstr("gather_bad"));
  EXPECT_THAT(s.getMessage(), HasSubstr("index 7"));
  // The device is still usable afterwards.
  c.inputs[1].fill = integersIn(0, 4);
  fillBuffer(c.inputs[1], data[1].data(), 1);
  EXPECT_TRUE(runOnDevice(plan, data, got).isOk());
}

TEST_P(DeviceKernelConformance, KernelScratchIsReusedAcrossLaunches) {
  // attention_grad, norm_grad and cross_entropy take scratch from the
  // device's allocator on every launch; after the first round it must come
  // from what the allocator already holds.
  std::vector<KernelCase> cases;
  for (KernelCase &c : backwardCases(DType::f32))
    if (c.op == OpKind::attention_grad || c.op == OpKind::norm_grad)
      cases.push_back(std::move(c));
  Device &device = backend->getDevice(0);
  size_t afterFirst = 0;
  for (int round = 0; round < 5; ++round) {
    for (const KernelCase &c : cases) {
      Plan plan = planOf(c);
      std::vector<std::vector<uint8_t>> data(plan.buffers.size()), got;
      for (size_t b = 0; b < plan.buffers.size(); ++b) {
        data[b].assign(plan.buffers[b].bytes(), 0);
        if (b < c.inputs.size())
          fillBuffer(c.inputs[b], data[b].data(), b);
      }
      ASSERT_TRUE(runOnDevice(plan, data, got).isOk()) << c.name;
    }
    MemoryUse use = device.getMemoryUse();
    EXPECT_EQ(use.inUse, 0u) << "round " << round;
    if (round == 0)
      afterFirst = use.reserved;
    else
      EXPECT_LE(use.reserved, afterFirst) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceKernelConformance,
                         ::testing::Values("host", "cuda"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

} // namespace
