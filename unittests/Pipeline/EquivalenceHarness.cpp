//===- EquivalenceHarness.cpp - compile and train in one process ----------===//
//
// EquivalenceHarness.h's definitions: rp-compile's training path (import,
// rp-prepare, the training pipeline, export) and the host trainer's run.
//
//===----------------------------------------------------------------------===//

#include "EquivalenceHarness.h"

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/Target/PlanExport.h"
#include "rp/runtime/Device.h"
#include "rp/runtime/Plan.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

using namespace mlir;
namespace rt = ::rp::runtime;

namespace rp::test {

std::string scratchDir() {
  SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("rp-equivalence", dir));
  return dir.str().str();
}

std::string compile(const std::string &model, const Config &c,
                    const std::string &dir) {
  DialectRegistry registry;
  mlir::rp::registerAllDialects(registry);
  MLIRContext context(registry);
  mlir::rp::ONNXImportOptions import;
  import.weightsPath = dir + "/model.weights.bin";
  import.irDir = dir;
  OwningOpRef<ModuleOp> module =
      mlir::rp::importONNXModel(model, &context, import);
  if (module && failed(mlir::rp::runPreparePipeline(*module, import.weightsPath,
                                                    import.irDir)))
    module = nullptr;
  EXPECT_TRUE(module) << c.name();
  if (!module)
    return "";
  PassManager pm(&context);
  mlir::rp::TrainPipelineOptions options;
  options.devices = c.devices;
  options.microbatches = c.microbatches;
  options.schedule = *mlir::rp::symbolizeScheduleKind(c.schedule);
  if (c.bf16 || c.f16)
    options.dtype =
        c.bf16 ? mlir::rp::ComputeType::bf16 : mlir::rp::ComputeType::f16;
  options.stages = c.stages;
  options.recompute = c.layerGrain ? mlir::rp::RecomputeGrain::layer
                                   : mlir::rp::RecomputeGrain::stage;
  options.recomputeStages = c.grains;
  options.tailJobs = c.tailJobs;
  mlir::rp::buildTrainPipeline(pm, options);
  EXPECT_TRUE(succeeded(pm.run(*module))) << c.name();
  mlir::rp::PlanExportOptions out;
  out.irDir = dir;
  out.planDir = dir;
  std::string plan = dir + "/model.rpplan";
  EXPECT_TRUE(succeeded(mlir::rp::exportPlanToFile(*module, out, plan)))
      << c.name();
  return plan;
}

Outcome train(const std::string &planPath, bool sync, const std::string &dir,
              const std::function<void(rt::TrainOptions &)> &tweak, Run run) {
  Outcome o;
  auto plan = rt::loadPlan(planPath);
  EXPECT_TRUE(bool(plan)) << (plan ? "" : plan.getStatus().getMessage());
  if (!plan)
    return o;
  std::unique_ptr<rt::Backend> backend;
  rt::Expected<std::unique_ptr<rt::HostForward>> fwd =
      rt::HostForward::create(*plan);
  if (run == Run::continuous) {
    rt::BackendOptions devices;
    devices.devices = plan->devices;
    devices.threads = 2;
    auto created = rt::createBackend("host", devices);
    EXPECT_TRUE(bool(created));
    if (!created)
      return o;
    backend = std::move(*created);
    rt::ForwardOptions two;
    two.slots = 2;
    two.rotate = true;
    fwd = rt::HostForward::create(*plan, *backend, two);
  }
  EXPECT_TRUE(bool(fwd)) << (fwd ? "" : fwd.getStatus().getMessage());
  if (!fwd)
    return o;
  // Device buffers share bytes only where the plan orders their uses (and
  // the arenas start as NaNs, so a wrong share shows in the losses).
  const rt::DeviceLayout &layout = (*fwd)->getLayout();
  rt::Status packed = rt::verifyDeviceLayout(*plan, layout);
  EXPECT_FALSE(packed.failed()) << packed.getMessage();
  uint64_t arenas = 0, unshared = 0;
  for (size_t d = 0; d < layout.arenaBytes.size(); ++d) {
    EXPECT_LE(layout.arenaBytes[d], layout.unsharedBytes[d]) << planPath;
    arenas += layout.arenaBytes[d];
    unshared += layout.unsharedBytes[d];
  }
  EXPECT_LT(arenas, unshared) << planPath;
  // The plan carries the compiler's peak per device, and one pass's arenas
  // stay within it, up to each buffer's alignment padding (issue 20): what
  // rp-run checks before it runs a plan.
  EXPECT_EQ(plan->plannedPeakBytes.size(), size_t(plan->devices)) << planPath;
  rt::Status within =
      rt::checkArenasWithinPlan(*plan, layout, (*fwd)->rotates());
  EXPECT_FALSE(within.failed()) << planPath << ": " << within.getMessage();
  rt::ThreadPool pool(2);
  rt::TrainOptions options;
  options.steps = 3;
  options.sync = sync;
  options.seed = 5;
  options.save = dir + "/checkpoint";
  if (tweak)
    tweak(options);
  ::rp::test::trainInto(o, *plan, **fwd, pool, options);
  return o;
}

std::string modelPath(const char *name) {
  return std::string(RP_TEST_MODELS) + "/" + name;
}

} // namespace rp::test
