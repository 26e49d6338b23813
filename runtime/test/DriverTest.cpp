//===- DriverTest.cpp - drivers registering with the registry -------------===//
//
// A driver registered by name is listed and opened by that name, and its
// device count is asked of it; the linked drivers are there before any
// registration; asking a driver without a count is an error saying so.
// (Loading the cuda library, and its absence, is test/Runtime/drivers.test.)
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Driver.h"
#include "rp/runtime/host/HostDevice.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>

using namespace rp::runtime;
using ::testing::HasSubstr;

namespace {

std::atomic<int> opened{0};

Expected<std::unique_ptr<Backend>> openFake(const BackendOptions &options) {
  ++opened;
  auto backend = host::HostBackend::create(options);
  if (!backend)
    return backend.getStatus();
  return std::unique_ptr<Backend>(std::move(*backend));
}

Expected<uint32_t> countFake() { return 7u; }

TEST(DriverRegistry, OpensARegisteredDriverByName) {
  Driver fake;
  fake.name = "fake-test-driver";
  fake.create = openFake;
  fake.countDevices = countFake;
  registerDriver(fake);

  std::vector<std::string> names = availableBackends();
  ASSERT_GE(names.size(), 3u);
  // The linked drivers registered themselves first, in the build's order.
  EXPECT_EQ(names[0], "host");
  EXPECT_EQ(names[1], "sim");
  EXPECT_NE(std::find(names.begin(), names.end(), "fake-test-driver"),
            names.end());

  int before = opened;
  BackendOptions options;
  options.devices = 2;
  options.threads = 2;
  auto backend = createBackend("fake-test-driver", options);
  ASSERT_TRUE(backend) << backend.getStatus().toString();
  EXPECT_EQ((*backend)->getNumDevices(), 2u);
  EXPECT_EQ(opened, before + 1);

  Expected<uint32_t> count = countDevices("fake-test-driver");
  ASSERT_TRUE(count) << count.getStatus().toString();
  EXPECT_EQ(*count, 7u);
}

TEST(DriverRegistry, CountsOnlyDriversThatCount) {
  Expected<uint32_t> host = countDevices("host");
  ASSERT_FALSE(host);
  EXPECT_EQ(host.getStatus().getCode(), StatusCode::InvalidArgument);
  EXPECT_THAT(host.getStatus().getMessage(),
              HasSubstr("opens as many devices as asked for"));
  Expected<uint32_t> unknown = countDevices("tpu");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.getStatus().getMessage(),
              HasSubstr("unknown backend 'tpu'"));
}

} // namespace
