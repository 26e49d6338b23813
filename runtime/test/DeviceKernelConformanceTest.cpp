//===- DeviceKernelConformanceTest.cpp - every kernel against the host ----===//
//
// The kernel half of the device-conformance suite: for every op of the plan
// format (plan.fbs's OpKind), forward and backward, in f32, bf16 and f16
// (and the integer and i1 cases the ops allow), a one-call program runs on
// a backend's device through Queue::launch, with device memory filled and
// read back through copies, and its outputs are compared with the host
// kernel's (host::runProgram) on the same random inputs.
//
// Tolerances (DESIGN.md's "equal within t": max|a - b| / max|ref| per
// output) are per dtype: a GPU's exp/log/erf differ from glibc's by an ulp
// or two and cuBLAS sums a GEMM in another order, so an f32 result moves in
// its last bits and a 16-bit result by at most one rounding step. NaN and
// infinity must sit at the same places, integers and i1 must be equal,
// and so must dequantize's outputs (a quantized base is the same weight on
// every device).
// The host backend, whose launch runs the very host kernels, must match
// bitwise: that is how the harness itself is tested on machines without a
// GPU, where the cuda instantiation is skipped with the backend's reason.
//
//===----------------------------------------------------------------------===//

#include "DeviceKernelCases.h"
#include "PlanTestUtil.h"

#include "rp/runtime/Device.h"
#include "rp/runtime/Half.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/host/Dispatch.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace rp::runtime;
using namespace rp::runtime::conformance;
using namespace rp::runtime::test;
using ::testing::HasSubstr;

namespace {

/// The relative tolerance of an output of `dtype`.
double tolerance(DType dtype) {
  switch (dtype) {
  case DType::f64:
    return 1e-12;
  case DType::f32:
    return 2e-5;
  case DType::f16:
    return 2e-3; // A little over one rounding step (2^-11).
  case DType::bf16:
    return 1e-2; // A little over one rounding step (2^-8).
  default:
    return 0;
  }
}

void fillBuffer(const Buf &b, uint8_t *data, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = numElements(b.shape);
  for (int64_t i = 0; i < n; ++i) {
    double u = double(rng() >> 11) / double(1ull << 53);
    double v = b.fill.lo + u * (b.fill.hi - b.fill.lo);
    if (b.fill.kind == Fill::integers)
      v = std::floor(v);
    if (b.fill.kind == Fill::boolean)
      v = (rng() & 1) ? 1 : 0;
    if (b.fill.kind == Fill::iota)
      v = double(i);
    if (b.fill.kind == Fill::labels)
      v = i % 5 == 4 ? -100 : std::floor(v);
    switch (b.dtype) {
    case DType::f32:
      reinterpret_cast<float *>(data)[i] = float(v);
      break;
    case DType::f64:
      reinterpret_cast<double *>(data)[i] = v;
      break;
    case DType::f16:
      reinterpret_cast<f16 *>(data)[i] = f16(v);
      break;
    case DType::bf16:
      reinterpret_cast<bf16 *>(data)[i] = bf16(v);
      break;
    case DType::i32:
      reinterpret_cast<int32_t *>(data)[i] = int32_t(v);
      break;
    case DType::i64:
      reinterpret_cast<int64_t *>(data)[i] = int64_t(v);
      break;
    case DType::i1:
      data[i] = v != 0 ? 1 : 0;
      break;
    case DType::u8:
      data[i] = uint8_t(int64_t(v));
      break;
    }
  }
}

double valueAt(DType dtype, const uint8_t *data, int64_t i) {
  switch (dtype) {
  case DType::f32:
    return reinterpret_cast<const float *>(data)[i];
  case DType::f64:
    return reinterpret_cast<const double *>(data)[i];
  case DType::f16:
    return float(reinterpret_cast<const f16 *>(data)[i]);
  case DType::bf16:
    return float(reinterpret_cast<const bf16 *>(data)[i]);
  case DType::i32:
    return reinterpret_cast<const int32_t *>(data)[i];
  case DType::i64:
    return double(reinterpret_cast<const int64_t *>(data)[i]);
  case DType::i1:
    return data[i] != 0;
  case DType::u8:
    return data[i];
  }
  return 0;
}

/// The program of `c` on device 0, its inputs then its outputs as buffers.
Plan planOf(const KernelCase &c) {
  Plan plan;
  plan.devices = 1;
  plan.staged = true;
  KernelCallDesc call;
  call.op = c.op;
  call.ints = c.ints;
  call.floats = c.floats;
  call.loc = c.name;
  auto add = [&](const Buf &b, std::vector<uint32_t> &to) {
    BufferDesc d;
    d.dtype = b.dtype;
    d.shape = b.shape;
    d.device = 0;
    d.name = c.name + "#" + std::to_string(plan.buffers.size());
    plan.buffers.push_back(d);
    to.push_back(uint32_t(plan.buffers.size() - 1));
  };
  for (const Buf &b : c.inputs)
    add(b, call.inputs);
  for (const Buf &b : c.outputs)
    add(b, call.outputs);
  plan.programs.push_back({c.name, {call}});
  return plan;
}

//===----------------------------------------------------------------------===//
// The harness
//===----------------------------------------------------------------------===//

class DeviceKernelConformance : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    Expected<std::unique_ptr<Backend>> opened =
        createBackend(GetParam(), backendOptions(1, 2));
    if (!opened && opened.getStatus().getCode() == StatusCode::Unavailable)
      GTEST_SKIP() << "backend '" << GetParam()
                   << "' not run: " << opened.getStatus().getMessage();
    ASSERT_TRUE(opened) << opened.getStatus().toString();
    backend = std::move(*opened);
  }

  /// Runs `plan`'s program 0 on device 0 with `inputs` (host bytes per
  /// input buffer); returns the bytes of every buffer after the launch.
  Status runOnDevice(const Plan &plan,
                     const std::vector<std::vector<uint8_t>> &contents,
                     std::vector<std::vector<uint8_t>> &after) {
    Device &device = backend->getDevice(0);
    BufferAddresses at(plan.buffers.size(), nullptr);
    std::vector<void *> staging;
    auto release = [&] {
      for (void *p : at)
        device.deallocate(p);
      for (void *p : staging)
        backend->deallocateHost(p);
    };
    Queue &up = device.getQueue(QueueKind::activation_h2d);
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      size_t bytes = plan.buffers[b].bytes();
      Expected<void *> d = device.allocate(bytes);
      Expected<void *> h = backend->allocateHost(bytes);
      if (!d || !h) {
        release();
        return !d ? d.getStatus() : h.getStatus();
      }
      at[b] = static_cast<uint8_t *>(*d);
      staging.push_back(*h);
      std::memcpy(*h, contents[b].data(), bytes);
      if (Status s = up.copy(*d, *h, bytes, CopyKind::hostToDevice);
          s.failed()) {
        release();
        return s;
      }
    }
    Status s = up.synchronize();
    Queue &compute = device.getQueue(QueueKind::compute);
    if (s.isOk())
      s = compute.launch(plan, 0, at);
    Status synced = compute.synchronize();
    if (s.isOk())
      s = synced;
    Queue &down = device.getQueue(QueueKind::d2h);
    for (size_t b = 0; s.isOk() && b < plan.buffers.size(); ++b)
      s = down.copy(staging[b], at[b], plan.buffers[b].bytes(),
                    CopyKind::deviceToHost);
    if (s.isOk())
      s = down.synchronize();
    after.resize(plan.buffers.size());
    for (size_t b = 0; s.isOk() && b < plan.buffers.size(); ++b) {
      const uint8_t *h = static_cast<const uint8_t *>(staging[b]);
      after[b].assign(h, h + plan.buffers[b].bytes());
    }
    release();
    return s;
  }

  std::unique_ptr<Backend> backend;
};

/// The host kernels on host memory: the reference.
Status runOnHost(const Plan &plan, std::vector<std::vector<uint8_t>> &data) {
  static ThreadPool pool(2);
  BufferAddresses at;
  for (std::vector<uint8_t> &d : data)
    at.push_back(d.data());
  return host::runProgram(pool, plan, 0, at);
}

TEST_P(DeviceKernelConformance, EveryKernelMatchesTheHostKernel) {
  const bool exact = std::string(GetParam()) == "host";
  std::vector<bool> covered(kNumOpKinds, false);
  std::vector<KernelCase> cases = allCases();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const KernelCase &c = cases[ci];
    SCOPED_TRACE(c.name);
    covered[static_cast<int>(c.op)] = true;
    Plan plan = planOf(c);
    std::vector<std::vector<uint8_t>> data(plan.buffers.size());
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      data[b].assign(plan.buffers[b].bytes(), 0);
      if (b < c.inputs.size())
        fillBuffer(c.inputs[b], data[b].data(), ci * 131 + b);
    }
    std::vector<std::vector<uint8_t>> reference = data, got;
    Status hostStatus = runOnHost(plan, reference);
    ASSERT_TRUE(hostStatus.isOk()) << hostStatus.toString();
    Status s = runOnDevice(plan, data, got);
    ASSERT_TRUE(s.isOk()) << s.toString();
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      size_t b = c.inputs.size() + o;
      const BufferDesc &desc = plan.buffers[b];
      SCOPED_TRACE("output " + std::to_string(o) + " " + dtypeName(desc.dtype));
      // Outputs start as zeros; random inputs never give all zeros back, so
      // this shows that the reference kernel ran.
      ASSERT_NE(reference[b], data[b]) << "the host kernel wrote nothing";
      if (exact) {
        EXPECT_EQ(got[b], reference[b]) << "the host device runs the host "
                                           "kernels: bitwise equal";
        continue;
      }
      // A quantized base is dequantized the same way on every device
      // (DESIGN.md): each value one rounded product, no library sum.
      if (c.op == OpKind::dequantize) {
        EXPECT_EQ(got[b], reference[b]) << "dequantize: bitwise the host's "
                                           "on every device";
        continue;
      }
      double maxRef = 0, maxDiff = 0;
      for (int64_t i = 0; i < desc.size(); ++i) {
        double r = valueAt(desc.dtype, reference[b].data(), i);
        double g = valueAt(desc.dtype, got[b].data(), i);
        ASSERT_EQ(std::isnan(r), std::isnan(g)) << "element " << i;
        if (std::isnan(r))
          continue;
        if (std::isinf(r) || std::isinf(g)) {
          ASSERT_EQ(r, g) << "element " << i;
          continue;
        }
        maxRef = std::max(maxRef, std::fabs(r));
        maxDiff = std::max(maxDiff, std::fabs(r - g));
      }
      double t = tolerance(desc.dtype);
      EXPECT_LE(maxDiff, t * std::max(maxRef, 1e-30))
          << "max |device - host| " << maxDiff << " against max |host| "
          << maxRef << " (tolerance " << t << ")";
    }
  }
  for (int op = 0; op < kNumOpKinds; ++op)
    EXPECT_TRUE(covered[op])
        << "no case runs " << opKindName(static_cast<OpKind>(op));
}

// The library paths (cuBLASLt's cached plans, cuBLAS's grouped GEMM for the
// MoE weight gradient) give the same bits run after run, as DESIGN.md's
// determinism needs; the test above holds them to the host's values.
TEST_P(DeviceKernelConformance, LibraryGemmsAreBitwiseRunToRun) {
  std::vector<KernelCase> cases = allCases();
  int checked = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const KernelCase &c = cases[ci];
    if (c.name.rfind("matmul", 0) != 0 &&
        c.name.rfind("moe_grouped_matmul", 0) != 0)
      continue;
    SCOPED_TRACE(c.name);
    Plan plan = planOf(c);
    std::vector<std::vector<uint8_t>> data(plan.buffers.size());
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      data[b].assign(plan.buffers[b].bytes(), 0);
      if (b < c.inputs.size())
        fillBuffer(c.inputs[b], data[b].data(), ci * 131 + b);
    }
    std::vector<std::vector<uint8_t>> first, second;
    Status s = runOnDevice(plan, data, first);
    ASSERT_TRUE(s.isOk()) << s.toString();
    s = runOnDevice(plan, data, second);
    ASSERT_TRUE(s.isOk()) << s.toString();
    for (size_t o = 0; o < c.outputs.size(); ++o)
      EXPECT_EQ(first[c.inputs.size() + o], second[c.inputs.size() + o])
          << "output " << o;
    ++checked;
  }
  EXPECT_GE(checked, 9 * 3);
}

TEST_P(DeviceKernelConformance, ABadIndexIsAnErrorNamingTheCall) {
  KernelCase c{"gather_bad",
               OpKind::gather,
               {{DType::f32, {4, 3}}, {DType::i64, {2}, integersIn(7, 8)}},
               {{DType::f32, {2, 3}}},
               {0}};
  Plan plan = planOf(c);
  std::vector<std::vector<uint8_t>> data(plan.buffers.size()), got;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    data[b].assign(plan.buffers[b].bytes(), 0);
    if (b < c.inputs.size())
      fillBuffer(c.inputs[b], data[b].data(), b);
  }
  // On the host the launch fails; on a GPU the kernel reports it and the
  // compute queue's synchronize does. Either way the step fails, saying
  // which call and which index.
  Status s = runOnDevice(plan, data, got);
  EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << s.toString();
  EXPECT_THAT(s.getMessage(), HasSubstr("gather_bad"));
  EXPECT_THAT(s.getMessage(), HasSubstr("index 7"));
  // The device is still usable afterwards.
  c.inputs[1].fill = integersIn(0, 4);
  fillBuffer(c.inputs[1], data[1].data(), 1);
  EXPECT_TRUE(runOnDevice(plan, data, got).isOk());
}

TEST_P(DeviceKernelConformance, BadMoEDataIsAnErrorNamingTheCall) {
  // What the host checks by reading experts, counts and positions the cuda
  // kernels check on the GPU (the host never reads them there); both fail
  // the step naming the call and the value.
  struct Bad {
    KernelCase c;
    const char *says;
  };
  const DType f = DType::f32, i32 = DType::i32;
  const Bad bads[] = {
      {{"moe_dispatch_bad",
        OpKind::moe_dispatch,
        {{f, {3, 4}}, {DType::i64, {3, 2}, integersIn(7, 8)}},
        {{f, {6, 4}}, {i32, {3, 2}}, {i32, {4}}}},
       "expert 7 of "},
      {{"moe_grouped_matmul_bad",
        OpKind::moe_grouped_matmul,
        {{f, {10, 5}}, {f, {2, 5, 6}}, {i32, {2}, integersIn(6, 7)}},
        {{f, {10, 6}}},
        {0}},
       "rows; the groups must fit in the 10 rows"},
      {{"moe_combine_grad_bad",
        OpKind::moe_combine_grad,
        {{f, {6, 4}}, {i32, {3, 2}, integersIn(0, 1)}, {f, {3, 4}}},
        {{f, {6, 4}}},
        {0}},
       "row 0 is named by two choices"},
  };
  for (const Bad &bad : bads) {
    SCOPED_TRACE(bad.c.name);
    Plan plan = planOf(bad.c);
    std::vector<std::vector<uint8_t>> data(plan.buffers.size()), got;
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      data[b].assign(plan.buffers[b].bytes(), 0);
      if (b < bad.c.inputs.size())
        fillBuffer(bad.c.inputs[b], data[b].data(), b);
    }
    Status s = runOnDevice(plan, data, got);
    EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << s.toString();
    EXPECT_THAT(s.getMessage(), HasSubstr(bad.c.name));
    EXPECT_THAT(s.getMessage(), HasSubstr(bad.says));
  }
}

TEST_P(DeviceKernelConformance, KernelScratchIsReusedAcrossLaunches) {
  // attention_grad, norm_grad, cross_entropy and the fused loss take
  // scratch from the device's allocator on every launch; after the first
  // round it must come from what the allocator already holds.
  // (The fused loss in bf16: its weight gradient's f32 accumulator too.)
  std::vector<KernelCase> cases;
  for (KernelCase &c : backwardCases(DType::f32))
    if (c.op == OpKind::attention_grad || c.op == OpKind::norm_grad)
      cases.push_back(std::move(c));
  for (KernelCase &c : backwardCases(DType::bf16))
    if (c.op == OpKind::linear_cross_entropy_grad)
      cases.push_back(std::move(c));
  Device &device = backend->getDevice(0);
  size_t afterFirst = 0;
  for (int round = 0; round < 5; ++round) {
    for (const KernelCase &c : cases) {
      Plan plan = planOf(c);
      std::vector<std::vector<uint8_t>> data(plan.buffers.size()), got;
      for (size_t b = 0; b < plan.buffers.size(); ++b) {
        data[b].assign(plan.buffers[b].bytes(), 0);
        if (b < c.inputs.size())
          fillBuffer(c.inputs[b], data[b].data(), b);
      }
      ASSERT_TRUE(runOnDevice(plan, data, got).isOk()) << c.name;
    }
    MemoryUse use = device.getMemoryUse();
    EXPECT_EQ(use.inUse, 0u) << "round " << round;
    if (round == 0)
      afterFirst = use.reserved;
    else
      EXPECT_LE(use.reserved, afterFirst) << "round " << round;
  }
}

TEST_P(DeviceKernelConformance, AttentionRepeatsBitwiseOnEveryPath) {
  // rp's contract (DESIGN.md, "GPU kernels"): a run repeats bit for bit,
  // on cuDNN's fused SDPA (its deterministic backward) as on the CUDA-core
  // kernel. On cuda, docs/cuda.md's attention line says which path ran.
  std::vector<KernelCase> cases;
  for (DType t : {DType::bf16, DType::f16, DType::f32})
    for (KernelCase &c : cudnnAttentionCases(t))
      cases.push_back(std::move(c));
  for (const KernelCase &c : cases) {
    SCOPED_TRACE(c.name);
    Plan plan = planOf(c);
    std::vector<std::vector<uint8_t>> data(plan.buffers.size()), first, again;
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      data[b].assign(plan.buffers[b].bytes(), 0);
      if (b < c.inputs.size())
        fillBuffer(c.inputs[b], data[b].data(), 7 * b + 1);
    }
    ASSERT_TRUE(runOnDevice(plan, data, first).isOk());
    ASSERT_TRUE(runOnDevice(plan, data, again).isOk());
    for (size_t o = c.inputs.size(); o < plan.buffers.size(); ++o)
      EXPECT_EQ(first[o], again[o]) << "output " << o - c.inputs.size();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceKernelConformance,
                         ::testing::Values("host", "cuda"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

} // namespace
