//===- TrainPipeline.cpp - rp-train-pipeline ------------------------------===//

#include "rp/Dialect/RP/TrainPipeline.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::rp;

void mlir::rp::buildTrainPipeline(
    OpPassManager &pm, const TrainPipelineOptions &options,
    llvm::function_ref<void(OpPassManager &)> beforePartition) {
  AttachLossPassOptions attach;
  attach.loss = options.loss;
  pm.addPass(createAttachLossPass(attach));
  if (beforePartition)
    beforePartition(pm);
  // Before partitioning, so that stage costs include the recomputation and
  // no stage waits for another's mask.
  pm.addPass(createRecomputeSharedPass());
  PartitionPassOptions partition;
  partition.schedule = options.schedule;
  partition.devices = options.devices;
  partition.microbatches = options.microbatches;
  partition.hw = options.hw;
  partition.measured = options.measured;
  partition.partitioner = options.partitioner;
  partition.stages = options.stages;
  partition.dispatch = options.dispatch;
  pm.addPass(createPartitionPass(partition));
  if (options.reportMaxSeq) {
    ReportMaxSeqPassOptions report;
    report.budgetGiB = options.budgetGiB;
    pm.addPass(createReportMaxSeqPass(report));
  }
  pm.addPass(createLowerSchedulePass());
  // The optimizer runs on the host, so every step uploads the new weights:
  // no schedule keeps them resident.
  InsertTransfersPassOptions transfers;
  transfers.weightBudget = 0;
  transfers.dispatch = options.dispatch;
  transfers.passShift = options.passShift;
  pm.addPass(createInsertTransfersPass(transfers));
  PlanMemoryPassOptions memory;
  memory.budgetGiB = options.budgetGiB;
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createVerifySchedulePass());
  AutodiffPassOptions autodiff;
  autodiff.recompute = options.recompute;
  pm.addPass(createAutodiffPass(autodiff));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::rp::registerTrainPipeline() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "rp-train-pipeline",
      "the whole training compile: loss, shared values, partition, schedule, transfers, "
      "memory plan, verification, autodiff",
      [](OpPassManager &pm, const TrainPipelineOptions &options) {
        buildTrainPipeline(pm, options);
      });
}
