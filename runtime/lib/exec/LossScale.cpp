//===- LossScale.cpp - dynamic loss scaling for f16 training --------------===//

#include "rp/runtime/LossScale.h"

#include <algorithm>
#include <atomic>
#include <cmath>

using namespace rp::runtime;

double LossScaler::scaleFor(unsigned step) const {
  if (step == verdicts)
    return previous;
  if (step == verdicts + 1)
    return scale;
  return -1;
}

void LossScaler::restore(unsigned done, double s, double prev, unsigned good) {
  verdicts = done;
  scale = s;
  previous = prev;
  goodSteps = good;
}

bool LossScaler::update(bool finite) {
  // The step being decided ran at `previous`.
  double ran = previous;
  previous = scale;
  ++verdicts;
  if (!finite) {
    scale = std::min(scale, ran * config.backoff);
    goodSteps = 0;
    return false;
  }
  if (++goodSteps >= config.interval) {
    scale *= config.growth;
    goodSteps = 0;
  }
  return true;
}

bool rp::runtime::allGradientsFinite(ThreadPool &pool,
                                     const std::vector<ParamSlot> &params) {
  std::atomic<bool> finite{true};
  for (const ParamSlot &p : params) {
    const float *g = p.grad;
    constexpr int64_t kChunk = 1 << 14;
    pool.parallelFor((p.size + kChunk - 1) / kChunk, [&](int64_t c) {
      int64_t end = std::min(p.size, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < end; ++i)
        if (!std::isfinite(g[i])) {
          finite.store(false, std::memory_order_relaxed);
          return;
        }
    });
  }
  return finite.load();
}
