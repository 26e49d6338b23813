//===- AtomicWrite.h - durable, atomic output files of the tools -*- C++
//-*-===//
//
// rp-compile's plan and weights and rp-import's IR are written the way the
// runtime writes checkpoints (runtime/include/rp/runtime/FileIO.h): into a
// fresh temporary file beside the target, every write checked (a full disk
// is an error, never a truncated file), fsynced, renamed into place, and the
// folder fsynced. At every instant the path holds the previous file or the
// new one, whole. llvm::writeToOutput does not check the stream's error
// before it renames, so a full disk would put a truncated file in place.
// The rules on names are the contract's (rp/contract/Files.h), the same as
// the runtime's: a fresh temporary (mkstemp), and a target that exists and
// is not a regular file (a FIFO, /dev/null, a folder, a link) is refused.
//
//===----------------------------------------------------------------------===//

#ifndef RP_SUPPORT_ATOMICWRITE_H
#define RP_SUPPORT_ATOMICWRITE_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Errc.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

namespace mlir::rp {

/// Fsyncs the descriptor `fd`, or the folder `path` when `fd` is negative.
/// A file system that cannot sync a folder (EINVAL) is not an error.
inline std::error_code syncFileOrFolder(int fd, llvm::StringRef path = "") {
  int own = -1;
  if (fd < 0) {
    own = ::open(path.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (own < 0)
      return std::error_code(errno, std::generic_category());
    fd = own;
  }
  int result = ::fsync(fd);
  int error = errno;
  if (own >= 0)
    ::close(own);
  if (result != 0 && !(own >= 0 && error == EINVAL))
    return std::error_code(error, std::generic_category());
  return {};
}

/// RP_FAULT_INJECT, for tests only (the runtime's FileIO.h has the same
/// switch for checkpoints): here it counts the renames that put the tools'
/// outputs in place. fail:N makes the N-th fail as a full disk would;
/// kill:N kills the process with SIGKILL just before it, so kill:2 stops
/// rp-compile between its weights and its plan.
inline std::error_code injectedRenameFault(llvm::StringRef path) {
  static const std::pair<bool, long> spec = [] {
    const char *text = std::getenv("RP_FAULT_INJECT");
    llvm::StringRef s = text ? text : "";
    bool kill = s.consume_front("kill:");
    long n = 0;
    if ((kill || s.consume_front("fail:")) && s.getAsInteger(10, n))
      n = 0;
    return std::make_pair(kill, n);
  }();
  static std::atomic<long> renames{0};
  if (spec.second <= 0 || ++renames != spec.second)
    return {};
  if (spec.first) {
    llvm::errs() << "rp: RP_FAULT_INJECT: killed before rename '" << path
                 << "'\n";
    llvm::errs().flush();
    ::kill(::getpid(), SIGKILL);
  }
  return std::make_error_code(std::errc::no_space_on_device);
}

// The contract's rules (rp/contract/Files.h), wrapped in ToolFiles.cpp so
// that this header does not declare the contract's namespace `::rp`, which
// would make `rp::` ambiguous in the tools' `using namespace mlir` files.

/// Why `path` cannot be an output of a tool (files::checkOutputTarget),
/// or "" when it can; `what` names it ("-o").
std::string checkOutputTarget(llvm::StringRef path,
                              llvm::StringRef what = "output");
/// Whether `path` is the null device, where an output is discarded.
bool isNullDevice(llvm::StringRef path);
/// A fresh temporary file beside `path` (files::createTempBeside).
llvm::Error createTempBeside(llvm::StringRef path, int &fd,
                             llvm::SmallVectorImpl<char> &tempPath);
/// Renames `tempPath` to `path` after checking `path` again
/// (files::renameIntoPlace).
llvm::Error renameIntoPlace(llvm::StringRef tempPath, llvm::StringRef path);

/// Finishes a temporary file: flushes `os` and checks every write, fsyncs
/// and closes `fd`, renames `tempPath` to `path` and fsyncs the folder. On
/// failure the temporary file is removed and the previous `path` is left.
inline llvm::Error commitTempFile(llvm::raw_fd_ostream &os, int fd,
                                  llvm::StringRef tempPath,
                                  llvm::StringRef path) {
  os.flush();
  std::error_code ec = os.error();
  os.clear_error();
  if (!ec)
    ec = syncFileOrFolder(fd);
  if (::close(fd) != 0 && !ec)
    ec = std::error_code(errno, std::generic_category());
  if (!ec)
    ec = injectedRenameFault(path);
  if (ec) {
    llvm::sys::fs::remove(tempPath);
    return llvm::createStringError(ec, "cannot write '%s': %s",
                                   path.str().c_str(), ec.message().c_str());
  }
  if (llvm::Error err = renameIntoPlace(tempPath, path)) {
    llvm::sys::fs::remove(tempPath);
    return err;
  }
  llvm::SmallString<256> folder(path);
  llvm::sys::path::remove_filename(folder);
  if (folder.empty())
    folder = ".";
  if (std::error_code sync = syncFileOrFolder(-1, folder))
    return llvm::createStringError(sync, "cannot sync the folder of '%s': %s",
                                   path.str().c_str(), sync.message().c_str());
  return llvm::Error::success();
}

/// Writes `path` atomically and durably with `write` (see the file
/// comment); "-" writes to stdout.
inline llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<void(llvm::raw_ostream &)> write) {
  if (path == "-") {
    write(llvm::outs());
    llvm::outs().flush();
    return llvm::Error::success();
  }
  if (std::string refused = checkOutputTarget(path); !refused.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), refused);
  if (isNullDevice(path))
    return llvm::Error::success(); // discarded, never replaced
  int fd = -1;
  llvm::SmallString<256> tempPath;
  if (llvm::Error err = createTempBeside(path, fd, tempPath))
    return err;
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/false);
  write(os);
  return commitTempFile(os, fd, tempPath, path);
}

} // namespace mlir::rp

#endif // RP_SUPPORT_ATOMICWRITE_H
