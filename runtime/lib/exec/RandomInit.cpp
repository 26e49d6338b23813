//===- RandomInit.cpp - parameters made from the plan alone ---------------===//
//
// RandomInit.h's rule. A norm's scale is found by its use: the scale
// operand of a norm call, followed back through the copies and the casts
// and reshapes that bring a host parameter to that operand. A parameter the
// graph adds to before its norm (Gemma's 1 + w) is not the operand itself
// and starts at zero, which is what such a model expects.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/RandomInit.h"

#include "rp/runtime/Executor.h"
#include "rp/runtime/host/Kernels.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace rp::runtime;

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Elements generated per chunk: bounds the f32 staging of a parameter of
// any size and lets the pool split the work.
constexpr int64_t kChunk = int64_t(1) << 20;

} // namespace

uint64_t rp::runtime::randomInitKey(uint64_t seed, const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name)
    h = (h ^ c) * 0x100000001b3ull;
  return splitmix64(h ^ splitmix64(seed));
}

void rp::runtime::fillRandomNormal(uint64_t key, double stddev, int64_t begin,
                                   int64_t n, float *out) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kUnit = 1.0 / double(uint64_t(1) << 53);
  for (int64_t i = 0; i < n; ++i) {
    // Box-Muller on the pair k / 2: both elements of a pair share their two
    // uniforms, so where a range starts changes no value.
    uint64_t k = uint64_t(begin + i), pair = k >> 1;
    double u1 = double((splitmix64(key + 2 * pair) >> 11) + 1) * kUnit;
    double u2 = double(splitmix64(key + 2 * pair + 1) >> 11) * kUnit;
    double r = std::sqrt(-2.0 * std::log(u1));
    double z = (k & 1) ? r * std::sin(kTwoPi * u2) : r * std::cos(kTwoPi * u2);
    out[i] = static_cast<float>(z * stddev);
  }
}

bool rp::runtime::parseRandomInit(const std::string &spec, uint64_t &seed,
                                  std::string &error) {
  const std::string word = "random";
  if (spec.compare(0, word.size(), word) != 0 ||
      (spec.size() > word.size() && spec[word.size()] != ':'))
    return false;
  seed = 0;
  if (spec.size() == word.size())
    return true;
  std::string digits = spec.substr(word.size() + 1);
  bool ok = !digits.empty() && digits.size() <= 20 &&
            digits.find_first_not_of("0123456789") == std::string::npos;
  if (ok) {
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(digits.c_str(), &end, 10);
    ok = errno == 0 && *end == 0;
    seed = v;
  }
  if (!ok)
    error = "--init-weights " + spec +
            ": give random or random:SEED, SEED a whole number below 2^64";
  return true;
}

std::vector<RandomInit> rp::runtime::randomInitRules(const Plan &plan) {
  size_t n = plan.buffers.size();
  // Where each buffer's bytes come from: copies, casts and reshapes.
  std::vector<std::vector<uint32_t>> sources(n);
  std::vector<uint32_t> scales;
  for (const ProgramDesc &program : plan.programs)
    for (const KernelCallDesc &c : program.calls) {
      bool norm = c.op == OpKind::layer_norm || c.op == OpKind::rms_norm;
      if (norm && c.ints.size() > 1 && c.ints[1] != 0 && c.inputs.size() > 1)
        scales.push_back(c.inputs[1]);
      bool moves = c.op == OpKind::cast || c.op == OpKind::reshape;
      if (moves && !c.inputs.empty() && !c.outputs.empty() &&
          c.outputs[0] < n && c.inputs[0] < n)
        sources[c.outputs[0]].push_back(c.inputs[0]);
    }
  for (const JobDesc &job : plan.jobs)
    for (const CopyDesc &copy : job.copies)
      if (copy.dst < n && copy.src < n)
        sources[copy.dst].push_back(copy.src);
  std::vector<bool> scale(n, false);
  while (!scales.empty()) {
    uint32_t b = scales.back();
    scales.pop_back();
    if (b >= n || scale[b])
      continue;
    scale[b] = true;
    for (uint32_t src : sources[b])
      scales.push_back(src);
  }
  std::vector<RandomInit> rules(n, RandomInit::none);
  for (size_t i = 0; i < n; ++i) {
    const BufferDesc &b = plan.buffers[i];
    if (!b.weight)
      continue;
    if (!b.weight->stored && b.weight->initBound == 0.0)
      rules[i] = RandomInit::zeros;
    else if (scale[i])
      rules[i] = RandomInit::ones;
    else if (b.shape.size() >= 2)
      rules[i] = RandomInit::normal;
    else
      rules[i] = RandomInit::zeros;
  }
  return rules;
}

Status HostForward::randomParameters(ThreadPool &pool, uint64_t seed) {
  std::vector<RandomInit> rules = randomInitRules(plan);
  std::vector<float> values;
  for (uint32_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    if (rules[i] == RandomInit::none)
      continue;
    if (!isFloat(b.dtype))
      return invalidArgument("--init-weights random: parameter '" +
                             b.weight->param + "' is not a float tensor");
    TensorRef dst = buffer(i, 0);
    Device *device = b.onHost() ? nullptr : &backend->getDevice(b.device);
    std::vector<uint8_t> staging;
    if (device && !device->isHostAccessible()) {
      staging.resize(b.bytes());
      dst.data = staging.data();
    }
    uint64_t key = randomInitKey(seed, b.weight->param);
    size_t width = dtypeSize(b.dtype);
    ThreadPool serial(1);
    for (int64_t start = 0; start < b.size(); start += kChunk) {
      int64_t n = std::min(kChunk, b.size() - start);
      values.resize(size_t(n));
      if (rules[i] == RandomInit::normal) {
        int64_t pieces = (n + 65535) / 65536;
        pool.parallelFor(pieces, [&](int64_t p) {
          int64_t lo = p * 65536, hi = std::min(n, lo + 65536);
          fillRandomNormal(key, kRandomInitStd, start + lo, hi - lo,
                           values.data() + lo);
        });
      } else {
        std::fill(values.begin(), values.end(),
                  rules[i] == RandomInit::ones ? 1.0f : 0.0f);
      }
      TensorRef src{values.data(), DType::f32, {n}};
      TensorRef part{static_cast<uint8_t *>(dst.data) + size_t(start) * width,
                     b.dtype,
                     {n}};
      if (Status s = host::cast(serial, src, part); s.failed())
        return s;
    }
    if (!staging.empty()) {
      // Device memory the host cannot write: every slot through a copy.
      Queue &queue = device->getQueue(QueueKind::weight_h2d);
      for (unsigned slot = 0; slot < slots; ++slot)
        if (Status s = queue.copy(buffer(i, slot).data, staging.data(),
                                  staging.size(), CopyKind::hostToDevice);
            s.failed())
          return s;
      if (Status s = queue.synchronize(); s.failed())
        return s;
      continue;
    }
    for (unsigned slot = 1; slot < slots; ++slot)
      if (buffer(i, slot).data != dst.data)
        std::memcpy(buffer(i, slot).data, dst.data, b.bytes());
  }
  return Status::ok();
}
