//===- PrintLayerCosts.cpp - rp-print-layer-costs -------------------------===//
//
// Shows the layer cost analysis, for people and for lit tests; the
// partitioner reads the same analysis directly. The recompute and backward
// figures are the kernels the estimate times (LayerCost.h): the forward ops
// the reverse sweep reads, the sweep's own kernels, the gradient adds.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "rp/Analysis/CostModel.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::rp {
#define GEN_PASS_DEF_PRINTLAYERCOSTSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

void printCost(llvm::raw_ostream &os, const LayerCost &c) {
  os << "layer \"" << c.name << "\" forward_flops=" << c.forwardFlops
     << " recompute_flops=" << c.recomputeFlops
     << " backward_flops=" << c.backwardFlops
     << " forward_traffic=" << c.forwardTraffic
     << " recompute_traffic=" << c.recomputeTraffic
     << " backward_traffic=" << c.backwardTraffic
     << " accumulate_flops=" << c.accumulateFlops
     << " accumulate_traffic=" << c.accumulateTraffic
     << " param_bytes=" << c.paramBytes << " grad_bytes=" << c.gradBytes
     << " act_in_bytes=" << c.actInBytes << " act_out_bytes=" << c.actOutBytes
     << " work_bytes=" << c.workBytes << " kernels=" << c.kernels
     << llvm::format(" forward_ms=%.6g recompute_ms=%.6g backward_ms=%.6g "
                     "accumulate_ms=%.6g upload_ms=%.6g download_ms=%.6g",
                     c.forwardMs, c.backwardRecomputeMs(), c.backwardMs,
                     c.accumulateMs, c.uploadMs, c.downloadMs)
     << " source=" << (c.measured ? "measured" : "model");
  if (c.measuredOps)
    os << " measured_ops=" << c.measuredOps;
  if (c.backwardMeasured)
    os << " recompute_peak_bytes=" << c.recomputePeakBytes
       << " kept_bytes=" << c.keptBytes
       << " kept_input_bytes=" << c.keptInputBytes
       << " backward_peak_bytes=" << c.backwardPeakBytes
       << " result_grad_bytes=" << c.resultGradBytes;
  os << "\n";
}

struct PrintLayerCostsPass
    : mlir::rp::impl::PrintLayerCostsPassBase<PrintLayerCostsPass> {
  using Base::Base;

  void runOnOperation() override {
    CostModel &model = getAnalysis<CostModel>();
    FailureOr<const CostInputs *> inputs =
        model.inputs(hw, measured, &getContext());
    if (failed(inputs))
      return signalPassFailure();
    const std::optional<MeasuredProfile> &times = (*inputs)->measured;
    llvm::raw_ostream &os = llvm::outs();
    bool any = false;
    llvm::StringSet<> found;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || func.getOps<LayerOp>().empty())
        continue;
      any = true;
      FailureOr<const std::vector<LayerCost> *> costs =
          model.layerCosts(func, hw, measured, /*strict=*/false);
      if (failed(costs))
        return signalPassFailure();
      for (const LayerCost &c : **costs)
        found.insert(c.name);
      os << "costs @" << func.getSymName() << " hw=" << (*inputs)->hw.name
         << " layers=" << (*costs)->size() << "\n";
      LayerCost total;
      for (const LayerCost &c : **costs) {
        printCost(os, c);
        total.forwardFlops += c.forwardFlops;
        total.recomputeFlops += c.recomputeFlops;
        total.backwardFlops += c.backwardFlops;
        total.accumulateFlops += c.accumulateFlops;
        total.paramBytes += c.paramBytes;
        total.gradBytes += c.gradBytes;
        total.forwardMs += c.forwardMs;
        total.recomputeMs += c.backwardRecomputeMs();
        total.backwardMs += c.backwardMs;
        total.accumulateMs += c.accumulateMs;
      }
      os << "total forward_flops=" << total.forwardFlops
         << " backward_flops=" << total.backwardFlops
         << " param_bytes=" << total.paramBytes
         << " grad_bytes=" << total.gradBytes
         << llvm::format(" forward_ms=%.6g backward_ms=%.6g", total.forwardMs,
                         total.backwardMs)
         << " recompute_flops=" << total.recomputeFlops
         << " accumulate_flops=" << total.accumulateFlops
         << llvm::format(" recompute_ms=%.6g accumulate_ms=%.6g\n",
                         total.recomputeMs, total.accumulateMs);
    }
    os.flush();
    if (!any) {
      getOperation().emitError()
          << "no function has rp.layer ops; group the graph into layers "
             "first (rp-group-layers)";
      return signalPassFailure();
    }
    // A measured layer no function has is a profile of another model.
    for (const std::string &name :
         times ? times->order : std::vector<std::string>())
      if (!found.contains(name)) {
        getOperation().emitError()
            << "measured profile names layer '" << name
            << "', which this graph does not have; was it measured on "
               "another model or with other layer names?";
        return signalPassFailure();
      }
    markAllAnalysesPreserved();
  }
};

} // namespace
