//===- LaunchTableTest.cpp - the launch counts against the cuda sources ---===//
//
// kernelLaunches counts what rp's cuda device launches per call from the
// table cudaLaunchSites (KernelCost.h); the compiler's estimate, the plan's
// predicted times and the sim charge launch_us and kernel_host_us on it.
// This reads each listed launch function in runtime/lib/cuda and counts its
// kernel launches and memsets, so that a launch added there (or one taken
// away) fails here until the table says so; no GPU needed.
//
//===----------------------------------------------------------------------===//

#include "rp/timing/Hardware.h"
#include "rp/timing/KernelCost.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace rp::timing;

namespace {

/// `text` without its // comments (a launch named in a comment is none).
std::string withoutComments(const std::string &text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    size_t at = line.find("//");
    out += (at == std::string::npos ? line : line.substr(0, at)) + "\n";
  }
  return out;
}

/// The body of the definition of `function` in `source`: from the brace
/// after its parameter list to the matching one; empty where there is none.
std::string bodyOf(const std::string &source, const std::string &function) {
  for (size_t at = source.find(function + "("); at != std::string::npos;
       at = source.find(function + "(", at + 1)) {
    size_t next = source.find_first_of(";{", at);
    if (next == std::string::npos || source[next] != '{')
      continue; // a declaration or a call
    // A call inside another body reaches '{' only after a ';'; a
    // definition's parameter list has none.
    int depth = 0;
    for (size_t i = next; i < source.size(); ++i) {
      depth += source[i] == '{' ? 1 : source[i] == '}' ? -1 : 0;
      if (depth == 0)
        return source.substr(next, i - next + 1);
    }
  }
  return {};
}

unsigned count(const std::string &text, const std::string &what) {
  unsigned n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    ++n;
  return n;
}

unsigned launches(const char *op, const std::vector<int64_t> &ints = {},
                  const std::vector<Operand> &in = {},
                  const std::vector<Operand> &out = {}) {
  int index = kernelOpIndex(op);
  EXPECT_GE(index, 0) << op;
  return kernelLaunches(uint16_t(index), ints, in, out);
}

} // namespace

TEST(LaunchTableTest, SitesAreTheCudaSources) {
  ASSERT_FALSE(cudaLaunchSites().empty());
  for (const CudaLaunchSite &site : cudaLaunchSites()) {
    std::string path = std::string(RP_CUDA_SOURCE_DIR) + "/" + site.file;
    std::ifstream file(path);
    ASSERT_TRUE(file) << "cannot read " << path;
    std::stringstream text;
    text << file.rdbuf();
    std::string body = bodyOf(withoutComments(text.str()), site.function);
    ASSERT_FALSE(body.empty())
        << site.function << " is not defined in " << site.file;
    unsigned written = count(body, "<<<") + count(body, "cudaMemsetAsync(");
    EXPECT_EQ(written, site.sites)
        << site.file << ": " << site.function << " writes " << written
        << " launches and memsets; cudaLaunchSites says " << site.sites
        << " (contract/lib/KernelCost.cpp: update the site and the count "
           "kernelLaunches makes of it)";
    EXPECT_LE(site.launches, site.sites) << site.function;
  }
}

TEST(LaunchTableTest, CountsPerCall) {
  Operand x{{8, 16}, 2};
  EXPECT_EQ(launches("reshape"), 0u);
  EXPECT_EQ(launches("matmul", {0, 1}), 1u);
  EXPECT_EQ(launches("softmax"), 1u);
  EXPECT_EQ(launches("attention", {1, 0, 0}), 1u);
  // The query and key passes; sinks add their gradient.
  EXPECT_EQ(launches("attention_grad", {1, 0, 0}), 2u);
  EXPECT_EQ(launches("attention_grad", {1, 0, 0, 1}), 3u);
  EXPECT_EQ(launches("rms_norm", {1, 1}), 1u);
  // The parameters' partial sums and total only where it writes them.
  EXPECT_EQ(launches("norm_grad", {1, 1, 0, 1}, {x, {{16}, 2}, x}, {x}), 1u);
  EXPECT_EQ(
      launches("norm_grad", {1, 1, 0, 1}, {x, {{16}, 2}, x}, {x, {{16}, 2}}),
      3u);
  EXPECT_EQ(launches("cross_entropy", {-100}), 3u);
  EXPECT_EQ(launches("cross_entropy_grad", {-100}), 1u);
  EXPECT_EQ(launches("gather_grad", {0}), 7u);
  // 10 tokens against a [32, 16] head, 4 a chunk: 3 chunks of a GEMM and
  // the rows, then the partials and the total.
  Operand hidden16{{10, 16}, 2}, head16{{32, 16}, 2}, labels{{10}, 8};
  EXPECT_EQ(
      launches("linear_cross_entropy", {-100, 4}, {hidden16, head16, labels}),
      3u * 2 + 2);
  // Backward: three GEMMs and the rows a chunk, and a 16-bit weight's f32
  // accumulator stored once; f32 sums in place; one chunk needs none.
  EXPECT_EQ(launches("linear_cross_entropy_grad", {-100, 4},
                     {hidden16, head16, labels}),
            3u * 4 + 1);
  Operand hidden32{{10, 16}, 4}, head32{{32, 16}, 4};
  EXPECT_EQ(launches("linear_cross_entropy_grad", {-100, 4},
                     {hidden32, head32, labels}),
            3u * 4);
  EXPECT_EQ(launches("linear_cross_entropy_grad", {-100, 16},
                     {hidden16, head16, labels}),
            4u);
  EXPECT_EQ(launches("moe_dispatch"), 4u);
  EXPECT_EQ(launches("moe_grouped_matmul", {1}), 4u);
  EXPECT_EQ(launches("moe_grouped_matmul_wgrad", {0}), 4u);
  EXPECT_EQ(launches("moe_combine_grad", {0}), 4u);
  EXPECT_EQ(launches("moe_combine_grad", {1}), 5u);
}

// launch_us is charged once per launch, not once per call: a norm
// gradient that writes its scale's gradient costs three launches.
TEST(LaunchTableTest, LaunchCostPerLaunch) {
  std::string error;
  auto profile = [&](double launchUs) {
    std::optional<HardwareModel> hw = parseHardwareModel(
        R"({"tflops": {"f32": 100}, "memory_gbps": 1000, "h2d_gbps": 25,
            "d2h_gbps": 25, "launch_us": )" +
            std::to_string(launchUs) + "}",
        "t.json", error);
    EXPECT_TRUE(hw) << error;
    return *hw;
  };
  HardwareModel with = profile(10), without = profile(0);
  Operand x{{64, 128}, 4}, scale{{128}, 4};
  std::vector<Operand> in{x, scale, x};
  uint16_t op = uint16_t(kernelOpIndex("norm_grad"));
  for (auto [outs, n] : {std::pair{std::vector<Operand>{x}, 1},
                         std::pair{std::vector<Operand>{x, scale}, 3}}) {
    KernelWork w = kernelWork(op, in, outs, {1, 1, 0, 1});
    EXPECT_EQ(w.launches, unsigned(n));
    EXPECT_NEAR(with.kernelMs(op, w, "f32") - without.kernelMs(op, w, "f32"),
                n * 10e-3, 1e-12);
  }
  // A view launches nothing and costs nothing.
  uint16_t view = uint16_t(kernelOpIndex("reshape"));
  KernelWork none = kernelWork(view, {x}, {x}, {});
  EXPECT_EQ(none.launches, 0u);
  EXPECT_EQ(with.kernelMs(view, none, "f32"), 0);
}
