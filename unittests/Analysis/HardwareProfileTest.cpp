//===- HardwareProfileTest.cpp - loading hardware profiles ----------------===//

#include "rp/Analysis/HardwareProfile.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::rp;

namespace {

class HardwareProfileTest : public ::testing::Test {
protected:
  /// Collects diagnostics instead of printing them.
  HardwareProfileTest()
      : handler(&context, [this](Diagnostic &d) {
          messages.push_back(d.str());
          return success();
        }) {}

  MLIRContext context;
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler;
};

TEST_F(HardwareProfileTest, ShipsFiveProfilesThatAllParse) {
  std::vector<std::string> names = shippedProfileNames();
  // h200 since issue 32.
  EXPECT_EQ(names, (std::vector<std::string>{"a800", "h100", "h200", "host",
                                             "rtx3090", "rtx4090"}));
  for (const std::string &name : names) {
    FailureOr<HardwareProfile> p = loadHardwareProfile(name, &context);
    ASSERT_TRUE(succeeded(p)) << name;
    EXPECT_EQ(p->name, name);
    EXPECT_GT(p->memoryBytes(), 0) << name;
    EXPECT_TRUE(succeeded(p->flopsPerSecond(BFloat16Type::get(&context))))
        << name;
  }
  EXPECT_TRUE(messages.empty());
}

TEST_F(HardwareProfileTest, RatesApplyEfficiency) {
  FailureOr<HardwareProfile> p = parseHardwareProfile(
      R"({"tflops": {"bf16": 100}, "compute_efficiency": 0.5,
          "memory_gbps": 1000, "memory_efficiency": 0.8, "memory_gib": 2,
          "h2d_gbps": 25, "d2h_gbps": 20, "gpus_per_link": 2})",
      "inline.json", &context);
  ASSERT_TRUE(succeeded(p));
  EXPECT_EQ(p->name, "inline.json");
  EXPECT_DOUBLE_EQ(*p->flopsPerSecond(BFloat16Type::get(&context)), 50e12);
  EXPECT_DOUBLE_EQ(p->bytesPerSecond(), 800e9);
  EXPECT_DOUBLE_EQ(p->memoryBytes(), 2.0 * (1 << 30));
  EXPECT_EQ(p->gpusPerLink, 2u);
  EXPECT_EQ(p->launchUs, 0);
  // No f32 rate given: integer and f32 ops have none either.
  EXPECT_TRUE(failed(p->flopsPerSecond(Float32Type::get(&context))));
  EXPECT_TRUE(failed(p->flopsPerSecond(IntegerType::get(&context, 64))));
}

TEST_F(HardwareProfileTest, RejectsBadProfilesWithTheField) {
  EXPECT_TRUE(failed(parseHardwareProfile(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "memory_gib": 1,
          "h2d_gbps": 1, "d2h_gbps": 1, "gpus_per_link": 1.5})",
      "half.json", &context)));
  EXPECT_TRUE(failed(parseHardwareProfile(
      R"({"tflops": {"f32": 1}, "memory_gbps": 1, "memory_gib": 1,
          "h2d_gbps": 1, "d2h_gbps": 1, "compute_efficiency": 2})",
      "over.json", &context)));
  EXPECT_TRUE(failed(parseHardwareProfile("[1, 2]", "array.json", &context)));
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_NE(messages[0].find("\"gpus_per_link\" must be a whole number"),
            std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("efficiencies are shares of peak, at most 1"),
            std::string::npos)
      << messages[1];
  EXPECT_NE(messages[2].find("must be a JSON object"), std::string::npos)
      << messages[2];
}

} // namespace
