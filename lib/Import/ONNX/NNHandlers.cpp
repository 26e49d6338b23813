//===- NNHandlers.cpp - ONNX matmul, reductions and norms ---------------===//
//---------------------===//

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

FailureOr<SmallVector<int64_t>>
onnx_import::reduceAxes(NodeImporter &n, int64_t rank, bool axesInput) {
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
    if (n.intAttr("noop_with_empty_axes", 0))
      return axes;
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
  return axes;
}

/// Reductions take axes as an attribute until opset 17 and as input 1 from
/// opset 18, except ReduceSum, whose axes are an input since opset 13.
static LogicalResult importReduce(NodeImporter &n, ReduceKind kind,
                                  bool axesInput) {
  Value x = n.input(0);
  if (!x)
    return failure();
  auto axes = reduceAxes(n, shapeOf(x).size(), axesInput);
  if (failed(axes))
    return failure();
  if (axes->empty()) {
    n.setOutput(0, x);
    return success();
  }
  bool keep = n.intAttr("keepdims", 1) != 0;
  n.setOutput(0, n.create<ReduceOp>(kind, x, *axes, keep));
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
  registerConvHandlers(t);
}
