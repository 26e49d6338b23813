//===- WeightsWriter.h - the weights file of an import ----------*- C++ -*-===//
//
// The ONNX importer's inline initializers and the large constants that
// rp-externalize-constants moves out of the IR are appended to one file
// beside the .mlir; rp.param ops reference (file, offset). The file appears
// atomically: it is written under a temporary name and renamed on commit, so
// a failed import never leaves a half-written weights file behind.
//
//===----------------------------------------------------------------------===//

#ifndef RP_SUPPORT_WEIGHTSWRITER_H
#define RP_SUPPORT_WEIGHTSWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace mlir::rp {

/// `file` relative to `dir` when it lies inside it, else its absolute path.
std::string relativePath(StringRef file, StringRef dir);

/// The module attribute that pairs an IR with its weight files: a
/// dictionary from each file its params read (the path as they name it) to
/// the file's fingerprint (ui64,
/// contract/include/rp/contract/WeightFingerprint.h). rp-import writes its
/// weights and its IR in two renames; the fingerprints let a reader refuse the
/// new weights beside the previous IR.
inline constexpr llvm::StringLiteral kWeightFingerprintsAttr =
    "rp.weight_fingerprints";

/// Records in `module` the fingerprint of every file its params read,
/// relative paths taken from `irDir`; a file that cannot be read is left
/// out (the param's reader reports it).
void recordWeightFingerprints(ModuleOp module, StringRef irDir);

/// Recomputes the fingerprints `module` records (none recorded: success)
/// and emits an error naming the IR and the file for one that is missing
/// or differs.
LogicalResult verifyWeightFingerprints(ModuleOp module, StringRef irDir);

class WeightsWriter {
public:
  explicit WeightsWriter(StringRef path) : path(path) {}
  ~WeightsWriter();

  LogicalResult open(Location loc);
  /// Opens the file in place to add to its end (creating it when missing);
  /// commit then only closes it.
  LogicalResult openAppend(Location loc);
  /// Appends `bytes` at the next 64-byte boundary; returns their offset.
  int64_t append(StringRef bytes);
  /// Renames the temporary file to `path`.
  LogicalResult commit(Location loc);

private:
  std::string path;
  llvm::SmallString<256> tempPath;
  std::unique_ptr<llvm::raw_fd_ostream> os;
  int fd = -1; ///< the temporary file's, closed by commit or the destructor
  int64_t size = 0;
  bool committed = false;
  bool appending = false;
};

} // namespace mlir::rp

#endif // RP_SUPPORT_WEIGHTSWRITER_H
