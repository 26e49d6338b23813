//===- Files.h - the file-access rules every rp tool follows ----*- C++ -*-===//
//
// One set of rules for the files the compiler tools and the runtime read and
// write, in the contract library because both sides need it (it links
// neither MLIR nor the executor; the compiler wraps it in
// rp/Support/AtomicWrite.h, the runtime in rp/runtime/FileIO.h):
//
// - An input is a regular file, opened without blocking (a FIFO with no
//   writer never hangs the open) and checked with fstat; its size is
//   checked against a cap for its kind before anything is allocated, so
//   /dev/zero or a huge sparse file cannot exhaust memory.
// - An output is written through a fresh temporary created beside the target
//   (mkstemp: never a fixed name, so nothing that is not rp's is replaced or
//   deleted), then renamed into place. A target that exists and is not a
//   regular file (a FIFO, a device such as /dev/null, a folder, a socket) or
//   is a symbolic link is refused before anything is written, and again just
//   before the rename: rename would replace the special file or the link
//   itself, never write through it, and neither is what the user meant.
//   The null device is the one exception: `-o /dev/null` discards the
//   output, as it does for every Unix tool (the writers write nothing and
//   never replace it).
// - A checkpoint folder is filled as a fresh temporary folder (mkdtemp)
//   beside it; "." and ".." are refused, a trailing slash is ignored.
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_FILES_H
#define RP_CONTRACT_FILES_H

#include <cstdint>
#include <string>
#include <string_view>

namespace rp::files {

/// The largest file of each kind the tools read. A kind whose size has no
/// smaller natural bound (.npy inputs, token files) uses the machine's
/// physical memory (physicalMemoryBytes).
/// Protobuf refuses messages over 2 GiB; an ONNX model is one message.
constexpr uint64_t kMaxOnnxBytes = 2ull << 30;
/// MLIR text the tools parse (dense constants live in weight files).
constexpr uint64_t kMaxIrBytes = 4ull << 30;
/// A plan file (it never embeds weights: DESIGN.md, Plan files).
constexpr uint64_t kMaxPlanBytes = 1ull << 30;

/// A refused or failed file operation: `code` is the errno behind it (0
/// when the file is refused for what it is) and `message` names the file.
/// Empty when the operation succeeded.
struct FileError {
  int code = 0;
  std::string message;
  explicit operator bool() const { return !message.empty(); }
};

/// This machine's physical memory in bytes.
uint64_t physicalMemoryBytes();

/// Opens `path` for reading and checks that it is a regular file of at most
/// `maxBytes`; `what` names it in messages ("the ONNX model"). On success
/// `fd` is open (the caller closes it) and `size` is the file's size.
FileError openInput(const std::string &path, std::string_view what,
                    uint64_t maxBytes, int &fd, uint64_t &size);

/// openInput without keeping the descriptor. "-" (stdin) passes, for the
/// tools that document it.
FileError checkInput(const std::string &path, std::string_view what,
                     uint64_t maxBytes);

/// Checks that `path` may be written as the file `what` ("--trace"): it does
/// not end in '/', is not "." or "..", its folder exists, and whatever is
/// there now is a regular file (not a link, FIFO, device, folder or socket).
/// "-" (stdout) and the null device pass.
FileError checkOutputTarget(const std::string &path, std::string_view what);

/// Whether `path` itself (not a link to it) is the null device: an output
/// there is discarded.
bool isNullDevice(const std::string &path);

/// Creates a fresh temporary file beside `path` (`<path>.tmp-XXXXXX`,
/// mode 0666 less the umask), open for writing in `fd`.
FileError createTempBeside(const std::string &path, std::string_view what,
                           int &fd, std::string &tempPath);

/// Creates a fresh empty temporary folder beside `path`
/// (`<path>.tmp-XXXXXX`, mode 0777 less the umask).
FileError createTempFolderBeside(const std::string &path, std::string_view what,
                                 std::string &tempPath);

/// Renames the temporary file `tempPath` to `path` after checking `path`
/// again (checkOutputTarget): a special file made there meanwhile is
/// refused, not replaced. The caller removes `tempPath` on failure.
FileError renameIntoPlace(const std::string &tempPath, const std::string &path,
                          std::string_view what);

/// Checks that `path` may name a checkpoint folder rp replaces as a whole:
/// not ".", ".." or "/", and not a symbolic link. What is inside an
/// existing folder is the caller's to check.
FileError checkFolderTarget(const std::string &path, std::string_view what);

/// `path` without trailing slashes ("ck/" is "ck"; "/" stays "/").
std::string withoutTrailingSlashes(const std::string &path);

/// The folder holding `path`: "." for a bare name.
std::string folderOf(const std::string &path);

/// What a file of mode `mode` is, for messages: "a FIFO", "a folder", ...
const char *kindOf(unsigned mode);

} // namespace rp::files

#endif // RP_CONTRACT_FILES_H
