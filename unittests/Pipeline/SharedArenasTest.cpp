//===- SharedArenasTest.cpp - two passes in flight on one copy of arenas --===//
//
// Issue 16's memory-lean continuous run: two passes in flight (host buffers
// a slot each) on ONE copy of the device arenas (ForwardOptions::
// arenaCopies = 1, what a plan with arena_copies = 1 asks for), the devices
// renamed pass by pass, a device taking up pass p+1 only once all its
// queues are done with pass p. DESIGN.md's equivalence holds as with a
// copy per pass: sync on 2, 3 and 4 host devices gives the one-device
// serial run's losses and final weights bit for bit over five steps, with
// --accumulate 1 and 2; async gives the one-step-stale reference's (one
// device, a barrier after every pass, the optimizer between the steps);
// a run resumed mid-way gives the uninterrupted one's. Device buffers start
// as NaNs and are packed to share bytes, so a pass that wrote a device's
// arena while the pass before still read it would show in the losses.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/Target/PlanExport.h"
#include "rp/runtime/Device.h"
#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Trainer.h"

#include "TrainOutcome.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>

using namespace mlir;
namespace rt = ::rp::runtime;

namespace {

std::string scratchDir() {
  SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("rp-shared-arenas", dir));
  return dir.str().str();
}

/// rp-compile's training path for gpt_op17 on `devices` devices, four
/// microbatches; `stages` as --stages (empty: the partitioner's).
std::string compile(unsigned devices, const std::string &stages,
                    const std::string &dir) {
  DialectRegistry registry;
  mlir::rp::registerAllDialects(registry);
  MLIRContext context(registry);
  mlir::rp::ONNXImportOptions import;
  import.weightsPath = dir + "/model.weights.bin";
  import.irDir = dir;
  OwningOpRef<ModuleOp> module = mlir::rp::importONNXModel(
      std::string(RP_TEST_MODELS) + "/gpt_op17.onnx", &context, import);
  if (module && failed(mlir::rp::runPreparePipeline(*module, import.weightsPath,
                                                    import.irDir)))
    module = nullptr;
  EXPECT_TRUE(module);
  if (!module)
    return "";
  PassManager pm(&context);
  mlir::rp::TrainPipelineOptions options;
  options.devices = devices;
  options.microbatches = 4;
  options.stages = stages;
  mlir::rp::buildTrainPipeline(pm, options);
  EXPECT_TRUE(succeeded(pm.run(*module)));
  mlir::rp::PlanExportOptions out;
  out.irDir = dir;
  out.planDir = dir;
  std::string plan = dir + "/model.rpplan";
  EXPECT_TRUE(succeeded(mlir::rp::exportPlanToFile(*module, out, plan)));
  return plan;
}

using ::rp::test::Outcome;

/// How a run keeps its passes: one at a time behind barriers (the
/// reference), or two in flight on one shared copy of the device arenas.
enum class Run { barrier, shared };

Outcome train(const std::string &planPath, Run run, const std::string &save,
              const std::function<void(rt::TrainOptions &)> &tweak) {
  Outcome o;
  auto plan = rt::loadPlan(planPath);
  EXPECT_TRUE(bool(plan)) << (plan ? "" : plan.getStatus().getMessage());
  if (!plan)
    return o;
  rt::BackendOptions devices;
  devices.devices = plan->devices;
  devices.threads = 2;
  auto backend = rt::createBackend("host", devices);
  EXPECT_TRUE(bool(backend));
  if (!backend)
    return o;
  rt::ForwardOptions forward;
  if (run == Run::shared) {
    forward.slots = 2;
    forward.arenaCopies = 1;
    forward.rotate = rt::renamesDevices(*plan, 2);
  }
  auto fwd = rt::HostForward::create(*plan, **backend, forward);
  EXPECT_TRUE(bool(fwd)) << (fwd ? "" : fwd.getStatus().getMessage());
  if (!fwd)
    return o;
  if (run == Run::shared) {
    // One copy: every slot's device buffers are the same bytes, and the
    // run stays within one pass's share of the planned peak.
    EXPECT_EQ((*fwd)->getArenaCopies(), 1u);
    if (plan->devices > 1) {
      EXPECT_TRUE((*fwd)->rotates()) << planPath;
    }
    for (uint32_t b = 0; b < plan->buffers.size(); ++b) {
      if (!plan->buffers[b].onHost()) {
        EXPECT_EQ((*fwd)->buffer(b, 0).data, (*fwd)->buffer(b, 1).data);
      }
    }
    rt::Status within = rt::checkAllocationWithinPlan(
        *plan, (*fwd)->getLayout(), (*fwd)->allocatedPerDevice(), 2, 1,
        (*fwd)->rotates());
    EXPECT_FALSE(within.failed()) << within.getMessage();
  }
  rt::ThreadPool pool(2);
  rt::TrainOptions options;
  options.steps = 5;
  options.seed = 5;
  options.save = save;
  options.continuous = run == Run::shared;
  tweak(options);
  // The reference's async optimizer runs between the steps.
  if (run == Run::barrier)
    options.overlapOptimizer = false;
  ::rp::test::trainInto(o, *plan, **fwd, pool, options);
  return o;
}

TEST(SharedArenas, TwoPassesOnOneCopyTrainLikeOneDevice) {
  std::string refDir = scratchDir();
  std::string ref = compile(1, "", refDir);
  // Five stage jobs a pass: the devices are renamed from pass to pass on
  // 2, 3 and 4 devices.
  std::vector<std::pair<unsigned, std::string>> plans;
  std::vector<std::string> dirs;
  for (unsigned g : {2u, 3u, 4u}) {
    dirs.push_back(scratchDir());
    plans.emplace_back(g, compile(g, "fwd:1,1;bwd:2,1,1", dirs.back()));
  }
  for (unsigned k : {1u, 2u})
    for (bool sync : {true, false}) {
      auto mode = [&](rt::TrainOptions &o) {
        o.sync = sync;
        o.accumulate = k;
      };
      Outcome want = train(ref, Run::barrier, refDir + "/ck", mode);
      ASSERT_EQ(want.losses.size(), 5u);
      EXPECT_NE(want.losses.front(), want.losses.back());
      for (size_t i = 0; i < plans.size(); ++i) {
        auto [g, plan] = plans[i];
        std::string what = "G=" + std::to_string(g) +
                           " K=" + std::to_string(k) +
                           (sync ? " sync" : " async");
        Outcome got = train(plan, Run::shared, dirs[i] + "/ck", mode);
        EXPECT_EQ(got.losses, want.losses) << what;
        EXPECT_TRUE(got.weights == want.weights)
            << what << ": final weights differ from one device";
        if (g != 3)
          continue;
        // 2 + 3 steps = 5, bitwise.
        std::string half = dirs[i] + "/half";
        Outcome first = train(plan, Run::shared, half, [&](auto &o) {
          mode(o);
          o.steps = 2;
        });
        Outcome second = train(plan, Run::shared, half, [&](auto &o) {
          mode(o);
          o.steps = 3;
          o.resume = half;
        });
        std::vector<std::string> joined = first.losses;
        joined.insert(joined.end(), second.losses.begin(), second.losses.end());
        EXPECT_EQ(joined, want.losses) << what << " resumed";
        EXPECT_TRUE(second.weights == want.weights) << what << " resumed";
        llvm::sys::fs::remove_directories(half);
      }
    }
  for (const std::string &dir : dirs)
    llvm::sys::fs::remove_directories(dir);
  llvm::sys::fs::remove_directories(refDir);
}

} // namespace
