//===- Optimizer.cpp - CPU optimizers on f32 master weights ---------------===//
//
// AdamW and SGD with the arithmetic of torch 1.13's CPU kernels, operation
// for operation, so that rp and torch.optim give the same bits (checked
// against torch in bench/adamw_vs_torch.py):
//
//  * Every Python float hyperparameter reaches a torch CPU kernel as a float:
//    torch derives the scalar in double (1 - lr * wd, lr / (1 - beta1^t),
//    sqrt(1 - beta2^t)) and the kernel casts it to the tensor's dtype. rp
//    computes the same doubles with the same libm pow/sqrt and casts.
//  * `a.add_(b, alpha=s)` is fmadd(b, s, a) in torch's AVX2 kernels (and its
//    scalar tails are contracted to an FMA by gcc), `a.addcmul_(b, c,
//    value=s)` is fma(s * b, c, a); addcdiv is a + (s * b) / c with no FMA.
//    rp writes these FMAs explicitly (__builtin_fmaf), so its results are the
//    same with or without FMA hardware and with any -ffp-contract setting.
//
// Each parameter is split into fixed chunks run on the thread pool. The
// updates are elementwise, so the bits never depend on the thread count; the
// norm is summed per fixed chunk and folded in chunk order.
//
// Inner loops are plain loops over __restrict__ float pointers that the
// compiler vectorizes. On x86 they are compiled twice, for the baseline ISA
// and for AVX2+FMA, and picked at run time: without FMA hardware
// __builtin_fmaf is a libm call that blocks vectorization. Both versions
// compute the same correctly rounded operations and give the same bits. This
// file is built with -fno-math-errno (sqrtf would otherwise keep the loop
// scalar) and -ffp-contract=off (lib/CMakeLists.txt): torch rounds p * (1 -
// lr * wd) before adding the update, and gcc's default contraction would fuse
// the two in the AVX2+FMA instance (OptimizerTest's torch bits catch that).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace rp::runtime {

namespace {

/// Elements per chunk of one parameter: 256 KiB of each of the four arrays,
/// so a chunk's working set stays in L2. Updates are elementwise, so the
/// grain only affects scheduling; the norm's rounding depends on it.
constexpr int64_t kOptimizerGrain = int64_t(1) << 16;

#if (defined(__GNUC__) || defined(__clang__)) &&                               \
    (defined(__x86_64__) || defined(__i386__))
#define RP_OPT_X86_DISPATCH 1
#define RP_OPT_INLINE inline __attribute__((always_inline))
#define RP_OPT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define RP_OPT_X86_DISPATCH 0
#define RP_OPT_INLINE inline
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RP_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#define RP_SQRTF(a) __builtin_sqrtf(a)
#else
#define RP_FMAF(a, b, c) std::fma(a, b, c)
#define RP_SQRTF(a) std::sqrt(a)
#endif

bool useAvx2Fma() {
#if RP_OPT_X86_DISPATCH
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// The f32 scalars of one AdamW step, each rounded from the double torch
/// computes in Python.
struct AdamWScalars {
  float gradScale;
  float decay;       // 1 - lr * wd
  float beta1;       // beta1
  float oneMinusB1;  // 1 - beta1
  float beta2;       // beta2
  float oneMinusB2;  // 1 - beta2
  float bc2Sqrt;     // sqrt(1 - beta2^t)
  float eps;         // eps
  float negStepSize; // -(lr / (1 - beta1^t))
};

/// torch 1.13, per element, in this order:
///   g *= scale                         (clip_grad_norm_'s g.mul_(coef))
///   p.mul_(1 - lr*wd)                  p * decay
///   exp_avg.mul_(b1).add_(g, 1-b1)     fma(g, 1-b1, m * b1)
///   exp_avg_sq.mul_(b2)
///             .addcmul_(g, g, 1-b2)    fma((1-b2) * g, g, v * b2)
///   denom = (v.sqrt() / bc2_sqrt).add_(eps)
///   p.addcdiv_(m, denom, -step_size)   p + (-step_size * m) / denom
RP_OPT_INLINE void adamwKernel(float *__restrict__ w,
                               const float *__restrict__ g,
                               float *__restrict__ m, float *__restrict__ v,
                               int64_t n, const AdamWScalars &s) {
  const float scale = s.gradScale, decay = s.decay, b1 = s.beta1,
              omb1 = s.oneMinusB1, b2 = s.beta2, omb2 = s.oneMinusB2,
              bc2Sqrt = s.bc2Sqrt, eps = s.eps, nss = s.negStepSize;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * scale;
    const float wi = w[i] * decay;
    const float mi = RP_FMAF(gi, omb1, m[i] * b1);
    const float vi = RP_FMAF(omb2 * gi, gi, v[i] * b2);
    const float denom = RP_SQRTF(vi) / bc2Sqrt + eps;
    w[i] = wi + (nss * mi) / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

struct SGDScalars {
  float gradScale;
  float weightDecay;
  float momentum;
  float oneMinusDampening;
  float negLr;
};

/// The momentum buffer's three cases.
enum class Momentum { None, First, Later };

/// torch 1.13's _single_tensor_sgd, per element:
///   g *= scale
///   d = g.add(p, alpha=wd)              fma(p, wd, g)     (only if wd != 0)
///   buf = clone(d)                      on the first step
///   buf.mul_(mu).add_(d, 1-dampening)   fma(d, 1-damp, buf * mu) later
///   d = d.add(buf, alpha=mu)            fma(buf, mu, d)   (nesterov)
///   d = buf                             (otherwise)
///   p.add_(d, alpha=-lr)                fma(d, -lr, p)
template <bool WeightDecay, Momentum Mom, bool Nesterov>
RP_OPT_INLINE void sgdKernel(float *__restrict__ w, const float *__restrict__ g,
                             float *__restrict__ buf, int64_t n,
                             const SGDScalars &s) {
  const float scale = s.gradScale, wd = s.weightDecay, mu = s.momentum,
              omd = s.oneMinusDampening, negLr = s.negLr;
  for (int64_t i = 0; i < n; ++i) {
    const float wi = w[i];
    float d = g[i] * scale;
    if constexpr (WeightDecay)
      d = RP_FMAF(wi, wd, d);
    if constexpr (Mom != Momentum::None) {
      float b;
      if constexpr (Mom == Momentum::First)
        b = d;
      else
        b = RP_FMAF(d, omd, buf[i] * mu);
      buf[i] = b;
      if constexpr (Nesterov)
        d = RP_FMAF(b, mu, d);
      else
        d = b;
    }
    w[i] = RP_FMAF(d, negLr, wi);
  }
}

/// Sum of g[i]^2 in double with eight interleaved accumulators (each square
/// of a float is exact in double), folded in a fixed tree: deterministic,
/// and independent of how the loop is vectorized.
RP_OPT_INLINE double sumSquaresKernel(const float *__restrict__ g, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double x = g[i + j];
      acc[j] += x * x;
    }
  for (int j = 0; i < n; ++i, ++j) {
    const double x = g[i];
    acc[j] += x * x;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The baseline and AVX2+FMA instances. The kernels above are always_inline,
// so each instance compiles them for its own ISA.

void adamwBase(float *w, const float *g, float *m, float *v, int64_t n,
               const AdamWScalars &s) {
  adamwKernel(w, g, m, v, n, s);
}

template <bool WD, Momentum Mom, bool Nesterov>
void sgdBase(float *w, const float *g, float *buf, int64_t n,
             const SGDScalars &s) {
  sgdKernel<WD, Mom, Nesterov>(w, g, buf, n, s);
}

double sumSquaresBase(const float *g, int64_t n) {
  return sumSquaresKernel(g, n);
}

#if RP_OPT_X86_DISPATCH
RP_OPT_TARGET_AVX2 void adamwAvx2(float *w, const float *g, float *m, float *v,
                                  int64_t n, const AdamWScalars &s) {
  adamwKernel(w, g, m, v, n, s);
}

template <bool WD, Momentum Mom, bool Nesterov>
RP_OPT_TARGET_AVX2 void sgdAvx2(float *w, const float *g, float *buf, int64_t n,
                                const SGDScalars &s) {
  sgdKernel<WD, Mom, Nesterov>(w, g, buf, n, s);
}

RP_OPT_TARGET_AVX2 double sumSquaresAvx2(const float *g, int64_t n) {
  return sumSquaresKernel(g, n);
}
#endif

using AdamWFn = void (*)(float *, const float *, float *, float *, int64_t,
                         const AdamWScalars &);
using SGDFn = void (*)(float *, const float *, float *, int64_t,
                       const SGDScalars &);
using SumSquaresFn = double (*)(const float *, int64_t);

AdamWFn pickAdamW() {
#if RP_OPT_X86_DISPATCH
  if (useAvx2Fma())
    return adamwAvx2;
#endif
  return adamwBase;
}

template <bool WD, Momentum Mom, bool Nesterov> SGDFn pickSGD3() {
#if RP_OPT_X86_DISPATCH
  if (useAvx2Fma())
    return sgdAvx2<WD, Mom, Nesterov>;
#endif
  return sgdBase<WD, Mom, Nesterov>;
}

template <bool WD> SGDFn pickSGD2(Momentum mom, bool nesterov) {
  switch (mom) {
  case Momentum::None:
    return pickSGD3<WD, Momentum::None, false>();
  case Momentum::First:
    return nesterov ? pickSGD3<WD, Momentum::First, true>()
                    : pickSGD3<WD, Momentum::First, false>();
  case Momentum::Later:
    return nesterov ? pickSGD3<WD, Momentum::Later, true>()
                    : pickSGD3<WD, Momentum::Later, false>();
  }
  return nullptr;
}

SGDFn pickSGD(bool weightDecay, Momentum mom, bool nesterov) {
  return weightDecay ? pickSGD2<true>(mom, nesterov)
                     : pickSGD2<false>(mom, nesterov);
}

SumSquaresFn pickSumSquares() {
#if RP_OPT_X86_DISPATCH
  if (useAvx2Fma())
    return sumSquaresAvx2;
#endif
  return sumSquaresBase;
}

//===----------------------------------------------------------------------===//
// Chunks and checks
//===----------------------------------------------------------------------===//

/// One fixed chunk of one parameter.
struct ParamChunk {
  size_t param;
  int64_t begin;
  int64_t end;
};

/// Every parameter split by fixedChunks(size, grain), in parameter order.
/// A function of the sizes alone, never of the thread count.
std::vector<ParamChunk> planChunks(const std::vector<ParamSlot> &params,
                                   int64_t grain) {
  std::vector<ParamChunk> chunks;
  for (size_t p = 0; p < params.size(); ++p) {
    ChunkPlan plan = fixedChunks(params[p].size, grain);
    for (int64_t c = 0; c < plan.numChunks; ++c)
      chunks.push_back({p, plan.begin(c), plan.end(c)});
  }
  return chunks;
}

/// Refuses null arrays and arrays that overlap where one of them is written:
/// the kernels' __restrict__ and the parallel chunks both rely on that.
/// Gradients are only read and may overlap one another.
Status checkSlots(const char *who, const std::vector<ParamSlot> &params,
                  int numStates) {
  struct Range {
    uintptr_t begin, end;
    bool written;
  };
  std::vector<Range> ranges;
  ranges.reserve(params.size() * (2 + numStates));
  for (size_t p = 0; p < params.size(); ++p) {
    const ParamSlot &slot = params[p];
    std::string where = std::string(who) + ": parameter " + std::to_string(p);
    if (slot.size < 0)
      return invalidArgument(where + " has a negative size");
    if (slot.size == 0)
      continue;
    if (!slot.weight || !slot.grad)
      return invalidArgument(where + " has no weight or no gradient");
    if ((numStates >= 1 && !slot.state0) || (numStates >= 2 && !slot.state1))
      return invalidArgument(where + " has no optimizer state");
    auto add = [&](const float *ptr, bool written) {
      auto b = reinterpret_cast<uintptr_t>(ptr);
      ranges.push_back(
          {b, b + static_cast<uintptr_t>(slot.size) * sizeof(float), written});
    };
    add(slot.weight, true);
    add(slot.grad, false);
    if (numStates >= 1)
      add(slot.state0, true);
    if (numStates >= 2)
      add(slot.state1, true);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range &a, const Range &b) { return a.begin < b.begin; });
  uintptr_t endAny = 0, endWritten = 0;
  for (const Range &r : ranges) {
    if (r.begin < endWritten || (r.written && r.begin < endAny))
      return invalidArgument(std::string(who) +
                             ": weights, gradients and optimizer state of "
                             "the parameters overlap in memory");
    endAny = std::max(endAny, r.end);
    if (r.written)
      endWritten = std::max(endWritten, r.end);
  }
  return {};
}

std::string fmt(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

} // namespace

//===----------------------------------------------------------------------===//
// API
//===----------------------------------------------------------------------===//

Status adamwStep(ThreadPool &pool, const AdamWConfig &config, int64_t step,
                 const std::vector<ParamSlot> &params, double gradScale) {
  // torch.optim.AdamW's own argument checks (written to reject NaN too).
  if (!(config.lr >= 0))
    return invalidArgument("adamw: invalid learning rate " + fmt(config.lr));
  if (!(config.eps >= 0))
    return invalidArgument("adamw: invalid epsilon " + fmt(config.eps));
  if (!(config.beta1 >= 0 && config.beta1 < 1))
    return invalidArgument("adamw: invalid beta1 " + fmt(config.beta1));
  if (!(config.beta2 >= 0 && config.beta2 < 1))
    return invalidArgument("adamw: invalid beta2 " + fmt(config.beta2));
  if (!(config.weightDecay >= 0))
    return invalidArgument("adamw: invalid weight decay " +
                           fmt(config.weightDecay));
  if (step < 1)
    return invalidArgument("adamw: steps count from 1, got " +
                           std::to_string(step));
  if (Status s = checkSlots("adamw", params, 2); s.failed())
    return s;

  // The doubles torch computes in Python, then cast to f32 by its kernels.
  const double t = static_cast<double>(step);
  const double biasCorrection1 = 1.0 - std::pow(config.beta1, t);
  const double biasCorrection2 = 1.0 - std::pow(config.beta2, t);
  const double stepSize = config.lr / biasCorrection1;
  const double decay = 1.0 - config.lr * config.weightDecay;
  AdamWScalars s;
  s.gradScale = static_cast<float>(gradScale);
  s.decay = static_cast<float>(decay);
  s.beta1 = static_cast<float>(config.beta1);
  s.oneMinusB1 = static_cast<float>(1.0 - config.beta1);
  s.beta2 = static_cast<float>(config.beta2);
  s.oneMinusB2 = static_cast<float>(1.0 - config.beta2);
  s.bc2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  s.eps = static_cast<float>(config.eps);
  s.negStepSize = static_cast<float>(-stepSize);

  const AdamWFn kernel = pickAdamW();
  const std::vector<ParamChunk> chunks = planChunks(params, kOptimizerGrain);
  pool.parallelFor(static_cast<int64_t>(chunks.size()), [&](int64_t c) {
    const ParamChunk &chunk = chunks[c];
    const ParamSlot &p = params[chunk.param];
    const int64_t b = chunk.begin;
    kernel(p.weight + b, p.grad + b, p.state0 + b, p.state1 + b, chunk.end - b,
           s);
  });
  return {};
}

Status sgdStep(ThreadPool &pool, const SGDConfig &config, int64_t step,
               const std::vector<ParamSlot> &params, double gradScale) {
  // torch.optim.SGD's own argument checks.
  if (!(config.lr >= 0))
    return invalidArgument("sgd: invalid learning rate " + fmt(config.lr));
  if (!(config.momentum >= 0))
    return invalidArgument("sgd: invalid momentum " + fmt(config.momentum));
  if (!(config.weightDecay >= 0))
    return invalidArgument("sgd: invalid weight decay " +
                           fmt(config.weightDecay));
  if (std::isnan(config.dampening))
    return invalidArgument("sgd: invalid dampening " + fmt(config.dampening));
  if (config.nesterov && (config.momentum <= 0 || config.dampening != 0))
    return invalidArgument(
        "sgd: nesterov momentum requires a momentum and zero dampening");
  if (step < 1)
    return invalidArgument("sgd: steps count from 1, got " +
                           std::to_string(step));
  const bool hasMomentum = config.momentum != 0;
  if (Status s = checkSlots("sgd", params, hasMomentum ? 1 : 0); s.failed())
    return s;

  SGDScalars s;
  s.gradScale = static_cast<float>(gradScale);
  s.weightDecay = static_cast<float>(config.weightDecay);
  s.momentum = static_cast<float>(config.momentum);
  s.oneMinusDampening = static_cast<float>(1.0 - config.dampening);
  s.negLr = static_cast<float>(-config.lr);
  // torch creates the buffer as a copy of the first step's d_p.
  const Momentum mom = !hasMomentum ? Momentum::None
                       : step == 1  ? Momentum::First
                                    : Momentum::Later;
  // torch skips the weight-decay add when wd == 0; fma(p, 0, g) is not
  // always g (p = inf or nan, g = -0), so neither does rp.
  const SGDFn kernel = pickSGD(config.weightDecay != 0, mom, config.nesterov);
  const std::vector<ParamChunk> chunks = planChunks(params, kOptimizerGrain);
  pool.parallelFor(static_cast<int64_t>(chunks.size()), [&](int64_t c) {
    const ParamChunk &chunk = chunks[c];
    const ParamSlot &p = params[chunk.param];
    const int64_t b = chunk.begin;
    kernel(p.weight + b, p.grad + b, hasMomentum ? p.state0 + b : nullptr,
           chunk.end - b, s);
  });
  return {};
}

double globalGradNorm(ThreadPool &pool, const std::vector<ParamSlot> &params) {
  // A parameter without a gradient contributes nothing (torch skips
  // parameters whose .grad is None).
  std::vector<ParamSlot> withGrad;
  withGrad.reserve(params.size());
  for (const ParamSlot &p : params)
    if (p.grad && p.size > 0)
      withGrad.push_back(p);
  const std::vector<ParamChunk> chunks = planChunks(withGrad, kOptimizerGrain);
  const SumSquaresFn kernel = pickSumSquares();
  // One partial per fixed chunk, folded in chunk order.
  const double sumSquares = deterministicReduce(
      pool, fixedChunks(static_cast<int64_t>(chunks.size()), 1), 0.0,
      [&](int64_t begin, int64_t end) {
        double sum = 0.0;
        for (int64_t c = begin; c < end; ++c) {
          const ParamChunk &chunk = chunks[c];
          sum += kernel(withGrad[chunk.param].grad + chunk.begin,
                        chunk.end - chunk.begin);
        }
        return sum;
      },
      [](double a, double b) { return a + b; });
  return std::sqrt(sumSquares);
}

double clipScale(double norm, double maxNorm) {
  // clip_coef = max_norm / (total_norm + 1e-6); clamp(max=1.0). Written so
  // that a NaN norm gives NaN, as torch.clamp does.
  const double coef = maxNorm / (norm + 1e-6);
  return coef > 1.0 ? 1.0 : coef;
}

} // namespace rp::runtime
