//===- EvalNonZero.cpp - NonZero of constant inputs -----------------------===//
//
// NonZero's output shape depends on the values it reads, so rp (static
// shapes) imports it only when its input is known at import: a mask built
// from constants and the input's static shape (X-MOD's `lang_ids ==
// adapter_idx` with the default language, `hidden[mask]` and
// `out[mask] = ...` around it, both exporters). Folded here as ONNX
// defines it: the coordinates of the non-zero elements, [rank, count] int64,
// in row-major order.
//
//===----------------------------------------------------------------------===//

#include "EvalTensor.h"

using namespace mlir;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::eval;

static LogicalResult evalNonZero(Eval &e) {
  const Tensor &x = e.first();
  if (x.rank() == 0)
    return e.n.error() << "NonZero of a scalar (rank 0): its output shape "
                          "is not defined the same way by every runtime; "
                          "export the mask with at least one dimension";
  SmallVector<int64_t> hits;
  for (int64_t k = 0; k < x.size(); ++k)
    if (x.isFloat() ? x.f[k] != 0.0 : x.i[k] != 0)
      hits.push_back(k);
  int64_t rank = x.rank(), count = hits.size();
  if (failed(e.fits({rank, count})))
    return failure();
  Tensor r =
      Tensor::make(IntegerType::get(x.element.getContext(), 64), {rank, count});
  SmallVector<int64_t> strides = stridesOf(x.shape);
  for (int64_t j = 0; j < count; ++j)
    for (int64_t d = 0; d < rank; ++d)
      r.i[d * count + j] = hits[j] / strides[d] % x.shape[d];
  e.out.push_back(std::move(r));
  return success();
}

void eval::registerNonZeroEvaluator(llvm::StringMap<EvalFn> &t) {
  t["NonZero"] = evalNonZero;
}
