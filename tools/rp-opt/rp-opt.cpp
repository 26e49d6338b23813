//===- rp-opt.cpp - rp optimizer driver -----------------------------------===//
//
// Parses rp modules, runs rp passes and pipelines, prints the result.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "rp/InitAllDialects.h"
#include "rp/InitAllPasses.h"

int main(int argc, char **argv) {
  mlir::rp::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::rp::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "rp optimizer driver\n", registry));
}
