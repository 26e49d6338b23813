//===- FilesTest.cpp - the file-access rules of every tool ----------------===//
//
// Files.h below both of its users: which inputs and output targets are
// refused and with which errno, that temporaries are fresh names beside the
// target, and that a target turned special between the check and the
// rename is refused, not replaced.
//
//===----------------------------------------------------------------------===//

#include "rp/contract/Files.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace rp::files;
namespace fs = std::filesystem;

namespace {

struct TempFolder {
  std::string path;
  TempFolder() {
    std::string pattern = fs::temp_directory_path() / "rp-files-XXXXXX";
    path = ::mkdtemp(pattern.data());
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string &name) const {
    return path + "/" + name;
  }
};

TEST(FilesTest, PathHelpers) {
  EXPECT_EQ(withoutTrailingSlashes("ck///"), "ck");
  EXPECT_EQ(withoutTrailingSlashes("/"), "/");
  EXPECT_EQ(folderOf("out.npy"), ".");
  EXPECT_EQ(folderOf("/out.npy"), "/");
  EXPECT_EQ(folderOf("a/b/ck/"), "a/b");
}

TEST(FilesTest, InputsMustBeRegularFilesUnderTheirCap) {
  TempFolder dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  std::ofstream(dir / "small") << "12345";
  EXPECT_NE(checkInput(dir / "fifo", "the model", 100)
                .message.find("is a FIFO, not a regular file"),
            std::string::npos);
  EXPECT_NE(checkInput("/dev/zero", "the model", 100)
                .message.find("is a device, not a regular file"),
            std::string::npos);
  EXPECT_NE(checkInput(dir / "small", "the model", 4)
                .message.find("holds 5 bytes, more than the 4 it may have"),
            std::string::npos);
  EXPECT_FALSE(checkInput(dir / "small", "the model", 5));
  EXPECT_EQ(checkInput(dir / "none", "the model", 5).code, ENOENT);
  EXPECT_FALSE(checkInput("-", "the model", 5));
}

TEST(FilesTest, OutputTargetsMustBeRegularFilesOrNew) {
  TempFolder dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_directory(dir / "folder");
  fs::create_symlink(dir / "fifo", dir / "link");
  for (const char *name : {"fifo", "folder", "link"})
    EXPECT_TRUE(checkOutputTarget(dir / name, "-o")) << name;
  EXPECT_NE(
      checkOutputTarget(dir / "link", "-o").message.find("is a symbolic link"),
      std::string::npos);
  EXPECT_EQ(checkOutputTarget(dir / "new/", "-o").code, EISDIR);
  EXPECT_EQ(checkOutputTarget(".", "-o").code, EISDIR);
  EXPECT_EQ(checkOutputTarget(dir / "no/out", "-o").code, ENOENT);
  EXPECT_FALSE(checkOutputTarget(dir / "new", "-o"));
  EXPECT_FALSE(checkOutputTarget("-", "-o"));
  EXPECT_FALSE(checkOutputTarget("/dev/null", "-o"));
  EXPECT_TRUE(isNullDevice("/dev/null"));
  EXPECT_FALSE(isNullDevice("/dev/zero"));
}

TEST(FilesTest, TemporariesAreFreshAndATargetMadeSpecialIsNotReplaced) {
  TempFolder dir;
  std::ofstream(dir / "out.tmp") << "not rp's";
  int fd = -1;
  std::string temp;
  ASSERT_FALSE(createTempBeside(dir / "out", "-o", fd, temp));
  ::close(fd);
  EXPECT_EQ(temp.rfind(dir / "out.tmp-", 0), 0u) << temp;
  // A FIFO appears at the target after the check: the rename refuses it.
  ASSERT_EQ(::mkfifo((dir / "out").c_str(), 0644), 0);
  EXPECT_TRUE(renameIntoPlace(temp, dir / "out", "-o"));
  struct stat st;
  ASSERT_EQ(::lstat((dir / "out").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ::unlink((dir / "out").c_str());
  EXPECT_FALSE(renameIntoPlace(temp, dir / "out", "-o"));
  EXPECT_TRUE(fs::is_regular_file(dir / "out"));

  std::string folder;
  ASSERT_FALSE(createTempFolderBeside(dir / "ck/", "--save", folder));
  EXPECT_EQ(folder.rfind(dir / "ck.tmp-", 0), 0u) << folder;
  EXPECT_TRUE(fs::is_directory(folder));
}

TEST(FilesTest, CheckpointFoldersCannotBeTheCurrentFolderOrALink) {
  TempFolder dir;
  for (const char *path : {".", "..", "/", "a/..", "./"})
    EXPECT_TRUE(checkFolderTarget(path, "--save")) << path;
  fs::create_symlink(dir.path, dir / "link");
  EXPECT_TRUE(checkFolderTarget(dir / "link", "--save"));
  EXPECT_FALSE(checkFolderTarget(dir / "ck/", "--save"));
}

} // namespace
