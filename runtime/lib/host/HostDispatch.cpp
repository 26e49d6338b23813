//===- HostDispatch.cpp - a plan program's calls on the host kernels ------===//
//
// The one dispatch from the plan's kernel calls to the host kernel library:
// HostForward (unstaged plans, host programs) and the host device's compute
// queues (staged plans) both run programs through runProgram here.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Half.h"
#include "rp/runtime/host/Dispatch.h"
#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/host/MoE.h"
#include "rp/runtime/host/Quant.h"
#include "rp/runtime/kernels/OpKinds.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::kernels;

/// The value of a one-element float tensor (a loss scale).
static double scalarValue(const TensorRef &t) {
  switch (t.dtype) {
  case DType::f64:
    return t.as<double>()[0];
  case DType::f32:
    return t.as<float>()[0];
  case DType::bf16:
    return static_cast<float>(t.as<bf16>()[0]);
  case DType::f16:
    return static_cast<float>(t.as<f16>()[0]);
  default:
    return 0.0;
  }
}

static Status runCall(ThreadPool &pool, const Plan &plan,
                      const ProgramDesc &program, size_t index,
                      const BufferAddresses &buffers) {
  const KernelCallDesc &c = program.calls[index];
  const CallTensors tensors = callTensors(plan, c, buffers);
  const std::vector<TensorRef> &in = tensors.in, &outs = tensors.outs;
  TensorRef out = outs[0];
  const std::vector<int64_t> &a = c.ints;
  auto optional = [&](bool present, size_t i) {
    return present ? std::optional<TensorRef>(in[i]) : std::nullopt;
  };
  switch (c.op) {
  RP_BINARY_OP_CASES:
    return binary(pool, binaryKindOf(c.op), in[0], in[1], out);
  case OpKind::cmp:
    return compare(pool, static_cast<CmpKind>(a[0]), in[0], in[1], out);
  case OpKind::where:
    return where(pool, in[0], in[1], in[2], out);
  case OpKind::gelu:
    return unary(pool, unaryKindOfGelu(a[0]), in[0], out);
  RP_UNARY_OP_CASES:
    return unary(pool, unaryKindOf(c.op), in[0], out);
  case OpKind::cast:
    return cast(pool, in[0], out);
  case OpKind::dequantize:
    return dequantize(pool, in[0], a[0], out);
  case OpKind::dropout: {
    DropoutKey key;
    bool on = false;
    if (Status s =
            dropoutKeyOf(in[1], in[0].size(), a[0], c.floats[0], key, on);
        s.failed())
      return s;
    return on ? dropout(pool, key, in[0], out) : copy(pool, in[0], out);
  }
  case OpKind::reshape:
    return copy(pool, in[0], out);
  case OpKind::transpose:
    return transpose(pool, in[0], a, out);
  case OpKind::slice: {
    size_t rank = out.shape.size();
    return slice(pool, in[0], {a.begin(), a.begin() + rank},
                 {a.begin() + rank, a.end()}, out);
  }
  case OpKind::concat:
    return concat(pool, in, a[0], out);
  case OpKind::broadcast:
    return broadcast(pool, in[0], out);
  case OpKind::gather:
    return gather(pool, in[0], in[1], a[0], out);
  case OpKind::matmul:
    // ints [transpose_a, transpose_b, (epilogue)]: Plan.cpp checks that the
    // bias and the pre-activation output are there when the epilogue says.
    if (a.size() > 2 && a[2] != 0)
      return matmulEpilogue(
          pool, in[0], in[1], a[0] != 0, a[1] != 0, in[2], a[2], out,
          outs.size() > 1 ? std::optional(outs[1]) : std::nullopt);
    return matmul(pool, in[0], in[1], a[0] != 0, a[1] != 0, out);
  case OpKind::reduce:
    return reduce(pool, static_cast<ReduceKind>(a[0]), in[0],
                  {a.begin() + 2, a.end()}, a[1] != 0, out);
  case OpKind::softmax:
  case OpKind::log_softmax:
    return softmax(pool, in[0], a[0], c.op == OpKind::log_softmax, out);
  case OpKind::layer_norm:
    return layerNorm(pool, in[0], optional(a[1], 1),
                     optional(a[2], a[1] ? 2 : 1), a[0], c.floats[0], out);
  case OpKind::rms_norm:
    return rmsNorm(pool, in[0], optional(a[1], 1), a[0], c.floats[0], out);
  case OpKind::attention: {
    kernels::AttentionExtras extras = kernels::attentionExtrasOf(a, c.floats);
    if (kernels::attentionHasSinks(a))
      extras.sinks = &in[3 + (a[1] != 0)];
    return attention(pool, in[0], in[1], in[2], optional(a[1], 3), a[0] != 0,
                     c.floats[0], out, extras);
  }
  case OpKind::cross_entropy:
    return crossEntropy(pool, in[0], in[1], a[0], outs[0], outs[1]);
  case OpKind::cross_entropy_grad:
    return crossEntropyGrad(pool, in[0], in[1], a[0], scalarValue(in[2]), out);
  case OpKind::linear_cross_entropy:
    return linearCrossEntropy(pool, in[0], in[1], in[2], a[0], a[1], outs[0],
                              outs[1]);
  case OpKind::linear_cross_entropy_grad:
    return linearCrossEntropyGrad(pool, in[0], in[1], in[2], a[0], a[1],
                                  scalarValue(in[3]), outs[0], outs[1]);
  case OpKind::unary_grad:
    if (a[0] < 0 || a[0] >= kNumUnaryGradKinds)
      return invalidArgument("unknown unary gradient kind");
    return unaryGrad(pool, unaryGradKindOf(a[0]), in[0], in[1], out);
  case OpKind::softmax_grad:
    return softmaxGrad(pool, in[0], in[1], a[0], a[1] != 0, out);
  case OpKind::norm_grad: {
    bool hasScale = a[1] != 0, withBias = a[2] != 0;
    auto scale = optional(hasScale, 1);
    const TensorRef &dy = in.back();
    std::optional<TensorRef> dscale, dbias;
    if (hasScale)
      dscale = outs[1];
    if (withBias)
      dbias = outs[hasScale ? 2 : 1];
    if (a[3])
      return rmsNormGrad(pool, in[0], scale, a[0], c.floats[0], dy, out,
                         dscale);
    return layerNormGrad(pool, in[0], scale, a[0], c.floats[0], dy, out, dscale,
                         dbias);
  }
  case OpKind::attention_grad: {
    kernels::AttentionExtras extras = kernels::attentionExtrasOf(a, c.floats);
    if (kernels::attentionHasSinks(a)) {
      extras.sinks = &in[3 + (a[1] != 0)];
      extras.sinksGrad = &outs[3];
    }
    return attentionGrad(pool, in[0], in[1], in[2], optional(a[1], 3),
                         a[0] != 0, c.floats[0], in.back(), outs[0], outs[1],
                         outs[2], extras);
  }
  case OpKind::gather_grad:
    return gatherGrad(pool, in[0], a[0], in[1], out);
  case OpKind::slice_grad: {
    size_t rank = out.shape.size();
    return sliceGrad(pool, in[0], {a.begin(), a.begin() + rank},
                     {a.begin() + rank, a.end()}, out);
  }
  case OpKind::extremum_grad:
    return reduceExtremumGrad(
        pool, static_cast<ReduceKind>(a[0]) == ReduceKind::max, in[0],
        {a.begin() + 2, a.end()}, a[1] != 0, in[1], out);
  case OpKind::moe_route:
    return moeRoute(pool, in[0], static_cast<MoESoftmax>(a[1] != 0), a[2] != 0,
                    outs[0], outs[1]);
  case OpKind::moe_route_grad:
    return moeRouteGrad(pool, in[0], in[1], in[2],
                        static_cast<MoESoftmax>(a[0] != 0), a[1] != 0, out);
  case OpKind::moe_dispatch:
    return moeDispatch(pool, in[0], in[1], outs[0], outs[1], outs[2]);
  case OpKind::moe_grouped_matmul:
    return moeGroupedMatmul(pool, in[0], in[1], in[2], a[0] != 0, out);
  case OpKind::moe_grouped_matmul_wgrad:
    return moeGroupedMatmulWGrad(pool, in[0], in[1], in[2], a[0] != 0, out);
  case OpKind::moe_combine:
    return moeCombine(pool, in[0], in[1], optional(a[0] != 0, 2), out);
  case OpKind::moe_combine_grad: {
    std::optional<TensorRef> dweights;
    if (a[0])
      dweights = outs[1];
    return moeCombineGrad(pool, in[0], in[1], optional(a[0] != 0, 2), in.back(),
                          out, dweights);
  }
  }
  return internalError("unknown kernel");
}

Status rp::runtime::host::runProgram(ThreadPool &pool, const Plan &plan,
                                     uint32_t index,
                                     const BufferAddresses &buffers) {
  std::vector<size_t> calls(plan.programs[index].calls.size());
  for (size_t i = 0; i < calls.size(); ++i)
    calls[i] = i;
  return runProgramCalls(pool, plan, index, calls, buffers);
}

Status rp::runtime::host::runProgramCalls(ThreadPool &pool, const Plan &plan,
                                          uint32_t index,
                                          const std::vector<size_t> &calls,
                                          const BufferAddresses &buffers) {
  const ProgramDesc &program = plan.programs[index];
  for (size_t i : calls) {
    Status s = runCall(pool, plan, program, i, buffers);
    if (s.failed())
      return callFailed(program, i, s);
  }
  return Status::ok();
}
