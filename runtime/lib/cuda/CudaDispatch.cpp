//===- CudaDispatch.cpp - a plan program's calls on the cuda kernels ------===//
//
// Call for call the host dispatch (host/HostDispatch.cpp): the same
// attribute conventions, and the kernels' shared argument checks
// (rp/runtime/kernels/Checks.h), which look at shapes and
// dtypes only, so that both devices accept exactly the same calls with the
// same messages. What the host checks by reading data (indices, labels, an
// integer divisor) the kernels check on the GPU and report through the
// device's error record.
//
//===----------------------------------------------------------------------===//

#include "CudaDispatch.h"
#include "CudaStatus.h"

#include "CudaDispatchChecks.h"
#include "CudaQuant.h"

#include "rp/runtime/kernels/OpKinds.h"
#include "rp/runtime/kernels/QuantChecks.h"

#include <cstring>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using namespace rp::runtime::kernels;
using namespace rp::runtime::cuda::detail;

namespace {

Status launched(cudaError_t error, const char *op) {
  return fromCuda(error, std::string("launching the ") + op + " kernel");
}

/// add, sub, mul, div, pow, max and min (`kind`), broadcasting.
Status binaryCall(const LaunchContext &ctx, OpKind kind, const TensorRef &lhs,
                  const TensorRef &rhs, const TensorRef &out) {
  const char *op = "binary";
  if (lhs.dtype != rhs.dtype || lhs.dtype != out.dtype)
    return invalidArgument(std::string(op) +
                           ": element types differ: " + describe(lhs) + ", " +
                           describe(rhs) + " -> " + describe(out));
  if (out.dtype == DType::i1)
    return unsupportedDType(op, out.dtype, "arithmetic");
  if (kind == OpKind::pow && !isFloat(out.dtype))
    return unsupportedDType(op, out.dtype, "pow");
  ElementMap map;
  if (Status s = broadcastMap(op, {&lhs, &rhs}, out, map); s.failed())
    return s;
  return launched(launchBinary(ctx, out.dtype, int(binaryKindOf(kind)), map,
                               lhs.data, rhs.data, out.data, out.size()),
                  op);
}

/// A unary op of `kind` (gelu's form from its attribute): float math, and
/// neg on integers too.
Status unaryCall(const LaunchContext &ctx, UnaryKind kind, const TensorRef &x,
                 const TensorRef &out) {
  const char *op = "unary";
  if (Status s = checkTensor(x, "input", op); s.failed())
    return s;
  if (Status s = checkLike(op, "output", out, x); s.failed())
    return s;
  bool neg = kind == UnaryKind::neg;
  if (!isFloat(x.dtype) && !(neg && isInteger(x.dtype)))
    return unsupportedDType(op, x.dtype, neg ? "neg" : "float math");
  return launched(
      launchUnary(ctx, x.dtype, int(kind), x.data, out.data, out.size()), op);
}

/// The plan of a broadcasting op (HostElementwise.cpp's planBroadcastOp).
Status runCall(const DispatchContext &dctx, const Plan &plan,
               uint32_t programIndex, size_t index,
               const BufferAddresses &buffers) {
  const ProgramDesc &program = plan.programs[programIndex];
  const KernelCallDesc &c = program.calls[index];
  const CallTensors tensors = callTensors(plan, c, buffers);
  const std::vector<TensorRef> &in = tensors.in, &outs = tensors.outs;
  const TensorRef &out = outs[0];
  const std::vector<int64_t> &a = c.ints;
  auto optional = [&](bool present, size_t i) {
    return present ? std::optional<TensorRef>(in[i]) : std::nullopt;
  };
  const LaunchContext ctx{dctx.stream, dctx.errors,
                          int64_t((uint64_t(programIndex) << 32) | index)};
  const size_t es = dtypeSize(out.dtype);

  switch (c.op) {
  RP_BINARY_OP_CASES:
    return binaryCall(ctx, c.op, in[0], in[1], out);
  case OpKind::cmp: {
    const char *op = "compare";
    if (in[0].dtype != in[1].dtype)
      return invalidArgument(std::string(op) +
                             ": operand element types differ: " +
                             describe(in[0]) + ", " + describe(in[1]));
    if (out.dtype != DType::i1)
      return invalidArgument(std::string(op) + ": output " + describe(out) +
                             " should have element type i1");
    ElementMap map;
    if (Status s = broadcastMap(op, {&in[0], &in[1]}, out, map); s.failed())
      return s;
    return launched(launchCompare(ctx, in[0].dtype, int(a[0]), map, in[0].data,
                                  in[1].data, out.data, out.size()),
                    op);
  }
  case OpKind::where: {
    const char *op = "where";
    if (in[0].dtype != DType::i1)
      return invalidArgument(std::string(op) + ": condition " +
                             describe(in[0]) + " should have element type i1");
    if (in[1].dtype != in[2].dtype || in[1].dtype != out.dtype)
      return invalidArgument(std::string(op) +
                             ": element types differ: " + describe(in[1]) +
                             ", " + describe(in[2]) + " -> " + describe(out));
    ElementMap map;
    if (Status s = broadcastMap(op, {&in[0], &in[1], &in[2]}, out, map);
        s.failed())
      return s;
    return launched(launchWhere(ctx, es, map, in[0].data, in[1].data,
                                in[2].data, out.data, out.size()),
                    op);
  }
  case OpKind::gelu:
    return unaryCall(ctx, unaryKindOfGelu(a[0]), in[0], out);
  RP_UNARY_OP_CASES:
    return unaryCall(ctx, unaryKindOf(c.op), in[0], out);
  case OpKind::dequantize: {
    if (Status s = checkDequantize(in[0], a[0], out); s.failed())
      return s;
    static const DequantTables tables = dequantTables();
    return launched(launchDequantize(ctx, int(a[0]), tables, in[0].data,
                                     out.dtype, out.data, out.size()),
                    "dequantize");
  }
  case OpKind::dropout: {
    const char *op = "dropout";
    if (Status s = checkTensor(in[0], "input", op); s.failed())
      return s;
    if (Status s = checkLike(op, "output", out, in[0]); s.failed())
      return s;
    if (!isFloat(in[0].dtype))
      return unsupportedDType(op, in[0].dtype, "dropout");
    if (in[1].dtype != DType::i64 || in[1].size() != 4)
      return invalidArgument("dropout: the key " + describe(in[1]) +
                             " is not a dropout_key row of 4 i64 values");
    double p = c.floats[0];
    if (!(p >= 0 && p < 1) || a[0] < 0 || a[0] > int64_t(UINT32_MAX))
      return invalidArgument("dropout: probability " + std::to_string(p) +
                             " or tensor " + std::to_string(a[0]) +
                             " out of range");
    return launched(launchDropout(ctx, in[0].dtype,
                                  static_cast<const int64_t *>(in[1].data),
                                  uint32_t(a[0]), float(p), in[0].data,
                                  out.data, out.size()),
                    op);
  }
  case OpKind::cast:
    if (Status s = checkSameShape(in[0], out, "cast"); s.failed())
      return s;
    return launched(launchCast(ctx, in[0].dtype, out.dtype, in[0].data,
                               out.data, out.size()),
                    "cast");
  case OpKind::reshape:
    if (in[0].dtype != out.dtype || in[0].size() != out.size())
      return invalidArgument("copy: " + describe(in[0]) + " and " +
                             describe(out) +
                             " differ in element type or count");
    if (out.size() == 0 || in[0].data == out.data)
      return {};
    return fromCuda(cudaMemcpyAsync(out.data, in[0].data, out.bytes(),
                                    cudaMemcpyDeviceToDevice, dctx.stream),
                    "cudaMemcpyAsync (reshape)");
  case OpKind::transpose: {
    const char *op = "transpose";
    const size_t rank = in[0].shape.size();
    std::vector<bool> seen(rank, false);
    bool valid = a.size() == rank && in[0].dtype == out.dtype;
    for (size_t i = 0; valid && i < rank; ++i) {
      valid = a[i] >= 0 && a[i] < int64_t(rank) && !seen[a[i]];
      if (valid)
        seen[a[i]] = true;
    }
    if (!valid)
      return invalidArgument(std::string(op) + ": " + describeShape(a) +
                             " is not a permutation of the dimensions of " +
                             describe(in[0]));
    Shape expected(rank);
    std::vector<int64_t> inStrides(rank), strides(rank);
    kernels::contiguousStrides(in[0].shape.data(), int(rank), inStrides.data());
    for (size_t i = 0; i < rank; ++i) {
      expected[i] = in[0].shape[a[i]];
      strides[i] = inStrides[a[i]];
    }
    if (expected != out.shape)
      return invalidArgument(std::string(op) + ": output " + describe(out) +
                             " should have shape " + describeShape(expected));
    if (out.size() == 0)
      return {};
    StridedPlan sp;
    if (Status s = makeStridedPlan(out.shape, {strides}, sp, op); s.failed())
      return s;
    return launched(
        launchStridedCopy(ctx, es, toMap(sp), in[0].data, out.data, out.size()),
        op);
  }
  case OpKind::slice:
  case OpKind::slice_grad: {
    bool grad = c.op == OpKind::slice_grad;
    const char *op = grad ? "slice_grad" : "slice";
    // slice: x -> window; slice_grad: window (dy) -> full (dx).
    const TensorRef &full = grad ? out : in[0];
    const TensorRef &window = grad ? in[0] : out;
    if (full.dtype != window.dtype)
      return invalidArgument(std::string(op) + ": " + describe(in[0]) +
                             " and " + describe(out) +
                             " differ in element type");
    size_t rank = out.shape.size();
    int64_t base = 0;
    std::vector<int64_t> strides;
    if (Status s =
            sliceWindow(op, full, window, grad ? "output gradient" : "output",
                        {a.begin(), a.begin() + rank},
                        {a.begin() + rank, a.end()}, base, strides);
        s.failed())
      return s;
    if (grad && full.size() > 0)
      if (Status s =
              fromCuda(cudaMemsetAsync(full.data, 0, full.bytes(), dctx.stream),
                       "cudaMemsetAsync (slice_grad)");
          s.failed())
        return s;
    if (window.size() == 0)
      return {};
    StridedPlan sp;
    if (Status s = makeStridedPlan(window.shape, {strides}, sp, op); s.failed())
      return s;
    char *fullBase = static_cast<char *>(full.data) + base * es;
    return launched(grad ? launchStridedScatter(ctx, es, toMap(sp), in[0].data,
                                                fullBase, window.size())
                         : launchStridedCopy(ctx, es, toMap(sp), fullBase,
                                             out.data, window.size()),
                    op);
  }
  case OpKind::concat: {
    const int64_t dim = a[0];
    int64_t outer = 0, inner = 0;
    if (Status s = checkConcat(in, dim, out, outer, inner); s.failed())
      return s;
    // Each input is one block per outer row of the output, laid end to end.
    const size_t outRow = size_t(out.shape[dim] * inner) * es;
    size_t start = 0;
    for (const TensorRef &t : in) {
      size_t block = size_t(t.shape[dim] * inner) * es;
      if (block > 0 && outer > 0)
        if (Status s = fromCuda(
                cudaMemcpy2DAsync(static_cast<char *>(out.data) + start, outRow,
                                  t.data, block, block, size_t(outer),
                                  cudaMemcpyDeviceToDevice, dctx.stream),
                "cudaMemcpy2DAsync (concat)");
            s.failed())
          return s;
      start += block;
    }
    return {};
  }
  case OpKind::broadcast: {
    if (in[0].dtype != out.dtype)
      return invalidArgument("broadcast: " + describe(in[0]) + " and " +
                             describe(out) + " differ in element type");
    if (out.size() == 0)
      return {};
    StridedPlan sp;
    if (Status s = makeBroadcastPlan(out.shape, {&in[0]}, sp, "broadcast");
        s.failed())
      return s;
    return launched(
        launchStridedCopy(ctx, es, toMap(sp), in[0].data, out.data, out.size()),
        "broadcast");
  }
  case OpKind::gather: {
    const char *op = "gather";
    int64_t outer = 1, inner = 1;
    if (in[0].dtype != out.dtype)
      return invalidArgument(std::string(op) + ": " + describe(in[0]) +
                             " and " + describe(out) +
                             " differ in element type");
    if (Status s =
            gatherShape(op, in[0], in[1], a[0], out, "output", outer, inner);
        s.failed())
      return s;
    return launched(
        launchGather(ctx, es, in[0].data, in[1].data, in[1].dtype == DType::i64,
                     outer, in[0].shape[a[0]], in[1].size(), inner, out.data),
        op);
  }
  case OpKind::gather_grad: {
    const char *op = "gather_grad";
    const TensorRef &indices = in[0], &dy = in[1];
    if (!isFloat(out.dtype))
      return unsupportedDType(op, out.dtype);
    if (Status s = checkTensorOf(dy, out.dtype, "output gradient", op);
        s.failed())
      return s;
    int64_t outer = 1, inner = 1;
    if (Status s = gatherShape(op, out, indices, a[0], dy, "output gradient",
                               outer, inner);
        s.failed())
      return s;
    const int64_t axisSize = out.shape[a[0]];
    Scratch scratch(dctx.stream);
    if (Status s = scratch.allocate(
            gatherGradScratchBytes(axisSize, indices.size()), op);
        s.failed())
      return s;
    return launched(launchGatherGrad(ctx, out.dtype, indices.data,
                                     indices.dtype == DType::i64, outer,
                                     axisSize, indices.size(), inner, dy.data,
                                     out.data, scratch.get()),
                    op);
  }
  case OpKind::matmul:
    // ints [transpose_a, transpose_b, (epilogue)], checked by Plan.cpp.
    if (a.size() > 2 && a[2] != 0)
      return matmulEpilogue(
          dctx, ctx, in[0], in[1], a[0] != 0, a[1] != 0, in[2], a[2], out,
          tensors.outs.size() > 1 ? &tensors.outs[1] : nullptr);
    return matmul(dctx, in[0], in[1], a[0] != 0, a[1] != 0, out);
  case OpKind::reduce:
  case OpKind::extremum_grad: {
    bool grad = c.op == OpKind::extremum_grad;
    const char *op = grad ? "reduce_extremum_grad" : "reduce";
    const TensorRef &x = in[0];
    const int kind = int(a[0]);
    if (Status s = checkTensor(x, "input", op); s.failed())
      return s;
    if (grad ? !isFloat(x.dtype)
             : (x.dtype == DType::i1 || (kind == 1 && !isFloat(x.dtype))))
      return unsupportedDType(op, x.dtype);
    ReduceMap map;
    Shape expected;
    if (Status s = reduceMap(op, x, {a.begin() + 2, a.end()}, a[1] != 0, map,
                             expected);
        s.failed())
      return s;
    const TensorRef &reduced = grad ? in[1] : out;
    if (Status s = checkTensorOf(reduced, x.dtype,
                                 grad ? "output gradient" : "output", op);
        s.failed())
      return s;
    if (expected != reduced.shape)
      return invalidArgument(
          std::string(op) + ": " + (grad ? "output gradient " : "output ") +
          describe(reduced) + " should have shape " + describeShape(expected));
    if (grad) {
      if (Status s = checkLike(op, "input gradient", out, x); s.failed())
        return s;
      return launched(launchExtremumGrad(ctx, x.dtype, kind == 2, map, x.data,
                                         in[1].data, out.data, in[1].size()),
                      op);
    }
    if (x.size() == 0 && out.size() > 0 && (kind == 2 || kind == 3))
      return invalidArgument(std::string(op) +
                             ": max/min over no elements of " + describe(x));
    Scratch scratch(dctx.stream);
    if (size_t bytes = reduceScratchBytes(map, out.size()))
      if (Status s = scratch.allocate(bytes, op); s.failed())
        return s;
    return launched(launchReduce(ctx, x.dtype, kind, map, x.data, out.data,
                                 out.size(), scratch.get()),
                    op);
  }
  case OpKind::softmax:
  case OpKind::log_softmax: {
    bool log = c.op == OpKind::log_softmax;
    SoftmaxRows rows;
    if (Status s = checkSoftmax(log, in[0], a[0], out, rows); s.failed())
      return s;
    return launched(launchSoftmax(ctx, in[0].dtype, log, in[0].data, out.data,
                                  rows.outer, rows.n, rows.inner),
                    log ? "log_softmax" : "softmax");
  }
  case OpKind::softmax_grad: {
    bool log = a[1] != 0;
    SoftmaxRows rows;
    if (Status s = checkSoftmaxGrad(log, in[0], in[1], a[0], out, rows);
        s.failed())
      return s;
    return launched(launchSoftmaxGrad(ctx, in[0].dtype, log, in[0].data,
                                      in[1].data, out.data, rows.outer, rows.n,
                                      rows.inner),
                    log ? "log_softmax_grad" : "softmax_grad");
  }
  case OpKind::layer_norm:
  case OpKind::rms_norm: {
    bool centered = c.op == OpKind::layer_norm;
    const char *op = centered ? "layer_norm" : "rms_norm";
    const TensorRef &x = in[0];
    auto scale = optional(a[1], 1);
    auto bias = centered ? optional(a[2], a[1] ? 2 : 1) : std::nullopt;
    if (!isFloat(x.dtype))
      return unsupportedDType(op, x.dtype);
    if (Status s = checkLike(op, "output", out, x); s.failed())
      return s;
    if (Status s = checkNormAxis(op, x, a[0], c.floats[0]); s.failed())
      return s;
    if (Status s = checkNormalized(op, "scale", scale, x, a[0]); s.failed())
      return s;
    if (Status s = checkNormalized(op, "bias", bias, x, a[0]); s.failed())
      return s;
    int64_t n = numElements(Shape(x.shape.begin() + a[0], x.shape.end()));
    int64_t rows = n ? x.size() / n : 0;
    return launched(launchNorm(ctx, x.dtype, centered, x.data,
                               scale ? scale->data : nullptr,
                               bias ? bias->data : nullptr, out.data, rows, n,
                               c.floats[0]),
                    op);
  }
  case OpKind::norm_grad: {
    bool hasScale = a[1] != 0, withBias = a[2] != 0, centered = a[3] == 0;
    const char *op = centered ? "layer_norm_grad" : "rms_norm_grad";
    const TensorRef &x = in[0], &dy = in.back();
    auto scale = optional(hasScale, 1);
    std::optional<TensorRef> dscale, dbias;
    if (hasScale)
      dscale = outs[1];
    if (withBias)
      dbias = outs[hasScale ? 2 : 1];
    if (!isFloat(x.dtype))
      return unsupportedDType(op, x.dtype);
    if (Status s = checkNormAxis(op, x, a[0], c.floats[0]); s.failed())
      return s;
    if (Status s = checkLike(op, "output gradient", dy, x); s.failed())
      return s;
    if (Status s = checkLike(op, "input gradient", out, x); s.failed())
      return s;
    if (Status s = checkNormalized(op, "scale", scale, x, a[0]); s.failed())
      return s;
    if (Status s = checkNormalized(op, "scale gradient", dscale, x, a[0]);
        s.failed())
      return s;
    if (Status s = checkNormalized(op, "bias gradient", dbias, x, a[0]);
        s.failed())
      return s;
    int64_t n = numElements(Shape(x.shape.begin() + a[0], x.shape.end()));
    int64_t rows = n ? x.size() / n : 0;
    Scratch scratch(dctx.stream);
    if (dscale || dbias)
      if (Status s =
              scratch.allocate(normGradScratchBytes(x.dtype, rows, n), op);
          s.failed())
        return s;
    return launched(launchNormGrad(ctx, x.dtype, centered, x.data,
                                   scale ? scale->data : nullptr, dy.data,
                                   out.data, dscale ? dscale->data : nullptr,
                                   dbias ? dbias->data : nullptr, rows, n,
                                   c.floats[0], scratch.get()),
                    op);
  }
  case OpKind::attention: {
    AttentionShape shape;
    auto mask = optional(a[1], 3);
    kernels::AttentionExtras extras = kernels::attentionExtrasOf(a, c.floats);
    if (kernels::attentionHasSinks(a))
      extras.sinks = &in[3 + (a[1] != 0)];
    if (Status s = attentionShape(in[0], in[1], in[2], mask, a[0] != 0,
                                  c.floats[0], out, nullptr, shape, extras);
        s.failed())
      return s;
    return attentionForward(dctx, ctx, in[0].dtype, shape, in[0].data,
                            in[1].data, in[2].data, mask ? mask->data : nullptr,
                            out.data);
  }
  case OpKind::attention_grad: {
    AttentionShape shape;
    auto mask = optional(a[1], 3);
    const AttentionGradRefs grads{outs[0], outs[1], outs[2]};
    kernels::AttentionExtras extras = kernels::attentionExtrasOf(a, c.floats);
    if (kernels::attentionHasSinks(a)) {
      extras.sinks = &in[3 + (a[1] != 0)];
      extras.sinksGrad = &outs[3];
    }
    if (Status s =
            attentionShape(in[0], in[1], in[2], mask, a[0] != 0, c.floats[0],
                           in.back(), &grads, shape, extras);
        s.failed())
      return s;
    return attentionBackward(dctx, ctx, in[0].dtype, shape, in[0].data,
                             in[1].data, in[2].data,
                             mask ? mask->data : nullptr, in.back().data,
                             outs[0].data, outs[1].data, outs[2].data);
  }
  case OpKind::cross_entropy: {
    const char *op = "cross_entropy";
    int64_t rows = 0, classes = 0;
    if (Status s = checkLogitsShape(op, in[0], in[1], rows, classes);
        s.failed())
      return s;
    DType sumType = in[0].dtype == DType::f64 ? DType::f64 : DType::f32;
    if (Status s = checkTensorOf(outs[0], sumType, "loss sum", op); s.failed())
      return s;
    if (Status s = checkTensorOf(outs[1], DType::i64, "count", op); s.failed())
      return s;
    if (outs[0].size() != 1 || outs[1].size() != 1)
      return invalidArgument(std::string(op) + ": loss sum " +
                             describe(outs[0]) + " and count " +
                             describe(outs[1]) + " must be scalars");
    Scratch scratch(dctx.stream);
    if (Status s = scratch.allocate(crossEntropyScratchBytes(rows), op);
        s.failed())
      return s;
    return launched(launchCrossEntropy(ctx, in[0].dtype, in[0].data, in[1].data,
                                       in[1].dtype == DType::i64, a[0], rows,
                                       classes, outs[0].data, outs[1].data,
                                       scratch.get()),
                    op);
  }
  case OpKind::cross_entropy_grad: {
    const char *op = "cross_entropy_grad";
    int64_t rows = 0, classes = 0;
    if (Status s = checkLogitsShape(op, in[0], in[1], rows, classes);
        s.failed())
      return s;
    if (Status s = checkLike(op, "logits gradient", out, in[0]); s.failed())
      return s;
    if (!isFloat(in[2].dtype) || in[2].size() != 1)
      return invalidArgument(std::string(op) + ": loss scale " +
                             describe(in[2]) +
                             " should be a one-element float tensor");
    return launched(
        launchCrossEntropyGrad(ctx, in[0].dtype, in[0].data, in[1].data,
                               in[1].dtype == DType::i64, a[0], rows, classes,
                               in[2].dtype, in[2].data, out.data),
        op);
  }
  case OpKind::unary_grad: {
    const char *op = "unary_grad";
    if (a[0] < 0 || a[0] >= kNumUnaryGradKinds)
      return invalidArgument("unknown unary gradient kind");
    if (!isFloat(in[0].dtype))
      return unsupportedDType(op, in[0].dtype);
    if (Status s = checkLike(op, "output gradient", in[1], in[0]); s.failed())
      return s;
    if (Status s = checkLike(op, "input gradient", out, in[0]); s.failed())
      return s;
    return launched(launchUnaryGrad(ctx, in[0].dtype,
                                    int(unaryGradKindOf(a[0])), in[0].data,
                                    in[1].data, out.data, out.size()),
                    op);
  }
  case OpKind::moe_route:
  case OpKind::moe_route_grad:
  case OpKind::moe_dispatch:
  case OpKind::moe_grouped_matmul:
  case OpKind::moe_grouped_matmul_wgrad:
  case OpKind::moe_combine:
  case OpKind::moe_combine_grad:
    return runMoE(dctx, ctx, c, tensors); // CudaMoEDispatch.cpp
  case OpKind::linear_cross_entropy:
  case OpKind::linear_cross_entropy_grad:
    return runLinearLoss(dctx, ctx, c, tensors); // CudaLinearLossDispatch.cpp
  }
  return internalError("unknown kernel");
}

} // namespace

Status rp::runtime::cuda::runProgram(
    const DispatchContext &ctx, const Plan &plan, uint32_t index,
    const BufferAddresses &buffers,
    const std::function<Status(size_t call, bool before)> &around) {
  if (Status s = fromCuda(cudaSetDevice(ctx.device), "cudaSetDevice");
      s.failed())
    return s;
  // A launch reads its error with cudaGetLastError, which also returns an
  // earlier call's error on this thread (one that call reported itself);
  // clear it, so that a launch reports only its own. A sticky error (a
  // kernel fault) is returned again by the next call regardless.
  (void)cudaGetLastError();
  const ProgramDesc &program = plan.programs[index];
  for (size_t i = 0; i < program.calls.size(); ++i) {
    if (around)
      if (Status s = around(i, true); s.failed())
        return s;
    Status s = runCall(ctx, plan, index, i, buffers);
    if (s.failed())
      return callFailed(program, i, s);
    if (around)
      if (Status s = around(i, false); s.failed())
        return s;
  }
  return Status::ok();
}
