//===- DeviceConformanceTest.cpp - what every backend's devices must do ---===//
//
// One suite over the device interface (Device.h), instantiated for every
// backend DESIGN.md names. Each test uses the interface alone, with the
// pointers a real device would hand out (device memory is touched only
// through copies), so that the same test runs unchanged on a GPU. A
// backend that is not built in, or finds no device, is skipped with its
// own message (createBackend's Unavailable), never failed: on a machine
// without a GPU the cuda instantiation reports why it did not run.
//
// On the host backend a queue runs each command before the enqueue
// returns; the tests do not rely on it. They synchronize before they read,
// and the cross-device test enqueues from two threads with the host-side
// "recorded" signal of the executor's protocol, which a cuda stream needs.
//
//===----------------------------------------------------------------------===//

#include "PlanTestUtil.h"

#include "rp/runtime/Device.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

using namespace rp::runtime;
using namespace rp::runtime::test;
using ::testing::HasSubstr;

namespace {

constexpr uint32_t kDevices = 2;

class DeviceConformance : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    Expected<std::unique_ptr<Backend>> opened =
        createBackend(GetParam(), backendOptions(kDevices, 2));
    if (!opened && opened.getStatus().getCode() == StatusCode::Unavailable) {
      // A machine with one GPU runs every test but the two-device ones.
      Expected<std::unique_ptr<Backend>> one =
          createBackend(GetParam(), backendOptions(1, 2));
      if (!one)
        GTEST_SKIP() << "backend '" << GetParam()
                     << "' not run: " << opened.getStatus().getMessage();
      backend = std::move(*one);
    } else {
      ASSERT_TRUE(opened) << opened.getStatus().toString();
      backend = std::move(*opened);
    }
    devices = backend->getNumDevices();
    last = devices - 1;
  }
  void TearDown() override {
    for (auto &[device, p] : deviceMemory)
      backend->getDevice(device).deallocate(p);
    for (void *p : hostMemory)
      backend->deallocateHost(p);
  }

  /// `bytes` of host memory filled with `fill`, freed by TearDown.
  uint8_t *host(size_t bytes, uint8_t fill = 0) {
    Expected<void *> p = backend->allocateHost(bytes);
    EXPECT_TRUE(p) << p.getStatus().toString();
    if (!p)
      return nullptr;
    hostMemory.push_back(*p);
    std::memset(*p, fill, bytes);
    return static_cast<uint8_t *>(*p);
  }
  /// `bytes` of device `d` memory, freed by TearDown, set from `init`
  /// (host memory) through a copy when given.
  uint8_t *device(uint32_t d, size_t bytes, const uint8_t *init = nullptr) {
    Expected<void *> p = backend->getDevice(d).allocate(bytes);
    EXPECT_TRUE(p) << p.getStatus().toString();
    if (!p)
      return nullptr;
    deviceMemory.emplace_back(d, *p);
    if (init) {
      Queue &q = backend->getDevice(d).getQueue(QueueKind::weight_h2d);
      EXPECT_TRUE(q.copy(*p, init, bytes, CopyKind::hostToDevice).isOk());
      EXPECT_TRUE(q.synchronize().isOk());
    }
    return static_cast<uint8_t *>(*p);
  }
  /// Device memory read back through a copy on `d`'s d2h queue.
  std::vector<uint8_t> read(uint32_t d, const uint8_t *p, size_t bytes) {
    uint8_t *h = host(bytes);
    Queue &q = backend->getDevice(d).getQueue(QueueKind::d2h);
    EXPECT_TRUE(q.copy(h, p, bytes, CopyKind::deviceToHost).isOk());
    EXPECT_TRUE(q.synchronize().isOk());
    return std::vector<uint8_t>(h, h + bytes);
  }

  std::unique_ptr<Backend> backend;
  /// The devices opened (kDevices, or one on a one-GPU machine) and the
  /// last of them, where single-device tests run.
  uint32_t devices = kDevices, last = kDevices - 1;
  std::vector<std::pair<uint32_t, void *>> deviceMemory;
  std::vector<void *> hostMemory;
};

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t &b : bytes)
    b = static_cast<uint8_t>(rng());
  return bytes;
}

TEST_P(DeviceConformance, OpensTheDevicesAndQueuesAsked) {
  EXPECT_STREQ(backend->getName(), GetParam());
  EXPECT_FALSE(backend->describe().empty());
  ASSERT_EQ(backend->getNumDevices(), devices);
  std::vector<const Queue *> seen;
  for (uint32_t d = 0; d < devices; ++d) {
    Device &device = backend->getDevice(d);
    EXPECT_EQ(device.getIndex(), d);
    for (int k = 0; k < kNumQueueKinds; ++k) {
      Queue &q = device.getQueue(QueueKind(k));
      EXPECT_EQ(q.getDevice(), d);
      EXPECT_EQ(q.getKind(), QueueKind(k));
      EXPECT_EQ(&device.getQueue(QueueKind(k)), &q) << "one queue per kind";
      seen.push_back(&q);
    }
    // Stage-boundary activations go before prefetched weights.
    EXPECT_GT(device.getQueue(QueueKind::activation_h2d).getPriority(),
              device.getQueue(QueueKind::weight_h2d).getPriority());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
}

TEST_P(DeviceConformance, AllocationIsAlignedDistinctAndFreed) {
  const size_t sizes[] = {0, 1, 63, 64, 1000, size_t(1) << 20};
  for (int round = 0; round < 2; ++round) {
    // Per memory (host, then each device): its allocations, as ranges.
    for (int where = -1; where < int(devices); ++where) {
      SCOPED_TRACE("memory " + std::to_string(where));
      std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
      std::vector<void *> got;
      for (size_t bytes : sizes) {
        Expected<void *> p =
            where < 0 ? backend->allocateHost(bytes)
                      : backend->getDevice(uint32_t(where)).allocate(bytes);
        ASSERT_TRUE(p) << p.getStatus().toString();
        ASSERT_NE(*p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u) << bytes;
        uintptr_t at = reinterpret_cast<uintptr_t>(*p);
        ranges.emplace_back(at, at + std::max<size_t>(bytes, 1));
        got.push_back(*p);
      }
      std::sort(ranges.begin(), ranges.end());
      for (size_t i = 1; i < ranges.size(); ++i)
        EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "overlap";
      // Freed memory may come back in the next round; it must not leak
      // (the sanitizer builds check) nor fail.
      for (void *p : got) {
        if (where < 0)
          backend->deallocateHost(p);
        else
          backend->getDevice(uint32_t(where)).deallocate(p);
      }
    }
  }
  backend->deallocateHost(nullptr);
  backend->getDevice(0).deallocate(nullptr);
}

TEST_P(DeviceConformance, FreedDeviceMemoryIsReused) {
  // A step frees and allocates the same sizes again: after the first round
  // the allocator must serve them from what it holds (the cuda device's
  // stream-ordered pool), never growing, and account for every byte.
  Device &dev = backend->getDevice(last);
  const MemoryUse before = dev.getMemoryUse();
  const size_t sizes[] = {size_t(1) << 20, 4096, 300000, size_t(3) << 20};
  size_t heldAfterFirst = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<void *> got;
    for (size_t bytes : sizes) {
      Expected<void *> p = dev.allocate(bytes);
      ASSERT_TRUE(p) << p.getStatus().toString();
      got.push_back(*p);
    }
    MemoryUse during = dev.getMemoryUse();
    if (during.reserved) { // Zero: the backend does not track it.
      EXPECT_GE(during.inUse, before.inUse + (size_t(4) << 20) + 304096);
      EXPECT_GE(during.reserved, during.inUse);
    }
    for (void *p : got)
      dev.deallocate(p);
    MemoryUse after = dev.getMemoryUse();
    EXPECT_EQ(after.inUse, before.inUse) << "round " << round;
    if (round == 0)
      heldAfterFirst = after.reserved;
    EXPECT_LE(after.reserved, heldAfterFirst) << "round " << round;
  }
}

TEST_P(DeviceConformance, CopiesMoveExactlyTheBytesAsked) {
  const size_t n = 4096, offset = 100, count = 777, from = 5;
  std::vector<uint8_t> pattern = randomBytes(n, 1);
  uint8_t *src = host(n);
  std::memcpy(src, pattern.data(), n);
  uint8_t *sentinel = host(n, 0xAB);
  for (uint32_t d = 0; d < devices; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    uint8_t *a = device(d, n, sentinel);
    uint8_t *b = device(d, n, sentinel);
    Device &dev = backend->getDevice(d);
    Queue &up = dev.getQueue(QueueKind::activation_h2d);
    Queue &down = dev.getQueue(QueueKind::d2h);
    ASSERT_TRUE(
        up.copy(a + offset, src + from, count, CopyKind::hostToDevice).isOk());
    // Nothing moves for zero bytes.
    ASSERT_TRUE(up.copy(a, src, 0, CopyKind::hostToDevice).isOk());
    ASSERT_TRUE(
        up.copy(b + 1, a + offset, count, CopyKind::deviceToDevice).isOk());
    ASSERT_TRUE(up.synchronize().isOk());
    uint8_t *out = host(n, 0xCD);
    ASSERT_TRUE(
        down.copy(out + 3, b + 1, count, CopyKind::deviceToHost).isOk());
    ASSERT_TRUE(down.synchronize().isOk());

    std::vector<uint8_t> gotA = read(d, a, n), gotB = read(d, b, n);
    for (size_t i = 0; i < n; ++i) {
      bool inA = i >= offset && i < offset + count;
      ASSERT_EQ(gotA[i], inA ? pattern[i - offset + from] : 0xAB) << i;
      bool inB = i >= 1 && i < 1 + count;
      ASSERT_EQ(gotB[i], inB ? pattern[i - 1 + from] : 0xAB) << i;
      bool inOut = i >= 3 && i < 3 + count;
      ASSERT_EQ(out[i], inOut ? pattern[i - 3 + from] : 0xCD) << i;
    }
  }
}

TEST_P(DeviceConformance, AQueueRunsItsWorkInOrder) {
  // Many writes of one slot, then a chain through two device buffers and
  // back, all on one queue with no synchronize between: only enqueue
  // order makes the last value and the chain's result come out.
  const int writes = 64;
  const size_t n = 256;
  uint8_t *values = host(writes * 8);
  for (int k = 0; k < writes; ++k)
    std::memset(values + k * 8, k + 1, 8);
  std::vector<uint8_t> pattern = randomBytes(n, 2);
  uint8_t *src = host(n);
  std::memcpy(src, pattern.data(), n);
  uint8_t *slotOut = host(8), *chainOut = host(n);
  uint8_t *slot = device(0, 8), *x = device(0, n), *y = device(0, n);
  Queue &q = backend->getDevice(0).getQueue(QueueKind::weight_h2d);
  for (int k = 0; k < writes; ++k)
    ASSERT_TRUE(q.copy(slot, values + k * 8, 8, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(q.copy(slotOut, slot, 8, CopyKind::deviceToHost).isOk());
  ASSERT_TRUE(q.copy(x, src, n, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(q.copy(y, x, n, CopyKind::deviceToDevice).isOk());
  ASSERT_TRUE(q.copy(chainOut, y, n, CopyKind::deviceToHost).isOk());
  ASSERT_TRUE(q.synchronize().isOk());
  EXPECT_EQ(std::vector<uint8_t>(slotOut, slotOut + 8),
            std::vector<uint8_t>(8, uint8_t(writes)));
  EXPECT_EQ(std::vector<uint8_t>(chainOut, chainOut + n), pattern);
}

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Queue::timeJobs (cuda: cudaEvents around each job): each job's span on
// the device, in the order the jobs were begun, inside the host's time
// around them; a job without commands, or one asked for out of order, is
// not measured, and the queue is back in step after.
TEST_P(DeviceConformance, AQueueTimesItsJobsWhereItCan) {
  Queue &q = backend->getDevice(last).getQueue(QueueKind::weight_h2d);
  if (!q.timeJobs())
    GTEST_SKIP() << "backend '" << GetParam()
                 << "' does not time jobs: traces keep the host's spans";
  const size_t n = size_t(64) << 20;
  uint8_t *src = host(n, 1), *dst = device(last, n);
  const int64_t before = steadyNs();
  q.beginJob(3);
  ASSERT_TRUE(q.copy(dst, src, n, CopyKind::hostToDevice).isOk());
  q.beginJob(7);
  q.beginJob(9);
  ASSERT_TRUE(q.copy(dst, src, n / 2, CopyKind::hostToDevice).isOk());
  int64_t s3 = 0, e3 = 0, s9 = 0, e9 = 0, x = 0, y = 0;
  ASSERT_TRUE(q.takeJobTime(3, true, s3, e3));
  EXPECT_FALSE(q.takeJobTime(7, true, x, y));
  ASSERT_TRUE(q.takeJobTime(9, true, s9, e9));
  const int64_t after = steadyNs();
  // The device's clock is placed on the host's within microseconds.
  const int64_t slack = 1000000;
  EXPECT_LE(before - slack, s3);
  EXPECT_LE(e3, s9);
  EXPECT_LE(e9, after + slack);
  // 64 MiB over PCIe take hundreds of microseconds; half that, half.
  EXPECT_GT(e3 - s3, 50000);
  EXPECT_GT(e9 - s9, 25000);
  EXPECT_LT(e9 - s9, e3 - s3);
  q.beginJob(1);
  ASSERT_TRUE(q.copy(dst, src, 8, CopyKind::hostToDevice).isOk());
  EXPECT_FALSE(q.takeJobTime(2, true, x, y));
  EXPECT_FALSE(q.takeJobTime(1, true, x, y));
  q.beginJob(4);
  ASSERT_TRUE(q.copy(dst, src, 8, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(q.takeJobTime(4, true, x, y));
  EXPECT_LE(e9, x);
  EXPECT_LE(x, y);
  ASSERT_TRUE(q.synchronize().isOk());
}

/// A plan of two programs over f32[n] buffers of device `d`: "sum" writes
/// c = (a + b) * a, "double" writes y = x + x.
struct TinyPlan {
  PlanBuilder b{kDevices, 1, true};
  uint32_t a, bb, c, x, y, sum, twice;
  TinyPlan(int64_t n, uint32_t d) {
    int32_t on = int32_t(d);
    a = b.buffer("a", {n}, on);
    bb = b.buffer("b", {n}, on);
    c = b.buffer("c", {n}, on);
    x = b.buffer("x", {n}, on);
    y = b.buffer("y", {n}, on);
    uint32_t t = b.buffer("t", {n}, on);
    sum = b.program("sum", {call(OpKind::add, {a, bb}, {t}),
                            call(OpKind::mul, {t, a}, {c})});
    twice = b.program("double", {call(OpKind::add, {x, x}, {y})});
  }
};

std::vector<float> randomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float &f : v)
    f = dist(rng);
  return v;
}

TEST_P(DeviceConformance, AKernelLaunchRunsAProgram) {
  const int64_t n = 1000;
  TinyPlan p(n, last);
  const Plan &plan = p.b.plan;
  size_t bytes = n * sizeof(float);
  std::vector<float> a = randomFloats(n, 3), b = randomFloats(n, 4);
  BufferAddresses at(plan.buffers.size(), nullptr);
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    at[i] = device(last, bytes);
  uint8_t *ha = host(bytes), *hb = host(bytes);
  std::memcpy(ha, a.data(), bytes);
  std::memcpy(hb, b.data(), bytes);
  Device &dev = backend->getDevice(last);
  Queue &up = dev.getQueue(QueueKind::activation_h2d);
  ASSERT_TRUE(up.copy(at[p.a], ha, bytes, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(up.copy(at[p.bb], hb, bytes, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(up.synchronize().isOk());
  Queue &compute = dev.getQueue(QueueKind::compute);
  Status launched = compute.launch(plan, p.sum, at);
  ASSERT_TRUE(launched.isOk()) << launched.toString();
  Status done = compute.synchronize();
  ASSERT_TRUE(done.isOk()) << done.toString();
  std::vector<uint8_t> got = read(last, at[p.c], bytes);
  const float *c = reinterpret_cast<const float *>(got.data());
  for (int64_t i = 0; i < n; ++i) {
    // One rounding per op, as IEEE f32 gives on every device.
    float t = a[i] + b[i];
    ASSERT_EQ(c[i], t * a[i]) << i;
  }
}

TEST_P(DeviceConformance, LaunchesRunOnTheComputeQueueOnly) {
  TinyPlan p(4, last);
  BufferAddresses at(p.b.plan.buffers.size(), nullptr);
  for (size_t i = 0; i < at.size(); ++i)
    at[i] = device(last, 4 * sizeof(float));
  Status s = backend->getDevice(last)
                 .getQueue(QueueKind::d2h)
                 .launch(p.b.plan, p.twice, at);
  EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << s.toString();
  EXPECT_THAT(s.getMessage(), HasSubstr("compute queue"));
}

TEST_P(DeviceConformance, AnEventNeverRecordedOrdersNothing) {
  auto event = backend->getDevice(0).createEvent();
  ASSERT_TRUE(event) << event.getStatus().toString();
  EXPECT_TRUE((*event)->query());
  EXPECT_TRUE((*event)->synchronize().isOk());
  Queue &q = backend->getDevice(last).getQueue(QueueKind::compute);
  EXPECT_TRUE(q.wait(**event).isOk());
  EXPECT_TRUE(q.synchronize().isOk());
}

TEST_P(DeviceConformance, AHostWaitSeesTheWorkBeforeTheRecord) {
  const size_t n = size_t(2) << 20;
  std::vector<uint8_t> pattern = randomBytes(n, 5);
  uint8_t *src = host(n);
  std::memcpy(src, pattern.data(), n);
  uint8_t *dst = host(n);
  uint8_t *x = device(0, n);
  auto event = backend->getDevice(0).createEvent();
  ASSERT_TRUE(event) << event.getStatus().toString();
  Queue &q = backend->getDevice(0).getQueue(QueueKind::activation_h2d);
  ASSERT_TRUE(q.copy(x, src, n, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(q.copy(dst, x, n, CopyKind::deviceToHost).isOk());
  ASSERT_TRUE(q.record(**event).isOk());
  ASSERT_TRUE((*event)->synchronize().isOk());
  EXPECT_TRUE((*event)->query());
  EXPECT_EQ(std::memcmp(dst, pattern.data(), n), 0);
}

TEST_P(DeviceConformance, AnEventIsRecordedOnItsOwnDevice) {
  if (devices < 2)
    GTEST_SKIP() << "needs two devices; the " << GetParam()
                 << " backend opened one";
  auto event = backend->getDevice(0).createEvent();
  ASSERT_TRUE(event) << event.getStatus().toString();
  Status s =
      backend->getDevice(last).getQueue(QueueKind::compute).record(**event);
  EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument) << s.toString();
  EXPECT_THAT(s.getMessage(), HasSubstr("device 0"));
}

TEST_P(DeviceConformance, AnEventOnDevice0sD2HUnblocksDevice1sCompute) {
  if (devices < 2)
    GTEST_SKIP() << "needs two devices; the " << GetParam()
                 << " backend opened one";
  // The executor's protocol, with a thread per device: device 0 uploads,
  // downloads to pinned memory and records on its d2h queue, then signals
  // the host; device 1 waits for the signal, makes its queues wait for
  // device 0's event, uploads, computes y = x + x and downloads. Device 0
  // starts late, so a device 1 that did not wait would read stale data.
  const int64_t n = 1 << 16;
  size_t bytes = n * sizeof(float);
  TinyPlan p(n, last);
  const Plan &plan = p.b.plan;
  std::vector<float> values = randomFloats(n, 6);
  uint8_t *src = host(bytes), *hop = host(bytes), *result = host(bytes);
  std::memcpy(src, values.data(), bytes);
  uint8_t *x0 = device(0, bytes);
  BufferAddresses at(plan.buffers.size(), nullptr);
  for (size_t i = 0; i < at.size(); ++i)
    at[i] = device(last, bytes);
  auto uploaded = backend->getDevice(0).createEvent();
  auto downloaded = backend->getDevice(0).createEvent();
  auto arrived = backend->getDevice(last).createEvent();
  auto computed = backend->getDevice(last).createEvent();
  for (auto *e : {&uploaded, &downloaded, &arrived, &computed})
    ASSERT_TRUE(*e) << e->getStatus().toString();

  std::mutex mutex;
  std::condition_variable signal;
  bool recorded = false;
  Status producer;
  std::thread device0([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Device &d = backend->getDevice(0);
    Queue &up = d.getQueue(QueueKind::activation_h2d);
    Queue &down = d.getQueue(QueueKind::d2h);
    Status s = up.copy(x0, src, bytes, CopyKind::hostToDevice);
    if (s.isOk())
      s = up.record(**uploaded);
    if (s.isOk())
      s = down.wait(**uploaded);
    if (s.isOk())
      s = down.copy(hop, x0, bytes, CopyKind::deviceToHost);
    if (s.isOk())
      s = down.record(**downloaded);
    std::lock_guard<std::mutex> lock(mutex);
    producer = s;
    recorded = true;
    signal.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    signal.wait(lock, [&] { return recorded; });
  }
  device0.join();
  ASSERT_TRUE(producer.isOk()) << producer.toString();
  Device &d1 = backend->getDevice(last);
  Queue &up = d1.getQueue(QueueKind::activation_h2d);
  Queue &compute = d1.getQueue(QueueKind::compute);
  Queue &down = d1.getQueue(QueueKind::d2h);
  ASSERT_TRUE(up.wait(**downloaded).isOk());
  ASSERT_TRUE(up.copy(at[p.x], hop, bytes, CopyKind::hostToDevice).isOk());
  ASSERT_TRUE(up.record(**arrived).isOk());
  ASSERT_TRUE(compute.wait(**downloaded).isOk());
  ASSERT_TRUE(compute.wait(**arrived).isOk());
  ASSERT_TRUE(compute.launch(plan, p.twice, at).isOk());
  ASSERT_TRUE(compute.record(**computed).isOk());
  ASSERT_TRUE(down.wait(**computed).isOk());
  ASSERT_TRUE(down.copy(result, at[p.y], bytes, CopyKind::deviceToHost).isOk());
  ASSERT_TRUE(down.synchronize().isOk());
  const float *y = reinterpret_cast<const float *>(result);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(y[i], values[i] + values[i]) << i;
}

// cuda runs where a GPU and the cuda backend are there, and says why not
// everywhere else.
INSTANTIATE_TEST_SUITE_P(Backends, DeviceConformance,
                         ::testing::Values("host", "cuda"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

} // namespace
