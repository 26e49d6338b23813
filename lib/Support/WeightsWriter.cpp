//===- WeightsWriter.cpp - the weights file of an import ------------------===//

#include "rp/Support/WeightsWriter.h"
#include "rp/Dialect/RP/RPOps.h"
#include "rp/Support/AtomicWrite.h"
#include "rp/contract/WeightFingerprint.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
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

/// `file` as a param names it, taken from `irDir` when relative.
static std::string resolveWeightFile(StringRef file, StringRef irDir) {
  if (llvm::sys::path::is_absolute(file))
    return file.str();
  SmallString<256> path(irDir.empty() ? "." : irDir);
  llvm::sys::path::append(path, file);
  return path.str().str();
}

void mlir::rp::recordWeightFingerprints(ModuleOp module, StringRef irDir) {
  llvm::SetVector<StringRef> files;
  module.walk([&](ParamOp p) {
    if (p.getFile())
      files.insert(*p.getFile());
  });
  Builder b(module.getContext());
  auto ui64 = b.getIntegerType(64, /*isSigned=*/false);
  SmallVector<NamedAttribute> entries;
  for (StringRef file : files)
    if (std::optional<uint64_t> fp =
            ::rp::plan::weightFileFingerprint(resolveWeightFile(file, irDir)))
      entries.push_back(
          b.getNamedAttr(file, b.getIntegerAttr(ui64, llvm::APInt(64, *fp))));
  if (entries.empty())
    module->removeAttr(kWeightFingerprintsAttr);
  else
    module->setAttr(kWeightFingerprintsAttr, b.getDictionaryAttr(entries));
}

LogicalResult mlir::rp::verifyWeightFingerprints(ModuleOp module,
                                                 StringRef irDir) {
  Attribute attr = module->getAttr(kWeightFingerprintsAttr);
  if (!attr)
    return success();
  // At the module's location (the IR file), without the module printed
  // after the message as an op's diagnostic would be.
  Location loc = module.getLoc();
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return emitError(loc)
           << kWeightFingerprintsAttr
           << " must be a dictionary from weight file to ui64 fingerprint; "
              "re-run rp-import to write it";
  for (NamedAttribute entry : dict) {
    auto recorded = dyn_cast<IntegerAttr>(entry.getValue());
    if (!recorded || !recorded.getType().isInteger(64))
      return emitError(loc)
             << kWeightFingerprintsAttr << " entry '"
             << entry.getName().getValue()
             << "' must be a ui64 fingerprint; re-run rp-import to write it";
    std::string path = resolveWeightFile(entry.getName(), irDir);
    std::optional<uint64_t> actual = ::rp::plan::weightFileFingerprint(path);
    if (!actual)
      return emitError(loc)
             << "weight file '" << path
             << "' of this IR is missing or not a regular file; keep it "
                "beside the IR where rp-import wrote it, or re-run rp-import";
    if (*actual != recorded.getValue().getZExtValue())
      return emitError(loc)
             << "weight file '" << path
             << "' is not the one this IR was written with (an rp-import "
                "replaced it and did not finish writing its IR, or the file "
                "was replaced since); re-run rp-import to write the IR and "
                "its weights again";
  }
  return success();
}

WeightsWriter::~WeightsWriter() {
  if (committed)
    return;
  if (os)
    os->clear_error();
  os.reset();
  if (fd >= 0)
    ::close(fd);
  if (!tempPath.empty())
    llvm::sys::fs::remove(tempPath);
}

LogicalResult WeightsWriter::open(Location loc) {
  if (std::string refused = checkOutputTarget(path, "weights file");
      !refused.empty())
    return emitError(loc) << refused;
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
  // Our own descriptor, so that commit can fsync it.
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(
          path, fd, llvm::sys::fs::CD_OpenAlways, llvm::sys::fs::OF_Append))
    return emitError(loc) << "cannot open the weights file '" << path
                          << "': " << ec.message();
  os = std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/false);
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
    // fsynced, not renamed: the IR that reads them is renamed into place
    // after this returns, and must not outlive them on a power loss.
    os->flush();
    std::error_code ec = os->error();
    os->clear_error();
    if (!ec)
      ec = syncFileOrFolder(fd);
    if (::close(fd) != 0 && !ec)
      ec = std::error_code(errno, std::generic_category());
    fd = -1;
    committed = true;
    if (ec)
      return emitError(loc) << "cannot write the weights file '" << path
                            << "': " << ec.message();
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
