//===- rp-compile.cpp - model to plan in one command ----------------------===//
//
// rp-compile MODEL.onnx|MODEL.mlir -o MODEL.rpplan --forward-only
//
// Imports an ONNX model (or reads rp IR), runs the passes that prepare the
// graph, and writes the plan. Inline weights of an ONNX model are written
// beside the plan (MODEL.weights.bin) and referenced relative to it.
// stdout carries nothing; stderr a one-paragraph summary and diagnostics.
// Exit codes: 0 ok, 1 bad input.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
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
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

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
    "microbatches", cl::init(1),
    cl::desc("microbatches per training step (the static batch is one)"));
static cl::opt<rp::ComputeType> dtype(
    "dtype", cl::desc("storage and compute type (master weights stay f32)"),
    cl::init(rp::ComputeType::f32),
    cl::values(clEnumValN(rp::ComputeType::f32, "f32", "float32"),
               clEnumValN(rp::ComputeType::bf16, "bf16", "bfloat16"),
               clEnumValN(rp::ComputeType::f16, "f16", "IEEE half")));
static cl::opt<unsigned> devices("devices", cl::init(1),
                                 cl::desc("number of devices (1 for now)"));

static std::string folderOf(StringRef path) {
  StringRef dir = llvm::sys::path::parent_path(path);
  return dir.empty() ? "." : dir.str();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  rp::ImportCLOptions importOptions;
  cl::ParseCommandLineOptions(argc, argv, "rp compiler: model to plan\n");

  if (microbatches == 0 || (forwardOnly && microbatches != 1)) {
    llvm::errs() << "rp-compile: --microbatches must be at least 1 (and 1 "
                    "for a --forward-only plan)\n";
    return 1;
  }
  if (devices != 1) {
    llvm::errs() << "rp-compile: --devices " << devices
                 << " is not available yet; plans run on one device\n";
    return 1;
  }

  DialectRegistry registry;
  rp::registerAllDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

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
    if (!forwardOnly) {
      rp::AttachLossPassOptions attach;
      attach.loss = loss;
      pm.addPass(rp::createAttachLossPass(attach));
    }
    // After the loss, so that the loss sees the model's own outputs; before
    // autodiff, so that the backward runs in the compute type too.
    if (dtype != rp::ComputeType::f32) {
      rp::ConvertFloatTypePassOptions convert;
      convert.to = dtype;
      pm.addPass(rp::createConvertFloatTypePass(convert));
    }
    if (!forwardOnly) {
      rp::AutodiffPassOptions autodiff;
      autodiff.recompute = recompute;
      pm.addPass(rp::createAutodiffPass(autodiff));
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
  options.microbatches = microbatches;
  FailureOr<size_t> size = rp::exportPlanToFile(*module, options, outputPath);
  if (failed(size))
    return 1;
  int layers = 0;
  module->walk([&](rp::LayerOp) { ++layers; });
  llvm::errs() << "rp-compile: " << outputPath << ": "
               << (forwardOnly ? "forward" : "training") << " plan, 1 device, "
               << layers << " layers run in order, "
               << dtypeNames[static_cast<int>(dtype.getValue())]
               << " compute, " << *size << " bytes\n";
  return 0;
}
