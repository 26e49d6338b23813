//===- DeviceMapTest.cpp - plan devices onto physical devices -------------===//

#include "rp/runtime/DeviceMap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace rp::runtime;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

const std::string kVar = "RP_CUDA_GPUS";

TEST(DeviceMapTest, WithoutAListPlanDeviceIIsDeviceI) {
  auto map = mapPlanDevices(3, 4, nullptr, kVar);
  ASSERT_TRUE(map) << map.getStatus().toString();
  EXPECT_THAT(*map, ElementsAre(0, 1, 2));
  auto empty = mapPlanDevices(2, 2, "", kVar);
  ASSERT_TRUE(empty);
  EXPECT_THAT(*empty, ElementsAre(0, 1));
}

TEST(DeviceMapTest, TooFewDevicesWithoutAListNamesBothWaysOut) {
  auto map = mapPlanDevices(4, 1, nullptr, kVar);
  ASSERT_FALSE(map);
  EXPECT_EQ(map.getStatus().getCode(), StatusCode::Unavailable);
  EXPECT_THAT(map.getStatus().getMessage(),
              HasSubstr("the plan runs on 4 devices but this machine has 1"));
  EXPECT_THAT(map.getStatus().getMessage(),
              HasSubstr("rp-compile --devices 1"));
  EXPECT_THAT(map.getStatus().getMessage(), HasSubstr("RP_CUDA_GPUS=0,0"));
}

TEST(DeviceMapTest, AListPutsSeveralPlanDevicesOnOne) {
  auto map = mapPlanDevices(4, 1, "0,0,0,0", kVar);
  ASSERT_TRUE(map) << map.getStatus().toString();
  EXPECT_THAT(*map, ElementsAre(0, 0, 0, 0));
  auto mixed = mapPlanDevices(3, 2, "1,0,1", kVar);
  ASSERT_TRUE(mixed);
  EXPECT_THAT(*mixed, ElementsAre(1, 0, 1));
}

TEST(DeviceMapTest, EntriesPastThePlansDevicesAreUnused) {
  auto map = mapPlanDevices(1, 2, "1,0,0", kVar);
  ASSERT_TRUE(map);
  EXPECT_THAT(*map, ElementsAre(1));
}

TEST(DeviceMapTest, ABadEntryIsAnErrorNamingTheList) {
  for (const char *bad : {"0,2", "0,,0", "x", "0,-1", "1a", ",", "0,"}) {
    SCOPED_TRACE(bad);
    auto map = mapPlanDevices(2, 2, bad, kVar);
    ASSERT_FALSE(map);
    EXPECT_EQ(map.getStatus().getCode(), StatusCode::InvalidArgument);
    EXPECT_THAT(map.getStatus().getMessage(),
                HasSubstr(std::string("RP_CUDA_GPUS='") + bad + "'"));
    EXPECT_THAT(
        map.getStatus().getMessage(),
        HasSubstr("is not a device of this machine (it has 2: 0 to 1)"));
  }
}

TEST(DeviceMapTest, TooFewEntriesIsAnError) {
  auto map = mapPlanDevices(3, 1, "0,0", kVar);
  ASSERT_FALSE(map);
  EXPECT_EQ(map.getStatus().getCode(), StatusCode::InvalidArgument);
  EXPECT_THAT(map.getStatus().getMessage(),
              HasSubstr("names 2 device(s) but the plan runs on 3"));
}

} // namespace
