//===- WeightsWriter.cpp - the weights file of an import ------------------===//

#include "rp/Support/WeightsWriter.h"
#include "rp/Support/AtomicWrite.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::rp;

/// Alignment of every tensor in the file, so that a runtime can map it and
/// hand out vector-aligned pointers.
static constexpr int64_t kAlignment = 64;

std::string mlir::rp::relativePath(StringRef file, StringRef dir) {
  SmallString<256> absFile(file), absDir(dir.empty() ? "." : dir);
  llvm::sys::fs::make_absolute(absFile);
  llvm::sys::fs::make_absolute(absDir);
  llvm::sys::path::remove_dots(absFile, /*remove_dot_dot=*/true);
  llvm::sys::path::remove_dots(absDir, /*remove_dot_dot=*/true);
  StringRef rest = absFile;
  if (rest.consume_front(absDir) && rest.consume_front("/"))
    return rest.str();
  return absFile.str().str();
}

WeightsWriter::~WeightsWriter() {
  if (!committed && !tempPath.empty()) {
    if (os)
      os->clear_error();
    os.reset();
    if (fd >= 0)
      ::close(fd);
    llvm::sys::fs::remove(tempPath);
  }
}

LogicalResult WeightsWriter::open(Location loc) {
  SmallString<256> model(path);
  llvm::sys::path::replace_extension(model, "");
  int tempFd;
  if (auto ec = llvm::sys::fs::createUniqueFile(model + ".%%%%%%.tmp", tempFd,
                                                tempPath))
    return emitError(loc) << "cannot create the weights file beside '" << path
                          << "': " << ec.message();
  fd = tempFd;
  os = std::make_unique<llvm::raw_fd_ostream>(tempFd, /*shouldClose=*/false);
  return success();
}

LogicalResult WeightsWriter::openAppend(Location loc) {
  uint64_t existing = 0;
  if (llvm::sys::fs::exists(path))
    if (auto ec = llvm::sys::fs::file_size(path, existing))
      return emitError(loc) << "cannot read the weights file '" << path
                            << "': " << ec.message();
  std::error_code ec;
  os = std::make_unique<llvm::raw_fd_ostream>(path, ec,
                                              llvm::sys::fs::OF_Append);
  if (ec)
    return emitError(loc) << "cannot open the weights file '" << path
                          << "': " << ec.message();
  size = existing;
  appending = true;
  return success();
}

int64_t WeightsWriter::append(StringRef bytes) {
  int64_t pad = (kAlignment - size % kAlignment) % kAlignment;
  os->write_zeros(pad);
  int64_t offset = size + pad;
  os->write(bytes.data(), bytes.size());
  size = offset + static_cast<int64_t>(bytes.size());
  return offset;
}

LogicalResult WeightsWriter::commit(Location loc) {
  if (appending) {
    // Folded constants appended after the import committed the file: the
    // file is already in place, so the appended bytes are checked and
    // flushed but not renamed.
    os->close();
    if (os->has_error())
      return emitError(loc) << "cannot write the weights file '" << path
                            << "': " << os->error().message();
    committed = true;
    return success();
  }
  // Every write checked, fsynced, renamed, folder fsynced (AtomicWrite.h).
  llvm::Error err = commitTempFile(*os, fd, tempPath, path);
  fd = -1;
  committed = true; // commitTempFile removed the temporary file on failure
  if (err)
    return emitError(loc) << "the weights file: "
                          << llvm::toString(std::move(err));
  return success();
}
