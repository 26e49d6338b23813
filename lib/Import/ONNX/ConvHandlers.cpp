//===- ConvHandlers.cpp - ONNX Conv, Pad and GatherND on run-time values --===//
//
// Ops rp has no kernel of its own for, written as slices, concats, reshapes,
// transposes and matmuls (whose VJPs give the gradients), as rp.trace writes
// the same ATen ops (python/rp/_conv.py, python/rp/_aten_pad.py):
//
//   Conv      a patch embedding (kernel == stride, no padding): reshape and
//             transpose into patches, one matmul; any other convolution of
//             any rank (padding, stride, dilation, groups: the depthwise
//             causal 1-D convolutions of Mamba, LFM, RecurrentGemma): im2col,
//             one strided slice of the zero-padded input per kernel offset,
//             then one matmul batched over the groups
//   Pad       constant mode: the input between constant blocks (a negative
//             pad crops first), one concat per padded axis (RWKV's time shift)
//   GatherND  batch_dims 0 on run-time data: a Gather on the flattened
//             leading axes (the dynamo exporter's `table[position_ids]`)
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// `v` between blocks of `fill` along `axis`, `before` and `after` wide.
static Value padAxis(NodeImporter &n, Value v, int64_t axis, int64_t before,
                     int64_t after, Attribute fill) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<Value> parts;
  auto block = [&](int64_t width) {
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = width;
    parts.push_back(n.constant(
        DenseElementsAttr::get(type.clone(shape), ArrayRef<Attribute>{fill})));
  };
  if (before)
    block(before);
  parts.push_back(v);
  if (after)
    block(after);
  if (parts.size() == 1)
    return v;
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] += before + after;
  return n.create<ConcatOp>(type.clone(shape), parts, uint64_t(axis));
}

/// `v` without its first `from` and last `to` entries along `axis`.
static Value cropAxis(NodeImporter &n, Value v, int64_t axis, int64_t from,
                      int64_t to) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape()), offsets(shape.size(), 0),
      strides(shape.size(), 1);
  offsets[axis] = from;
  shape[axis] -= from + to;
  return n.create<SliceOp>(type.clone(shape), v, offsets, strides);
}

static Attribute zeroOf(NodeImporter &n, Type element) {
  if (isa<FloatType>(element))
    return n.builder.getFloatAttr(element, 0.0);
  return n.builder.getIntegerAttr(element, 0);
}

/// [B, C, S1.., Sk] cut into non-overlapping patches [B, L, C*K1..*Kk]
/// (reshape, transpose), one matmul with the [O, C*K1..*Kk] weight, the
/// bias added on the last axis, and [B, L, O] -> [B, O, P1.., Pk].
static Value patchConv(NodeImporter &n, Value x, Value w, Value bias,
                       ArrayRef<int64_t> kernel) {
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(w);
  int64_t k = kernel.size(), b = xs[0], c = xs[1], o = ws[0];
  SmallVector<int64_t> patches, split{b, c}, used{b, c};
  for (int64_t d = 0; d < k; ++d) {
    patches.push_back(xs[2 + d] / kernel[d]);
    split.append({patches.back(), kernel[d]});
    used.push_back(patches.back() * kernel[d]);
  }
  Value p = x;
  if (ArrayRef(used) != xs) // ONNX, as ATen, drops what no patch covers
    p = n.create<SliceOp>(cast<RankedTensorType>(x.getType()).clone(used), x,
                          SmallVector<int64_t>(used.size(), 0),
                          SmallVector<int64_t>(used.size(), 1));
  p = n.reshape(p, split);
  // [B, C, P1, K1, .., Pk, Kk] -> [B, P1.., Pk, C, K1.., Kk]
  SmallVector<int64_t> perm{0};
  for (int64_t d = 0; d < k; ++d)
    perm.push_back(2 + 2 * d);
  perm.push_back(1);
  for (int64_t d = 0; d < k; ++d)
    perm.push_back(3 + 2 * d);
  p = n.create<TransposeOp>(p, perm);
  int64_t flat = product(ws.drop_front()), length = product(patches);
  p = n.reshape(p, {b, length, flat});
  Value y = n.create<MatmulOp>(p, n.reshape(w, {o, flat}), false, true);
  if (bias)
    y = n.create<AddOp>(y, bias);
  y = n.create<TransposeOp>(y, SmallVector<int64_t>{0, 2, 1});
  SmallVector<int64_t> result{b, o};
  llvm::append_range(result, patches);
  return n.reshape(y, result);
}

/// Any convolution as im2col: the zero-padded input's strided slice for
/// each kernel offset (in the weight's row-major order) gives what every
/// output position sees through that kernel element; the K slices stacked
/// after the channels are the columns [B, G, L, C/G*K], which meet the
/// weight [G, O/G, C/G*K] in one matmul batched over the G groups.
static Value im2colConv(NodeImporter &n, Value x, Value w,
                        ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> pads, ArrayRef<int64_t> dil,
                        int64_t groups) {
  auto xt = cast<RankedTensorType>(x.getType());
  ArrayRef<int64_t> ws = shapeOf(w);
  int64_t k = kernel.size(), b = xt.getDimSize(0), c = xt.getDimSize(1),
          o = ws[0];
  Attribute zero = zeroOf(n, xt.getElementType());
  Value padded = x;
  for (int64_t d = 0; d < k; ++d)
    padded = padAxis(n, padded, 2 + d, pads[d], pads[k + d], zero);
  ArrayRef<int64_t> ps = shapeOf(padded);
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < k; ++d)
    out.push_back((ps[2 + d] - dil[d] * (kernel[d] - 1) - 1) / strides[d] + 1);
  int64_t kk = product(kernel), length = product(out);
  SmallVector<int64_t> sliceShape{b, c}, pieceShape{b, c, 1};
  llvm::append_range(sliceShape, out);
  llvm::append_range(pieceShape, out);
  SmallVector<int64_t> sliceStrides{1, 1};
  llvm::append_range(sliceStrides, strides);
  SmallVector<Value> pieces;
  SmallVector<int64_t> offset(k, 0);
  for (int64_t i = 0; i < kk; ++i) {
    SmallVector<int64_t> start{0, 0};
    for (int64_t d = 0; d < k; ++d)
      start.push_back(offset[d] * dil[d]);
    Value s =
        n.create<SliceOp>(xt.clone(sliceShape), padded, start, sliceStrides);
    pieces.push_back(n.reshape(s, pieceShape));
    for (int64_t d = k - 1; d >= 0 && ++offset[d] == kernel[d]; --d)
      offset[d] = 0;
  }
  SmallVector<int64_t> colsShape{b, c, kk};
  llvm::append_range(colsShape, out);
  Value cols = pieces.size() == 1 ? n.reshape(pieces[0], colsShape)
                                  : n.create<ConcatOp>(xt.clone(colsShape),
                                                       pieces, uint64_t(2));
  // One group keeps the weight a plain [O, C*K] matrix, as a linear layer's.
  int64_t cg = c / groups, og = o / groups;
  SmallVector<int64_t> g;
  if (groups > 1)
    g.push_back(groups);
  int64_t gd = g.size();
  SmallVector<int64_t> grouped{b};
  llvm::append_range(grouped, g);
  grouped.append({cg, kk, length});
  cols = n.reshape(cols, grouped);
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d <= gd; ++d)
    perm.push_back(d);
  perm.append({3 + gd, 1 + gd, 2 + gd});
  cols = n.create<TransposeOp>(cols, perm);
  SmallVector<int64_t> rows{b};
  llvm::append_range(rows, g);
  rows.append({length, cg * kk});
  cols = n.reshape(cols, rows);
  SmallVector<int64_t> wshape(g);
  wshape.append({og, cg * kk});
  Value y = n.create<MatmulOp>(cols, n.reshape(w, wshape), false, true);
  SmallVector<int64_t> swap;
  for (int64_t d = 0; d <= gd; ++d)
    swap.push_back(d);
  swap.append({2 + gd, 1 + gd});
  y = n.create<TransposeOp>(y, swap);
  SmallVector<int64_t> result{b, o};
  llvm::append_range(result, out);
  return n.reshape(y, result);
}

static LogicalResult importConv(NodeImporter &n) {
  Value x = n.input(0), w = n.input(1);
  if (!x || !w)
    return failure();
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(w);
  int64_t k = int64_t(ws.size()) - 2;
  if (k < 1 || xs.size() != ws.size())
    return n.error() << "input " << x.getType() << " and weight " << w.getType()
                     << " are not a convolution's [B, C, S..] "
                     << "and [O, C/group, K..]";
  SmallVector<int64_t> kernel(ws.drop_front(2));
  if (auto shape = n.intsAttr("kernel_shape"); shape && *shape != kernel)
    return n.error() << "kernel_shape [" << ArrayRef(*shape)
                     << "] is not the weight's [" << ArrayRef(kernel) << "]";
  auto strides = n.intsAttr("strides").value_or(SmallVector<int64_t>(k, 1));
  auto pads = n.intsAttr("pads").value_or(SmallVector<int64_t>(2 * k, 0));
  auto dil = n.intsAttr("dilations").value_or(SmallVector<int64_t>(k, 1));
  int64_t groups = n.intAttr("group", 1);
  std::string autoPad = n.stringAttr("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return n.error() << "auto_pad " << autoPad
                     << " is not supported (give explicit pads)";
  if (autoPad == "VALID")
    pads.assign(2 * k, 0);
  if (int64_t(strides.size()) != k || int64_t(pads.size()) != 2 * k ||
      int64_t(dil.size()) != k)
    return n.error() << "strides, pads or dilations do not match the " << k
                     << "-D kernel";
  if (groups < 1 || xs[1] % groups || ws[0] % groups || ws[1] * groups != xs[1])
    return n.error() << "group " << groups << " does not split input "
                     << x.getType() << " and weight " << w.getType();
  for (int64_t d = 0; d < k; ++d)
    if (pads[d] < 0 || pads[k + d] < 0 || strides[d] < 1 || dil[d] < 1 ||
        xs[2 + d] + pads[d] + pads[k + d] < dil[d] * (kernel[d] - 1) + 1)
      return n.error() << "pads [" << ArrayRef(pads) << "], strides ["
                       << ArrayRef(strides) << "] or dilations ["
                       << ArrayRef(dil) << "] leave no output for input "
                       << x.getType() << " and weight " << w.getType();
  bool patchify = groups == 1 && ArrayRef(strides) == ArrayRef(kernel) &&
                  llvm::all_of(pads, [](int64_t p) { return p == 0; }) &&
                  llvm::all_of(dil, [](int64_t d) { return d == 1; });
  Value bias;
  if (n.hasInput(2) && !(bias = n.input(2)))
    return failure();
  if (patchify) {
    n.setOutput(0, patchConv(n, x, w, bias, kernel));
    return success();
  }
  Value y = im2colConv(n, x, w, kernel, strides, pads, dil, groups);
  if (bias) {
    SmallVector<int64_t> column{ws[0]};
    column.append(k, 1);
    y = n.create<AddOp>(y, n.reshape(bias, column));
  }
  n.setOutput(0, y);
  return success();
}

/// Pad in constant mode with constant pads (and axes) on a run-time input.
static LogicalResult importPad(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  std::string mode = n.stringAttr("mode", "constant");
  if (mode != "constant")
    return n.error() << "mode '" << mode << "' on a run-time input is not "
                     << "supported (rp maps constant padding)";
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank();
  SmallVector<int64_t> pads;
  if (n.opset < 11) {
    pads = n.intsAttr("pads").value_or(SmallVector<int64_t>{});
  } else {
    auto in = n.constantInts(1, "pads");
    if (failed(in))
      return failure();
    pads = *in;
  }
  SmallVector<int64_t> axes;
  if (n.hasInput(3)) {
    auto in = n.constantInts(3, "axes");
    if (failed(in))
      return failure();
    for (int64_t a : *in) {
      auto axis = n.normalizeAxis(a, rank);
      if (failed(axis))
        return failure();
      axes.push_back(*axis);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  }
  int64_t m = axes.size();
  if (int64_t(pads.size()) != 2 * m)
    return n.error() << "has " << pads.size() << " pads for " << m << " axes";
  Attribute fill = zeroOf(n, xt.getElementType());
  if (n.hasInput(2)) {
    auto value = n.constantInput(2, "constant_value");
    if (failed(value))
      return failure();
    if (value->getNumElements() != 1)
      return n.error() << "constant_value is not one value";
    fill = *value->getValues<Attribute>().begin();
    if (cast<TypedAttr>(fill).getType() != xt.getElementType())
      return n.error() << "constant_value's type is not the input's";
  }
  Value v = x;
  for (int64_t i = 0; i < m; ++i) {
    int64_t axis = axes[i], before = pads[i], after = pads[m + i];
    int64_t size = shapeOf(v)[axis];
    int64_t from = std::max<int64_t>(0, -before),
            to = std::max<int64_t>(0, -after);
    if (from + to > size)
      return n.error() << "pads [" << ArrayRef(pads) << "] crop more than "
                       << "axis " << axis << " of " << x.getType() << " holds";
    if (from || to)
      v = cropAxis(n, v, axis, from, to);
    v = padAxis(n, v, axis, std::max<int64_t>(0, before),
                std::max<int64_t>(0, after), fill);
  }
  n.setOutput(0, v);
  return success();
}

/// GatherND with batch_dims 0: indices [.., q] address the data's first q
/// axes. One axis is a Gather; more are a Gather on those axes flattened,
/// which needs the indices constant (their row-major offsets are computed
/// here).
static LogicalResult importGatherND(NodeImporter &n) {
  Value x = n.input(0), ids = n.input(1);
  if (!x || !ids)
    return failure();
  if (int64_t bd = n.intAttr("batch_dims", 0))
    return n.error() << "batch_dims " << bd << " on run-time data is not "
                     << "supported (rp maps batch_dims 0)";
  ArrayRef<int64_t> xs = shapeOf(x), is = shapeOf(ids);
  if (is.empty() || is.back() < 1 || is.back() > int64_t(xs.size()))
    return n.error() << "indices " << ids.getType() << " do not address "
                     << "data " << x.getType();
  int64_t q = is.back();
  SmallVector<int64_t> rows(is.drop_back());
  if (q == 1) {
    n.setOutput(0, n.create<GatherOp>(x, n.reshape(ids, rows), 0));
    return success();
  }
  auto constIds = n.constantInts(1, "indices (of more than one axis)");
  if (failed(constIds))
    return failure();
  SmallVector<int64_t> flat;
  for (size_t r = 0; r < constIds->size(); r += q) {
    int64_t offset = 0;
    for (int64_t a = 0; a < q; ++a) {
      int64_t i = (*constIds)[r + a];
      if (i < -xs[a] || i >= xs[a])
        return n.error() << "index " << i << " is out of range for axis " << a
                         << " of " << x.getType();
      offset = offset * xs[a] + (i < 0 ? i + xs[a] : i);
    }
    flat.push_back(offset);
  }
  SmallVector<int64_t> table{product(xs.take_front(q))};
  llvm::append_range(table, xs.drop_front(q));
  auto idsType = RankedTensorType::get(rows, n.builder.getI64Type());
  Value offsets =
      n.constant(DenseElementsAttr::get(idsType, ArrayRef<int64_t>(flat)));
  n.setOutput(0, n.create<GatherOp>(n.reshape(x, table), offsets, 0));
  return success();
}

void onnx_import::registerConvHandlers(llvm::StringMap<Handler> &t) {
  t["Conv"] = importConv;
  t["Pad"] = importPad;
  t["GatherND"] = importGatherND;
}
