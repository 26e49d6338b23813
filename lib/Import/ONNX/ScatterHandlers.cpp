//===- ScatterHandlers.cpp - ScatterND of run-time updates ----------------===//
//
// A slice write, `t[..., a:b] = u` or `t[..., a:b].copy_(u)`, exports as
// ScatterND with indices the exporter computed from shapes alone
// (constant once shapes are static) and updates computed at run time.
// DeepSeek-V3's attention builds its keys that way (`new_empty`, then two
// slice copies). rp has no scatter kernel, but with constant indices that
// cover a box of the data the scatter is the data with that box replaced:
// slices of the data around the box and the updates, concatenated, which
// the differentiable rp ops already are. Other constant indices (the
// TorchScript exporter's for a masked or strided write: Bailing's and Kimi's
// linear attention) write rows: a where of a gather of the updates and the
// data (writeRows). ScatterElements whose indices name one slab along its
// axis (torch 2's select_scatter) is the box write; other constant
// ScatterElements indices are refused. ScatterElements whose indices are
// computed at run time (a router's chosen groups written into a mask,
// DeepSeek-V3's group-limited top-k as dynamo exports it) is mapped along
// the last axis: a one-hot of the indices picks each position's update,
// and the data stays where no index points (writeChosen).
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

/// data[.., :offset] ++ updates ++ data[.., offset + size:] along `axis`:
/// the data with that slab replaced.
static Value writeBox(NodeImporter &n, Value data, Value updates, int64_t axis,
                      int64_t offset, int64_t size) {
  auto dt = cast<RankedTensorType>(data.getType());
  ArrayRef<int64_t> dims = dt.getShape();
  int64_t rank = dt.getRank();
  SmallVector<Value> parts;
  auto sliceOfData = [&](int64_t from, int64_t to) {
    if (from == to)
      return;
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1),
        shape(dims.begin(), dims.end());
    offsets[axis] = from;
    shape[axis] = to - from;
    parts.push_back(
        n.create<SliceOp>(RankedTensorType::get(shape, dt.getElementType()),
                          data, offsets, strides));
  };
  sliceOfData(0, offset);
  parts.push_back(n.castTo(updates, dt.getElementType()));
  sliceOfData(offset + size, dims[axis]);
  if (parts.size() == 1)
    return parts.front();
  return n.create<ConcatOp>(dt, parts, uint64_t(axis));
}

/// Any other constant indices (reduction none): the data and the updates
/// as rows of the trailing dimensions after the first `r`, and each data
/// row the update row that writes it last (as onnxruntime's loop leaves
/// it), or its own: where(written, gather(updates, writer), data). The
/// gather's VJP gives each update row the gradient of the rows it wrote
/// last; the where, the data's gradient where nothing wrote.
static Value writeRows(NodeImporter &n, Value data, Value updates, int64_t r,
                       ArrayRef<int64_t> indices) {
  auto dt = cast<RankedTensorType>(data.getType());
  ArrayRef<int64_t> dims = dt.getShape();
  int64_t rows = 1, written = int64_t(indices.size()) / r;
  for (int64_t d : dims.take_front(r))
    rows *= d;
  SmallVector<int64_t> strides(r, 1);
  for (int64_t a = r - 2; a >= 0; --a)
    strides[a] = strides[a + 1] * dims[a + 1];
  SmallVector<int64_t> writer(rows, 0);
  SmallVector<bool> isWritten(rows, false);
  for (int64_t u = 0; u < written; ++u) {
    int64_t row = 0;
    for (int64_t a = 0; a < r; ++a)
      row += indices[u * r + a] * strides[a];
    writer[row] = u;
    isWritten[row] = true;
  }
  SmallVector<int64_t> rowShape{rows}, updShape{written}, maskShape{rows};
  llvm::append_range(rowShape, dims.drop_front(r));
  llvm::append_range(updShape, dims.drop_front(r));
  maskShape.append(dims.size() - r, 1);
  Value flatData = n.reshape(data, rowShape);
  Value flatUpd = n.reshape(n.castTo(updates, dt.getElementType()), updShape);
  Value ids = n.i64Constant(writer);
  Value picked = n.create<GatherOp>(flatUpd, ids, int64_t(0));
  Value mask = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(maskShape, n.builder.getI1Type()),
      ArrayRef<bool>(isWritten)));
  return n.reshape(n.create<WhereOp>(mask, picked, flatData), dims);
}

static LogicalResult importScatterND(NodeImporter &n) {
  Value data = n.input(0), updates = n.input(2);
  if (!data || !updates)
    return failure();
  if (n.stringAttr("reduction", "none") != "none")
    return n.error() << "a ScatterND with reduction '"
                     << n.stringAttr("reduction", "none")
                     << "' on run-time values is not supported; rp maps a "
                        "slice write (reduction none)";
  auto indices = n.constantInput(1, "indices");
  if (failed(indices))
    return failure();
  auto dt = cast<RankedTensorType>(data.getType());
  auto it = cast<RankedTensorType>(indices->getType());
  ArrayRef<int64_t> dims = dt.getShape();
  int64_t rank = dt.getRank(), r = it.getShape().back();
  ArrayRef<int64_t> grid = it.getShape().drop_back();
  SmallVector<int64_t> values;
  for (const APInt &v : indices->getValues<APInt>())
    values.push_back(v.getSExtValue());
  auto refuse = [&]() {
    return n.error() << "indices " << it << " and updates " << updates.getType()
                     << " do not scatter into " << dt
                     << " (updates must be the indices' grid then the "
                        "data's dimensions after the indexed ones)";
  };
  SmallVector<int64_t> box(grid);
  if (r > rank || values.empty())
    return refuse();
  llvm::append_range(box, dims.drop_front(r));
  if (cast<RankedTensorType>(updates.getType()).getShape() != ArrayRef(box))
    return refuse();
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t d = dims[i % r];
    if (values[i] < -d || values[i] >= d)
      return n.error() << "index " << values[i] << " is outside axis " << i % r
                       << " of the data (" << d << ")";
    if (values[i] < 0)
      values[i] += d;
  }
  // A box: index tuple p of the grid is `offset + p` over the first r
  // axes (so the grid has r axes), partial along one axis at most.
  auto asBox = [&]() -> std::optional<std::pair<int, int64_t>> {
    if (int64_t(grid.size()) != r)
      return std::nullopt;
    SmallVector<int64_t> pos(r, 0);
    for (size_t i = 0; i < values.size(); i += r) {
      for (int64_t a = 0; a < r; ++a)
        if (values[i + a] != values[a] + pos[a])
          return std::nullopt;
      for (int64_t a = r - 1; a >= 0 && ++pos[a] == grid[a]; --a)
        pos[a] = 0;
    }
    int axis = -1;
    for (int64_t a = 0; a < r; ++a) {
      if (values[a] + box[a] > dims[a])
        return std::nullopt;
      if (box[a] == dims[a])
        continue;
      if (axis >= 0)
        return std::nullopt;
      axis = int(a);
    }
    return std::make_pair(axis, axis < 0 ? int64_t(0) : values[axis]);
  };
  if (auto written = asBox()) {
    auto [axis, offset] = *written;
    n.setOutput(0, axis < 0
                       ? n.castTo(updates, dt.getElementType())
                       : writeBox(n, data, updates, axis, offset, box[axis]));
    return success();
  }
  n.setOutput(0, writeRows(n, data, updates, r, values));
  return success();
}

/// ScatterElements (reduction none) along the last axis with run-time
/// indices: out[.., j] = updates[.., m] where indices[.., m] = j, data[.., j]
/// where no index is j. The indices' leading dimensions must be the data's.
/// Repeated indices add their updates (ONNX leaves that case undefined;
/// the routers that write masks this way scatter a top-k, whose indices
/// are distinct).
static LogicalResult writeChosen(NodeImporter &n, Value data, Value indices,
                                 Value updates) {
  auto dt = cast<RankedTensorType>(data.getType());
  auto it = cast<RankedTensorType>(indices.getType());
  int64_t rank = dt.getRank();
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> ds = dt.getShape(), is = it.getShape();
  if (*axis != rank - 1 || it.getRank() != rank ||
      cast<RankedTensorType>(updates.getType()).getShape() != is ||
      is.drop_back() != ds.drop_back())
    return n.error() << "ScatterElements with indices computed at run time is "
                        "mapped along the last axis only, with indices and "
                        "updates of one shape whose leading dimensions are "
                        "the data's; this one writes "
                     << updates.getType() << " at " << indices.getType()
                     << " into " << dt << " along axis " << *axis;
  int64_t c = ds.back();
  Type i64 = n.builder.getI64Type(), f32 = n.builder.getF32Type();
  Type el = dt.getElementType();
  // Sums run in the data's float type, or f32 for a mask or integers.
  Type f = isa<FloatType>(el) ? el : f32;
  Value idx = n.castTo(indices, i64);
  Value neg = n.create<CmpOp>(CmpPredicate::lt, idx, scalarOf(n, i64, 0));
  idx = n.create<WhereOp>(neg, n.create<AddOp>(idx, scalarOf(n, i64, c)), idx);
  SmallVector<int64_t> col(is), rangeShape(rank, 1), upd(is);
  col.push_back(1);
  upd.push_back(1);
  rangeShape.push_back(c);
  SmallVector<int64_t> range = llvm::to_vector(llvm::seq<int64_t>(0, c));
  // hit[.., m, j]: index m writes position j.
  Value hit = n.create<CmpOp>(CmpPredicate::eq, n.reshape(idx, col),
                              n.reshape(n.i64Constant(range), rangeShape));
  Value one = scalarOf(n, f, 1.0), zero = scalarOf(n, f, 0.0);
  Value hits =
      n.create<ReduceOp>(ReduceKind::sum, n.create<WhereOp>(hit, one, zero),
                         ArrayRef<int64_t>{rank - 1}, false);
  Value written = n.create<ReduceOp>(
      ReduceKind::sum,
      n.create<WhereOp>(hit, n.reshape(n.castTo(updates, f), upd), zero),
      ArrayRef<int64_t>{rank - 1}, false);
  Value covered = n.create<CmpOp>(CmpPredicate::gt, hits, zero);
  n.setOutput(0, n.create<WhereOp>(covered, n.castTo(written, el), data));
  return success();
}

/// ScatterElements (reduction none) whose constant indices along `axis`
/// are offset, offset + 1, .. at every other position: the same slab
/// write, x[:, t] = y as torch 2's exporter writes select_scatter
/// (RWKV's and RecurrentGemma's recurrences).
static LogicalResult importScatterElements(NodeImporter &n) {
  Value data = n.input(0), updates = n.input(2);
  if (!data || !updates)
    return failure();
  auto refuse = [&]() {
    return n.error() << "ScatterElements of run-time values is mapped only "
                        "as a slab write (constant indices that name the "
                        "same consecutive positions along the axis at "
                        "every other position, reduction none, as "
                        "select_scatter and slice_scatter export); these "
                        "indices are not one";
  };
  if (n.stringAttr("reduction", "none") != "none")
    return refuse();
  Value runTime = n.input(1);
  if (!runTime)
    return failure();
  if (DenseElementsAttr folded; !matchPattern(runTime, m_Constant(&folded)))
    return writeChosen(n, data, runTime, updates);
  auto indices = n.constantInput(1, "indices");
  if (failed(indices))
    return failure();
  auto dt = cast<RankedTensorType>(data.getType());
  auto it = cast<RankedTensorType>(indices->getType());
  int64_t rank = dt.getRank();
  auto axisOr = n.normalizeAxis(n.intAttr("axis", 0), rank);
  if (failed(axisOr))
    return failure();
  int64_t axis = *axisOr;
  ArrayRef<int64_t> dims = dt.getShape(), is = it.getShape();
  if (it.getRank() != rank || it.getNumElements() == 0 ||
      cast<RankedTensorType>(updates.getType()).getShape() != is)
    return refuse();
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && is[d] != dims[d])
      return refuse();
  SmallVector<int64_t> values;
  for (const APInt &v : indices->getValues<APInt>()) {
    int64_t i = v.getSExtValue();
    values.push_back(i < 0 ? i + dims[axis] : i);
  }
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= is[d];
  int64_t offset = values[0];
  for (auto [flat, v] : llvm::enumerate(values))
    if (v != offset + int64_t(flat / inner) % is[axis])
      return refuse();
  if (offset < 0 || offset + is[axis] > dims[axis])
    return refuse();
  n.setOutput(0, writeBox(n, data, updates, axis, offset, is[axis]));
  return success();
}

void onnx_import::registerScatterHandlers(llvm::StringMap<Handler> &t) {
  t["ScatterND"] = importScatterND;
  t["ScatterElements"] = importScatterElements;
}
