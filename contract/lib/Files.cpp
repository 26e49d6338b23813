//===- Files.cpp - the file-access rules every rp tool follows ------------===//

#include "rp/contract/Files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace rp::files;

namespace {

FileError systemError(int code, const std::string &message) {
  return {code, message + ": " + std::strerror(code)};
}

/// The permission bits a plain create would give: mkstemp and mkdtemp make
/// 0600 and 0700, which a tool's outputs should not keep.
mode_t umaskBits() {
  static const mode_t mask = [] {
    mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }();
  return mask;
}

/// The last component of `path` after trailing slashes are dropped.
std::string lastComponent(const std::string &path) {
  std::string p = withoutTrailingSlashes(path);
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string quoted(std::string_view what, const std::string &path) {
  return std::string(what) + " '" + path + "'";
}

} // namespace

const char *rp::files::kindOf(unsigned mode) {
  if (S_ISDIR(mode))
    return "a folder";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "not a regular file";
}

std::string rp::files::withoutTrailingSlashes(const std::string &path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/')
    --end;
  return path.substr(0, end);
}

std::string rp::files::folderOf(const std::string &path) {
  std::string p = withoutTrailingSlashes(path);
  size_t slash = p.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

uint64_t rp::files::physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0)
    return uint64_t(1) << 40;
  return uint64_t(pages) * uint64_t(size);
}

FileError rp::files::openInput(const std::string &path, std::string_view what,
                               uint64_t maxBytes, int &fd, uint64_t &size) {
  fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return systemError(errno, "cannot open " + quoted(what, path));
  struct stat st;
  FileError error;
  if (::fstat(fd, &st) != 0)
    error = systemError(errno, "cannot read " + quoted(what, path));
  else if (!S_ISREG(st.st_mode))
    error = {0, quoted(what, path) + " is " + kindOf(st.st_mode) +
                    ", not a regular file; give the path of a file"};
  else if (uint64_t(st.st_size) > maxBytes)
    error = {0, quoted(what, path) + " holds " + std::to_string(st.st_size) +
                    " bytes, more than the " + std::to_string(maxBytes) +
                    " it may have"};
  if (error) {
    ::close(fd);
    fd = -1;
    return error;
  }
  size = uint64_t(st.st_size);
  // Reads block as usual from here on; O_NONBLOCK only kept the open of a
  // FIFO from waiting for a writer.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return {};
}

FileError rp::files::checkInput(const std::string &path, std::string_view what,
                                uint64_t maxBytes) {
  if (path == "-")
    return {};
  int fd = -1;
  uint64_t size = 0;
  FileError error = openInput(path, what, maxBytes, fd, size);
  if (fd >= 0)
    ::close(fd);
  return error;
}

bool rp::files::isNullDevice(const std::string &path) {
  struct stat st, null;
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) &&
         ::stat("/dev/null", &null) == 0 && S_ISCHR(null.st_mode) &&
         st.st_rdev == null.st_rdev;
}

FileError rp::files::checkOutputTarget(const std::string &path,
                                       std::string_view what) {
  if (path == "-" || isNullDevice(path))
    return {};
  std::string last = lastComponent(path);
  if (path.empty() || path.back() == '/' || last == "." || last == "..")
    return {EISDIR, quoted(what, path) +
                        " names a folder; give the path of a file in it"};
  std::string folder = folderOf(path);
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return {ENOENT, "the folder of " + quoted(what, path) +
                        " does not exist; create it first"};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return {};
    return systemError(errno, "cannot check " + quoted(what, path));
  }
  if (S_ISREG(st.st_mode))
    return {};
  if (S_ISLNK(st.st_mode))
    return {0, quoted(what, path) +
                   " is a symbolic link; rp replaces only regular files and "
                   "never writes through a link: give the path it points to, "
                   "or a new path"};
  return {0, quoted(what, path) + " exists and is " + kindOf(st.st_mode) +
                 ", not a regular file; rp replaces only regular files: give "
                 "a new path, or remove it first"};
}

FileError rp::files::createTempBeside(const std::string &path,
                                      std::string_view what, int &fd,
                                      std::string &tempPath) {
  std::vector<char> name(path.begin(), path.end());
  const char suffix[] = ".tmp-XXXXXX";
  name.insert(name.end(), suffix, suffix + sizeof(suffix));
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0)
    return systemError(errno, "cannot create a temporary file beside " +
                                  quoted(what, path));
  tempPath = name.data();
  ::fchmod(fd, 0666 & ~umaskBits());
  return {};
}

FileError rp::files::createTempFolderBeside(const std::string &path,
                                            std::string_view what,
                                            std::string &tempPath) {
  std::string target = withoutTrailingSlashes(path);
  std::vector<char> name(target.begin(), target.end());
  const char suffix[] = ".tmp-XXXXXX";
  name.insert(name.end(), suffix, suffix + sizeof(suffix));
  if (!::mkdtemp(name.data()))
    return systemError(errno, "cannot create a temporary folder beside " +
                                  quoted(what, target));
  tempPath = name.data();
  ::chmod(tempPath.c_str(), 0777 & ~umaskBits());
  return {};
}

FileError rp::files::renameIntoPlace(const std::string &tempPath,
                                     const std::string &path,
                                     std::string_view what) {
  if (isNullDevice(path))
    return {0,
            quoted(what, path) + " is the null device; rp never replaces it"};
  if (FileError error = checkOutputTarget(path, what))
    return error;
  if (::rename(tempPath.c_str(), path.c_str()) != 0)
    return systemError(errno, "cannot rename '" + tempPath + "' to " +
                                  quoted(what, path));
  return {};
}

FileError rp::files::checkFolderTarget(const std::string &path,
                                       std::string_view what) {
  std::string target = withoutTrailingSlashes(path);
  std::string last = lastComponent(target);
  if (target.empty() || target == "/" || last == "." || last == "..")
    return {EINVAL, quoted(what, path) +
                        " names the current folder, a parent or the root, "
                        "which a save cannot replace; give the name of a "
                        "folder for the checkpoint, such as ck"};
  struct stat st;
  if (::lstat(target.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return {0, quoted(what, path) +
                   " is a symbolic link; rp replaces the folder as a whole and "
                   "never writes through a link: give the folder itself"};
  return {};
}
