//===- LossScale.h - dynamic loss scaling for f16 training -------*- C++
//-*-===//
//
// f16 has five exponent bits: small gradients flush to zero unless the loss
// is scaled up before the backward, and large ones overflow. Dynamic loss
// scaling (as torch.cuda.amp.GradScaler) multiplies the loss gradient by a
// scale S; when any gradient of the step comes back inf or NaN the step is
// skipped (no update, the optimizer's step count stays, its gradients are
// discarded) and S shrinks, and after `interval` good steps in a row S
// grows. The trainer checks the summed gradients of all stages on the
// host, so every stage agrees on the decision by construction. bf16 has
// f32's exponent range and trains without it.
//
// The scale is one step stale by design, like the weights in async mode:
// step k runs at the scale the verdicts of steps 0..k-2 give, so step k+1
// can start (its loss_scale input staged) while step k still runs, and the
// pipeline stays full. The verdict of step k itself is exact (its own
// gradients). Since step k+1 ran at the scale step k overflowed at, its
// overflow says nothing new: a verdict sets the scale to at most the scale
// its step ran at times `backoff`, so two overflowing steps in a row back
// off once. The same rule on every device count, slot count and with or
// without a barrier between the steps, so the bits do not depend on them.
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
      : config(config), scale(config.initial), previous(config.initial) {}

  /// The scale after every verdict taken (the one step `decided() + 1`
  /// runs at).
  double getScale() const { return scale; }
  /// The scale step `decided()` runs at (decided before its predecessor's
  /// verdict).
  double getPreviousScale() const { return previous; }
  unsigned getGoodSteps() const { return goodSteps; }
  /// The steps whose verdicts are in (the next verdict is this step's).
  unsigned decided() const { return verdicts; }
  /// The scale step `step` runs at: the verdicts of steps up to step - 2
  /// decide it. Asked once step - 2's verdict is in and before step's own
  /// (so step is decided() or decided() + 1); anything else is a bug and
  /// gives a negative number.
  double scaleFor(unsigned step) const;
  /// Restores a checkpointed state: `done` steps decided, the scale the
  /// next one runs at (`previous`) and the one after it (`s`).
  void restore(unsigned done, double s, double previous, unsigned good);
  /// Takes the next step's verdict: false (an inf or NaN gradient) backs the
  /// scale off, to at most the step's own scale times `backoff`; true counts
  /// towards growing it. Returns the verdict.
  bool update(bool finite);

private:
  LossScaleConfig config;
  double scale, previous;
  unsigned goodSteps = 0, verdicts = 0;
};

/// Whether every gradient of `params` is finite; the same answer for any
/// thread count.
bool allGradientsFinite(ThreadPool &pool, const std::vector<ParamSlot> &params);

} // namespace rp::runtime

#endif // RP_RUNTIME_LOSSSCALE_H
