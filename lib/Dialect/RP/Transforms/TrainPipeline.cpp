//===- TrainPipeline.cpp - rp-train-pipeline ------------------------------===//

#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/contract/PlanFormat.h"
#include "rp/timing/Hardware.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;

/// Dropout only in training plans: a forward plan is PEFT's eval mode.
static void addLora(OpPassManager &pm, const TrainPipelineOptions &options,
                    bool training) {
  if (options.loraRank <= 0)
    return;
  AddLoraPassOptions lora;
  lora.rank = options.loraRank;
  lora.alpha = options.loraAlpha;
  lora.targets = options.loraTargets;
  lora.keep = options.loraModulesToSave;
  lora.dropout = training ? double(options.loraDropout) : 0.0;
  pm.addPass(createAddLoraPass(lora));
}

/// Right after the adapters exist (they say which weights are frozen), so
/// that every pass after it counts the quantized bytes.
static void addQuantize(OpPassManager &pm,
                        const TrainPipelineOptions &options) {
  if (options.quantizeBase == QuantizeBase::none)
    return;
  QuantizeBasePassOptions quantize;
  quantize.kind = options.quantizeBase == QuantizeBase::int8 ? QuantKind::int8
                                                             : QuantKind::nf4;
  quantize.weightsFile = options.quantizeFile;
  quantize.irDir = options.quantizeIrDir;
  pm.addPass(createQuantizeBasePass(quantize));
}

static void addConvert(OpPassManager &pm, const TrainPipelineOptions &options) {
  if (options.dtype == ComputeType::f32)
    return;
  ConvertFloatTypePassOptions to;
  to.to = options.dtype;
  pm.addPass(createConvertFloatTypePass(to));
}

namespace {
/// Records passes-in-flight on the module before anything partitions it:
/// rp-partition's and rp-choose-loss-fusion's host budget counts that many
/// passes' pinned buffers (hostMemoryOf reads `rp.passes_in_flight` until
/// rp-plan-memory records the schedule's), in rp-opt's pipeline as in
/// rp-compile's, which builds it.
struct RecordPassesInFlight
    : public PassWrapper<RecordPassesInFlight, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RecordPassesInFlight)

  explicit RecordPassesInFlight(unsigned passes) : passes(passes) {}
  StringRef getArgument() const override {
    return "rp-record-passes-in-flight";
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module->setAttr("rp.passes_in_flight",
                    IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                     int64_t(passes)));
  }
  unsigned passes;
};
} // namespace

void mlir::rp::buildForwardPipeline(OpPassManager &pm,
                                    const TrainPipelineOptions &options) {
  addLora(pm, options, /*training=*/false);
  addQuantize(pm, options);
  addConvert(pm, options);
}

void mlir::rp::buildTrainPipeline(OpPassManager &pm,
                                  const TrainPipelineOptions &options) {
  if (options.passesInFlight > 0)
    pm.addPass(std::make_unique<RecordPassesInFlight>(options.passesInFlight));
  addLora(pm, options, /*training=*/true);
  addQuantize(pm, options);
  AttachLossPassOptions attach;
  attach.loss = options.loss;
  pm.addPass(createAttachLossPass(attach));
  // Right after the loss exists, so that the partitioner, the memory plan
  // and autodiff all see the fused op and no [tokens, vocab] logits.
  if (options.fuseLoss != FuseLoss::never)
    pm.addPass(createFuseLinearCrossEntropyPass());
  // After the loss, so that the loss sees the model's own outputs; before
  // partitioning and autodiff, so that stages are cut by the compute type's
  // sizes and the backward runs in it too.
  addConvert(pm, options);
  // Before partitioning, so that stage costs include the recomputation and
  // no stage waits for another's mask.
  pm.addPass(createRecomputeSharedPass());
  // The schedule is decided here, once: the later passes read it from
  // #rp.partition.
  PartitionPassOptions partition;
  partition.schedule = options.schedule;
  partition.devices = options.devices;
  partition.microbatches = options.microbatches;
  partition.hw = options.hw;
  partition.measured = options.measured;
  partition.partitioner = options.partitioner;
  partition.stages = options.stages;
  // Grains given per stage (--recompute-stages) name the stages that
  // `auto` would cut without choosing a grain: stage grain's.
  partition.recompute = options.recomputeStages.empty() ||
                                options.recompute != RecomputeGrain::automatic
                            ? options.recompute
                            : RecomputeGrain::stage;
  partition.dispatch = options.dispatch;
  partition.tailJobs = options.tailJobs;
  partition.budgetGiB = options.budgetGiB;
  partition.hostBudgetGiB = options.hostBudgetGiB;
  partition.hostSlackPct = options.hostSlackPct;
  // The fused graph's grain note is replaced where the loss is unfused:
  // its ranges (four timed runs) are left to rp-choose-loss-fusion.
  partition.deferGrainRange = options.fuseLoss == FuseLoss::automatic;
  pm.addPass(createPartitionPass(partition));
  if (options.reportMaxSeq) {
    ReportMaxSeqPassOptions report;
    report.budgetGiB = options.budgetGiB;
    report.repartition = options.stages.empty();
    report.dispatch = options.dispatch;
    pm.addPass(createReportMaxSeqPass(report));
  }
  // After the report, which looks for the long sequences where only the
  // fused loss fits; before the schedule, which then lowers the graph and
  // partition chosen.
  if (options.fuseLoss == FuseLoss::automatic) {
    ChooseLossFusionPassOptions choose;
    choose.budgetGiB = options.budgetGiB;
    choose.stages = options.stages;
    choose.dispatch = options.dispatch;
    choose.passShift = options.passShift;
    choose.tailJobs = int(options.tailJobs);
    choose.hostBudgetGiB = options.hostBudgetGiB;
    choose.hostSlackPct = options.hostSlackPct;
    pm.addPass(createChooseLossFusionPass(choose));
  }
  // On the graph and stages the plan would have: it reports the slices it
  // chooses and the predicted step, and records the slices for
  // rp-slice-tokens below.
  if (!options.tokenSlices.empty()) {
    PredictTokenSlicesPassOptions slices;
    slices.slices = options.tokenSlices;
    slices.budgetGiB = options.budgetGiB;
    slices.reportMaxSeq = options.reportMaxSeq;
    slices.hostBudgetGiB = options.hostBudgetGiB;
    slices.dispatch = options.dispatch;
    slices.passShift = options.passShift;
    slices.cut = true;
    // The stages rp's partitioner cut for one microbatch a pass are
    // searched again with the slices; stages the user gave are kept.
    slices.searchStages =
        options.stages.empty() && options.partitioner == Partitioner::rp;
    // --tail-jobs given is kept; unset, `auto` slices of one sequence a
    // step take one or two tail jobs by the prediction.
    slices.tailJobs = options.tailJobs.hasValue() ? options.tailJobs : 0;
    pm.addPass(createPredictTokenSlicesPass(slices));
  }
  // After the loss fusion's choice, on the graph and partition it kept:
  // `--recompute auto` becomes a grain per backward stage.
  ChooseRecomputePassOptions grain;
  grain.budgetGiB = options.budgetGiB;
  grain.grains = options.recomputeStages;
  pm.addPass(createChooseRecomputePass(grain));
  // The slice functions are cut from the graph with its grains chosen, so
  // that each slice is differentiated as @main is; the schedule, its
  // transfers and its memory plan are then the sliced ones (one slice:
  // the unsliced plan). The exporter refuses a sliced schedule for now.
  if (!options.tokenSlices.empty()) {
    SliceTokensPassOptions cut;
    cut.slices = "auto";
    pm.addPass(createSliceTokensPass(cut));
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
  memory.passesInFlight = options.passesInFlight;
  memory.arenaCopies = options.arenaCopies;
  pm.addPass(createPlanMemoryPass(memory));
  pm.addPass(createVerifySchedulePass());
  pm.addPass(createAutodiffPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Last: on the ops the exporter writes, the backward's included.
  if (options.fuseMatmulEpilogue)
    pm.addPass(createFuseMatmulEpiloguePass());
}

const char *mlir::rp::defaultHardware() {
  return ::rp::timing::kDefaultHardware;
}

LogicalResult mlir::rp::checkTrainPipelineOptions(
    const TrainPipelineOptions &options, bool asFlags,
    llvm::function_ref<void(const llvm::Twine &)> error) {
  // A string, not a Twine: a Twine returned from here would point at the
  // temporaries it was built of.
  auto flag = [&](StringRef name) {
    return (asFlags ? "--" + name : llvm::Twine(name)).str();
  };
  auto spelled = [&](StringRef name, const std::string &value) {
    return flag(name) + (asFlags ? " " : "=") + value;
  };
  // Reals as the user wrote them (%g: 0.1, not 0.100000).
  auto real = [](double value) {
    std::string text;
    llvm::raw_string_ostream(text) << llvm::format("%g", value);
    return text;
  };
  unsigned devices = options.devices, microbatches = options.microbatches;
  if (devices == 0 || devices > ::rp::plan::kMaxPlanDevices) {
    error(spelled("devices", std::to_string(devices)) + ": give 1 to " +
          llvm::Twine(::rp::plan::kMaxPlanDevices) + " devices");
    return failure();
  }
  if (microbatches > ::rp::plan::kMaxPlanMicrobatches) {
    error(spelled("microbatches", std::to_string(microbatches)) +
          ": give 0 (the default) to " +
          llvm::Twine(::rp::plan::kMaxPlanMicrobatches));
    return failure();
  }
  // A shipped profile's name (NAME or NAME:as-built): a misspelt one is
  // refused before hours of work, not when the partition pass first loads
  // it. A file is the partition pass's to read, which places what is wrong
  // in it at its line.
  std::string text, source, message;
  if (!::rp::timing::namesProfileFile(options.hw) &&
      !::rp::timing::readHardwareProfile(options.hw, text, source, message)) {
    error(message);
    return failure();
  }
  // The LoRA and budget numbers' ranges, each with its meaning. rp-compile
  // refuses nan and inf in the text (CheckNumberFlags.cpp); a pipeline
  // string's parser takes them, so they are refused here.
  // A cap, not only a sign: a rank of 2^31 made adapters of terabytes whose
  // uploads, chunked at 256 MiB, gave the memory plan millions of commands
  // (the options fuzzer's hang). No model's hidden size comes near 65536,
  // and a rank above an adapted weight's smaller side adds nothing.
  if (options.loraRank < 0 || options.loraRank > kMaxLoraRank) {
    error(spelled("lora-rank", std::to_string(options.loraRank)) +
          ": give 0 (no adapters) or a rank from 1 to " +
          std::to_string(kMaxLoraRank));
    return failure();
  }
  if (!(options.loraAlpha > 0 && std::isfinite(options.loraAlpha))) {
    error(spelled("lora-alpha", real(options.loraAlpha)) +
          ": the LoRA scaling numerator is a number > 0");
    return failure();
  }
  if (!(options.loraDropout >= 0 && options.loraDropout < 1)) {
    error(spelled("lora-dropout", real(options.loraDropout)) +
          ": the probability of dropping an adapter input is in [0, 1)");
    return failure();
  }
  if (options.loraDropout > 0 && options.loraRank == 0) {
    error(flag("lora-dropout") + " needs " + flag("lora-rank") +
          " (it drops the adapters' inputs)");
    return failure();
  }
  if (!(options.budgetGiB >= 0 && std::isfinite(options.budgetGiB))) {
    error(spelled("budget-gib", real(options.budgetGiB)) +
          ": give 0 (the profile's memory) or a number of GiB > 0");
    return failure();
  }
  if (!(options.hostSlackPct >= 0 && options.hostSlackPct <= 100)) {
    error(spelled("host-slack-pct", real(options.hostSlackPct)) +
          ": give a percentage from 0 (the fastest stages) to 100");
    return failure();
  }
  return success();
}

void mlir::rp::registerTrainPipeline() {
  // PassPipelineRegistration, with the options checked as they are parsed.
  registerPassPipeline(
      "rp-train-pipeline",
      "the whole training compile: LoRA and compute type, loss, shared "
      "values, partition, schedule, transfers, memory plan, verification, "
      "autodiff",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        TrainPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (failed(checkTrainPipelineOptions(
                options, /*asFlags=*/false, [&](const Twine &message) {
                  (void)errorHandler("rp-train-pipeline: " + message);
                })))
          return failure();
        buildTrainPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(TrainPipelineOptions());
      });
}
