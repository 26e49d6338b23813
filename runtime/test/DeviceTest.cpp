//===- DeviceTest.cpp - the backend registry and the executor on devices --===//
//
// The registry says which backends this runtime has and why one is
// missing. The executor's buffers come from the backend's devices, once
// per run: a backend that counts its allocations sees one per host buffer
// and one arena per device, and none while steps run.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/Device.h"
#include "rp/runtime/PipelineExecutor.h"

#include <gmock/gmock.h>

#include <atomic>

using namespace rp::runtime;
using namespace rp::runtime::test;
using ::testing::HasSubstr;

namespace {

TEST(DeviceRegistry, HasTheHostBackend) {
  std::vector<std::string> names = availableBackends();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "host");
  auto host = createBackend("host", backendOptions(3, 6));
  ASSERT_TRUE(host) << host.getStatus().toString();
  EXPECT_EQ((*host)->getNumDevices(), 3u);
  EXPECT_THAT((*host)->describe(), HasSubstr("2 compute thread(s)"));
}

TEST(DeviceRegistry, SaysWhyABackendIsMissing) {
  for (const char *name : {"cuda", "sim"}) {
    bool built = false;
    for (const std::string &n : availableBackends())
      built |= n == name;
    if (built)
      continue;
    auto backend = createBackend(name, backendOptions(1, 1));
    ASSERT_FALSE(backend) << name;
    EXPECT_EQ(backend.getStatus().getCode(), StatusCode::Unavailable);
    EXPECT_THAT(backend.getStatus().getMessage(), HasSubstr(name));
    EXPECT_THAT(backend.getStatus().getMessage(), HasSubstr("--backend host"));
  }
  auto unknown = createBackend("tpu", backendOptions(1, 1));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.getStatus().getCode(), StatusCode::InvalidArgument);
  EXPECT_THAT(unknown.getStatus().getMessage(),
              HasSubstr("unknown backend 'tpu'; this runtime has: host"));
  auto none = createBackend("host", backendOptions(0, 1));
  ASSERT_FALSE(none);
  EXPECT_THAT(none.getStatus().getMessage(), HasSubstr("at least one device"));
}

/// Counts allocations and frees per memory (index 0: host, d + 1: device
/// d) and hands the work on to a host backend.
class CountingBackend final : public Backend {
public:
  static constexpr int kMaxMemories = 8;
  struct Counts {
    std::atomic<int> allocated{0}, freed{0};
  };

  explicit CountingBackend(std::unique_ptr<Backend> inner)
      : inner(std::move(inner)) {
    for (uint32_t d = 0; d < this->inner->getNumDevices(); ++d)
      devices.push_back(std::make_unique<CountingDevice>(
          this->inner->getDevice(d), counts[d + 1]));
  }
  const char *getName() const override { return inner->getName(); }
  std::string describe() const override { return inner->describe(); }
  uint32_t getNumDevices() const override { return inner->getNumDevices(); }
  Device &getDevice(uint32_t index) override { return *devices[index]; }
  Expected<void *> allocateHost(size_t bytes) override {
    ++counts[0].allocated;
    return inner->allocateHost(bytes);
  }
  void deallocateHost(void *memory) override {
    ++counts[0].freed;
    inner->deallocateHost(memory);
  }

  Counts counts[kMaxMemories];

private:
  class CountingDevice final : public Device {
  public:
    CountingDevice(Device &inner, Counts &counts)
        : inner(inner), counts(counts) {}
    uint32_t getIndex() const override { return inner.getIndex(); }
    Expected<void *> allocate(size_t bytes) override {
      ++counts.allocated;
      return inner.allocate(bytes);
    }
    void deallocate(void *memory) override {
      ++counts.freed;
      inner.deallocate(memory);
    }
    bool isHostAccessible() const override { return inner.isHostAccessible(); }
    Queue &getQueue(QueueKind kind) override { return inner.getQueue(kind); }
    Expected<std::unique_ptr<Event>> createEvent() override {
      return inner.createEvent();
    }

  private:
    Device &inner;
    Counts &counts;
  };

  std::unique_ptr<Backend> inner;
  std::vector<std::unique_ptr<CountingDevice>> devices;
};

TEST(DeviceExecutor, BuffersComeFromTheirDevicesOncePerRunOneArenaEach) {
  TwoStagePlan t = makeTwoStagePlan(3, 2, 4);
  Expected<Plan> plan = writeAndLoad(t.b.plan, "counted.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto host = createBackend("host", backendOptions(plan->devices, 2));
  ASSERT_TRUE(host) << host.getStatus().toString();
  CountingBackend backend(std::move(*host));
  // One allocation per host buffer; one arena per device.
  int expected[CountingBackend::kMaxMemories] = {};
  for (const BufferDesc &b : plan->buffers)
    expected[b.device + 1] = b.onHost() ? expected[0] + 1 : 1;
  {
    auto fwd = HostForward::create(*plan, backend);
    ASSERT_TRUE(fwd) << fwd.getStatus().toString();
    for (uint32_t m = 0; m <= plan->devices; ++m) {
      EXPECT_EQ(backend.counts[m].allocated, expected[m]) << "memory " << m;
      EXPECT_GT(expected[m], 0);
    }
    auto exec = PipelineExecutor::create(*plan, **fwd, PipelineOptions());
    ASSERT_TRUE(exec) << exec.getStatus().toString();
    ThreadPool hostPool(2);
    for (int step = 0; step < 3; ++step)
      ASSERT_TRUE((*exec)->step(hostPool).isOk());
    for (uint32_t m = 0; m <= plan->devices; ++m) {
      EXPECT_EQ(backend.counts[m].allocated, expected[m]) << "memory " << m;
      EXPECT_EQ(backend.counts[m].freed, 0);
    }
  }
  for (uint32_t m = 0; m <= plan->devices; ++m)
    EXPECT_EQ(backend.counts[m].freed, expected[m]) << "memory " << m;
}

TEST(DeviceExecutor, RefusesABackendOfAnotherDeviceCount) {
  TwoStagePlan t = makeTwoStagePlan(2, 2, 4);
  Expected<Plan> plan = writeAndLoad(t.b.plan, "count.rpplan");
  ASSERT_TRUE(plan) << plan.getStatus().toString();
  auto one = createBackend("host", backendOptions(1, 1));
  ASSERT_TRUE(one);
  auto fwd = HostForward::create(*plan, **one);
  ASSERT_FALSE(fwd);
  EXPECT_THAT(fwd.getStatus().getMessage(),
              HasSubstr("lives on device 1, but the host backend has 1"));
  auto three = createBackend("host", backendOptions(3, 1));
  ASSERT_TRUE(three);
  auto fwd3 = HostForward::create(*plan, **three);
  ASSERT_TRUE(fwd3) << fwd3.getStatus().toString();
  auto exec = PipelineExecutor::create(*plan, **fwd3, PipelineOptions());
  ASSERT_FALSE(exec);
  EXPECT_THAT(exec.getStatus().getMessage(),
              HasSubstr("runs on 2 device(s), but its buffers were allocated "
                        "on a host backend of 3"));
}

} // namespace
