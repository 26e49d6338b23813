//===- rp-compile.cpp - model to plan in one command ----------------------===//
//
// rp-compile MODEL.onnx|MODEL.mlir -o MODEL.rpplan [--forward-only]
//
// Imports an ONNX model (or reads rp IR), runs the passes that prepare the
// graph and (for training) rp-train-pipeline: partition, schedule,
// transfers, memory plan, verification, autodiff; then writes the plan. Inline weights of an ONNX model are written
// beside the plan (MODEL.weights.bin) and referenced relative to it.
// stdout carries nothing; stderr a one-paragraph summary and diagnostics.
// Exit codes: 0 ok, 1 bad input.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/Support/ToolGuards.h"
#include "rp/Target/PlanExport.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx|model.mlir>"));
static cl::opt<std::string> outputPath("o", cl::Required,
                                       cl::desc("the .rpplan to write"),
                                       cl::value_desc("file"));
static cl::opt<bool> forwardOnly(
    "forward-only", cl::desc("compile an inference plan (forward only)"));
static cl::opt<std::string> loss(
    "loss", cl::init("cross-entropy"),
    cl::desc("training loss: cross-entropy, or output:NAME"));
static cl::opt<int64_t> loraRank(
    "lora-rank", cl::init(0),
    cl::desc("add LoRA adapters of this rank and freeze the rest (0: off)"));
static cl::opt<double> loraAlpha("lora-alpha", cl::init(16.0),
                                 cl::desc("LoRA scaling numerator"));
static cl::opt<std::string> loraTargets(
    "lora-targets", cl::init(""),
    cl::desc("regular expression on weight names (default: every linear "
             "layer), e.g. q_proj|v_proj"));
static cl::opt<rp::RecomputeGrain> recompute(
    "recompute", cl::init(rp::RecomputeGrain::stage),
    cl::desc("what a backward recomputes from its saved input"),
    cl::values(clEnumValN(rp::RecomputeGrain::stage, "stage",
                          "every layer before the tail as one group"),
               clEnumValN(rp::RecomputeGrain::layer, "layer",
                          "each layer alone")));
static cl::opt<unsigned> microbatches(
    "microbatches", cl::init(0),
    cl::desc("microbatches per training step (the static batch is one); 0: "
             "1 on one device, else devices + 1"));
static cl::opt<rp::ComputeType> dtype(
    "dtype", cl::desc("storage and compute type (master weights stay f32)"),
    cl::init(rp::ComputeType::f32),
    cl::values(clEnumValN(rp::ComputeType::f32, "f32", "float32"),
               clEnumValN(rp::ComputeType::bf16, "bf16", "bfloat16"),
               clEnumValN(rp::ComputeType::f16, "f16", "IEEE half")));
static cl::opt<unsigned> devices("devices", cl::init(1),
                                 cl::desc("devices the plan runs on"));
static cl::opt<std::string>
    hw("hw", cl::init("host"),
       cl::desc("hardware profile: rtx4090, rtx3090, a800, h100, host, or a "
                "JSON file (docs/hardware-profiles.md)"));
static cl::opt<std::string> schedule(
    "schedule", cl::init("round-robin"),
    cl::desc("round-robin, gpipe, 1f1b, interleaved-1f1b or looped-bfs"));
static cl::opt<std::string>
    partitioner("partitioner", cl::init("rp"),
                cl::desc("rp (least estimated step time) or roundpipe"));
static cl::opt<std::string> dispatch(
    "dispatch", cl::init("modulo"),
    cl::desc("round-robin: how the jobs move from pass to pass, modulo (the "
             "job counter carries on) or rounds (the pass shift the timing "
             "model finds fastest; docs/pipeline.md)"));
static cl::opt<int> passShift(
    "pass-shift", cl::init(-1),
    cl::desc("round-robin: move the jobs by this many devices per pass "
             "instead (to compare; -1: --dispatch decides)"));
static cl::opt<std::string>
    stages("stages", cl::init(""),
           cl::desc("a partition of your own: fwd:A,B,...;bwd:X,Y,... "
                    "(layers per stage; bwd starts with the tail)"));
static cl::opt<std::string>
    measured("measured", cl::init(""),
             cl::desc("per-layer times measured by rp-run --profile, which "
                      "override the cost model"));
static cl::opt<bool> reportMaxSeq(
    "report-max-seq",
    cl::desc("also report the largest sequence length whose plan fits the "
             "devices (a remark on stderr)"));
static cl::opt<double>
    budgetGiB("budget-gib", cl::init(0),
              cl::desc("device memory to plan against in GiB (0: the "
                       "profile's)"));

static std::string formatBytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t(1) << 30))
    snprintf(text, sizeof(text), "%.2f GiB", bytes / double(1 << 30));
  else if (bytes >= (1 << 20))
    snprintf(text, sizeof(text), "%.2f MiB", bytes / double(1 << 20));
  else
    snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  return text;
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
  int layers = 0, backward = 0;
  module.walk([&](rp::LayerOp l) {
    if (l.getRole() == rp::LayerRole::backward)
      ++backward;
    else
      layers += l.getSpan() ? (*l.getSpan())[1] - (*l.getSpan())[0] : 1;
  });
  auto &os = llvm::errs();
  os << "rp-compile: " << outputPath << ": ";
  auto schedules = module.getOps<rp::ScheduleOp>();
  if (schedules.empty()) {
    os << "forward plan, 1 device, " << layers << " layers run in order, "
       << dtypeName << " compute, " << size << " bytes\n";
    return;
  }
  rp::ScheduleOp s = *schedules.begin();
  auto main = module.lookupSymbol<func::FuncOp>(s.getFunction());
  auto partition = main->getAttrOfType<rp::PartitionAttr>("rp.partition");
  std::string fwd, bwd;
  for (int64_t n : partition.getForward())
    fwd += (fwd.empty() ? "" : ",") + std::to_string(n);
  for (int64_t n : partition.getBackward())
    bwd += (bwd.empty() ? "" : ",") + std::to_string(n);
  os << "training plan, " << s.getDevices() << " device"
     << (s.getDevices() == 1 ? "" : "s") << ", " << s.getKind()
     << " schedule, " << s.getMicrobatches() << " microbatch"
     << (s.getMicrobatches() == 1 ? "" : "es") << " per step; " << layers
     << " layers in stages fwd:" << fwd << ";bwd:" << bwd << " (" << backward
     << " backward program" << (backward == 1 ? "" : "s") << ", "
     << (recompute == rp::RecomputeGrain::stage ? "stage" : "layer")
     << "-grain recompute, " << dtypeName << " compute)";
  if (FloatAttr ms = s.getStepMsAttr()) {
    // One figure: round-robin's is the steady state of a run whose steps
    // run back to back (the pipeline fills and drains once per run, not
    // once per step); a static schedule's is one step, fill and drain
    // included.
    double bubble = s.getBubbleAttr() ? s.getBubbleAttr().getValueAsDouble() : 0;
    bool steady = s.getKind() == "round-robin";
    char text[200];
    snprintf(text, sizeof(text),
             "; predicted step %.3f ms on %s%s, %.0f%% bubble",
             ms.getValueAsDouble(), s.getHw().str().c_str(),
             steady ? " in the steady state (steps back to back; fill and "
                      "drain once per run)"
                    : "",
             100 * bubble);
    os << text;
  }
  if (std::optional<uint64_t> shift = s.getPassShift()) {
    // Each device's compute per step over a rotation (the passes after
    // which every job is back where it started): 1 is even.
    uint64_t g = s.getDevices(), k = *shift % g;
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
    os << "; peak device memory";
    for (auto [d, p] : llvm::enumerate(*peaks))
      os << (d ? ", " : " ") << formatBytes(p);
    if (std::optional<uint64_t> budget = s.getBudgetBytes())
      os << " of " << formatBytes(*budget);
  }
  if (std::optional<uint64_t> pinned = s.getPinnedBytes())
    os << "; pinned host memory " << formatBytes(*pinned);
  os << "; " << size << " bytes\n";
}

static std::string folderOf(StringRef path) {
  StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

/// The most devices and microbatches a plan may have (rp-run --devices
/// takes the same range). Compile time and memory grow with devices times
/// microbatches: 256 devices or 1024 microbatches of a 4-layer model compile
/// in seconds, 4096 devices took 75 s and 2.4 GB.
constexpr unsigned kMaxDevices = 256;
constexpr unsigned kMaxMicrobatches = 1024;

int main(int argc, char **argv) {
  rp::installLastResort("rp-compile");
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  rp::ImportCLOptions importOptions;
  cl::ParseCommandLineOptions(argc, argv, "rp compiler: model to plan\n");

  // A documented cap (README.md), checked before any work: the partitioner
  // and scheduler grow with the device count, and rp-run runs at most as
  // many devices.
  if (devices == 0 || devices > kMaxDevices) {
    llvm::errs() << "rp-compile: --devices " << devices << ": give 1 to "
                 << kMaxDevices << " devices\n";
    return 1;
  }
  if (microbatches > kMaxMicrobatches) {
    llvm::errs() << "rp-compile: --microbatches " << microbatches
                 << ": give 0 (the default) to " << kMaxMicrobatches << "\n";
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
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  if (std::string why = rp::checkRegularInput(inputPath, "the model");
      !why.empty()) {
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
    module = rp::importAndPrepare(inputPath, &context, *options);
    irDir = options->irDir;
  } else {
    std::string error;
    auto file = openInputFile(inputPath, &error);
    if (!file) {
      llvm::errs() << "rp-compile: " << error << "\n";
      return 1;
    }
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (module) {
      PassManager pm(&context);
      pm.addPass(createCanonicalizerPass());
      pm.addPass(rp::createGroupLayersPass());
      pm.addPass(rp::createVerifyGraphPass());
      if (failed(pm.run(*module)))
        module = nullptr;
    }
  }
  if (module) {
    PassManager pm(&context);
    if (loraRank > 0) {
      rp::AddLoraPassOptions lora;
      lora.rank = loraRank;
      lora.alpha = loraAlpha;
      lora.targets = loraTargets;
      pm.addPass(rp::createAddLoraPass(lora));
    }
    auto convert = [&](OpPassManager &p) {
      // After the loss, so that the loss sees the model's own outputs;
      // before partitioning and autodiff, so that stages are cut by the
      // compute type's sizes and the backward runs in it too.
      if (dtype != rp::ComputeType::f32) {
        rp::ConvertFloatTypePassOptions to;
        to.to = dtype;
        p.addPass(rp::createConvertFloatTypePass(to));
      }
    };
    if (forwardOnly) {
      convert(pm);
    } else {
      rp::TrainPipelineOptions train;
      train.loss = loss;
      train.devices = devices;
      train.microbatches = microbatches;
      train.hw = hw;
      train.schedule = schedule;
      train.partitioner = partitioner;
      train.stages = stages;
      train.dispatch = dispatch;
      train.passShift = passShift;
      train.measured = measured;
      train.recompute = recompute;
      train.budgetGiB = budgetGiB;
      train.reportMaxSeq = reportMaxSeq;
      rp::buildTrainPipeline(pm, train, convert);
    }
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(*module)))
      module = nullptr;
  }
  if (!module || failed(verify(*module)))
    return 1;

  rp::PlanExportOptions options;
  options.irDir = irDir;
  options.planDir = folderOf(outputPath);
  const char *dtypeNames[] = {"f32", "f16", "bf16"};
  options.producer = "rp-compile " + inputPath +
                     (forwardOnly ? " --forward-only" : " --loss " + loss) +
                     " --dtype " + dtypeNames[static_cast<int>(dtype.getValue())];
  if (!forwardOnly)
    options.producer += " --devices " + std::to_string(devices) +
                        " --schedule " + schedule + " --hw " + hw;
  FailureOr<size_t> size = rp::exportPlanToFile(*module, options, outputPath);
  if (failed(size))
    return 1;
  printSummary(*module, *size);
  return 0;
}
