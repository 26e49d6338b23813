//===- ScatterHandlers.cpp - ScatterND of run-time updates ----------------===//
//
// A slice write, `t[..., a:b] = u` or `t[..., a:b].copy_(u)`, exports as
// ScatterND with indices the exporter computed from shapes alone
// (constant once shapes are static) and updates computed at run time.
// DeepSeek-V3's attention builds its keys that way (`new_empty`, then two
// slice copies). rp has no scatter kernel, but with constant indices that
// cover a box of the data the scatter is the data with that box replaced:
// slices of the data around the box and the updates, concatenated, which
// the differentiable rp ops already are. ScatterElements whose indices
// name one slab along its axis (torch 2's select_scatter) is the same
// write. Other index patterns are refused.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

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
  // The box: index tuple p of the grid is `offset + p`, over the first r
  // axes, so the grid has r axes and the updates are the box's shape.
  SmallVector<int64_t> values;
  for (const APInt &v : indices->getValues<APInt>())
    values.push_back(v.getSExtValue());
  auto refuse = [&]() {
    return n.error() << "a ScatterND of run-time updates is mapped only as a "
                        "slice write (indices, constant, that cover a box of "
                        "the data, partial along at most one axis); these "
                        "indices are not one";
  };
  if ((int64_t)grid.size() != r || r > rank || values.empty())
    return refuse();
  SmallVector<int64_t> offset(values.begin(), values.begin() + r);
  for (int64_t a = 0; a < r; ++a)
    if (offset[a] < 0)
      offset[a] += dims[a];
  SmallVector<int64_t> pos(r, 0);
  for (size_t i = 0; i < values.size(); i += r) {
    for (int64_t a = 0; a < r; ++a) {
      int64_t v = values[i + a] < 0 ? values[i + a] + dims[a] : values[i + a];
      if (v != offset[a] + pos[a])
        return refuse();
    }
    for (int64_t a = r - 1; a >= 0 && ++pos[a] == grid[a]; --a)
      pos[a] = 0;
  }
  SmallVector<int64_t> box(grid);
  llvm::append_range(box, dims.drop_front(r));
  if (cast<RankedTensorType>(updates.getType()).getShape() != ArrayRef(box))
    return refuse();
  int axis = -1;
  for (int64_t a = 0; a < r; ++a) {
    if (offset[a] < 0 || offset[a] + box[a] > dims[a])
      return refuse();
    if (box[a] == dims[a])
      continue;
    if (axis >= 0)
      return refuse();
    axis = a;
  }
  if (axis < 0) {
    n.setOutput(0, n.castTo(updates, dt.getElementType()));
    return success();
  }
  n.setOutput(0, writeBox(n, data, updates, axis, offset[axis], box[axis]));
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
