//===- ToolOptions.cpp - the compiler tools' command lines hold rp's flags
//-===//
//
// The MLIR libraries bring LLVM's own command-line options with them (code
// generation, Polly, the vectorisers: about 300 in rp-import). rp never
// reads them, --help drowned rp's flags in them, and some of their parsers
// end in a fatal error on a bad value (`--sve-tail-folding=a,b` was an
// internal error, exit 2). They are removed before parsing, so such a flag
// is cl's "Unknown command line argument" (exit 1); MLIR's own flags
// (mlir-*: printing, timing, diagnostics) stay, behind --help-hidden.
//
//===----------------------------------------------------------------------===//

#include "rp/Support/ToolGuards.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"

namespace cl = llvm::cl;

void mlir::rp::dropForeignOptions(llvm::ArrayRef<llvm::StringRef> own) {
  // cl's own flags: --help and its forms, --version, --color.
  static const llvm::StringRef kept[] = {
      "help",    "help-hidden", "help-list",     "help-list-hidden",
      "version", "color",       "print-options", "print-all-options"};
  auto keep = [&](llvm::StringRef name) {
    return llvm::is_contained(own, name) || llvm::is_contained(kept, name);
  };
  llvm::SmallVector<cl::Option *> drop;
  for (auto &entry : cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.first;
    if (keep(name))
      continue;
    if (name.starts_with("mlir-")) {
      if (entry.second->getOptionHiddenFlag() == cl::NotHidden)
        entry.second->setHiddenFlag(cl::Hidden);
      continue;
    }
    // An option can be registered under several names; remove it once.
    if (!llvm::is_contained(drop, entry.second))
      drop.push_back(entry.second);
  }
  for (cl::Option *option : drop)
    option->removeArgument();
}
