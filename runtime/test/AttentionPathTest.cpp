//===- AttentionPathTest.cpp - the choice of a GPU's attention kernel -----===//
//
// chooseAttentionPath (AttentionPath.h) on the host: which problems go to
// cuDNN's fused SDPA and which fall back to the CUDA-core kernel, with
// which reason, and that each reason is said once.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/AttentionPath.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

using namespace rp::runtime;
using ::testing::HasSubstr;

namespace {

CudnnLibraryInfo cudnn919() { return {true, 91900, "libcudnn.so.9"}; }

/// Qwen3-1.7B's attention: bf16, 16 query heads over 8, width 128, causal.
AttentionProblem qwen3() {
  AttentionProblem p;
  p.dtype = DType::bf16;
  p.mask = AttentionMaskKind::causal;
  p.headDim = p.valueDim = 128;
  p.heads = 16;
  p.kvHeads = 8;
  return p;
}

TEST(AttentionPathTest, Bf16AndF16GoToCudnnOnAdaAndHopper) {
  for (int sm : {80, 86, 89, 90})
    for (DType t : {DType::bf16, DType::f16})
      for (bool backward : {false, true}) {
        AttentionProblem p = qwen3();
        p.dtype = t;
        p.backward = backward;
        AttentionChoice c = chooseAttentionPath(p, cudnn919(), sm);
        EXPECT_EQ(c.path, AttentionPath::cudnn) << sm << " " << c.reason;
        EXPECT_EQ(c.reason, "");
      }
}

TEST(AttentionPathTest, F32AndF64StayOnCudaCores) {
  for (DType t : {DType::f32, DType::f64}) {
    AttentionProblem p = qwen3();
    p.dtype = t;
    AttentionChoice c = chooseAttentionPath(p, cudnn919(), 90);
    EXPECT_EQ(c.path, AttentionPath::cudaCores);
    EXPECT_THAT(c.reason, HasSubstr(std::string(dtypeName(t)) +
                                    " attention: cuDNN's fused attention "
                                    "takes bf16 and f16 only"));
  }
}

TEST(AttentionPathTest, NoCudnnSaysWhy) {
  CudnnLibraryInfo none{false, 0, "libcudnn.so.9 not found"};
  AttentionChoice c = chooseAttentionPath(qwen3(), none, 90);
  EXPECT_EQ(c.path, AttentionPath::cudaCores);
  EXPECT_EQ(c.reason, "no cuDNN: libcudnn.so.9 not found");
}

TEST(AttentionPathTest, OldCudnnAndOldGpusFallBack) {
  CudnnLibraryInfo old{true, 8907, "libcudnn.so.8"};
  EXPECT_THAT(chooseAttentionPath(qwen3(), old, 90).reason,
              HasSubstr("cuDNN 8.9.7 (libcudnn.so.8) is older than the 9.0.0"));
  CudnnLibraryInfo v8{true, 90000 - 1, "x"};
  EXPECT_EQ(chooseAttentionPath(qwen3(), v8, 90).path,
            AttentionPath::cudaCores);
  AttentionChoice turing = chooseAttentionPath(qwen3(), cudnn919(), 75);
  EXPECT_EQ(turing.path, AttentionPath::cudaCores);
  EXPECT_THAT(turing.reason, HasSubstr("sm_75: cuDNN's fused attention needs "
                                       "sm_80 (Ampere) or newer"));
}

TEST(AttentionPathTest, HeadWidthsByArchitectureAndVersion) {
  AttentionProblem p = qwen3();
  p.headDim = p.valueDim = 256;
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 90).path, AttentionPath::cudnn);
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 89).path, AttentionPath::cudnn);
  // Ada takes 256 only after cuDNN 9.9.
  CudnnLibraryInfo v99{true, 90900, "libcudnn.so.9"};
  AttentionChoice ada = chooseAttentionPath(p, v99, 89);
  EXPECT_EQ(ada.path, AttentionPath::cudaCores);
  EXPECT_THAT(ada.reason, HasSubstr("takes multiples of 8 up to 128"));
  // Blackwell: multiples of 16 up to 128.
  p.headDim = p.valueDim = 72;
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 90).path, AttentionPath::cudnn);
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 100).reason,
              HasSubstr("multiples of 16 up to 128"));
  p.headDim = p.valueDim = 60;
  AttentionChoice odd = chooseAttentionPath(p, cudnn919(), 90);
  EXPECT_EQ(odd.path, AttentionPath::cudaCores);
  EXPECT_EQ(odd.reason, "head widths 60 (query/key) and 60 (value): cuDNN "
                        "9.19.0 on sm_90 takes multiples of 8 up to 256");
  p.headDim = 320;
  p.valueDim = 64;
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 90).path,
            AttentionPath::cudaCores);
}

TEST(AttentionPathTest, GroupedQueryHeads) {
  AttentionProblem p = qwen3();
  p.heads = 32;
  p.kvHeads = 8; // Llama-3.1-8B
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 90).path, AttentionPath::cudnn);
  p.kvHeads = 1; // multi-query
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 90).path, AttentionPath::cudnn);
  p.kvHeads = 5;
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 90).reason,
              HasSubstr("32 query heads over 5 key/value heads"));
}

TEST(AttentionPathTest, Masks) {
  AttentionProblem p = qwen3();
  for (AttentionMaskKind m :
       {AttentionMaskKind::none, AttentionMaskKind::causal,
        AttentionMaskKind::additive, AttentionMaskKind::band}) {
    p.mask = m;
    EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 89).path,
              AttentionPath::cudnn);
  }
  p.mask = AttentionMaskKind::band;
  CudnnLibraryInfo v9{true, 90800, "libcudnn.so.9"};
  EXPECT_EQ(chooseAttentionPath(p, v9, 89).reason,
            "banded mask without the causal bound: needs cuDNN 9.10.2, found "
            "9.8.0");
  p.mask = AttentionMaskKind::boolean;
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 89).reason,
              HasSubstr("boolean mask: cuDNN's attention takes an additive "
                        "bias"));
  p.mask = AttentionMaskKind::segments;
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 89).reason,
              HasSubstr("segment ids (packed documents)"));
  p.mask = AttentionMaskKind::additive;
  p.maskBroadcastsRowsOrKeys = true;
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 89).reason,
              HasSubstr("broadcast along the query or key axis"));
}

TEST(AttentionPathTest, SoftCapFallsBack) {
  AttentionProblem p = qwen3();
  p.softCap = 50.0;
  for (bool backward : {false, true}) {
    p.backward = backward;
    AttentionChoice c = chooseAttentionPath(p, cudnn919(), 90);
    EXPECT_EQ(c.path, AttentionPath::cudaCores);
    EXPECT_THAT(c.reason, HasSubstr("soft-capped scores (Gemma 2): "
                                    "cudnn-frontend's SDPA has no soft-cap "
                                    "attribute"));
  }
}

TEST(AttentionPathTest, SinksFallBack) {
  AttentionProblem p = qwen3();
  p.sinks = true;
  p.window = 128;
  for (bool backward : {false, true}) {
    p.backward = backward;
    AttentionChoice c = chooseAttentionPath(p, cudnn919(), 90);
    EXPECT_EQ(c.path, AttentionPath::cudaCores);
    EXPECT_THAT(c.reason, HasSubstr("attention sinks (GPT-OSS): cuDNN's SDPA "
                                    "has no sink column"));
  }
  p.sinks = false;
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 90).path, AttentionPath::cudnn);
}

// rp.attention's sliding window and its causal mask over more keys than
// queries are cuDNN's diagonal band (left bound, bottom-right alignment),
// forward and backward, from cuDNN 9.2; with a mask operand they fall
// back (cuDNN takes the band without a bias only).
TEST(AttentionPathTest, WindowAndBottomRightCausal) {
  for (int sm : {89, 90})
    for (bool backward : {false, true}) {
      AttentionProblem p = qwen3();
      p.backward = backward;
      p.window = 4096;
      EXPECT_EQ(chooseAttentionPath(p, cudnn919(), sm).path,
                AttentionPath::cudnn);
      p.window = 0;
      p.bottomRight = true;
      EXPECT_EQ(chooseAttentionPath(p, cudnn919(), sm).path,
                AttentionPath::cudnn);
      p.window = 128;
      EXPECT_EQ(chooseAttentionPath(p, cudnn919(), sm).path,
                AttentionPath::cudnn);
    }
  AttentionProblem p = qwen3();
  p.window = 4096;
  CudnnLibraryInfo v91{true, 90100, "libcudnn.so.9"};
  EXPECT_EQ(chooseAttentionPath(p, v91, 89).reason,
            "sliding window: cuDNN's causal band with a left bound needs "
            "cuDNN 9.2, found 9.1.0");
  p.mask = AttentionMaskKind::additive;
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 89).reason,
              HasSubstr("sliding window with a mask operand: cuDNN takes its "
                        "diagonal band without a bias only"));
  p.window = 0;
  p.bottomRight = true;
  EXPECT_THAT(chooseAttentionPath(p, cudnn919(), 89).reason,
              HasSubstr("bottom-right causal mask with a mask operand"));
}

TEST(AttentionPathTest, DeterministicBackwardOnBlackwellNeeds918) {
  AttentionProblem p = qwen3();
  p.backward = true;
  CudnnLibraryInfo v917{true, 91700, "libcudnn.so.9"};
  EXPECT_EQ(chooseAttentionPath(p, v917, 100).reason,
            "deterministic backward on sm_100 needs cuDNN 9.18, found 9.17.0");
  p.backward = false;
  EXPECT_EQ(chooseAttentionPath(p, v917, 100).path, AttentionPath::cudnn);
  p.backward = true;
  EXPECT_EQ(chooseAttentionPath(p, cudnn919(), 100).path, AttentionPath::cudnn);
}

TEST(AttentionPathTest, ListDevicesLine) {
  EXPECT_EQ(describeAttentionPath(cudnn919(), 90, "GPU 0 (NVIDIA H200, sm_90)"),
            "attention on GPU 0 (NVIDIA H200, sm_90): bf16/f16 through cuDNN "
            "9.19.0 (libcudnn.so.9) fused SDPA (deterministic backward), "
            "f32/f64 on CUDA cores");
  EXPECT_EQ(describeAttentionPath(cudnn919(), 75, "GPU 1 (T4, sm_75)"),
            "attention on GPU 1 (T4, sm_75): CUDA cores (sm_75: cuDNN's fused "
            "attention needs sm_80 (Ampere) or newer)");
  EXPECT_EQ(describeAttentionPath(cudnn919(), 0, ""),
            "attention: cuDNN 9.19.0 (libcudnn.so.9) loads; no GPU to choose "
            "for");
  EXPECT_EQ(describeAttentionPath({false, 0, "RP_CUDNN=off"}, 0, ""),
            "attention: CUDA cores only (no cuDNN: RP_CUDNN=off)");
}

TEST(AttentionPathTest, EachFallbackIsSaidOnce) {
  std::vector<std::string> lines;
  FallbackLog log([&](const std::string &line) { lines.push_back(line); });
  AttentionProblem p = qwen3();
  p.dtype = DType::f32;
  for (int step = 0; step < 3; ++step) {
    AttentionChoice c = chooseAttentionPath(p, cudnn919(), 90);
    log.say(c.reason);
  }
  p.dtype = DType::bf16;
  p.mask = AttentionMaskKind::boolean;
  EXPECT_TRUE(log.say(chooseAttentionPath(p, cudnn919(), 90).reason));
  EXPECT_FALSE(log.say(chooseAttentionPath(p, cudnn919(), 90).reason));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("f32 attention"));
  EXPECT_THAT(lines[1], HasSubstr("boolean mask"));
}

TEST(AttentionPathTest, VersionString) {
  EXPECT_EQ(cudnnVersionString(91900), "9.19.0");
  EXPECT_EQ(cudnnVersionString(91002), "9.10.2");
  EXPECT_EQ(cudnnVersionString(8907), "8.9.7");
}

} // namespace
