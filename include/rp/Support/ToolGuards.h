//===- ToolGuards.h - what every rp compiler tool checks first --*- C++ -*-===//
//
// The runtime's reader discipline (runtime/include/rp/runtime/FileIO.h) for
// the compiler tools: an input path must name a regular file (a FIFO
// without a writer would block the open forever, a folder or /dev/zero
// would fail deep inside a parser), and nothing unexpected ends in an abort:
// an escaping exception or an LLVM fatal error is DESIGN.md's internal
// error, a message and exit code 2.
//
//===----------------------------------------------------------------------===//

#ifndef RP_SUPPORT_TOOLGUARDS_H
#define RP_SUPPORT_TOOLGUARDS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ErrorHandling.h"

#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <exception>
#include <new>
#include <string>
#include <typeinfo>

namespace mlir::rp {

/// The largest input of each kind (rp/contract/Files.h's caps, which
/// ToolFiles.cpp checks these against): protobuf refuses an ONNX model over
/// 2 GiB; MLIR text keeps dense constants in weight files.
inline constexpr uint64_t kMaxOnnxInputBytes = uint64_t(2) << 30;
inline constexpr uint64_t kMaxIrInputBytes = uint64_t(4) << 30;

/// Why `path` cannot be read as `what` ("the ONNX model"), or "" when it
/// names a regular file of at most `maxBytes` (files::checkInput, the
/// runtime's rules). A missing file is left to the reader's own message;
/// "-" is stdin.
std::string checkRegularInput(llvm::StringRef path, llvm::StringRef what,
                              uint64_t maxBytes = kMaxIrInputBytes);

/// Removes every registered command-line option but the tool's `own`, cl's
/// (--help, --version, --color) and MLIR's mlir-* (hidden from --help):
/// LLVM's code-generation flags are not rp's, and some of them end in a
/// fatal error on a bad value (ToolOptions.cpp). Call before the tool
/// constructs options of its own that are not in `own`, and before parsing.
void dropForeignOptions(llvm::ArrayRef<llvm::StringRef> own);

namespace detail {
inline const char *&guardedTool() {
  static const char *tool = "rp";
  return tool;
}
[[noreturn]] inline void internalError(const char *what) {
  std::fprintf(stderr,
               "%s: internal error: %s (a bug in rp; please report it with "
               "the command that ran)\n",
               guardedTool(), what);
  std::_Exit(2);
}
/// An allocation failed: the input asked for more memory than the machine
/// has, a user error (exit 1), not a bug. Only async-signal-safe calls.
[[noreturn]] inline void outOfMemory() {
  std::fprintf(stderr,
               "%s: error: out of memory: the input needs more memory than "
               "this machine has (a shape or a constant too large?)\n",
               guardedTool());
  std::_Exit(1);
}
} // namespace detail

/// Makes an exception escaping `tool` (libstdc++ throws even where LLVM
/// code is built without exceptions) or an LLVM fatal error exit 2 with a
/// message instead of aborting.
inline void installLastResort(const char *tool) {
  detail::guardedTool() = tool;
  // The tools are built without exceptions (no catch), so the handler
  // names the exception's type only.
  std::set_terminate([] {
    const std::type_info *type = abi::__cxa_current_exception_type();
    if (type && *type == typeid(std::bad_alloc))
      detail::outOfMemory();
    detail::internalError(
        (std::string("uncaught exception ") + (type ? type->name() : "?"))
            .c_str());
  });
  llvm::install_fatal_error_handler(
      [](void *, const char *reason, bool) { detail::internalError(reason); },
      nullptr);
  // LLVM's allocation failures bypass the fatal error handler (and abort).
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *, bool) { detail::outOfMemory(); }, nullptr);
}

} // namespace mlir::rp

#endif // RP_SUPPORT_TOOLGUARDS_H
