//===- CudnnLibraryTest.cpp - libcudnn opened at run time -----------------===//
//
// The cuda driver's cuDNN loader (lib/cuda/cudnn/CudnnLibrary.cpp, which
// includes no CUDA header) on any machine: RP_CUDNN=off, a missing file,
// a file that is not cuDNN, and, where the toolkit's cuDNN is installed,
// that it opens and names its version without a GPU or a driver.
//
//===----------------------------------------------------------------------===//

#include "../lib/cuda/cudnn/CudnnLibrary.h"

#include "rp/runtime/Driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

using namespace rp::runtime;
using namespace rp::runtime::cuda;
using ::testing::HasSubstr;

namespace {

TEST(CudnnLibraryTest, OffTurnsItOff) {
  LoadedCudnn c = openCudnn("off", nullptr, {"libcudnn.so.9"});
  EXPECT_FALSE(c.info.loaded);
  EXPECT_EQ(c.info.where, "RP_CUDNN=off");
  EXPECT_EQ(openCudnn("0", nullptr, {}).info.where, "RP_CUDNN=0");
}

TEST(CudnnLibraryTest, MissingFileSaysWhatWasTried) {
  LoadedCudnn c = openCudnn(nullptr, "/nonexistent/libcudnn.so.9", {"x"});
  EXPECT_FALSE(c.info.loaded);
  EXPECT_THAT(c.info.where, HasSubstr("/nonexistent/libcudnn.so.9: "));
  EXPECT_THAT(c.info.where, HasSubstr("(RP_CUDNN_LIBRARY)"));
  LoadedCudnn none = openCudnn(nullptr, nullptr, {"/no/a.so", "/no/b.so"});
  EXPECT_THAT(none.info.where, HasSubstr("/no/a.so: "));
  EXPECT_THAT(none.info.where, HasSubstr("; /no/b.so: "));
  // Without cuDNN the choice falls back, saying why.
  AttentionProblem p;
  p.headDim = p.valueDim = 128;
  EXPECT_EQ(chooseAttentionPath(p, none.info, 90).reason,
            "no cuDNN: " + none.info.where);
}

TEST(CudnnLibraryTest, ALibraryWithoutCudnnIsRefused) {
  // libm is a library, but not cuDNN.
  LoadedCudnn c = openCudnn(nullptr, "libm.so.6", {});
  EXPECT_FALSE(c.info.loaded);
  EXPECT_THAT(c.info.where, HasSubstr("has no cudnnGetVersion"));
}

TEST(CudnnLibraryTest, TheToolkitsCudnnOpensWithoutAGpu) {
#ifndef RP_TEST_CUDNN_LIBRARY
  GTEST_SKIP() << "the build found no libcudnn";
#else
  if (!std::ifstream(RP_TEST_CUDNN_LIBRARY))
    GTEST_SKIP() << RP_TEST_CUDNN_LIBRARY << " is not there";
  LoadedCudnn c = openCudnn(nullptr, RP_TEST_CUDNN_LIBRARY, {});
  ASSERT_TRUE(c.info.loaded) << c.info.where;
  EXPECT_GE(c.info.version, kMinCudnnVersion);
  EXPECT_EQ(c.info.where, RP_TEST_CUDNN_LIBRARY);
  // What a GPU of each kind would run.
  AttentionProblem p;
  p.headDim = p.valueDim = 128;
  EXPECT_EQ(chooseAttentionPath(p, c.info, 89).path, AttentionPath::cudnn);
  EXPECT_EQ(chooseAttentionPath(p, c.info, 90).path, AttentionPath::cudnn);
#endif
}

TEST(CudnnLibraryTest, EachGpuSaysItsAttentionPath) {
  // The cuda driver's --list-devices lines (Driver::describeAttention).
  std::string lines = describeDriverAttention("cuda");
  Expected<uint32_t> gpus = countDevices("cuda");
  if (!gpus) {
    // No GPU: one line saying whether cuDNN loads (or none at all when
    // the driver library does not load).
    if (!lines.empty()) {
      EXPECT_THAT(lines, HasSubstr("attention: "));
    }
    GTEST_SKIP() << "no GPU: " << gpus.getStatus().getMessage();
  }
  for (uint32_t g = 0; g < *gpus; ++g)
    EXPECT_THAT(lines, HasSubstr("attention on GPU " + std::to_string(g)));
  // scripts/gpu-test.sh sets it where cuDNN is found on an sm_80+ GPU.
  if (std::getenv("RP_EXPECT_CUDNN")) {
    EXPECT_THAT(lines, HasSubstr("through cuDNN"));
  }
}

} // namespace
