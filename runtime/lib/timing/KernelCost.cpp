//===- KernelCost.cpp - the work of one plan kernel call ------------------===//

#include "rp/timing/KernelCost.h"

#include <algorithm>

using namespace rp::timing;

namespace {

// plan.fbs OpKind order.
const char *const kOpNames[kNumKernelOps] = {
    "add", "sub", "mul", "div", "pow", "max", "min", "cmp", "where", "neg",
    "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "silu", "relu",
    "gelu", "cast", "reshape", "transpose", "slice", "concat", "broadcast",
    "gather", "matmul", "reduce", "softmax", "log_softmax", "layer_norm",
    "rms_norm", "attention", "cross_entropy", "cross_entropy_grad",
    "unary_grad", "softmax_grad", "norm_grad", "attention_grad", "gather_grad",
    "slice_grad", "extremum_grad",
    // Mixture of experts.
    "moe_route", "moe_route_grad", "moe_dispatch", "moe_grouped_matmul",
    "moe_grouped_matmul_wgrad", "moe_combine", "moe_combine_grad"};

enum Op : uint16_t {
  kPow = 4,
  kExp = 10,
  kLog = 11,
  kTanh = 14,
  kErf = 15,
  kSigmoid = 16,
  kSilu = 17,
  kGelu = 19,
  kCast = 20,
  kReshape = 21,
  kTranspose = 22,
  kSlice = 23,
  kConcat = 24,
  kBroadcast = 25,
  kGather = 26,
  kMatmul = 27,
  kReduce = 28,
  kSoftmax = 29,
  kLogSoftmax = 30,
  kLayerNorm = 31,
  kRmsNorm = 32,
  kAttention = 33,
  kCrossEntropy = 34,
  kCrossEntropyGrad = 35,
  kUnaryGrad = 36,
  kSoftmaxGrad = 37,
  kNormGrad = 38,
  kAttentionGrad = 39,
  kGatherGrad = 40,
  kSliceGrad = 41,
  kMoERoute = 43,
  kMoERouteGrad = 44,
  kMoEDispatch = 45,
  kMoEGroupedMatmul = 46,
  kMoEGroupedMatmulWGrad = 47,
  kMoECombine = 48,
  kMoECombineGrad = 49,
};

/// FLOPs per element of the ops that are neither matmuls nor attention;
/// a gradient costs about twice its forward.
double flopsPerElement(uint16_t op) {
  switch (op) {
  case kLayerNorm:
  case kRmsNorm:
  case kGelu:
    return 8;
  case kSoftmax:
  case kLogSoftmax:
  case kCrossEntropy:
    return 5;
  case kSilu:
  case kSigmoid:
  case kTanh:
  case kErf:
  case kExp:
  case kLog:
  case kPow:
    return 4;
  case kCast:
  case kTranspose:
  case kMoEDispatch:
    return 0;
  case kMoERoute:
  case kMoERouteGrad:
    return 5;
  case kMoECombine:
  case kMoECombineGrad:
    return 2;
  case kSlice:
  case kConcat:
  case kBroadcast:
  case kGather:
  case kGatherGrad:
  case kSliceGrad:
    return 0;
  case kNormGrad:
    return 16;
  case kSoftmaxGrad:
  case kCrossEntropyGrad:
    return 10;
  case kUnaryGrad:
    return 8;
  default:
    return 1;
  }
}

/// Query-key pairs an attention computes: all, or the lower triangle
/// (aligned to the end of the keys) when causal.
double attentionPairs(int64_t sq, int64_t sk, bool causal) {
  if (!causal)
    return double(sq) * double(sk);
  double pairs = 0;
  for (int64_t i = 0; i < sq; ++i)
    pairs += double(std::min(sk, std::max<int64_t>(0, i + 1 + sk - sq)));
  return pairs;
}

double attentionFlops(const std::vector<Operand> &in, bool causal) {
  if (in.size() < 3 || in[0].shape.size() < 2 || in[1].shape.size() < 2 ||
      in[2].shape.size() < 2)
    return 0;
  const std::vector<int64_t> &q = in[0].shape, &k = in[1].shape,
                             &v = in[2].shape;
  int64_t sq = q[q.size() - 2], d = q.back();
  int64_t sk = k[k.size() - 2], dv = v.back();
  if (sq <= 0 || d <= 0)
    return 0;
  double batch = double(in[0].elements()) / double(sq * d);
  return 2 * batch * attentionPairs(sq, sk, causal) * double(d + dv);
}

} // namespace

const char *rp::timing::kernelOpName(uint16_t op) {
  return op < kNumKernelOps ? kOpNames[op] : "?";
}

int rp::timing::kernelOpIndex(const std::string &name) {
  for (int i = 0; i < kNumKernelOps; ++i)
    if (name == kOpNames[i])
      return i;
  return -1;
}

int64_t Operand::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

KernelWork rp::timing::kernelWork(uint16_t op,
                                  const std::vector<Operand> &inputs,
                                  const std::vector<Operand> &outputs,
                                  const std::vector<int64_t> &ints) {
  KernelWork w;
  if (op == kReshape) {
    w.launches = false;
    return w;
  }
  double io = 0;
  for (const Operand &o : inputs)
    io += double(o.bytes());
  for (const Operand &o : outputs)
    io += double(o.bytes());
  w.bytes = io;
  auto attr = [&](size_t i) { return i < ints.size() ? ints[i] : 0; };
  if (op == kMatmul) {
    if (inputs.empty() || outputs.empty() || inputs[0].shape.size() < 2)
      return w;
    const std::vector<int64_t> &a = inputs[0].shape;
    int64_t k = a[a.size() - (attr(0) != 0 ? 2 : 1)];
    w.flops = 2 * double(outputs[0].elements()) * double(k);
    return w;
  }
  if (op == kMoEGroupedMatmul || op == kMoEGroupedMatmulWGrad) {
    // Every row meets one expert's [K, N] weight: 2 R K N whatever the
    // routing (the per-expert split only changes the GEMM shapes). The
    // whole weight stack is read or written: at uniform routing every
    // expert has rows.
    if (inputs.size() < 2 || outputs.empty() || inputs[0].shape.size() != 2)
      return w;
    double rows = double(inputs[0].shape[0]);
    double kIn = double(inputs[0].shape[1]);
    double nOut = op == kMoEGroupedMatmul ? double(outputs[0].shape.back())
                                          : double(inputs[1].shape.back());
    w.flops = 2 * rows * kIn * nOut;
    return w;
  }
  if (op == kAttention) {
    w.flops = attentionFlops(inputs, attr(0) != 0);
    return w;
  }
  if (op == kAttentionGrad) {
    // Recomputes the scores and forms dV, dP, dQ, dK: five products to the
    // forward's two.
    w.flops = attentionFlops(inputs, attr(0) != 0) * 5 / 2;
    return w;
  }
  double elements = 0;
  if ((op == kReduce || outputs.empty()) && !inputs.empty())
    elements = double(inputs[0].elements());
  else if (!outputs.empty())
    elements = double(outputs[0].elements());
  w.flops = elements * flopsPerElement(op);
  if (op == kGather && inputs.size() >= 2 && !outputs.empty())
    w.bytes = double(inputs[1].bytes()) + 2 * double(outputs[0].bytes());
  return w;
}
