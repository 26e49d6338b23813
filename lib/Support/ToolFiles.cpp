//===- ToolFiles.cpp - the compiler tools' side of the file rules ---------===//
//
// The contract's file-access rules (rp/contract/Files.h), the same the
// runtime follows, behind the LLVM-typed functions AtomicWrite.h and
// ToolGuards.h declare: this file is the only one of the compiler that
// includes Files.h, so the contract's `::rp` namespace never meets the
// tools' `using namespace mlir` and its `rp::`.
//
//===----------------------------------------------------------------------===//

#include "rp/Support/AtomicWrite.h"
#include "rp/Support/ToolGuards.h"
#include "rp/contract/Files.h"

#include <cerrno>

namespace files = ::rp::files;

static_assert(mlir::rp::kMaxOnnxInputBytes == files::kMaxOnnxBytes);
static_assert(mlir::rp::kMaxIrInputBytes == files::kMaxIrBytes);

static llvm::Error toError(const files::FileError &e) {
  return llvm::createStringError(
      std::error_code(e.code ? e.code : EINVAL, std::generic_category()),
      e.message);
}

std::string mlir::rp::checkOutputTarget(llvm::StringRef path,
                                        llvm::StringRef what) {
  return files::checkOutputTarget(path.str(), what.str()).message;
}

bool mlir::rp::isNullDevice(llvm::StringRef path) {
  return files::isNullDevice(path.str());
}

llvm::Error mlir::rp::createTempBeside(llvm::StringRef path, int &fd,
                                       llvm::SmallVectorImpl<char> &tempPath) {
  std::string temp;
  if (files::FileError e =
          files::createTempBeside(path.str(), "output", fd, temp))
    return toError(e);
  tempPath.assign(temp.begin(), temp.end());
  return llvm::Error::success();
}

llvm::Error mlir::rp::renameIntoPlace(llvm::StringRef tempPath,
                                      llvm::StringRef path) {
  if (files::FileError e =
          files::renameIntoPlace(tempPath.str(), path.str(), "output"))
    return toError(e);
  return llvm::Error::success();
}

std::string mlir::rp::checkRegularInput(llvm::StringRef path,
                                        llvm::StringRef what,
                                        uint64_t maxBytes) {
  files::FileError e = files::checkInput(path.str(), what.str(), maxBytes);
  // A missing file is the reader's to report, in its own words.
  return e.code == ENOENT ? "" : e.message;
}
