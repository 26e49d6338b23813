//===- LossScale.h - dynamic loss scaling for f16 training -------*- C++
//-*-===//
//
// f16 has five exponent bits: small gradients flush to zero unless the loss
// is scaled up before the backward, and large ones overflow. Dynamic loss
// scaling (as torch.cuda.amp.GradScaler) multiplies the loss gradient by a
// scale S; when any gradient of the step comes back inf or NaN the step is
// skipped (no update, the optimizer's step count stays) and S shrinks,
// and after `interval` good steps in a row S grows. The trainer checks the
// summed gradients of all stages on the host, so every stage agrees on the
// decision by construction. bf16 has f32's exponent range and trains
// without it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LOSSSCALE_H
#define RP_RUNTIME_LOSSSCALE_H

#include "rp/runtime/Optimizer.h"
#include "rp/runtime/ThreadPool.h"

#include <vector>

namespace rp::runtime {

/// GradScaler's defaults.
struct LossScaleConfig {
  double initial = 65536.0;
  double growth = 2.0;
  double backoff = 0.5;
  unsigned interval = 2000;
};

class LossScaler {
public:
  explicit LossScaler(const LossScaleConfig &config = LossScaleConfig())
      : config(config), scale(config.initial) {}

  double getScale() const { return scale; }
  unsigned getGoodSteps() const { return goodSteps; }
  /// Restores a checkpointed state.
  void restore(double s, unsigned good) {
    scale = s;
    goodSteps = good;
  }
  /// Takes a step's verdict: false (an inf or NaN gradient) backs the scale
  /// off, true counts towards growing it. Returns the verdict.
  bool update(bool finite);

private:
  LossScaleConfig config;
  double scale;
  unsigned goodSteps = 0;
};

/// Whether every gradient of `params` is finite; the same answer for any
/// thread count.
bool allGradientsFinite(ThreadPool &pool, const std::vector<ParamSlot> &params);

} // namespace rp::runtime

#endif // RP_RUNTIME_LOSSSCALE_H
