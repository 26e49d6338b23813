//===- rp-bench-optimizer.cpp - time rp's AdamW on given data -------------===//
//
// rp-bench-optimizer --sizes N1,N2,... --weights W.f32 --grads G0.f32
//                    [--grads G1.f32 ...] [--steps 5] [--threads T]
//                    [--lr 1e-3] [--beta1 0.9] [--beta2 0.999] [--eps 1e-8]
//                    [--weight-decay 1e-2] [--grad-scale 1]
//                    [--out-weights W.f32] [--out-m M.f32] [--out-v V.f32]
//
// The driver of bench/adamw_vs_torch.py. Files are raw little-endian float32
// holding all parameters back to back (sum of --sizes elements). The moments
// start at zero, as in torch; step k (from 1) uses the (k-1) mod count-th
// --grads file. Writes the final weights and moments where asked and prints
// on stdout:
//   params <total elements>
//   steps <N>
//   best_step_ms <best wall time of one adamwStep>
//   mean_step_ms <mean over the steps>
// Exit 0 ok, 1 user error (bad flags, unreadable or mis-sized files).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/LastResort.h"
#include "rp/runtime/Optimizer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

using namespace rp::runtime;

static int fail(const std::string &message) {
  std::fprintf(stderr, "rp-bench-optimizer: error: %s\n", message.c_str());
  return 1;
}

static bool readFloats(const std::string &path, std::vector<float> &out,
                       size_t count, std::string &error) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  const auto bytes = static_cast<size_t>(in.tellg());
  if (bytes != count * sizeof(float)) {
    error = path + " holds " + std::to_string(bytes) + " bytes, expected " +
            std::to_string(count * sizeof(float)) + " (" +
            std::to_string(count) + " float32)";
    return false;
  }
  out.resize(count);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char *>(out.data()),
               static_cast<std::streamsize>(bytes))) {
    error = "cannot read " + path;
    return false;
  }
  return true;
}

static bool writeFloats(const std::string &path, const std::vector<float> &data,
                        std::string &error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out ||
      !out.write(reinterpret_cast<const char *>(data.data()),
                 static_cast<std::streamsize>(data.size() * sizeof(float)))) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  installLastResort("rp-bench-optimizer");
  CLI::App app{"rp-bench-optimizer: times rp's AdamW on given data"};
  std::vector<int64_t> sizes;
  std::string weightsPath, outWeights, outM, outV;
  std::vector<std::string> gradPaths;
  unsigned steps = 5;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  AdamWConfig config;
  double gradScale = 1.0;
  app.add_option("--sizes", sizes, "parameter sizes, comma separated")
      ->required()
      ->delimiter(',');
  app.add_option("--weights", weightsPath, "initial weights (raw float32)")
      ->required();
  app.add_option("--grads", gradPaths,
                 "gradients (raw float32); repeat for per-step gradients")
      ->required();
  app.add_option("--steps", steps, "AdamW steps to run");
  app.add_option("--threads", threads, "thread pool size");
  app.add_option("--lr", config.lr, "learning rate");
  app.add_option("--beta1", config.beta1, "beta1");
  app.add_option("--beta2", config.beta2, "beta2");
  app.add_option("--eps", config.eps, "eps");
  app.add_option("--weight-decay", config.weightDecay, "weight decay");
  app.add_option("--grad-scale", gradScale, "factor applied to gradients");
  app.add_option("--out-weights", outWeights, "write final weights here");
  app.add_option("--out-m", outM, "write final exp_avg here");
  app.add_option("--out-v", outV, "write final exp_avg_sq here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (steps < 1)
    return fail("--steps must be at least 1");
  if (threads < 1)
    return fail("--threads must be at least 1");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 1)
      return fail("--sizes must be positive");
    total += size;
  }

  std::string error;
  std::vector<float> w, m(total, 0.0f), v(total, 0.0f);
  if (!readFloats(weightsPath, w, total, error))
    return fail(error);
  std::vector<std::vector<float>> grads(gradPaths.size());
  for (size_t i = 0; i < gradPaths.size(); ++i)
    if (!readFloats(gradPaths[i], grads[i], total, error))
      return fail(error);

  ThreadPool pool(threads);
  std::vector<double> times;
  for (unsigned k = 1; k <= steps; ++k) {
    const std::vector<float> &g = grads[(k - 1) % grads.size()];
    std::vector<ParamSlot> slots;
    int64_t offset = 0;
    for (int64_t size : sizes) {
      slots.push_back({w.data() + offset, g.data() + offset, m.data() + offset,
                       v.data() + offset, size});
      offset += size;
    }
    auto start = std::chrono::steady_clock::now();
    Status s = adamwStep(pool, config, k, slots, gradScale);
    auto stop = std::chrono::steady_clock::now();
    if (s.failed())
      return fail(s.getMessage());
    times.push_back(
        std::chrono::duration<double, std::milli>(stop - start).count());
  }

  if (!outWeights.empty() && !writeFloats(outWeights, w, error))
    return fail(error);
  if (!outM.empty() && !writeFloats(outM, m, error))
    return fail(error);
  if (!outV.empty() && !writeFloats(outV, v, error))
    return fail(error);

  std::printf("params %lld\n", static_cast<long long>(total));
  std::printf("steps %u\n", steps);
  std::printf("best_step_ms %.4f\n",
              *std::min_element(times.begin(), times.end()));
  std::printf("mean_step_ms %.4f\n",
              std::accumulate(times.begin(), times.end(), 0.0) / times.size());
  return 0;
}
