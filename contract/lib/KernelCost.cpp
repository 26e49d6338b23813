//===- KernelCost.cpp - the work of one plan kernel call ------------------===//

#include "rp/timing/KernelCost.h"

#include "rp/contract/MatmulBatch.h"
#include "rp/contract/MatmulEpilogue.h"
#include "rp/contract/ReduceChunks.h"

#include <algorithm>
#include <climits>

using namespace rp::timing;

namespace {

using K = ::rp::plan::OpKind;

/// FLOPs per element of the ops that are neither matmuls nor attention;
/// a gradient costs about twice its forward.
double flopsPerElement(uint16_t op) {
  switch (static_cast<K>(op)) {
  case K::layer_norm:
  case K::rms_norm:
  case K::gelu:
    return 8;
  case K::softmax:
  case K::log_softmax:
  case K::cross_entropy:
    return 5;
  case K::silu:
  case K::sigmoid:
  case K::tanh:
  case K::erf:
  case K::exp:
  case K::log:
  case K::pow:
    return 4;
  case K::cast:
  case K::transpose:
  case K::moe_dispatch:
    return 0;
  case K::moe_route:
  case K::moe_route_grad:
    return 5;
  case K::moe_combine:
  case K::moe_combine_grad:
  case K::dequantize: // a scale and a level per value
    return 2;
  case K::slice:
  case K::concat:
  case K::broadcast:
  case K::gather:
  case K::gather_grad:
  case K::slice_grad:
    return 0;
  case K::norm_grad:
    return 16;
  case K::softmax_grad:
  case K::cross_entropy_grad:
    return 10;
  case K::unary_grad:
    return 8;
  case K::dropout: // Philox4x32-10: 10 rounds of two products per 4 values
    return 10;
  default:
    return 1;
  }
}

/// Query-key pairs an attention computes: all, or the lower triangle
/// (aligned to the end of the keys) when causal, at most `window` keys a
/// query with a sliding window (0: none).
double attentionPairs(int64_t sq, int64_t sk, bool causal, int64_t window) {
  if (!causal)
    return double(sq) * double(sk);
  double pairs = 0;
  for (int64_t i = 0; i < sq; ++i) {
    int64_t keys = std::min(sk, std::max<int64_t>(0, i + 1 + sk - sq));
    pairs += double(window > 0 ? std::min(keys, window) : keys);
  }
  return pairs;
}

double attentionFlops(const std::vector<Operand> &in, bool causal,
                      int64_t window) {
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
  return 2 * batch * attentionPairs(sq, sk, causal, window) * double(d + dv);
}

} // namespace

const char *rp::timing::kernelOpName(uint16_t op) {
  return op < kNumKernelOps ? ::rp::plan::EnumNamesOpKind()[op] : "?";
}

bool rp::timing::launchesKernel(uint16_t op) {
  return static_cast<K>(op) != K::reshape;
}

const std::vector<CudaLaunchSite> &rp::timing::cudaLaunchSites() {
  // Every function of runtime/lib/cuda that enqueues work on a stream, the
  // op kinds whose calls run it, and, where it is written for several, a
  // row per kind (their sites sum to the function's). LaunchTableTest
  // finds every launch in those sources and fails on one not here.
  static const std::vector<CudaLaunchSite> sites = {
      // Elementwise: one kernel a call (the unary one written for two
      // element-type families).
      {"CudaElementwise.cu", "launchBinary", 1, 1,
       "add sub mul div pow max min"},
      {"CudaElementwise.cu", "launchCompare", 1, 1, "cmp"},
      {"CudaElementwise.cu", "launchWhere", 1, 1, "where"},
      {"CudaElementwise.cu", "launchUnary", 2, 1,
       "neg exp log sqrt rsqrt tanh erf sigmoid silu relu gelu"},
      {"CudaElementwise.cu", "launchDropout", 1, 1, "dropout"},
      {"CudaElementwise.cu", "launchUnaryGrad", 1, 1, "unary_grad"},
      {"CudaElementwise.cu", "launchCast", 1, 1, "cast"},
      {"CudaQuant.cu", "launchDequantize", 2, 1, "dequantize"},
      // Movement: one strided kernel; gather by index width.
      {"CudaMovement.cu", "launchStridedCopy", 1, 1,
       "transpose slice broadcast"},
      {"CudaMovement.cu", "launchStridedScatter", 1, 1, "slice_grad"},
      {"CudaMovement.cu", "launchGather", 2, 1, "gather"},
      // Two memsets, the bucket sort's four kernels, the gradient.
      {"CudaMovement.cu", "launchGatherGrad", 7, 7, "gather_grad"},
      // The dispatcher's own: a reshape's copy, slice_grad's zeroing before
      // its scatter, a copy per concat input. A plan gives a reshape's
      // result a buffer of its own, live beside its input, so the device
      // always copies; counted 0 (a view) until the tests whose figures a
      // copy's charge moves are re-derived (issue 32, docs/sim.md).
      {"CudaDispatch.cpp", "runCall", 1, 0, "reshape"},
      {"CudaDispatch.cpp", "runCall", 1, 1, "slice_grad"},
      {"CudaDispatch.cpp", "runCall", 1, 1, "concat"},
      // Matmul: one GEMM (cuBLASLt with its epilogue fused, else cuBLAS's
      // strided batch; a zeroing where the sum is empty), one per batch
      // entry where the batch has no constant stride
      // (rp/contract/MatmulBatch.h), and the epilogue's pass where
      // cuBLASLt does not fuse it.
      {"CudaMatmul.cpp", "gemm", 2, 1, "matmul"},
      {"CudaGemmLt.cpp", "ltMatmul", 1, 1, "matmul"},
      {"CudaEpilogue.cu", "launchBiasActivation", 1, 1, "matmul"},
      {"CudaEpilogue.cu", "launchGeluGradEpilogue", 1, 1, "matmul"},
      // One pass, or a chunk pass and the outputs' fold where the split
      // (rp/contract/ReduceChunks.h) cuts the reduced elements.
      {"CudaNN.cu", "launchReduce", 3, 2, "reduce"},
      {"CudaNN.cu", "launchExtremumGrad", 1, 1, "extremum_grad"},
      // Row lanes or a thread a row.
      {"CudaNN.cu", "launchSoftmax", 2, 1, "softmax log_softmax"},
      {"CudaNN.cu", "launchSoftmaxGrad", 2, 1, "softmax_grad"},
      {"CudaAttention.cu", "launchAttention", 1, 1, "attention"},
      // The query pass, the sinks' gradient (only with sinks), the key pass.
      {"CudaAttentionGrad.cu", "launchAttentionGrad", 3, 3, "attention_grad"},
      // cuDNN where a build has it and the card takes the call
      // (AttentionPath.h; no sinks): one execution for attention, two for
      // its gradient (the forward's output and statistics, then the
      // backward), as many as rp's own kernels without sinks.
      {"cudnn/CudnnAttention.cpp", "run", 1, 1, "attention attention_grad"},
      {"CudaNorms.cu", "launchNorm", 1, 1, "layer_norm rms_norm"},
      // The row pass; the parameters' partial sums and their total only
      // where the call writes the scale's or the bias's gradient.
      {"CudaNorms.cu", "launchNormGrad", 3, 3, "norm_grad"},
      // One launch per label width.
      {"CudaLinearLoss.cu", "launchLinearLossRows", 2, 1,
       "cross_entropy linear_cross_entropy"},
      // The partial sums (per label width) and the total (per type).
      {"CudaLinearLoss.cu", "launchLinearLossTotal", 4, 2,
       "cross_entropy linear_cross_entropy"},
      {"CudaLinearLoss.cu", "launchCrossEntropyGradRows", 2, 1,
       "cross_entropy_grad linear_cross_entropy_grad"},
      {"CudaLinearLoss.cu", "launchStoreAccumulator", 2, 1,
       "linear_cross_entropy_grad"},
      // The weight gradient's zeroing where there are no rows.
      {"CudaLinearLoss.cu", "launchZero", 1, 1, "linear_cross_entropy_grad"},
      // The chunk loop's GEMMs (CudaLinearLossLoop.cpp).
      {"CudaLinearLossDispatch.cpp", "gemm", 1, 1,
       "linear_cross_entropy linear_cross_entropy_grad"},
      {"CudaMoE.cu", "launchMoERoute", 1, 1, "moe_route"},
      {"CudaMoE.cu", "launchMoERouteGrad", 1, 1, "moe_route_grad"},
      // Rank, offsets, place, move.
      {"CudaMoE.cu", "launchMoEDispatch", 4, 4, "moe_dispatch"},
      {"CudaMoE.cu", "launchMoECombine", 1, 1, "moe_combine"},
      // Two memsets, the positions' check, the rows and, weighted, the
      // weights' gradient.
      {"CudaMoE.cu", "launchMoECombineGrad", 5, 5, "moe_combine_grad"},
      // Offsets and the tile plan; the batched GEMM (cuBLAS; a zeroing
      // instead where there is no product) between them and the finish.
      {"CudaMoEGemm.cu", "launchMoEGemmPlan", 2, 2, "moe_grouped_matmul"},
      {"CudaMoEDispatch.cpp", "groupedMatmul", 2, 1, "moe_grouped_matmul"},
      {"CudaMoEGemm.cu", "launchMoEGemmFinish", 1, 1, "moe_grouped_matmul"},
      // The weight gradient with CUTLASS: the zeroing, offsets and
      // problems, the grouped GEMM.
      {"CudaMoEDispatch.cpp", "groupedWGradCutlass", 1, 1,
       "moe_grouped_matmul_wgrad"},
      {"CudaMoEGemm.cu", "launchMoEGroupedProblems", 2, 2,
       "moe_grouped_matmul_wgrad"},
      {"CudaMoECutlass.cu", "runGrouped", 1, 1, "moe_grouped_matmul_wgrad"},
      // Without CUTLASS headers: the counts down (and the host waiting for
      // them), the zeroing, the pointers up, cuBLAS's grouped GEMM; where
      // neither takes the call (f64, widths not a multiple of 8 in 16-bit
      // types), the tiled kernel after the offsets. kernelLaunches counts
      // CUTLASS's path: scripts/setup.sh installs its headers, so rp as
      // built runs it (docs/cuda.md), and rtx4090:as-built times it so.
      {"CudaMoEDispatch.cpp", "groupedWGradGemm", 4, 4,
       "moe_grouped_matmul_wgrad"},
      {"CudaMoEGemm.cu", "launchMoEWGrad", 2, 2, "moe_grouped_matmul_wgrad"},
      // Not a call's: the executor's copies (timed as copies on the
      // links), its error record's download and reset after each job
      // (job_us), and a program's CUDA graph replay (the calls it holds
      // are counted above).
      {"CudaQueue.cpp", "copy", 1, 0, kNotACall},
      {"CudaQueue.cpp", "synchronize", 2, 0, kNotACall},
      {"CudaGraphs.cpp", "replay", 1, 0, kNotACall},
  };
  return sites;
}

unsigned rp::timing::cudaLaunches(const char *function, const char *op) {
  for (const CudaLaunchSite &s : cudaLaunchSites())
    if (std::string(s.function) == function && (!op || servesOp(s, op)))
      return s.launches;
  return 0;
}

bool rp::timing::servesOp(const CudaLaunchSite &site, const char *op) {
  std::string ops = std::string(" ") + site.ops + " ";
  return ops.find(std::string(" ") + op + " ") != std::string::npos;
}

unsigned rp::timing::kernelLaunches(uint16_t op,
                                    const std::vector<int64_t> &ints) {
  return kernelLaunches(op, ints, {}, {});
}

unsigned rp::timing::kernelLaunches(uint16_t op,
                                    const std::vector<int64_t> &ints,
                                    const std::vector<Operand> &inputs,
                                    const std::vector<Operand> &outputs) {
  auto attr = [&](size_t i) { return i < ints.size() ? ints[i] : 0; };
  switch (static_cast<K>(op)) {
  case K::reshape: // a copy on the device, counted as a view (above)
    return cudaLaunches("runCall", "reshape");
  case K::matmul: {
    // ints: transpose_a, transpose_b, (epilogue). cuBLASLt fuses the bias
    // and the tanh gelu (without a pre-activation to keep) and its
    // derivative; the erf gelu's forward and derivative, and the
    // activation where the pre-activation is kept, take a pass after the
    // GEMM, and f64 (cuBLAS alone) takes one for any epilogue.
    using E = ::rp::plan::MatmulEpilogue;
    auto e = static_cast<E>(attr(2));
    bool f64 = !inputs.empty() && inputs[0].elementBytes == 8;
    bool fused = !f64 && (e == E::bias || e == E::dGeluTanh ||
                          (e == E::biasGeluTanh && outputs.size() < 2));
    unsigned gemm = cudaLaunches("gemm", "matmul");
    // A batch without a constant stride: cuBLAS's GEMM per entry, and no
    // cuBLASLt to fuse an epilogue.
    if (inputs.size() >= 2 && inputs[0].shape.size() >= 2 &&
        inputs[1].shape.size() >= 2) {
      const std::vector<int64_t> &a = inputs[0].shape, &b = inputs[1].shape;
      bool ta = attr(0) != 0;
      int64_t gemms = ::rp::plan::matmulGemms({a.begin(), a.end() - 2},
                                              {b.begin(), b.end() - 2},
                                              a[a.size() - (ta ? 1 : 2)], ta);
      if (gemms > 1) {
        gemm = unsigned(std::min<int64_t>(gemms, UINT_MAX / 2));
        fused = false;
      }
    }
    if (e == E::none || fused)
      return gemm;
    return gemm + (e == E::dGelu || e == E::dGeluTanh
                       ? cudaLaunches("launchGeluGradEpilogue")
                       : cudaLaunches("launchBiasActivation"));
  }
  case K::slice_grad: // the zeroing, then the window's scatter
    return cudaLaunches("runCall", "slice_grad") +
           cudaLaunches("launchStridedScatter");
  case K::concat: // a copy per input
    return cudaLaunches("runCall", "concat") *
           unsigned(std::max<size_t>(1, inputs.size()));
  case K::reduce: { // ints: kind, keepdims, axes
    if (inputs.empty() || outputs.empty())
      return 1;
    int64_t numOut = outputs[0].elements();
    int64_t reduced = numOut > 0 ? inputs[0].elements() / numOut : 0;
    return ::rp::plan::reduceChunkTarget(reduced, numOut) >= 2
               ? cudaLaunches("launchReduce")
               : 1;
  }
  case K::attention:
    return cudaLaunches("launchAttention");
  case K::attention_grad: // ints: causal, has_mask, window, has_sinks
    return cudaLaunches("launchAttentionGrad") - (attr(3) != 0 ? 0 : 1);
  case K::layer_norm:
  case K::rms_norm:
    return cudaLaunches("launchNorm");
  case K::norm_grad: // outputs: dx, then dscale and dbias where written
    return outputs.size() > 1 ? cudaLaunches("launchNormGrad") : 1;
  case K::cross_entropy:
    return cudaLaunches("launchLinearLossRows") +
           cudaLaunches("launchLinearLossTotal");
  case K::cross_entropy_grad:
    return cudaLaunches("launchCrossEntropyGradRows");
  case K::linear_cross_entropy:
  case K::linear_cross_entropy_grad: {
    // hidden [..., K] and weight [C, K]; ints: ignore_index, chunk. The
    // chunk loop (CudaLinearLossLoop.cpp) runs ceil(rows / step) chunks.
    bool grad = static_cast<K>(op) == K::linear_cross_entropy_grad;
    int64_t rows = 1, k = 0;
    unsigned elementBytes = 4;
    if (inputs.size() >= 2 && inputs[1].shape.size() == 2) {
      k = inputs[1].shape[1];
      rows = k > 0 ? inputs[0].elements() / k : 0;
      elementBytes = inputs[0].elementBytes;
    }
    int64_t step = std::max<int64_t>(1, std::min(attr(1), rows));
    int64_t chunks = (rows + step - 1) / step;
    if (!grad)
      return unsigned(chunks) * (1 + cudaLaunches("launchLinearLossRows")) +
             cudaLaunches("launchLinearLossTotal");
    if (rows == 0)
      return 1; // the weight gradient's zeroing
    // Per chunk the logits' GEMM, the rows, dhidden's and dweight's GEMMs;
    // a 16-bit weight over several chunks sums in f32 and is stored once.
    bool accumulator = elementBytes < 4 && step < rows;
    return unsigned(chunks) * (3 + cudaLaunches("launchCrossEntropyGradRows")) +
           (accumulator ? cudaLaunches("launchStoreAccumulator") : 0);
  }
  case K::gather_grad:
    return cudaLaunches("launchGatherGrad");
  case K::moe_dispatch:
    return cudaLaunches("launchMoEDispatch");
  case K::moe_grouped_matmul: // the plan, the batched GEMM, the finish
    return cudaLaunches("launchMoEGemmPlan") + 1 +
           cudaLaunches("launchMoEGemmFinish");
  case K::moe_grouped_matmul_wgrad: // zeroing, problems, CUTLASS's GEMM
    return cudaLaunches("groupedWGradCutlass") +
           cudaLaunches("launchMoEGroupedProblems") +
           cudaLaunches("runGrouped");
  case K::moe_combine_grad: // ints: [has_weights]
    return cudaLaunches("launchMoECombineGrad") - (attr(0) != 0 ? 0 : 1);
  default:
    return 1;
  }
}

int rp::timing::kernelOpIndex(const std::string &name) {
  for (int i = 0; i < kNumKernelOps; ++i)
    if (name == ::rp::plan::EnumNamesOpKind()[i])
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
  K kind = static_cast<K>(op);
  w.launches = kernelLaunches(op, ints, inputs, outputs);
  if (!w.launches)
    return w;
  double io = 0;
  for (const Operand &o : inputs)
    io += double(o.bytes());
  for (const Operand &o : outputs)
    io += double(o.bytes());
  w.bytes = io;
  auto attr = [&](size_t i) { return i < ints.size() ? ints[i] : 0; };
  if (kind == K::matmul) {
    if (inputs.empty() || outputs.empty() || inputs[0].shape.size() < 2)
      return w;
    const std::vector<int64_t> &a = inputs[0].shape;
    int64_t k = a[a.size() - (attr(0) != 0 ? 2 : 1)];
    w.flops = 2 * double(outputs[0].elements()) * double(k);
    return w;
  }
  if (kind == K::moe_grouped_matmul || kind == K::moe_grouped_matmul_wgrad) {
    // Every row meets one expert's [K, N] weight: 2 R K N whatever the
    // routing (the per-expert split only changes the GEMM shapes). The
    // whole weight stack is read or written: at uniform routing every
    // expert has rows.
    if (inputs.size() < 2 || outputs.empty() || inputs[0].shape.size() != 2)
      return w;
    double rows = double(inputs[0].shape[0]);
    double kIn = double(inputs[0].shape[1]);
    double nOut = kind == K::moe_grouped_matmul
                      ? double(outputs[0].shape.back())
                      : double(inputs[1].shape.back());
    w.flops = 2 * rows * kIn * nOut;
    // The expert count: the weight stack's [E, ...] (the wgrad writes it).
    const std::vector<int64_t> &stack =
        kind == K::moe_grouped_matmul ? inputs[1].shape : outputs[0].shape;
    if (stack.size() == 3 && stack[0] > 0)
      w.groups = double(stack[0]);
    return w;
  }
  if (kind == K::linear_cross_entropy || kind == K::linear_cross_entropy_grad) {
    // hidden [..., K] against the [C, K] head: the logits 2 T K C and
    // cross-entropy's 5 per logit; the gradient recomputes the logits and
    // forms dhidden and dweight (three products) and dlogits (10 per
    // logit). The logits stay a chunk at a time, so only the operands and
    // results move.
    if (inputs.size() < 2 || inputs[0].shape.empty() ||
        inputs[1].shape.size() != 2)
      return w;
    double k = double(inputs[1].shape[1]), classes = double(inputs[1].shape[0]);
    double tokens = double(inputs[0].elements()) / std::max(k, 1.0);
    double logits = tokens * classes;
    w.flops = kind == K::linear_cross_entropy ? 2 * logits * k + 5 * logits
                                              : 6 * logits * k + 10 * logits;
    return w;
  }
  if (kind == K::attention) {
    // ints: causal, has_mask, (window).
    w.flops = attentionFlops(inputs, attr(0) != 0, attr(2));
    return w;
  }
  if (kind == K::attention_grad) {
    // Recomputes the scores and forms dV, dP, dQ, dK: five products to the
    // forward's two.
    w.flops = attentionFlops(inputs, attr(0) != 0, attr(2)) * 5 / 2;
    return w;
  }
  // A reduction's work is per input element: cross-entropy reads every
  // logit into a scalar loss, and its gradient (about twice the forward,
  // see flopsPerElement) is per logit too.
  double elements = 0;
  if ((kind == K::reduce || kind == K::cross_entropy || outputs.empty()) &&
      !inputs.empty())
    elements = double(inputs[0].elements());
  else if (!outputs.empty())
    elements = double(outputs[0].elements());
  w.flops = elements * flopsPerElement(op);
  if (kind == K::gather && inputs.size() >= 2 && !outputs.empty())
    w.bytes = double(inputs[1].bytes()) + 2 * double(outputs[0].bytes());
  return w;
}
