//===- RandomInit.h - parameters made from the plan alone -------*- C++ -*-===//
//
// rp-run --init-weights random[:SEED] trains a plan without its weights file
// (a plan from `python -m rp.shapes qwen3-1.7b` is kilobytes; its weights
// would be gigabytes). Every parameter is made on the box by one fixed rule,
// chosen by the parameter's role as the plan records it:
//   - a norm's scale (the scale operand of a layer_norm or rms_norm call,
//     followed back through copies, casts and reshapes): ones;
//   - any other parameter of rank 2 or more (matrices, embeddings, stacked
//     experts): normal(0, 0.02), as GPT-2 and transformers' initializers;
//   - any other parameter (biases, norm shifts, scalars): zeros;
//   - an unstored parameter whose plan says it starts at zero (LoRA's B,
//     init_bound 0): zeros, so that an adapter starts as the identity.
// Frozen parameters take the same rule: every value a weights file holds is
// replaced.
// Element k of a parameter is a function of the seed, the parameter's name
// and k only (a counter-based generator: splitmix64 and Box-Muller), so the
// values are the same on any device count and any thread count.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_RANDOMINIT_H
#define RP_RUNTIME_RANDOMINIT_H

#include "rp/runtime/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rp::runtime {

enum class RandomInit { none, normal, ones, zeros };

/// The standard deviation of the normal rule.
inline constexpr double kRandomInitStd = 0.02;

/// Per plan buffer, what --init-weights random gives it (none: not a
/// parameter).
std::vector<RandomInit> randomInitRules(const Plan &plan);

/// The generator's key of parameter `name` under `seed` (FNV-1a of the name
/// mixed with the seed; fixed, unlike std::hash).
uint64_t randomInitKey(uint64_t seed, const std::string &name);

/// Elements [begin, begin + n) of the normal(0, stddev) sequence of `key`
/// into `out`.
void fillRandomNormal(uint64_t key, double stddev, int64_t begin, int64_t n,
                      float *out);

/// "random" or "random:SEED" (SEED a decimal uint64): the seed; nullopt-like
/// false when `spec` is not of that form (a safetensors path then).
bool parseRandomInit(const std::string &spec, uint64_t &seed,
                     std::string &error);

} // namespace rp::runtime

#endif // RP_RUNTIME_RANDOMINIT_H
