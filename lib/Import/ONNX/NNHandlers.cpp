//===- NNHandlers.cpp - ONNX matmul, reductions, norms and conv -----------===//

#include "NodeImporter.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static Value scalarLike(NodeImporter &n, Value like, double value) {
  Type element = getElementTypeOrSelf(like);
  auto type = RankedTensorType::get({}, element);
  return n.constant(
      DenseElementsAttr::get(type, n.builder.getFloatAttr(element, value)));
}

/// numpy matmul: vectors are promoted to matrices and the added dimension
/// dropped again.
static LogicalResult importMatMul(NodeImporter &n) {
  Value a = n.input(0), b = n.input(1);
  if (!a || !b)
    return failure();
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(b);
  if (as.empty() || bs.empty())
    return n.error() << "cannot multiply " << a.getType() << " by "
                     << b.getType() << ": scalars have no matrix product";
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  if (vecA)
    a = n.reshape(a, {1, as[0]});
  if (vecB)
    b = n.reshape(b, {bs[0], 1});
  ArrayRef<int64_t> pa = shapeOf(a), pb = shapeOf(b);
  if (pa.back() != pb[pb.size() - 2])
    return n.error() << "cannot multiply " << a.getType() << " by "
                     << b.getType();
  if (failed(broadcastShapes(pa.drop_back(2), pb.drop_back(2))))
    return n.error() << "batch dimensions of " << a.getType() << " and "
                     << b.getType() << " do not broadcast";
  Value y = n.create<MatmulOp>(a, b, false, false);
  if (vecA || vecB) {
    SmallVector<int64_t> shape(shapeOf(y));
    if (vecB)
      shape.pop_back();
    if (vecA)
      shape.erase(shape.end() - (vecB ? 1 : 2));
    y = n.reshape(y, shape);
  }
  n.setOutput(0, y);
  return success();
}

static LogicalResult importGemm(NodeImporter &n) {
  Value a = n.input(0), b = n.input(1);
  if (!a || !b)
    return failure();
  bool ta = n.intAttr("transA", 0), tb = n.intAttr("transB", 0);
  if (shapeOf(a).size() != 2 || shapeOf(b).size() != 2)
    return n.error() << "expects matrices, got " << a.getType() << " and "
                     << b.getType();
  int64_t k = shapeOf(a)[ta ? 0 : 1], kb = shapeOf(b)[tb ? 1 : 0];
  if (k != kb)
    return n.error() << "contraction sizes " << k << " and " << kb << " differ";
  Value y = n.create<MatmulOp>(a, b, ta, tb);
  double alpha = n.floatAttr("alpha", 1.0f), beta = n.floatAttr("beta", 1.0f);
  if (alpha != 1.0)
    y = n.create<MulOp>(y, scalarLike(n, y, alpha));
  if (n.hasInput(2) && beta != 0.0) {
    Value c = n.input(2);
    if (!c)
      return failure();
    if (beta != 1.0)
      c = n.create<MulOp>(c, scalarLike(n, c, beta));
    y = n.create<AddOp>(y, c);
  }
  n.setOutput(0, y);
  return success();
}

template <typename OpTy> static LogicalResult importSoftmax(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  auto axis = n.normalizeAxis(n.intAttr("axis", -1), shapeOf(x).size());
  if (failed(axis))
    return failure();
  n.setOutput(0, n.create<OpTy>(x, *axis));
  return success();
}

/// Reductions take axes as an attribute until opset 17 and as input 1 from
/// opset 18, except ReduceSum, whose axes are an input since opset 13.
static LogicalResult importReduce(NodeImporter &n, ReduceKind kind,
                                  bool axesInput) {
  Value x = n.input(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  SmallVector<int64_t> axes;
  if (axesInput && n.hasInput(1)) {
    auto given = n.constantInts(1, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else if (auto given = n.intsAttr("axes")) {
    axes = *given;
  }
  if (axes.empty()) {
    if (n.intAttr("noop_with_empty_axes", 0)) {
      n.setOutput(0, x);
      return success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes) {
    auto norm = n.normalizeAxis(a, rank);
    if (failed(norm))
      return failure();
    a = *norm;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  bool keep = n.intAttr("keepdims", 1) != 0;
  n.setOutput(0, n.create<ReduceOp>(kind, x, axes, keep));
  return success();
}

static LogicalResult importLayerNorm(NodeImporter &n) {
  if (n.opset < 17)
    return n.error() << "LayerNormalization exists from opset 17; the model "
                        "declares opset "
                     << n.opset << " (re-export with opset_version=17)";
  Value x = n.input(0), scale = n.input(1);
  if (!x || !scale || failed(n.onlyFirstOutput()))
    return failure();
  Value bias = n.hasInput(2) ? n.input(2) : Value();
  if (n.hasInput(2) && !bias)
    return failure();
  auto axis = n.normalizeAxis(n.intAttr("axis", -1), shapeOf(x).size());
  if (failed(axis))
    return failure();
  double eps = n.floatAttr("epsilon", 1e-5f);
  Value y = LayerNormOp::create(n.builder, n.loc, x.getType(), x, scale, bias,
                                n.builder.getI64IntegerAttr(*axis),
                                n.builder.getF64FloatAttr(eps));
  n.setOutput(0, y);
  return success();
}

/// Conv is supported in the one form transformers use: patch embedding,
/// kernel == stride, no padding, no dilation, one group. It is a matmul over
/// the flattened patches.
static LogicalResult importConv(NodeImporter &n) {
  Value x = n.input(0), w = n.input(1);
  if (!x || !w)
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(w);
  if (xs.size() != 4 || ws.size() != 4)
    return n.error() << "only 2-D convolutions are supported";
  SmallVector<int64_t> kernel(ws.drop_front(2));
  auto strides = n.intsAttr("strides").value_or(SmallVector<int64_t>{1, 1});
  auto pads = n.intsAttr("pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
  auto dil = n.intsAttr("dilations").value_or(SmallVector<int64_t>{1, 1});
  bool patchify = strides == kernel &&
                  llvm::all_of(pads, [](int64_t p) { return p == 0; }) &&
                  llvm::all_of(dil, [](int64_t d) { return d == 1; }) &&
                  n.intAttr("group", 1) == 1 &&
                  n.stringAttr("auto_pad", "NOTSET") == "NOTSET";
  if (!patchify)
    return n.error() << "only patch-embedding convolutions (kernel == "
                        "stride, no padding, dilation 1, group 1) are "
                        "supported, but this one has kernel ["
                     << ArrayRef(kernel) << "], strides [" << ArrayRef(strides)
                     << "], pads [" << ArrayRef(pads) << "], dilations ["
                     << ArrayRef(dil) << "], group " << n.intAttr("group", 1)
                     << ", auto_pad " << n.stringAttr("auto_pad", "NOTSET")
                     << "; rp imports transformers, whose only convolution "
                        "is a ViT-style patch embedding";
  int64_t b = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  int64_t kh = kernel[0], kw = kernel[1], o = ws[0];
  if (h % kh || wd % kw || ws[1] != c)
    return n.error() << "image " << x.getType()
                     << " does not tile into patches of kernel " << w.getType();
  int64_t ph = h / kh, pw = wd / kw;
  // [B, C, ph, kh, pw, kw] -> [B, ph, pw, C, kh, kw] -> [B, ph*pw, C*kh*kw]
  Value p = n.reshape(x, {b, c, ph, kh, pw, kw});
  p = n.create<TransposeOp>(p, SmallVector<int64_t>{0, 2, 4, 1, 3, 5});
  p = n.reshape(p, {b, ph * pw, c * kh * kw});
  Value wm = n.reshape(w, {o, c * kh * kw});
  Value y = n.create<MatmulOp>(p, wm, false, true); // [B, L, O]
  if (n.hasInput(2)) {
    Value bias = n.input(2);
    if (!bias)
      return failure();
    y = n.create<AddOp>(y, bias);
  }
  y = n.create<TransposeOp>(y, SmallVector<int64_t>{0, 2, 1}); // [B, O, L]
  n.setOutput(0, n.reshape(y, {b, o, ph, pw}));
  return success();
}

/// Gelu is an op from opset 20 (exporters decompose it before).
static LogicalResult importGelu(NodeImporter &n) {
  if (n.opset < 20)
    return n.error() << "Gelu exists from opset 20; the model declares opset "
                     << n.opset;
  Value x = n.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(getElementTypeOrSelf(x)))
    return n.error() << "expects a float input but got " << x.getType();
  std::string approximate = n.stringAttr("approximate", "none");
  auto kind = symbolizeGeluApproximation(approximate);
  if (!kind)
    return n.error() << "approximate '" << approximate
                     << "' is not one of 'none' and 'tanh'";
  n.setOutput(0, GeluOp::create(n.builder, n.loc, x.getType(), x, *kind));
  return success();
}

void onnx_import::registerNNHandlers(llvm::StringMap<Handler> &t) {
  t["Gelu"] = importGelu;
  t["MatMul"] = importMatMul;
  t["Gemm"] = importGemm;
  t["Softmax"] = importSoftmax<SoftmaxOp>;
  t["LogSoftmax"] = importSoftmax<LogSoftmaxOp>;
  t["ReduceMean"] = [](NodeImporter &n) {
    return importReduce(n, ReduceKind::mean, n.opset >= 18);
  };
  t["ReduceSum"] = [](NodeImporter &n) {
    return importReduce(n, ReduceKind::sum, true);
  };
  t["ReduceMax"] = [](NodeImporter &n) {
    return importReduce(n, ReduceKind::max, n.opset >= 18);
  };
  t["ReduceMin"] = [](NodeImporter &n) {
    return importReduce(n, ReduceKind::min, n.opset >= 18);
  };
  t["LayerNormalization"] = importLayerNorm;
  t["Conv"] = importConv;
}
