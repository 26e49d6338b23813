//===- rp-compile.cpp - model to plan in one command ----------------------===//
//
// rp-compile MODEL.onnx|MODEL.mlir -o MODEL.rpplan [--forward-only]
//
// Imports an ONNX model (or reads rp IR), runs rp-prepare and (for
// training) rp-train-pipeline: partition, schedule, transfers, memory plan,
// verification, autodiff; then writes the plan. The pipeline's options are
// the tool's flags (TrainPipelineOptions). Inline weights of an ONNX model are
// written beside the plan (MODEL.weights.bin) and referenced relative to it.
// stdout carries nothing; stderr a one-paragraph summary and diagnostics.
// Exit codes: 0 ok, 1 bad input.
//
//===----------------------------------------------------------------------===//

#include "HostBudget.h"
#include "StepAssumptions.h"
#include "rp/Analysis/HostMemory.h"
#include "rp/Analysis/PassesInFlight.h"
#include "rp/Analysis/SearchStats.h"
#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/Support/AtomicWrite.h"
#include "rp/Support/ToolGuards.h"
#include "rp/Support/WeightsWriter.h"
#include "rp/Target/PlanExport.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <malloc.h>
#include <numeric>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|model.mlir>"));
static cl::opt<std::string> outputPath("o", cl::Required,
                                       cl::desc("the .rpplan to write"),
                                       cl::value_desc("file"));
static cl::opt<bool>
    forwardOnly("forward-only",
                cl::desc("compile an inference plan (forward only)"));
static cl::opt<bool>
    tf32("tf32", cl::desc("let the cuda device's f32 GEMMs round their "
                          "inputs to TF32 (recorded in the plan; off: f32 "
                          "products as the host's)"));
/// A refusal (a plan over its memory budget, a bad --stages) is about
/// numbers, not the IR: the op a diagnostic is attached to (the whole
/// schedule, thousands of lines for a real model) is printed only when
/// asked.
static cl::opt<bool> printIrOnError(
    "print-ir-on-error",
    cl::desc("print the operation an error is about (the IR) after it"));

/// The pipeline's options are this tool's flags (--devices, --schedule, ...):
/// one struct, parsed here and handed to the pipeline as is.
static rp::TrainPipelineOptions &pipelineOptions() {
  static rp::TrainPipelineOptions options(rp::ToolFlags{true});
  return options;
}

static std::string formatBytes(int64_t bytes) {
  return rp::formatHostBytes(bytes);
}

/// The host side of every plan: its host memory by part (a quantized base,
/// rp-compile --quantize-base, shows here and in the uploads) and the
/// weight bytes it uploads per step.
static void printHostMemory(ModuleOp module, llvm::raw_ostream &os) {
  rp::HostMemory m =
      rp::hostMemoryOf(module, module.getOps<rp::ScheduleOp>().empty());
  char uploads[64];
  snprintf(uploads, sizeof(uploads), "%.3f MiB", m.uploads / double(1 << 20));
  os << "; host memory " << rp::describeHostMemory(m) << "; weight uploads "
     << uploads << " per step";
}

/// Where rp's partitioner took stages slower than its fastest for
/// smaller pinned buffers (--host-slack-pct without --host-budget-gib):
/// both, so that the trade is the summary's, not hidden in the stages.
static void printSlackHold(rp::PartitionAttr partition, llvm::raw_ostream &os) {
  std::vector<unsigned> fwd(partition.getForward().begin(),
                            partition.getForward().end());
  std::vector<unsigned> bwd(partition.getBackward().begin(),
                            partition.getBackward().end());
  std::vector<rp::SlackHold> holds = rp::slackHolds();
  for (auto it = holds.rbegin(); it != holds.rend(); ++it) {
    // #rp.partition's backward list starts with the tail.
    std::vector<unsigned> tailAndBwd{it->tail};
    tailAndBwd.insert(tailAndBwd.end(), it->bwd.begin(), it->bwd.end());
    if (it->fwd != fwd || tailAndBwd != bwd)
      continue;
    char text[320];
    snprintf(text, sizeof(text),
             "; stages held near the fastest: they stage %s in the pinned "
             "buffers for a step estimated %.3f ms, where the fastest "
             "stages found stage %s for %.3f ms (%.1f %% faster; "
             "--host-slack-pct %g takes stages up to that much slower that "
             "stage at least 1 GiB less, 0 the fastest)",
             formatBytes(it->stagedBytes).c_str(), it->ms,
             formatBytes(it->fastestStagedBytes).c_str(), it->fastestMs,
             (1 - it->fastestMs / it->ms) * 100,
             double(pipelineOptions().hostSlackPct));
    os << text;
    return;
  }
}

/// The one-paragraph summary on stderr: what the plan runs where, and
/// what the compiler predicts for it.
static void printSummary(ModuleOp module, size_t size) {
  // The graph's own compute type: --dtype converts f32 graphs only, so a
  // bf16 graph compiled with the default is still bf16.
  std::string dtypeName;
  module.walk([&](rp::LayerOp l) {
    for (Type t : l.getResultTypes())
      if (auto f = dyn_cast<FloatType>(getElementTypeOrSelf(t));
          f && dtypeName.empty()) {
        llvm::raw_string_ostream os(dtypeName);
        f.print(os);
      }
  });
  if (dtypeName.empty())
    dtypeName = "f32";
  // A sliced compile's slice functions (@main.slice<k>) repeat @main's
  // layers and choices: the summary counts the scheduled function's.
  auto schedules = module.getOps<rp::ScheduleOp>();
  Operation *scheduled = module;
  if (!schedules.empty())
    if (Operation *f = module.lookupSymbol((*schedules.begin()).getFunction()))
      scheduled = f;
  int layers = 0, backward = 0;
  scheduled->walk([&](rp::LayerOp l) {
    if (l.getRole() == rp::LayerRole::backward)
      ++backward;
    else
      layers += l.getSpan() ? (*l.getSpan())[1] - (*l.getSpan())[0] : 1;
  });
  auto &os = llvm::errs();
  os << "rp-compile: " << outputPath << ": ";
  if (schedules.empty()) {
    os << "forward plan, 1 device, " << layers << " layers run in order, "
       << dtypeName << " compute";
    printHostMemory(module, os);
    os << ", " << size << " bytes\n";
    return;
  }
  rp::ScheduleOp s = *schedules.begin();
  rp::PartitionAttr partition = s.getPartition();
  std::string fwd, bwd;
  for (int64_t n : partition.getForward())
    fwd += (fwd.empty() ? "" : ",") + std::to_string(n);
  for (int64_t n : partition.getBackward())
    bwd += (bwd.empty() ? "" : ",") + std::to_string(n);
  unsigned devices = partition.getDevices();
  unsigned microbatches = partition.getMicrobatches();
  os << "training plan, " << devices << " device" << (devices == 1 ? "" : "s")
     << ", " << rp::stringifyScheduleKind(partition.getSchedule())
     << " schedule, " << microbatches << " microbatch"
     << (microbatches == 1 ? "" : "es") << " per step";
  if (auto k = s->getAttrOfType<IntegerAttr>("rp.token_slices"))
    os << " in " << k.getInt() << " token slices each";
  os << "; " << layers << " layers in stages fwd:" << fwd << ";bwd:" << bwd
     << " (" << backward << " backward program" << (backward == 1 ? "" : "s")
     << ", ";
  if (partition.isMixed()) {
    // Which backward stages (1: the first after the tail) --recompute auto
    // put at layer grain.
    std::string which;
    for (auto [b, g] : llvm::enumerate(partition.getGrains()))
      if (g == rp::RecomputeGrain::layer)
        which += (which.empty() ? "" : ",") + std::to_string(b + 1);
    os << "mixed-grain recompute: layer grain in backward stage"
       << (which.find(',') == std::string::npos ? " " : "s ") << which << " of "
       << partition.getGrains().size() << ", stage grain elsewhere";
  } else {
    os << rp::stringifyRecomputeGrain(partition.getRecompute())
       << "-grain recompute";
  }
  os << ", " << dtypeName << " compute)";
  // Two tail jobs change how the tail's gradients are summed, which the
  // one-device reference must share to give the same bits.
  if (partition.getTailJobs() == 2) {
    // With token slices the microbatches it alternates are the slices.
    const char *what =
        s->hasAttr("rp.token_slices") ? "token slices" : "microbatches";
    os << "; the fused tail as 2 jobs on alternate " << what
       << " (its gradients the even " << what
       << "' sum plus the odd ones': compile a one-device reference with "
          "--tail-jobs 2)";
  }
  // --recompute auto's grain and why (rp-partition), and --fuse-loss=auto's
  // choice and why (rp-choose-loss-fusion).
  rp::RPDialect *dialect =
      module.getContext()->getLoadedDialect<rp::RPDialect>();
  for (auto func : module.getOps<func::FuncOp>())
    if (StringAttr choice =
            dialect->getRecomputeChoiceAttrHelper().getAttr(func);
        choice && func == scheduled)
      os << "; --recompute auto chose " << choice.getValue();
  for (auto func : module.getOps<func::FuncOp>())
    if (StringAttr choice = dialect->getLossFusionAttrHelper().getAttr(func);
        choice && func == scheduled)
      os << "; LM-head loss " << choice.getValue();
  if (FloatAttr ms = s.getStepMsAttr()) {
    // One figure: round-robin's is the steady state of a run whose steps
    // run back to back (the pipeline fills and drains once per run, not
    // once per step); a static schedule's is one step, fill and drain
    // included.
    double bubble =
        s.getBubbleAttr() ? s.getBubbleAttr().getValueAsDouble() : 0;
    bool steady = partition.getSchedule() == rp::ScheduleKind::roundRobin;
    char text[200];
    snprintf(
        text, sizeof(text), "; predicted step %.3f ms on %s%s, %.0f%% bubble",
        ms.getValueAsDouble(), partition.getHw().getProfile().str().c_str(),
        steady ? " in the steady state (steps back to back; fill and "
                 "drain once per run)"
               : "",
        100 * bubble);
    os << text;
    rp::printStepAssumptions(module, s, os);
  }
  if (std::optional<uint64_t> shift = s.getPassShift()) {
    // Each device's compute per step over a rotation (the passes after
    // which every job is back where it started): 1 is even.
    uint64_t g = devices, k = *shift % g;
    uint64_t rotation = k ? g / std::gcd(k, g) : 1;
    std::vector<double> busy(g, 0);
    for (auto c : s.getBody().front().getOps<rp::ComputeOp>())
      for (uint64_t p = 0; p < rotation; ++p)
        busy[(uint64_t(c.getDevice()) + p * k) % g] +=
            c.getMs().convertToDouble() / rotation;
    auto [lo, hi] = std::minmax_element(busy.begin(), busy.end());
    char text[160];
    snprintf(text, sizeof(text),
             "; devices shifted by %llu per pass, busiest over idlest device "
             "%.3f",
             (unsigned long long)k, *lo > 0 ? *hi / *lo : 0.0);
    os << text;
  }
  if (std::optional<ArrayRef<int64_t>> peaks = s.getPeakBytes()) {
    // What a run allocates: its copies of the arenas, each the largest
    // device's when the devices are renamed.
    uint64_t passes = s.getPassesInFlight().value_or(2);
    uint64_t copies = s.getArenaCopies().value_or(passes);
    unsigned shift = partition.getSchedule() == rp::ScheduleKind::roundRobin
                         ? unsigned(s.getPassShift().value_or(0) % devices)
                         : 0;
    std::vector<int64_t> run = rp::runPeakBytes(
        *peaks, unsigned(copies), rp::renamesDevices(shift, passes));
    os << "; peak device memory";
    for (auto [d, p] : llvm::enumerate(run))
      os << (d ? ", " : " ") << formatBytes(p);
    if (std::optional<uint64_t> budget = s.getBudgetBytes())
      os << " of " << formatBytes(*budget);
    if (passes >= 2 && copies >= 2) {
      os << " (2 passes in flight, a copy of the arenas each)";
    } else {
      std::vector<int64_t> two =
          rp::runPeakBytes(*peaks, 2, rp::renamesDevices(shift, 2));
      os << (passes >= 2 ? " (2 passes in flight sharing one copy of the "
                           "arenas: two copies would need "
                         : " (1 pass in flight: two copies would need ")
         << formatBytes(*std::max_element(two.begin(), two.end())) << ")";
    }
  }
  if (std::optional<uint64_t> pinned = s.getPinnedBytes()) {
    // rp-plan-memory's figure holds the weights' and gradients' pinned
    // copies beside the staging buffers; split it, since the host memory
    // that follows names only the buffers "pinned" and the two totals read
    // as one otherwise.
    os << "; pinned host memory " << formatBytes(*pinned);
    if (llvm::hasSingleElement(schedules)) {
      int64_t buffers = rp::hostMemoryOf(module).pinned;
      os << " (weight and gradient copies "
         << formatBytes(int64_t(*pinned) - buffers) << ", pinned buffers "
         << formatBytes(buffers) << ")";
    }
  }
  printHostMemory(module, os);
  printSlackHold(partition, os);
  os << rp::hostAdvice(module, pipelineOptions().hostBudgetGiB,
                       pipelineOptions().hostSlackPct);
  os << "; " << size << " bytes";
  // What choosing cost: rp's partitioner times candidates (each a schedule
  // laid out as a run), for every choice left automatic.
  if (rp::SearchStats search = rp::searchStats();
      search.searches || search.memoryLimits) {
    char text[200];
    snprintf(text, sizeof(text),
             "; the partition search timed %llu candidates in %.2f s (%u "
             "search%s",
             (unsigned long long)search.candidates, search.seconds,
             search.searches, search.searches == 1 ? "" : "es");
    os << text;
    if (search.reused)
      os << ", " << search.reused << " reused";
    if (search.floorStops)
      os << ", " << search.floorStops
         << " stopped at the host optimizer's floor";
    if (search.memoryLimits)
      os << ", " << search.memoryLimits
         << " answered by the memory objective at the memory limit";
    if (search.budgetStops)
      os << ", " << search.budgetStops << " stopped at their budget of "
         << rp::kSearchBudget << " candidates, the best found kept";
    os << ")";
  }
  if (rp::HoldStats hold = rp::holdStats(); hold.holds) {
    char text[224];
    snprintf(text, sizeof(text),
             "; held %s with %llu memory plans and %llu step-time "
             "estimates (%llu asked again, read back) in %.2f s",
             pipelineOptions().hostBudgetGiB > 0
                 ? "to the host budget"
                 : "near the fastest stages (--host-slack-pct)",
             (unsigned long long)hold.plans, (unsigned long long)hold.timed,
             (unsigned long long)hold.reused, hold.seconds);
    os << text;
  }
  os << "\n";
}

namespace {

/// The plan export as the pass manager's last step, so that the plan's
/// predicted times take the profiles the passes parsed (their CostModel
/// analysis, which lives only while the pass manager runs) instead of
/// parsing them again. Not a registered pass: it writes this tool's output.
struct ExportPlanStep
    : public PassWrapper<ExportPlanStep, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExportPlanStep)

  ExportPlanStep(rp::PlanExportOptions options, FailureOr<size_t> &size)
      : options(std::move(options)), size(size) {}

  void runOnOperation() override {
    size = rp::exportPlanToFile(getOperation(), options, outputPath,
                                getAnalysisManager());
    if (failed(size))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }

  rp::PlanExportOptions options;
  FailureOr<size_t> &size;
};

} // namespace

static std::string folderOf(StringRef path) {
  StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

/// Refuses a numeric flag whose text is not one plain decimal number
/// (CheckNumberFlags.cpp), before LLVM's parsers read it.
bool checkNumberFlags(int argc, char **argv);

int main(int argc, char **argv) {
  rp::installLastResort("rp-compile");
  // The partition search lays out thousands of runs, each a graph of
  // small vectors: keep the freed memory instead of returning it to the
  // system and faulting it in again (a tenth of Llama-3.1-8B's compile
  // was page faults and heap trimming).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  // --help lists rp's flags: LLVM's options are removed, MLIR's go behind
  // --help-hidden (together they were most of a 436-line --help).
  rp::dropForeignOptions({"o", "forward-only", "tf32", "print-ir-on-error"});
  rp::ImportCLOptions importOptions;
  rp::TrainPipelineOptions &pipeline = pipelineOptions();
  if (!checkNumberFlags(argc, argv))
    return 1;
  cl::ParseCommandLineOptions(argc, argv, "rp compiler: model to plan\n");
  // The pipeline's (rp's partitioner holds the pinned buffers to it); the
  // refusal and the stage-grain retry are this tool's (HostBudget.h).
  const double hostBudgetGiB = pipeline.hostBudgetGiB;
  unsigned devices = pipeline.devices, microbatches = pipeline.microbatches;

  // The documented caps (README.md), the profile's name and the LoRA and
  // budget ranges, checked before any work, as rp-opt's pipeline checks
  // them (TrainPipeline.cpp).
  if (failed(rp::checkTrainPipelineOptions(
          pipeline, /*asFlags=*/true, [](const Twine &message) {
            llvm::errs() << "rp-compile: " << message << "\n";
          })))
    return 1;
  // --host-budget-gib's range is checked here, the text as it is parsed
  // (StrictNumbers.h).
  if (!(hostBudgetGiB >= 0)) {
    llvm::errs() << "rp-compile: --host-budget-gib "
                 << llvm::format("%g", double(hostBudgetGiB))
                 << ": give 0 (no check) or a number of GiB > 0\n";
    return 1;
  }
  if (forwardOnly && (devices != 1 || microbatches > 1)) {
    llvm::errs() << "rp-compile: a --forward-only plan runs on one device "
                    "with one microbatch; drop --devices and --microbatches\n";
    return 1;
  }

  DialectRegistry registry;
  rp::registerAllDialects(registry);
  MLIRContext context(registry);
  // An error names the op's location and its numbers; the whole IR only
  // when asked (--print-ir-on-error, or MLIR's --mlir-print-op-on-diagnostic).
  auto &registered = cl::getRegisteredOptions();
  auto printOp = registered.find("mlir-print-op-on-diagnostic");
  context.printOpOnDiagnostic(
      printIrOnError ||
      (printOp != registered.end() && printOp->second->getNumOccurrences()));
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  if (std::string why = rp::checkRegularInput(inputPath, "the model");
      !why.empty()) {
    llvm::errs() << "rp-compile: " << why << "\n";
    return 1;
  }
  // Before any work: a FIFO or /dev/null is never replaced by the plan.
  if (std::string why = rp::checkOutputTarget(outputPath, "-o"); !why.empty()) {
    llvm::errs() << "rp-compile: " << why << "\n";
    return 1;
  }
  OwningOpRef<ModuleOp> module;
  std::string irDir = folderOf(inputPath);
  if (StringRef(inputPath).ends_with(".onnx")) {
    // The IR stays in memory: weights go beside the plan and are referenced
    // from the plan's folder.
    auto options = importOptions.get(inputPath, outputPath, &context);
    if (failed(options))
      return 1;
    module = rp::importONNXModel(inputPath, &context, *options);
    irDir = options->irDir;
    if (module && failed(rp::runPreparePipeline(*module, options->weightsPath,
                                                options->irDir)))
      module = nullptr;
  } else {
    std::string error;
    auto file = openInputFile(inputPath, &error);
    if (!file) {
      llvm::errs() << "rp-compile: " << error << "\n";
      return 1;
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    // Anything not named .onnx is read as MLIR, and an empty file parses as
    // an empty module: say so, not "no func.func @main to attach a loss".
    if (module && !module->lookupSymbol("main")) {
      llvm::errs() << "rp-compile: '" << inputPath
                   << "' holds no model (no func.func @main): a name not "
                      "ending in .onnx is read as MLIR (rp-import's output); "
                      "give the ONNX model its .onnx name\n";
      return 1;
    }
    // The plan reads the weights the params name: refuse files that are not
    // the ones the IR was written with (rp-verify-weights), such as the new
    // weights an interrupted rp-import left beside the previous IR.
    if (module && failed(rp::verifyWeightFingerprints(*module, irDir)))
      module = nullptr;
    // Already imported (rp-import, rp.trace) or written by hand: the same
    // cleanups, without a weights file to move constants to.
    if (module && failed(rp::runPreparePipeline(*module, "", irDir)))
      module = nullptr;
  }
  if (!module)
    return 1;

  // --quantize-base: the blobs go beside the plan (MODEL.quant.bin), the
  // params that read them relative to the IR's folder.
  const char *quantNames[] = {"none", "nf4", "int8"};
  const char *quantName =
      quantNames[static_cast<int>(pipeline.quantizeBase.getValue())];
  if (pipeline.quantizeBase != rp::QuantizeBase::none) {
    SmallString<256> file(outputPath);
    llvm::sys::path::replace_extension(file, "quant.bin");
    pipeline.quantizeFile = file.str().str();
    pipeline.quantizeIrDir = irDir;
  }

  rp::PlanExportOptions options;
  options.irDir = irDir;
  options.planDir = folderOf(outputPath);
  const char *dtypeNames[] = {"f32", "f16", "bf16"};
  options.producer =
      "rp-compile " + inputPath +
      (forwardOnly ? " --forward-only" : " --loss " + pipeline.loss) +
      " --dtype " + dtypeNames[static_cast<int>(pipeline.dtype.getValue())];
  if (pipeline.quantizeBase != rp::QuantizeBase::none)
    options.producer += std::string(" --quantize-base ") + quantName;
  options.tf32 = tf32;
  if (pipeline.loraRank > 0) {
    options.lora.rank = pipeline.loraRank;
    options.lora.alpha = pipeline.loraAlpha;
    options.lora.targets = pipeline.loraTargets;
    options.lora.modulesToSave = pipeline.loraModulesToSave;
    // A forward plan has no dropout (eval mode), but the adapters' settings
    // are the same as the training plan's.
    options.lora.dropout = pipeline.loraDropout;
  }
  if (tf32)
    options.producer += " --tf32";
  if (!forwardOnly)
    options.producer += " --devices " + std::to_string(devices) +
                        " --schedule " +
                        rp::stringifyScheduleKind(pipeline.schedule).str() +
                        " --hw " + pipeline.hw;
  // --host-budget-gib with --recompute auto: a layer-grain plan over the
  // budget is compiled again at stage grain, from a copy of the module as
  // it was before the pipeline (HostBudget.h).
  rp::HostBudgetRequest budget;
  budget.gib = hostBudgetGiB;
  budget.quantized = pipeline.quantizeBase != rp::QuantizeBase::none;
  budget.lora = pipeline.loraRank > 0;
  budget.mayRetryAtStageGrain =
      hostBudgetGiB > 0 && !forwardOnly &&
      pipeline.recompute == rp::RecomputeGrain::automatic &&
      pipeline.recomputeStages.empty();
  // And with two passes in flight over it where one fits: compiled again
  // with one, unless the user gave the passes (HostBudget.h).
  budget.mayRetryWithOnePass =
      hostBudgetGiB > 0 && !forwardOnly && pipeline.passesInFlight == 0;
  OwningOpRef<ModuleOp> spare;
  if (budget.mayRetryAtStageGrain || budget.mayRetryWithOnePass)
    spare = module->clone();
  // --passes-in-flight reaches the host budget's hold through
  // rp-train-pipeline, which records it on the module before partitioning
  // (as rp-opt's does).
  FailureOr<size_t> size = failure();
  auto compile = [&](ModuleOp target, rp::HostBudgetOutcome &outcome) {
    PassManager pm(&context);
    if (forwardOnly)
      rp::buildForwardPipeline(pm, pipeline);
    else
      rp::buildTrainPipeline(pm, pipeline);
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (hostBudgetGiB > 0)
      pm.addPass(rp::createHostBudgetStep(budget, outcome));
    pm.addPass(std::make_unique<ExportPlanStep>(options, size));
    return succeeded(pm.run(target)) && succeeded(size);
  };
  // At most two compiles again, each from the module as it was: at stage
  // grain, then with one pass in flight.
  rp::HostBudgetOutcome outcome;
  bool compiled = compile(*module, outcome);
  while (!compiled && (outcome.retryAtStageGrain || outcome.retryWithOnePass)) {
    if (outcome.retryAtStageGrain) {
      pipeline.recompute = rp::RecomputeGrain::stage;
      budget.mayRetryAtStageGrain = false;
      budget.layerGrainBytes = outcome.layerGrainBytes;
    } else {
      pipeline.passesInFlight = 1;
      budget.mayRetryWithOnePass = false;
      budget.twoPassBytes = outcome.twoPassBytes;
      budget.twoPassStepMs = outcome.twoPassStepMs;
    }
    module = OwningOpRef<ModuleOp>(spare->clone());
    outcome = rp::HostBudgetOutcome();
    compiled = compile(*module, outcome);
  }
  if (!compiled) {
    // Forced stage grain has no layer-grain fallback for the stages that
    // do not fit the devices (rp-choose-recompute's, under auto).
    if (budget.layerGrainBytes > 0 && !outcome.checked)
      llvm::errs() << "rp-compile: --host-budget-gib "
                   << llvm::format("%g", double(hostBudgetGiB))
                   << ": the layer-grain plan --recompute auto chose needs "
                   << formatBytes(budget.layerGrainBytes)
                   << " of host memory, and at stage grain the plan did "
                      "not compile (above)\n";
    return 1;
  }
  printSummary(*module, *size);
  if (tf32)
    llvm::errs() << "f32 GEMMs on cuda in TF32 (--tf32: their inputs rounded "
                    "to TF32 on the tensor cores; bf16 and f16 GEMMs as "
                    "before)\n";
  // RP_STEADY_MEMO_CHECK=1: every whole-run timing read back was timed
  // again (rp/Analysis/SteadyState.h); a difference fails the compile.
  if (rp::WholeRunStats runs = rp::wholeRunStats(); runs.checking) {
    llvm::errs() << "rp-compile: whole-run timing memo check: " << runs.checked
                 << " read back and timed again, " << runs.differ
                 << " differ\n";
    if (runs.differ)
      return 1;
  }
  return 0;
}
