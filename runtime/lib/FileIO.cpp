//===- FileIO.cpp - checked reads and durable writes of files -------------===//

#include "rp/runtime/FileIO.h"
#include "rp/contract/Files.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utility>

using namespace rp::runtime;
namespace files = rp::files;
namespace fs = std::filesystem;

namespace {

/// RP_FAULT_INJECT, parsed once: the operation number to act on (0: none)
/// and whether to kill the process rather than fail the operation.
struct FaultPlan {
  uint64_t at = 0;
  bool kill = false;
};

FaultPlan faultPlan() {
  FaultPlan plan;
  const char *spec = std::getenv("RP_FAULT_INJECT");
  if (!spec)
    return plan;
  std::string s(spec);
  size_t colon = s.find(':');
  if (colon == std::string::npos)
    return plan;
  std::string mode = s.substr(0, colon), number = s.substr(colon + 1);
  if ((mode != "fail" && mode != "kill") || number.empty() ||
      number.size() > 9 ||
      number.find_first_not_of("0123456789") != std::string::npos)
    return plan;
  plan.at = std::stoull(number);
  plan.kill = mode == "kill";
  return plan;
}

/// The status of a failed system call on `path`: a full disk or quota is a
/// resource problem, a missing folder a name problem, the rest (permissions,
/// read-only file systems, I/O errors) something the user has to fix too.
Status ioError(int error, std::string_view doing, const std::string &path) {
  std::string message = "cannot " + std::string(doing) + " '" + path +
                        "': " + std::strerror(error);
  if (error == ENOSPC || error == EDQUOT)
    return resourceExhausted(message + " (free some space and retry)");
  if (error == ENOENT || error == ENOTDIR)
    return notFound(message);
  return invalidArgument(message);
}

/// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  /// Closes now, reporting the error close may carry for written data.
  int release() {
    int result = ::close(fd);
    fd = -1;
    return result;
  }
};

/// A contract FileError as a Status: a missing folder or file is a name
/// problem, a full disk a resource problem, the rest the user's to fix.
Status fromFileError(const files::FileError &e) {
  if (!e)
    return Status::ok();
  if (e.code == ENOSPC || e.code == EDQUOT)
    return resourceExhausted(e.message + " (free some space and retry)");
  if (e.code == ENOENT || e.code == ENOTDIR)
    return notFound(e.message);
  return invalidArgument(e.message);
}

/// Opens `path` for reading (files::openInput: regular files only, without
/// blocking on a FIFO), with no cap on its size.
Status openRegular(const std::string &path, std::string_view what, Fd &fd,
                   uint64_t &size) {
  return fromFileError(files::openInput(path, what, UINT64_MAX, fd.fd, size));
}

/// Writes all of `pieces` with as few system calls as the kernel allows
/// (writev), retrying short writes and interruptions.
Status writeAll(int fd, const std::vector<ByteSpan> &pieces,
                const std::string &path) {
  std::vector<iovec> iov;
  for (const ByteSpan &piece : pieces)
    if (piece.size)
      iov.push_back({const_cast<void *>(piece.data), piece.size});
  size_t next = 0;
  while (next < iov.size()) {
    if (Status s = faultPoint("write", path); s.failed())
      return s;
    int count = int(std::min<size_t>(iov.size() - next, IOV_MAX));
    ssize_t n = ::writev(fd, iov.data() + next, count);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return ioError(errno, "write", path);
    }
    if (n == 0)
      return ioError(EIO, "write", path);
    // Skip what was written; a piece written in part continues later.
    for (size_t done = size_t(n); done > 0;) {
      size_t step = std::min(done, iov[next].iov_len);
      iov[next].iov_base = static_cast<char *>(iov[next].iov_base) + step;
      iov[next].iov_len -= step;
      done -= step;
      if (iov[next].iov_len == 0)
        ++next;
    }
  }
  return Status::ok();
}

std::string parentOf(const std::string &path) { return files::folderOf(path); }

} // namespace

Status rp::runtime::faultPoint(std::string_view op, const std::string &path) {
  static const FaultPlan plan = faultPlan();
  static std::atomic<uint64_t> count{0};
  if (plan.at == 0)
    return Status::ok();
  if (++count != plan.at)
    return Status::ok();
  if (plan.kill) {
    std::fprintf(stderr, "rp: RP_FAULT_INJECT: killed before %.*s '%s'\n",
                 int(op.size()), op.data(), path.c_str());
    std::raise(SIGKILL);
  }
  return ioError(ENOSPC, std::string(op) + " (RP_FAULT_INJECT)", path);
}

uint64_t rp::runtime::physicalMemoryBytes() {
  return files::physicalMemoryBytes();
}

Expected<uint64_t> rp::runtime::checkRegularFile(const std::string &path,
                                                 std::string_view what) {
  Fd fd;
  uint64_t size = 0;
  if (Status s = openRegular(path, what, fd, size); s.failed())
    return s;
  return size;
}

Expected<PieceReader> rp::runtime::PieceReader::open(const std::string &path,
                                                     std::string_view what) {
  Fd fd;
  uint64_t size = 0;
  if (Status s = openRegular(path, what, fd, size); s.failed())
    return s;
  PieceReader r;
  r.fileFd = fd.fd;
  fd.fd = -1;
  r.byteCount = size;
  r.filePath = path;
  r.fileWhat = std::string(what);
  return r;
}

rp::runtime::PieceReader::PieceReader(PieceReader &&other) noexcept {
  *this = std::move(other);
}

PieceReader &rp::runtime::PieceReader::operator=(PieceReader &&other) noexcept {
  if (this != &other) {
    if (fileFd >= 0)
      ::close(fileFd);
    fileFd = std::exchange(other.fileFd, -1);
    byteCount = other.byteCount;
    filePath = std::move(other.filePath);
    fileWhat = std::move(other.fileWhat);
  }
  return *this;
}

rp::runtime::PieceReader::~PieceReader() {
  if (fileFd >= 0)
    ::close(fileFd);
}

Status rp::runtime::PieceReader::readAt(uint64_t offset, void *out,
                                        size_t n) const {
  if (offset > byteCount || n > byteCount - offset)
    return invalidArgument(fileWhat + " '" + filePath + "': bytes [" +
                           std::to_string(offset) + ", " +
                           std::to_string(offset + n) + ") run past its " +
                           std::to_string(byteCount) + " bytes");
  auto *to = static_cast<char *>(out);
  for (size_t done = 0; done < n;) {
    ssize_t got = ::pread(fileFd, to + done, n - done, off_t(offset + done));
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got < 0)
      return invalidArgument("cannot read " + fileWhat + " '" + filePath +
                             "': " + std::strerror(errno));
    if (got == 0)
      return invalidArgument(fileWhat + " '" + filePath +
                             "' shrank while it was read; is something "
                             "writing it?");
    done += size_t(got);
  }
  return Status::ok();
}

Expected<std::string> rp::runtime::readRegularFile(const std::string &path,
                                                   std::string_view what,
                                                   uint64_t maxBytes) {
  Expected<PieceReader> file = PieceReader::open(path, what);
  if (!file)
    return file.getStatus();
  if (file->size() > maxBytes)
    return invalidArgument(std::string(what) + " '" + path + "' holds " +
                           std::to_string(file->size()) +
                           " bytes, more than the " + std::to_string(maxBytes) +
                           " a " + std::string(what) + " may have");
  std::string bytes(size_t(file->size()), '\0');
  if (Status s = file->readAt(0, bytes.data(), bytes.size()); s.failed())
    return s;
  return bytes;
}

Status rp::runtime::syncFolder(const std::string &path) {
  if (Status s = faultPoint("sync folder", path); s.failed())
    return s;
  Fd fd;
  fd.fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd.fd < 0)
    return ioError(errno, "open folder", path);
  // Some file systems cannot sync a folder (EINVAL); their renames are as
  // durable as they get.
  if (::fsync(fd.fd) != 0 && errno != EINVAL)
    return ioError(errno, "sync folder", path);
  return Status::ok();
}

Status rp::runtime::checkOutputPath(const std::string &path,
                                    std::string_view what) {
  return fromFileError(files::checkOutputTarget(path, what));
}

Status rp::runtime::writeFileAtomic(const std::string &path,
                                    const std::vector<ByteSpan> &pieces,
                                    std::string_view what) {
  if (Status s = checkOutputPath(path, what); s.failed())
    return s;
  if (files::isNullDevice(path))
    return Status::ok(); // discarded, as -o /dev/null is for any tool
  if (Status s = faultPoint("create", path); s.failed())
    return s;
  Fd fd;
  std::string tmp;
  if (files::FileError e = files::createTempBeside(path, what, fd.fd, tmp))
    return fromFileError(e);
  Status result = writeAll(fd.fd, pieces, tmp);
  if (result.isOk())
    result = faultPoint("sync", tmp);
  if (result.isOk() && ::fsync(fd.fd) != 0)
    result = ioError(errno, "sync", tmp);
  if (result.isOk())
    result = faultPoint("close", tmp);
  if (result.isOk() && fd.release() != 0)
    result = ioError(errno, "close", tmp);
  if (result.isOk())
    result = faultPoint("rename", tmp);
  if (result.isOk())
    result = fromFileError(files::renameIntoPlace(tmp, path, what));
  if (result.failed()) {
    // Ours alone: mkstemp made it.
    ::unlink(tmp.c_str());
    return result;
  }
  return syncFolder(parentOf(path));
}

Status rp::runtime::removeTree(const std::string &path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec)))
    return Status::ok();
  if (Status s = faultPoint("remove", path); s.failed())
    return s;
  fs::remove_all(path, ec);
  if (ec)
    return ioError(ec.value(), "remove", path);
  return Status::ok();
}

Expected<std::string> rp::runtime::makeTempFolderBeside(const std::string &path,
                                                        std::string_view what) {
  if (Status s = faultPoint("create folder", path); s.failed())
    return s;
  std::string tmp;
  if (files::FileError e = files::createTempFolderBeside(path, what, tmp))
    return fromFileError(e);
  return tmp;
}

Status rp::runtime::replaceFolder(const std::string &from,
                                  const std::string &to) {
  std::string parent = parentOf(to);
  if (Status s = syncFolder(from); s.failed())
    return s;
  if (Status s = faultPoint("rename", from); s.failed())
    return s;
  struct stat st;
  if (::lstat(to.c_str(), &st) != 0) {
    if (::rename(from.c_str(), to.c_str()) != 0)
      return ioError(errno, "rename into place", from);
    return syncFolder(parent);
  }
#ifdef SYS_renameat2
  // RENAME_EXCHANGE (linux/fs.h): both names stay valid throughout.
  constexpr unsigned kExchange = 1u << 1;
  if (::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                kExchange) == 0) {
    if (Status s = syncFolder(parent); s.failed())
      return s;
    return removeTree(from);
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    return ioError(errno, "exchange with", to);
#endif
  // No exchange here: the old folder steps aside first; a crash before the
  // second rename leaves it at `to`.old, where loading looks next.
  std::string old = to + ".old";
  std::error_code ec;
  if (fs::exists(fs::symlink_status(old, ec)) &&
      !fs::is_regular_file(fs::path(old) / "state.json", ec))
    return invalidArgument("cannot move '" + to + "' aside: '" + old +
                           "' exists and is not an rp checkpoint; rp removes "
                           "only what it made: move it away and save again");
  if (Status s = removeTree(old); s.failed())
    return s;
  if (::rename(to.c_str(), old.c_str()) != 0)
    return ioError(errno, "move aside", to);
  if (Status s = faultPoint("rename", from); s.failed())
    return s;
  if (::rename(from.c_str(), to.c_str()) != 0)
    return ioError(errno, "rename into place", from);
  if (Status s = syncFolder(parent); s.failed())
    return s;
  return removeTree(old);
}
