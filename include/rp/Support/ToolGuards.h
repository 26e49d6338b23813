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

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ErrorHandling.h"

#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <exception>
#include <string>
#include <sys/stat.h>
#include <typeinfo>

namespace mlir::rp {

/// Why `path` cannot be read as `what` ("the ONNX model"), or "" when it
/// names a regular file. A missing file is left to the reader's own
/// message; "-" is stdin.
inline std::string checkRegularInput(llvm::StringRef path,
                                     llvm::StringRef what) {
  struct stat st;
  if (path == "-" || ::stat(path.str().c_str(), &st) != 0 ||
      S_ISREG(st.st_mode))
    return "";
  const char *kind = S_ISDIR(st.st_mode)    ? "a folder"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
                         ? "a device"
                         : "not a regular file";
  return what.str() + " '" + path.str() + "' is " + kind +
         ", not a regular file; give the path of a file";
}

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
    detail::internalError(
        (std::string("uncaught exception ") + (type ? type->name() : "?"))
            .c_str());
  });
  llvm::install_fatal_error_handler(
      [](void *, const char *reason, bool) { detail::internalError(reason); },
      nullptr);
}

} // namespace mlir::rp

#endif // RP_SUPPORT_TOOLGUARDS_H
