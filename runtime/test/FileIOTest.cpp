//===- FileIOTest.cpp - checked reads, durable writes, checkpoint state ---===//
//
// The reader discipline and the checkpoint rules of FileIO.h and
// Checkpoint.h, below the tools: what is refused and with which code, and
// that a write or a folder replacement leaves the target whole.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/FileIO.h"
#include "rp/runtime/Checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace rp::runtime;
namespace fs = std::filesystem;

namespace {

/// A fresh folder for one test, removed after it.
struct TempFolder {
  std::string path;
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "rp-fileio-XXXXXX");
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

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FileIOTest, ReadsARegularFileWhole) {
  TempFolder dir;
  std::ofstream(dir / "a.txt") << "hello";
  Expected<std::string> text = readRegularFile(dir / "a.txt", "test file", 64);
  ASSERT_TRUE(text) << text.getStatus().toString();
  EXPECT_EQ(*text, "hello");
}

TEST(FileIOTest, RefusesFoldersFifosAndDevicesWithoutBlocking) {
  TempFolder dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  for (auto [path, kind] :
       {std::pair{dir.path, "a folder"}, std::pair{dir / "fifo", "a FIFO"},
        std::pair{std::string("/dev/zero"), "a device"}}) {
    Expected<std::string> text = readRegularFile(path, "test file", 1 << 20);
    ASSERT_FALSE(text) << path;
    EXPECT_EQ(exitCode(text.getStatus()), 1);
    EXPECT_NE(text.getStatus().getMessage().find(kind), std::string::npos)
        << text.getStatus().getMessage();
  }
  // No open blocked on the FIFO.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(FileIOTest, RefusesAFileOverTheCapBeforeReadingIt) {
  TempFolder dir;
  std::ofstream(dir / "big") << std::string(100, 'x');
  Expected<std::string> text = readRegularFile(dir / "big", "test file", 99);
  ASSERT_FALSE(text);
  EXPECT_NE(text.getStatus().getMessage().find("holds 100 bytes, more than "
                                               "the 99"),
            std::string::npos)
      << text.getStatus().getMessage();
  EXPECT_EQ(text.getStatus().getCode(), StatusCode::InvalidArgument);
}

TEST(FileIOTest, AMissingFileIsNotFound) {
  TempFolder dir;
  Expected<uint64_t> size = checkRegularFile(dir / "none", "test file");
  ASSERT_FALSE(size);
  EXPECT_EQ(size.getStatus().getCode(), StatusCode::NotFound);
}

TEST(FileIOTest, AnAtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  TempFolder dir;
  std::ofstream(dir / "out") << "old contents";
  std::string a = "new ", b = "contents";
  ASSERT_TRUE(
      writeFileAtomic(dir / "out", {{a.data(), a.size()}, {b.data(), b.size()}})
          .isOk());
  EXPECT_EQ(slurp(dir / "out"), "new contents");
  EXPECT_FALSE(fs::exists(dir / "out.tmp"));
}

TEST(FileIOTest, AWriteIntoAMissingFolderFailsAndNamesIt) {
  TempFolder dir;
  Status s = writeFileAtomic(dir / "no/such/out", "x");
  ASSERT_TRUE(s.failed());
  EXPECT_EQ(s.getCode(), StatusCode::NotFound);
  EXPECT_NE(s.getMessage().find("the folder of output file '" +
                                (dir / "no/such/out") + "' does not exist"),
            std::string::npos)
      << s.getMessage();
}

/// The names in `dir`, sorted.
std::vector<std::string> namesIn(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(FileIOTest, AnAtomicWriteRefusesATargetThatIsNotARegularFile) {
  TempFolder dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_directory(dir / "folder");
  std::ofstream(dir / "real") << "kept";
  fs::create_symlink(dir / "real", dir / "link");
  for (const char *name : {"fifo", "folder", "link"}) {
    Status s = writeFileAtomic(dir / name, "x", "--trace");
    ASSERT_TRUE(s.failed()) << name;
    EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << name;
    EXPECT_NE(s.getMessage().find("--trace '" + (dir / name) + "'"),
              std::string::npos)
        << s.getMessage();
  }
  // The null device discards what is written to it; it is never replaced.
  EXPECT_TRUE(writeFileAtomic("/dev/null", "x", "--trace").isOk());
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // Nothing replaced, nothing left behind.
  EXPECT_TRUE(fs::is_fifo(dir / "fifo"));
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_EQ(slurp(dir / "real"), "kept");
  EXPECT_EQ(namesIn(dir.path),
            (std::vector<std::string>{"fifo", "folder", "link", "real"}));
}

TEST(FileIOTest, AnAtomicWriteLeavesAFileNamedLikeATemporaryAlone) {
  TempFolder dir;
  std::ofstream(dir / "out.npy.tmp") << "someone else's";
  ASSERT_TRUE(writeFileAtomic(dir / "out.npy", "x").isOk());
  EXPECT_EQ(slurp(dir / "out.npy.tmp"), "someone else's");
  EXPECT_EQ(namesIn(dir.path),
            (std::vector<std::string>{"out.npy", "out.npy.tmp"}));
}

TEST(FileIOTest, ReplaceFolderSwapsInTheNewFolderWhole) {
  TempFolder dir;
  fs::create_directory(dir / "ck");
  std::ofstream(dir / "ck/state.json") << "old";
  fs::create_directory(dir / "ck.tmp");
  std::ofstream(dir / "ck.tmp/mine") << "not rp's";
  Expected<std::string> tmp = makeTempFolderBeside(dir / "ck", "checkpoint");
  ASSERT_TRUE(tmp);
  EXPECT_NE(*tmp, dir / "ck.tmp");
  std::ofstream(*tmp + "/state.json") << "new";
  ASSERT_TRUE(replaceFolder(*tmp, dir / "ck").isOk());
  EXPECT_EQ(slurp(dir / "ck/state.json"), "new");
  EXPECT_FALSE(fs::exists(*tmp));
  EXPECT_FALSE(fs::exists(dir / "ck.old"));
  EXPECT_EQ(slurp(dir / "ck.tmp/mine"), "not rp's");
}

TEST(FileIOTest, SaveTargetsThatCannotBeReplacedAreRefusedUpFront) {
  TempFolder dir;
  for (const char *path : {".", "..", "/", "./", "a/.."}) {
    Status s = checkSaveTarget(path);
    ASSERT_TRUE(s.failed()) << path;
    EXPECT_NE(s.getMessage().find("which a save cannot replace"),
              std::string::npos)
        << s.getMessage();
  }
  fs::create_symlink(dir.path, dir / "link");
  EXPECT_TRUE(checkSaveTarget(dir / "link").failed());
  EXPECT_TRUE(checkSaveTarget(dir / "new/").isOk());
  EXPECT_TRUE(checkSaveTarget(dir / "a/b/c").isOk());
}

TEST(CheckpointStateTest, RoundTripsEveryField) {
  CheckpointState state;
  state.step = 7;
  state.sync = true;
  state.sgd = true;
  state.dataPosition = 123456789012ull;
  state.updates = 6;
  state.lossScale = 1024;
  state.goodSteps = 3;
  state.seed = UINT64_MAX - 1;
  state.shuffleSeed = 5;
  Expected<CheckpointState> back =
      parseCheckpointState(formatCheckpointState(state), "state.json");
  ASSERT_TRUE(back) << back.getStatus().toString();
  EXPECT_EQ(back->step, 7u);
  EXPECT_TRUE(back->sync);
  EXPECT_TRUE(back->sgd);
  EXPECT_EQ(back->dataPosition, 123456789012ull);
  EXPECT_EQ(back->updates, 6u);
  EXPECT_EQ(back->lossScale, 1024);
  EXPECT_EQ(back->goodSteps, 3u);
  EXPECT_EQ(back->seed, UINT64_MAX - 1);
  EXPECT_EQ(back->shuffleSeed, 5u);
  // A file that predates the seed: none, not 0.
  Expected<CheckpointState> old = parseCheckpointState("{\"step\": 1}", "s");
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->seed);
  EXPECT_FALSE(old->shuffleSeed);
  EXPECT_FALSE(old->schedule);
}

TEST(CheckpointStateTest, RoundTripsTheSchedule) {
  CheckpointState state;
  state.step = 3;
  // An lr that 15 digits would not read back.
  state.schedule = CheckpointSchedule{"cosine", 0.1 + 0.2, 2, 600};
  Expected<CheckpointState> back =
      parseCheckpointState(formatCheckpointState(state), "state.json");
  ASSERT_TRUE(back) << back.getStatus().toString();
  ASSERT_TRUE(back->schedule);
  EXPECT_TRUE(*back->schedule == *state.schedule);
  EXPECT_EQ(back->schedule->lr, 0.1 + 0.2);
}

TEST(CheckpointStateTest, RefusesWrongTypesAndRanges) {
  // The schedules' texts are split over two lines on purpose.
  // NOLINTBEGIN(bugprone-suspicious-missing-comma)
  for (const char *text :
       {"[]",
        "{}",
        "{\"step\": -1}",
        "{\"step\": 1.5}",
        "{\"step\": \"1\"}",
        "{\"step\": 1099511627776}",
        "{\"step\": 1, \"updates\": 2}",
        "{\"step\": 1, \"sync\": 1}",
        "{\"step\": 1, \"optimizer\": \"adam\"}",
        "{\"step\": 1, \"loss_scale\": -2}",
        "{\"step\": 1, \"good_steps\": 9}",
        "{\"step\": 1, \"data_position\": -5}",
        "{\"step\": 1, \"seed\": -1}",
        "{\"step\": 1, \"seed\": \"3\"}",
        "not json",
        "{\"step\": 1, \"lr_schedule\": 1}",
        "{\"step\": 1, \"lr_schedule\": {\"kind\": \"step\", \"lr\": 1, "
        "\"warmup_steps\": 0, \"total_steps\": 1}}",
        "{\"step\": 1, \"lr_schedule\": {\"kind\": \"linear\", \"lr\": -1, "
        "\"warmup_steps\": 0, \"total_steps\": 1}}",
        "{\"step\": 1, \"lr_schedule\": {\"kind\": \"linear\", \"lr\": 1, "
        "\"warmup_steps\": 0.5, \"total_steps\": 1}}",
        "{\"step\": 1, \"lr_schedule\": {\"kind\": \"linear\", \"lr\": 1, "
        "\"warmup_steps\": 0}}"}) {
    // NOLINTEND(bugprone-suspicious-missing-comma)
    Expected<CheckpointState> state = parseCheckpointState(text, "state.json");
    ASSERT_FALSE(state) << text;
    EXPECT_EQ(exitCode(state.getStatus()), 1) << text;
    EXPECT_NE(state.getStatus().getMessage().find("state.json is not a usable "
                                                  "checkpoint state"),
              std::string::npos)
        << state.getStatus().getMessage();
  }
}

TEST(CheckpointStateTest, SaveTargetMustBeNewEmptyOrACheckpoint) {
  TempFolder dir;
  EXPECT_TRUE(checkSaveTarget(dir / "new").isOk());
  fs::create_directory(dir / "empty");
  EXPECT_TRUE(checkSaveTarget(dir / "empty").isOk());
  fs::create_directory(dir / "ck");
  std::ofstream(dir / "ck/state.json") << "{}";
  EXPECT_TRUE(checkSaveTarget(dir / "ck").isOk());
  fs::create_directory(dir / "notes");
  std::ofstream(dir / "notes/a.txt") << "keep";
  EXPECT_TRUE(checkSaveTarget(dir / "notes").failed());
  std::ofstream(dir / "file") << "keep";
  EXPECT_TRUE(checkSaveTarget(dir / "file").failed());
}

} // namespace
