//===- FileIO.h - checked reads and durable writes of files -----*- C++ -*-===//
//
// Every file the runtime and its tools read or write goes through here, so
// that one discipline holds for all of them (DESIGN.md: every bad input ends
// in a clear error, never a crash, a hang or a silent wrong answer). The
// rules themselves are the contract's (rp/contract/Files.h), which the
// compiler tools follow too:
//
// - Reads take regular files only. A folder, FIFO, device or socket is
//   refused with a message before anything is read; the file is opened
//   non-blocking and checked with fstat, so a FIFO without a writer never
//   blocks. The size is checked against a cap before anything is allocated,
//   so /dev/zero or a huge file cannot exhaust memory.
// - Writes are durable and atomic: the bytes go to a fresh temporary file
//   (mkstemp) beside the target, which must be a regular file if it exists
//   (a FIFO, a device, a folder or a symbolic link is refused before
//   anything is written), every write's result is checked (a full disk is an
//   error, not a truncated file), the file and then its folder are fsynced, and
//   one rename puts it in place. At every instant the path holds the old file
//   or the new one, whole.
// - Folders (checkpoints) are replaced the same way: a fresh temporary
//   folder (mkdtemp) is filled and synced, then swapped with the old one in
//   a single atomic rename. Nothing rp did not create is deleted.
//
// Fault injection, for tests only: RP_FAULT_INJECT=fail:N makes the N-th
// file operation of the process (from 1) fail as a full disk would;
// RP_FAULT_INJECT=kill:N kills the process with SIGKILL just before it.
// Tests use it to check that a save interrupted anywhere leaves a loadable
// checkpoint (test/Runtime/checkpoint-faults.test).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_FILEIO_H
#define RP_RUNTIME_FILEIO_H

#include "rp/runtime/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rp::runtime {

/// The largest JSON document (checkpoint state, hardware profile) the
/// runtime reads: far above any real one, far below a memory problem.
constexpr uint64_t kMaxJsonBytes = 64ull << 20;

/// This machine's physical memory in bytes: the cap of reads whose size
/// has no smaller natural bound (.npy inputs, token files).
uint64_t physicalMemoryBytes();

/// Checks that `path` names a regular file, without opening it for long and
/// without blocking on a FIFO; `what` names the file in messages ("plan",
/// "data file"). Returns its size.
Expected<uint64_t> checkRegularFile(const std::string &path,
                                    std::string_view what);

/// Reads the whole regular file `path`, refusing anything larger than
/// `maxBytes` with a message that names `what` and the cap.
Expected<std::string> readRegularFile(const std::string &path,
                                      std::string_view what, uint64_t maxBytes);

/// A regular file read in pieces: a reader that copies what it needs out of
/// a large file (a checkpoint's tensors, a dataset's rows) holds those bytes
/// once, not the whole file besides (readRegularFile's string).
class PieceReader {
public:
  /// Opens `path` (a regular file, FIFOs refused without blocking);
  /// `what` names it in messages ("checkpoint", ".safetensors file").
  static Expected<PieceReader> open(const std::string &path,
                                    std::string_view what);
  PieceReader(PieceReader &&other) noexcept;
  PieceReader &operator=(PieceReader &&other) noexcept;
  PieceReader(const PieceReader &) = delete;
  PieceReader &operator=(const PieceReader &) = delete;
  ~PieceReader();

  /// The file's size when it was opened.
  uint64_t size() const { return byteCount; }
  /// Reads bytes [offset, offset + n) into `out`: an error (never a short
  /// read) past the end or when the file shrank while it was read.
  Status readAt(uint64_t offset, void *out, size_t n) const;

private:
  PieceReader() = default;
  int fileFd = -1;
  uint64_t byteCount = 0;
  std::string filePath, fileWhat;
};

/// Bytes to write, in order.
struct ByteSpan {
  const void *data;
  size_t size;
};

/// Refuses an output path that cannot be written as a regular file (see
/// files::checkOutputTarget); `what` names it ("--trace").
Status checkOutputPath(const std::string &path, std::string_view what);

/// Writes `pieces` to `path` atomically and durably (see the file comment);
/// `what` names the file in messages.
Status writeFileAtomic(const std::string &path,
                       const std::vector<ByteSpan> &pieces,
                       std::string_view what = "output file");
inline Status writeFileAtomic(const std::string &path, std::string_view text,
                              std::string_view what = "output file") {
  return writeFileAtomic(path, {ByteSpan{text.data(), text.size()}}, what);
}

/// Creates a fresh, empty temporary folder beside `path` and returns its
/// path; the caller fills it and puts it in place with replaceFolder.
Expected<std::string> makeTempFolderBeside(const std::string &path,
                                           std::string_view what);

/// Fsyncs the folder `path`, so that the names created in it last.
Status syncFolder(const std::string &path);

/// Puts the complete folder `from` at `to` in one atomic step: a rename if
/// `to` does not exist, else an exchange of the two (renameat2), after
/// which the old folder, now at `from`, is removed. Where the file system
/// cannot exchange, the old folder is moved to `to`.old first; a crash in
/// between leaves the old folder whole there (loading looks there next).
Status replaceFolder(const std::string &from, const std::string &to);

/// Removes the file or folder tree `path` if it exists.
Status removeTree(const std::string &path);

/// A checked file operation for fault injection (the file comment): fails
/// or kills when RP_FAULT_INJECT selects this operation. `op` and `path`
/// name it in the injected error.
Status faultPoint(std::string_view op, const std::string &path);

} // namespace rp::runtime

#endif // RP_RUNTIME_FILEIO_H
