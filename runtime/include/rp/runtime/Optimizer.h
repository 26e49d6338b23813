//===- Optimizer.h - CPU optimizers on f32 master weights -------*- C++ -*-===//
//
// The optimizer the host runs on the f32 master copy of every trainable
// parameter, with PyTorch's formulas (torch.optim.AdamW, torch.optim.SGD)
// so that rp's trajectories can be checked against torch's. Vectorizable
// loops over fixed chunks on the runtime's thread pool: the bits of the
// result do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_OPTIMIZER_H
#define RP_RUNTIME_OPTIMIZER_H

#include "rp/runtime/Status.h"
#include "rp/runtime/ThreadPool.h"

#include <cstdint>
#include <vector>

namespace rp::runtime {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 1e-2;
};

struct SGDConfig {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;
  bool nesterov = false;
};

/// One parameter's optimizer view: master weights, its gradient, and the
/// state the optimizer keeps (AdamW: exp_avg and exp_avg_sq; SGD with
/// momentum: the momentum buffer), all f32 and `size` long.
struct ParamSlot {
  float *weight = nullptr;
  const float *grad = nullptr;
  float *state0 = nullptr;
  float *state1 = nullptr;
  int64_t size = 0;
};

/// torch.optim.AdamW: w -= lr * wd * w; m = b1 m + (1-b1) g;
/// v = b2 v + (1-b2) g^2; w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
/// with `step` = t counted from 1. `gradScale` multiplies every gradient
/// first (global-norm clipping).
Status adamwStep(ThreadPool &pool, const AdamWConfig &config, int64_t step,
                 const std::vector<ParamSlot> &params, double gradScale = 1.0);

/// torch.optim.SGD (momentum buffer initialized to the first gradient, as
/// torch does; state0 is the buffer and may be null without momentum).
Status sgdStep(ThreadPool &pool, const SGDConfig &config, int64_t step,
               const std::vector<ParamSlot> &params, double gradScale = 1.0);

/// The L2 norm of all gradients together, summed in a fixed order (double
/// accumulation) so it is the same for any thread count.
double globalGradNorm(ThreadPool &pool, const std::vector<ParamSlot> &params);

/// torch.nn.utils.clip_grad_norm_: the factor min(1, maxNorm / (norm +
/// 1e-6)) to pass as gradScale.
double clipScale(double norm, double maxNorm);

} // namespace rp::runtime

#endif // RP_RUNTIME_OPTIMIZER_H
