//===- ONNXFuzzer.cpp - libFuzzer target of the ONNX importer -------------===//
//
// Imports the input as an ONNX model (through a file, as rp-import does) and
// prepares it as rp-compile does (import, then rp-prepare: layer grouping,
// graph verification). A refusal, reported through the context's
// diagnostics, is fine; a crash, an LLVM fatal error or an abort is a
// finding, and so is a module that imports but fails the verifier (a silent
// wrong answer downstream). Built by scripts/fuzz.sh with clang-14 against
// the main build's libraries.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/Import/ONNX/Importer.h"
#include "rp/InitAllDialects.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;

/// Where the target writes its files: $RP_FUZZ_TMP (scripts/fuzz.sh gives
/// each run its own and removes it after), else /tmp.
static std::string fuzzFolderRoot() {
  const char *root = std::getenv("RP_FUZZ_TMP");
  return root && *root ? root : "/tmp";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string dir =
      fuzzFolderRoot() + "/rp-fuzz-onnx-" + std::to_string(::getpid());
  static const int made = ::mkdir(dir.c_str(), 0755);
  (void)made;
  std::string path = dir + "/model.onnx";
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size)
    std::abort();
  std::fclose(f);

  DialectRegistry registry;
  rp::registerAllDialects(registry);
  MLIRContext context(registry);
  // Refusals are diagnostics; they are the expected outcome of most inputs.
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  rp::ONNXImportOptions options;
  options.weightsPath = dir + "/model.weights.bin";
  options.irDir = dir;
  OwningOpRef<ModuleOp> module = rp::importONNXModel(path, &context, options);
  if (module && failed(rp::runPreparePipeline(*module, options.weightsPath,
                                              options.irDir)))
    module = nullptr;
  if (module && failed(verify(*module))) {
    std::fprintf(stderr, "rp fuzz finding: an imported module fails the "
                         "verifier\n");
    std::abort();
  }
  return 0;
}
