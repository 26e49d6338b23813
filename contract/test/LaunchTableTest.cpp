//===- LaunchTableTest.cpp - the launch counts against the cuda sources ---===//
//
// kernelLaunches counts what rp's cuda device launches per call from the
// table cudaLaunchSites (KernelCost.h); the compiler's estimate, the plan's
// predicted times and the sim charge launch_us and kernel_host_us on it.
// This reads every source of runtime/lib/cuda, finds each launch (a kernel
// launch, a memset or copy on a stream, a cuBLAS, cuBLASLt, cuDNN or
// CUTLASS call) and the function it is in, and checks that the table has
// that function with that many: a launch added there (or taken away), in
// a function listed or not, fails here until the table says so; no GPU
// needed.
//
//===----------------------------------------------------------------------===//

#include "rp/timing/Hardware.h"
#include "rp/timing/KernelCost.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace rp::timing;

namespace {

/// What enqueues work on a stream. A library's entry taken by a function
/// of ours (cuDNN's run, CUTLASS's) counts where it is called.
const char *const kLaunches[] = {
    "<<<",
    "cudaMemsetAsync(",
    "cudaMemcpyAsync(",
    "cudaMemcpy2DAsync(",
    "cudaLaunchKernel(",
    "cudaGraphLaunch(",
    "cublasGemmEx(",
    "cublasGemmStridedBatchedEx(",
    "cublasGemmBatchedEx(",
    "cublasGemmGroupedBatchedEx(",
    "cublasLtMatmul(",
    "execute_plan_at_index(", // cuDNN's graph
    ".run(ctx.stream)",       // CUTLASS's device operator
};

/// `text` without comments, string and character literals (their quotes
/// kept) and preprocessor lines: a launch named in any of them is none.
std::string codeOnly(const std::string &text) {
  std::string out;
  size_t n = text.size();
  for (size_t i = 0; i < n;) {
    char c = text[i];
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      i = i == std::string::npos ? n : i;
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i);
      i = i == std::string::npos ? n : i + 2;
    } else if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < n && text[j] != c)
        j += text[j] == '\\' ? 2 : 1;
      out += c;
      out += c;
      i = j + 1;
    } else if (c == '#' && (i == 0 || text[i - 1] == '\n')) {
      // To the line's end, continuation lines included.
      while (i < n && !(text[i] == '\n' && text[i - 1] != '\\'))
        ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

/// The name of the function whose body opens at `brace`: the word before
/// the parameter list that closes just before it (qualifiers skipped);
/// empty where the brace opens no function (a namespace, a class, an
/// initializer).
std::string functionAt(const std::string &code, size_t brace) {
  size_t k = brace;
  auto skipSpace = [&] {
    while (k > 0 && std::isspace(static_cast<unsigned char>(code[k - 1])))
      --k;
  };
  for (bool again = true; again;) {
    skipSpace();
    again = false;
    for (const char *word : {"const", "noexcept", "override", "mutable"}) {
      size_t len = std::char_traits<char>::length(word);
      if (k >= len && code.compare(k - len, len, word) == 0) {
        k -= len;
        again = true;
      }
    }
  }
  if (k == 0 || code[k - 1] != ')')
    return {};
  for (int depth = 0; k > 0; --k) {
    depth += code[k - 1] == ')' ? 1 : code[k - 1] == '(' ? -1 : 0;
    if (depth == 0)
      break;
  }
  --k; // at the '('
  skipSpace();
  size_t end = k;
  while (k > 0 && (std::isalnum(static_cast<unsigned char>(code[k - 1])) ||
                   code[k - 1] == '_'))
    --k;
  return code.substr(k, end - k);
}

/// The launches in `text`, by the outermost function they are in ("" for
/// any outside a function).
std::map<std::string, unsigned> launchesByFunction(const std::string &text) {
  std::string code = codeOnly(text);
  std::map<std::string, unsigned> found;
  std::string function;
  bool inFunction = false;
  int depth = 0, functionDepth = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    for (const char *launch : kLaunches)
      if (code.compare(i, std::char_traits<char>::length(launch), launch) == 0)
        ++found[inFunction ? function : ""];
    if (code[i] == '{') {
      if (!inFunction) {
        function = functionAt(code, i);
        inFunction = !function.empty();
        functionDepth = depth;
      }
      ++depth;
    } else if (code[i] == '}') {
      --depth;
      if (inFunction && depth == functionDepth)
        inFunction = false;
    }
  }
  return found;
}

/// Every C++ and CUDA source under runtime/lib/cuda, by its path there.
std::map<std::string, std::string> cudaSources() {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> sources;
  fs::path root(RP_CUDA_SOURCE_DIR);
  for (const auto &entry : fs::recursive_directory_iterator(root)) {
    std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() ||
        (ext != ".cu" && ext != ".cpp" && ext != ".cuh" && ext != ".h"))
      continue;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    sources[fs::relative(entry.path(), root).generic_string()] = text.str();
  }
  return sources;
}

unsigned launches(const char *op, const std::vector<int64_t> &ints = {},
                  const std::vector<Operand> &in = {},
                  const std::vector<Operand> &out = {}) {
  int index = kernelOpIndex(op);
  EXPECT_GE(index, 0) << op;
  return kernelLaunches(uint16_t(index), ints, in, out);
}

} // namespace

// The scanner itself: what it counts and where it puts it.
TEST(LaunchTableTest, ScannerFindsLaunchesInFunctions) {
  std::map<std::string, unsigned> found = launchesByFunction(R"(
#define NOT_HERE cudaMemsetAsync(p, 0, n, s)
namespace {
struct Runner {
  Status run(Built &b) const { return execute_plan_at_index(h, b); }
};
} // namespace
// k<<<1, 1>>>() in a comment is none.
cudaError_t launchTwo(const LaunchContext &ctx, int n) {
  auto step = [&](int i) { k<<<1, 1, 0, ctx.stream>>>(i, "<<<"); };
  if (n > 1) {
    step(0);
  }
  return cudaMemcpy2DAsync(a, b, c, d, e, f, k, ctx.stream);
}
static const int table[] = {1, 2};
)");
  std::map<std::string, unsigned> expected{{"run", 1}, {"launchTwo", 2}};
  EXPECT_EQ(found, expected);
}

TEST(LaunchTableTest, EveryLaunchIsInTheTable) {
  std::map<std::string, std::string> sources = cudaSources();
  ASSERT_FALSE(sources.empty()) << RP_CUDA_SOURCE_DIR;
  // The table's sites by file and function (a function's rows summed).
  std::map<std::pair<std::string, std::string>, unsigned> listed;
  for (const CudaLaunchSite &site : cudaLaunchSites()) {
    listed[{site.file, site.function}] += site.sites;
    EXPECT_LE(site.launches, site.sites) << site.function;
    EXPECT_TRUE(sources.count(site.file))
        << site.file << " (a row of cudaLaunchSites) is not in "
        << RP_CUDA_SOURCE_DIR;
  }
  unsigned total = 0;
  for (const auto &[file, text] : sources)
    for (const auto &[function, n] : launchesByFunction(text)) {
      total += n;
      EXPECT_FALSE(function.empty())
          << file << ": " << n << " launches outside any function";
      auto it = listed.find({file, function});
      unsigned inTable = it == listed.end() ? 0 : it->second;
      EXPECT_EQ(n, inTable)
          << file << ": " << function << " writes " << n
          << " launches (kernels, memsets, copies, library calls); "
             "cudaLaunchSites says "
          << inTable
          << " (contract/lib/KernelCost.cpp: attribute them to the op kinds "
             "that run them and count them in kernelLaunches)";
      if (it != listed.end())
        listed.erase(it);
    }
  for (const auto &[where, n] : listed)
    ADD_FAILURE() << where.first << ": " << where.second << " is in "
                  << "cudaLaunchSites with " << n
                  << " launches but writes none";
  // Every kind in runtime/lib/cuda today: a scan that found few would
  // pass the checks above on an empty table.
  EXPECT_GE(total, 80u);
}

// Every op kind the plan has is run by some row, and every row names op
// kinds: a new kind, or a row naming a misspelt one, fails here.
TEST(LaunchTableTest, EveryOpKindIsAttributed) {
  for (const CudaLaunchSite &site : cudaLaunchSites()) {
    if (std::string(site.ops) == kNotACall)
      continue;
    std::istringstream ops(site.ops);
    std::string op;
    unsigned n = 0;
    while (ops >> op) {
      EXPECT_GE(kernelOpIndex(op), 0)
          << site.function << " names '" << op << "', not an op kind";
      ++n;
    }
    EXPECT_GT(n, 0u) << site.function;
  }
  for (int op = 0; op < kNumKernelOps; ++op) {
    bool served = false;
    for (const CudaLaunchSite &site : cudaLaunchSites())
      served = served || servesOp(site, kernelOpName(uint16_t(op)));
    EXPECT_TRUE(served) << kernelOpName(uint16_t(op))
                        << " is run by no row of cudaLaunchSites";
  }
}

TEST(LaunchTableTest, CountsPerCall) {
  Operand x{{8, 16}, 2};
  // A reshape is counted as a view (its copy on the device is not charged
  // yet: cudaLaunchSites).
  EXPECT_EQ(launches("reshape"), 0u);
  EXPECT_EQ(launches("matmul", {0, 1}), 1u);
  // MatmulEpilogue: bias and the tanh gelu fused by cuBLASLt; the erf
  // gelu, its derivative and a kept pre-activation take a pass; f64 one
  // for any epilogue.
  Operand a{{8, 16}, 2}, w{{16, 4}, 2}, y{{8, 4}, 2}, bias{{4}, 2};
  EXPECT_EQ(launches("matmul", {0, 0, 1}, {a, w, bias}, {y}), 1u);
  EXPECT_EQ(launches("matmul", {0, 0, 2}, {a, w, bias}, {y}), 2u);
  EXPECT_EQ(launches("matmul", {0, 0, 3}, {a, w, bias}, {y}), 1u);
  EXPECT_EQ(launches("matmul", {0, 0, 3}, {a, w, bias}, {y, y}), 2u);
  EXPECT_EQ(launches("matmul", {0, 0, 4}, {a, w, y}, {y}), 2u);
  EXPECT_EQ(launches("matmul", {0, 0, 5}, {a, w, y}, {y}), 1u);
  Operand a64{{8, 16}, 8}, w64{{16, 4}, 8}, y64{{8, 4}, 8}, b64{{4}, 8};
  EXPECT_EQ(launches("matmul", {0, 0, 1}, {a64, w64, b64}, {y64}), 2u);
  // Batches: one strided GEMM where each operand steps by a constant (a
  // full batch, a shared matrix, a shared B folded into A's rows); one
  // GEMM per entry otherwise, and the epilogue in a pass of its own.
  auto mm = [](const std::vector<int64_t> &ab, const std::vector<int64_t> &bb,
               const std::vector<int64_t> &ob, int64_t epilogue = 0) {
    auto with = [](const std::vector<int64_t> &batch, int64_t r, int64_t c) {
      std::vector<int64_t> s = batch;
      s.push_back(r);
      s.push_back(c);
      return Operand{s, 2};
    };
    std::vector<Operand> in{with(ab, 8, 16), with(bb, 16, 4)};
    if (epilogue)
      in.push_back(Operand{{4}, 2});
    return launches("matmul", {0, 0, epilogue}, in, {with(ob, 8, 4)});
  };
  EXPECT_EQ(mm({2, 3}, {2, 3}, {2, 3}), 1u);
  EXPECT_EQ(mm({6}, {}, {6}), 1u);
  EXPECT_EQ(mm({}, {5}, {5}), 1u);
  EXPECT_EQ(mm({2, 1}, {2, 1}, {2, 1}), 1u);
  EXPECT_EQ(mm({2, 1}, {1, 3}, {2, 3}), 6u);
  EXPECT_EQ(mm({3}, {2, 1}, {2, 3}), 6u);
  EXPECT_EQ(mm({2, 3}, {3}, {2, 3}), 6u);
  EXPECT_EQ(mm({2, 1}, {1, 3}, {2, 3}, 1), 7u);
  EXPECT_EQ(mm({2, 3}, {2, 3}, {2, 3}, 1), 1u);
  EXPECT_EQ(launches("slice_grad"), 2u);
  EXPECT_EQ(launches("concat", {1}, {x, x, x}, {{{8, 48}, 2}}), 3u);
  // A sum of 4096 rows into 16 outputs is cut in chunks (two passes); a
  // row sum of 16 into 4096 outputs, or of 32 elements, is one.
  EXPECT_EQ(launches("reduce", {0, 0, 0}, {{{4096, 16}, 4}}, {{{16}, 4}}), 2u);
  EXPECT_EQ(launches("reduce", {0, 0, 1}, {{{4096, 16}, 4}}, {{{4096}, 4}}),
            1u);
  EXPECT_EQ(launches("reduce", {0, 0, 0}, {{{32, 16}, 4}}, {{{16}, 4}}), 1u);
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

// rp as built runs CUTLASS's grouped GEMM for the MoE weight gradient:
// scripts/setup.sh installs its headers and the cuda library compiles
// CudaMoECutlass.cu where it finds them (RP_CUDA_CUTLASS), and the
// dispatcher tries it before the tiled kernel. So the launch count is that
// path's (the zeroing, the problems, the GEMM; cuBLAS's in a build without
// the headers makes as many, two of them copies) and not the tiled
// loop's (f64, refused shapes), and the
// as-built profiles time the call as the library profile's grouped GEMM:
// none of them names the tiled loop for it.
TEST(LaunchTableTest, AsBuiltWeightGradientIsCutlassGroupedGemm) {
  unsigned cutlass = cudaLaunches("groupedWGradCutlass") +
                     cudaLaunches("launchMoEGroupedProblems") +
                     cudaLaunches("runGrouped");
  EXPECT_EQ(cutlass, 4u);
  EXPECT_EQ(launches("moe_grouped_matmul_wgrad", {0}), cutlass);
  EXPECT_NE(cutlass, cudaLaunches("launchMoEWGrad"));
  std::map<std::string, std::string> sources = cudaSources();
  std::string dispatch = codeOnly(sources["CudaMoEDispatch.cpp"]);
  size_t wgrad = dispatch.find("Status groupedMatmulWGrad(");
  ASSERT_NE(wgrad, std::string::npos);
  size_t first = dispatch.find("groupedWGradCutlass(", wgrad);
  EXPECT_LT(first, dispatch.find("launchMoEWGrad(", wgrad))
      << "the dispatcher no longer tries CUTLASS before the tiled kernel";
  auto read = [](const std::string &path) {
    std::ifstream file(std::string(RP_CUDA_SOURCE_DIR) + "/" + path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  };
  EXPECT_NE(read("CMakeLists.txt").find("CudaMoECutlass.cu"),
            std::string::npos);
  EXPECT_NE(read("../../../scripts/setup.sh").find("nvidia-cutlass=="),
            std::string::npos);
  uint16_t op = uint16_t(kernelOpIndex("moe_grouped_matmul_wgrad"));
  Operand rows{{4096, 512}, 2}, grads{{4096, 1024}, 2}, counts{{32}, 4},
      dweight{{32, 512, 1024}, 2};
  KernelWork work = kernelWork(op, {rows, grads, counts}, {dweight}, {0});
  for (const char *name : {"rtx4090", "h200"}) {
    std::string error;
    std::optional<HardwareModel> library = loadHardwareModel(name, error);
    std::optional<HardwareModel> built =
        loadHardwareModel(std::string(name) + ":as-built", error);
    ASSERT_TRUE(library && built) << error;
    EXPECT_FALSE(built->kernels.count("moe_grouped_matmul_wgrad")) << name;
    EXPECT_EQ(built->kernelMs(op, work, "bf16"),
              library->kernelMs(op, work, "bf16"))
        << name;
  }
}
