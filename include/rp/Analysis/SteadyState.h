//===- SteadyState.h - steps run back to back, steady state -----*- C++ -*-===//
//
// A training run is many steps, and rp's executor runs them without a
// barrier (issue 16): the round-robin job counter carries across steps, so
// job n of step k runs on device (n + k * S) mod G for S stage jobs a step,
// and a device starts step k+1's jobs as soon as it is free and their
// inputs and weights are ready. The pipeline's fill and drain are then paid
// once per run, not once per step: step k+1's first forwards run on the
// devices step k's drain frees. The time a user should believe is the
// steady state: the period between steps once the run is under way.
//
// steadyState inserts one step's transfers into a lowered (compute-only)
// pipeline and hands that step's graph to the timing core's continuous
// layout (rp/timing/Continuous.h), the one the sim device times too: the
// step repeated on rotated devices, two in flight, the optimizer on the
// host after each step, and per layer with trainable weights a version
// gate (step k reads the weights of the update of step k-2 in async mode,
// k-1 in sync mode). The period is read as the sim reads it: the mean over
// the first cycle of step ends that repeats after a warm-up of about a
// rotation (G / gcd(S, G) steps; rp/timing/Continuous.h). Static schedules keep
// their devices (no rotation); their steps overlap only as far as queue order
// and data allow.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_STEADYSTATE_H
#define RP_ANALYSIS_STEADYSTATE_H

#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/SearchStats.h"

namespace mlir::rp {

/// Steps a steady-state estimate lays out at least; it lays out more when
/// reading the period needs them (rp/timing/Continuous.h).
constexpr unsigned kSteadySteps = 5;

struct SteadyState {
  /// The period between two steps once the run is under way: the
  /// predicted step time.
  double stepMs = 0;
  /// The first step alone, from the run's start to its last compute's end
  /// (the fill included).
  double firstStepMs = 0;
  /// One step's compute, summed over devices.
  double busyMs = 0;
  /// Per device, its compute per step averaged over a whole rotation
  /// (G / gcd(S, G) steps for round-robin, after which every job is back
  /// on its step-0 device): the rotation spreads a step's jobs over the
  /// devices unless S is a multiple of G.
  std::vector<double> deviceBusyMs;
  /// The device shift from one step to the next it was timed with.
  unsigned shift = 0;

  /// 1 - busyMs / (devices x stepMs): the idle share of the GPUs in the
  /// steady state (switch and intra bubbles; no fill, no drain).
  double bubble() const;
  /// The most and least busy devices' ratio over a rotation (1: even).
  double busyRatio() const;
};

/// The steady state of `pipeline` (compute only, as lowerSchedule gives
/// it) run continuously, with transfers; std::nullopt when the run
/// deadlocks (a bug), with the stuck command's label in `stuck`.
std::optional<SteadyState>
steadyState(const Pipeline &pipeline, llvm::ArrayRef<LayerCost> layers,
            const HardwareProfile &hw, bool syncOptimizer = false,
            unsigned steps = kSteadySteps, std::string *stuck = nullptr);

/// The steady state of a compute-only round-robin `pipeline` run as the
/// memory plan decides (rp-plan-memory): `passes` in flight on `copies`
/// copies of the arenas (1: shared, a device waits for its own part of the
/// pass before). rp-choose-loss-fusion times its options the same way.
std::optional<SteadyState> steadyStateInMemory(Pipeline pipeline,
                                               unsigned passes, unsigned copies,
                                               llvm::ArrayRef<LayerCost> layers,
                                               const HardwareProfile &hw,
                                               std::string *stuck = nullptr);

/// `Dispatch` (an ODS enum in RPAttrs.td, whose names the `dispatch`
/// options take) says how a round-robin plan moves its jobs from one pass
/// to the next (the plan's pass shift, decided at compile time so plans
/// stay static):
/// - modulo: the job counter carries on, pass p's job n on device
///   (n + p * S) mod G for S stage jobs a pass;
/// - rounds: each pass (a round of the job chain) starts on the device the
///   timing model finds best: of the modulo shift and, when that one does
///   not walk every job over every device (gcd(S, G) > 1, e.g. S a multiple
///   of G, which never rotates), the shifts 1 and G - 1 that do, the one
///   whose steady step is shortest (modulo on ties). Never slower than
///   modulo in the timing model; it spreads the busy time of plans whose
///   modulo shift leaves some devices with the long jobs every pass.

/// Chooses the pass shift of `pipeline` (compute only) under `dispatch`,
/// stores it in pipeline.passShift (static schedules keep -1) and returns
/// the steady state it was chosen by; std::nullopt as steadyState.
/// `untilSteady`: a partition search's candidate, which the search times
/// once: not kept in the whole-run memo (every run stops once its period
/// is read either way).
std::optional<SteadyState>
dispatchPasses(Pipeline &pipeline, llvm::ArrayRef<LayerCost> layers,
               const HardwareProfile &hw, Dispatch dispatch,
               bool syncOptimizer = false, std::string *stuck = nullptr,
               bool untilSteady = false);

/// How many whole-run timings (steadyState, steadyStateInMemory and
/// dispatchPasses without untilSteady) this process answered from an
/// earlier timing of the same inputs rather than laying the run out again:
/// the same result bit for bit, every input the timing reads being its key.
unsigned steadyStatesReused();

/// wholeRunStats, setSteadyMemoCheck: rp/Analysis/SearchStats.h.

} // namespace mlir::rp

#endif // RP_ANALYSIS_STEADYSTATE_H
