//===- GemmPlanCache.cpp - one cuBLASLt algorithm per GEMM shape ----------===//

#include "GemmPlanCache.h"

#include <tuple>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

auto tie(const GemmKey &k) {
  return std::tie(k.m, k.n, k.k, k.batch, k.lda, k.ldb, k.ldc, k.strideA,
                  k.strideB, k.strideC, k.transA, k.transB, k.type, k.tf32,
                  k.epilogue, k.alignA, k.alignB, k.alignC);
}

} // namespace

bool GemmKey::operator==(const GemmKey &o) const {
  return tie(*this) == tie(o);
}

size_t GemmKeyHash::operator()(const GemmKey &key) const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  for (int64_t v : {key.m, key.n, key.k, key.batch, key.lda, key.ldb, key.ldc,
                    key.strideA, key.strideB, key.strideC})
    mix(uint64_t(v));
  mix(uint64_t(key.alignA) | uint64_t(key.alignB) << 16 |
      uint64_t(key.alignC) << 32);
  mix(uint64_t(key.transA) | uint64_t(key.transB) << 1 |
      uint64_t(key.tf32) << 2 | uint64_t(key.epilogue) << 3 |
      uint64_t(key.type) << 8);
  return size_t(h);
}

uint32_t rp::runtime::cuda::gemmAlignment(int64_t bytes) {
  uint32_t align = 256;
  while (align > 1 && bytes % align != 0)
    align /= 2;
  return align;
}

std::string rp::runtime::cuda::describeGemm(const GemmKey &key) {
  static const char *const epilogues[] = {"",
                                          ", bias",
                                          ", bias+gelu",
                                          ", bias gradient",
                                          ", gelu gradient",
                                          ", gelu and bias gradients"};
  std::string s = std::to_string(key.m) + " x " + std::to_string(key.n) +
                  " x " + std::to_string(key.k);
  if (key.batch != 1)
    s += ", batch " + std::to_string(key.batch);
  if (key.transA)
    s += ", A^T";
  if (key.transB)
    s += ", B^T";
  s += std::string(", ") + dtypeName(key.type);
  if (key.tf32)
    s += " (tf32)";
  return s + epilogues[static_cast<int>(key.epilogue)];
}

Expected<GemmChoice> GemmPlanCache::choose(const GemmKey &key,
                                           GemmHeuristic &heuristic) {
  // Held across the query: two devices asking for a new shape at once must
  // not both ask and keep different answers.
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = plans.find(key); it != plans.end())
    return it->second;
  ++asked;
  GemmChoice choice;
  Expected<std::vector<GemmAlgo>> offered =
      heuristic.candidates(key, workspaceBytes);
  if (!offered) {
    choice.why = "cuBLASLt's heuristic failed for " + describeGemm(key) + ": " +
                 offered.getStatus().getMessage();
  } else {
    for (const GemmAlgo &algo : *offered)
      if (!algo.reduces && algo.workspace <= workspaceBytes) {
        choice.found = true;
        choice.algo = algo;
        break;
      }
    if (!choice.found)
      choice.why = "cuBLASLt offers no reduction-free algorithm within the " +
                   std::to_string(workspaceBytes >> 20) +
                   " MiB workspace for " + describeGemm(key) + " (" +
                   std::to_string(offered->size()) + " offered)";
  }
  plans.emplace(key, choice);
  return choice;
}

size_t GemmPlanCache::queries() const {
  std::lock_guard<std::mutex> lock(mutex);
  return asked;
}

size_t GemmPlanCache::size() const {
  std::lock_guard<std::mutex> lock(mutex);
  return plans.size();
}
