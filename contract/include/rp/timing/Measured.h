//===- Measured.h - the measured-profile format -----------------*- C++ -*-===//
//
// A measured profile (docs/hardware-profiles.md, "Measured profiles": the
// per-layer times rp-run --profile writes, or any file of that form): its
// one reader and one writer, which rp-run (writing it, and timing the sim
// with it) and rp-compile (costing layers with it) share. It also times
// a staged plan's programs by the layers they compute, in place of the
// kernel-cost model, so that measured times reach the sim device (rp-run
// --backend sim --measured FILE) as they reach the partitioner. Programs
// are named after their layers by the staged export (runtime/lib/exec/
// Profile.cpp): "L" or "L slotN" a forward, "A..B" a fused tail (or a
// forward of several layers), "L.backward" or "A..B.backward" a backward
// with its recompute. A program's time is the sum over its layers of the
// times the compiler charges the same job (lib/Analysis/Pipeline.cpp):
// recompute_ms for a forward, forward_ms + backward_ms for the tail,
// recompute_ms + backward_ms for a backward; recompute_ms defaults to
// forward_ms. A program with a layer the file does not time (or that is
// not named after layers) keeps the model's time.
//
// Its "ops" section (format kMeasuredOpsFormat, "ops_format") times single
// kernel calls: per op kind, element type (the call's first floating-point
// operand's, as the timing model reads it), operand shapes and the
// attributes that change the work at those shapes (measuredOpAttrs), the
// median of the calls rp-run --profile timed on the device and how many there
// were. A call whose key the section names takes that time in place of the
// model's (timedCallMs), its launches included; every other call keeps the
// model's. Where a program is timed by its layers above, the layers' time
// wins: it is the whole program as the executor ran it (its calls, the
// gaps between them and what no op entry names), where the op entries add
// up only the calls (docs/sim.md, the row "measured times" of its model table).
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_MEASURED_H
#define RP_TIMING_MEASURED_H

#include "rp/timing/Hardware.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rp::timing {

struct MeasuredLayerTimes {
  /// -1: not in the file.
  double forwardMs = -1, recomputeMs = -1, backwardMs = -1;
};

/// The version of the "ops" section a reader takes; a file with another
/// "ops_format" is refused (measure again with this build's rp-run).
/// Format 2 keys each call by its attributes too (measuredOpAttrs); format
/// 1's entries may mix calls that differ in them (a causal and a full
/// attention), so no entry of it can be trusted and it is refused whole.
inline constexpr int kMeasuredOpsFormat = 2;

/// One kernel call shape's measured time.
struct MeasuredOpTime {
  /// plan.fbs's op kind name ("matmul") and the call's element type name.
  std::string op, dtype;
  std::vector<std::vector<int64_t>> inputs, outputs;
  /// The median of the timed calls, ms; how many calls were timed.
  double ms = 0;
  uint64_t calls = 0;
  /// measuredOpAttrs of the calls (empty for a kind none of whose
  /// attributes change its work).
  std::vector<int64_t> attrs;
};

struct MeasuredTimes {
  /// The profile the times were taken on, when the file says.
  std::string hw;
  /// How the times were taken, for people (rp-run --profile explains its
  /// splits); no reader acts on it.
  std::string note;
  /// backward_ms includes adding one microbatch's weight gradients to the
  /// job's accumulators, so the plan's add-grads programs of these layers
  /// take none of their own ("backward_includes_accumulation": true).
  bool backwardIncludesAccumulation = false;
  /// Layer names in the file's order (the graph's, for spans "A..B").
  std::vector<std::string> order;
  std::map<std::string, MeasuredLayerTimes> layers;
  /// By measuredOpKey.
  std::map<std::string, MeasuredOpTime> ops;
};

/// The attributes of a call of op kind `op` (plan.fbs's `ints` and
/// `floats`, the layouts lib/Target/PlanExport writes) that change its
/// work on the same operand shapes, the part of its key beyond them. The
/// rule: every attribute that selects the kernel's computation is kept;
/// what only picks data (a slice's offsets, a dropout's stream id, a
/// loss's ignore_index) or restates the shapes (a reduce's keep_dims, a
/// concat's dim) is left out, so calls differing only in those share one
/// entry. Per kind: matmul [transpose_a, transpose_b, epilogue];
/// attention and attention_grad [causal, has_mask, window, has_sinks,
/// has_softcap] (absent trailing ints as 0; the soft-cap's presence from
/// floats[1]); reduce and extremum_grad [kind, dims...]; slice and
/// slice_grad their strides; linear_cross_entropy(_grad) [chunk]; gelu,
/// transpose, gather, softmax, log_softmax, layer_norm, rms_norm,
/// unary_grad, softmax_grad, norm_grad, gather_grad, moe_route(_grad),
/// moe_grouped_matmul(_wgrad), moe_combine(_grad) and dequantize all their
/// ints; the other kinds (elementwise, cmp, where, cast, broadcast,
/// concat, dropout, cross_entropy(_grad), moe_dispatch) none. GQA's group
/// count is in the shapes (query heads against key heads).
std::vector<int64_t> measuredOpAttrs(uint16_t op,
                                     const std::vector<int64_t> &ints,
                                     const std::vector<double> &floats);
/// Whether any attribute of op kind `op` goes into its key.
bool measuredOpHasAttrs(uint16_t op);

/// The key of a call in the "ops" section: "matmul f32 [6,16,32] [32,32]
/// -> [6,16,32] {0,1,0}" (op kind, element type, input shapes, output
/// shapes, measuredOpAttrs where there are any).
std::string measuredOpKey(const std::string &op, const std::string &dtype,
                          const std::vector<std::vector<int64_t>> &inputs,
                          const std::vector<std::vector<int64_t>> &outputs,
                          const std::vector<int64_t> &attrs);
std::string measuredOpKey(uint16_t op, const CallOperands &call,
                          const std::vector<int64_t> &ints,
                          const std::vector<double> &floats);

/// The measured time of a call of op kind `op` on `call`'s operands with
/// attributes `ints` and `floats`, or std::nullopt where `times` (may be
/// null) names no such call.
std::optional<double> measuredCallMs(const MeasuredTimes *times, uint16_t op,
                                     const CallOperands &call,
                                     const std::vector<int64_t> &ints,
                                     const std::vector<double> &floats);

/// The time of one kernel call: its measured time where `measured` names
/// it, else the model's (callMs). The one rule the sim device, the plan
/// export's prediction and the compiler's layer costs share.
double timedCallMs(const HardwareModel &hw, const MeasuredTimes *measured,
                   uint16_t op, const CallOperands &call,
                   const std::vector<int64_t> &ints,
                   const std::vector<double> &floats);

/// Parses `text` (a measured profile's JSON); std::nullopt with `error`
/// saying what is wrong and where.
std::optional<MeasuredTimes> parseMeasuredTimes(const std::string &text,
                                                const std::string &source,
                                                std::string &error);
/// The text of the file at `path`; false with `error` when it is not a
/// regular file or cannot be read.
bool readMeasuredProfile(const std::string &path, std::string &text,
                         std::string &error);
/// readMeasuredProfile, then parseMeasuredTimes.
std::optional<MeasuredTimes> loadMeasuredTimes(const std::string &path,
                                               std::string &error);

/// The file's text for `times`: {"hw", "note",
/// ["backward_includes_accumulation": true,] "layers": [{"name",
/// "forward_ms", "recompute_ms", "backward_ms"}], ["ops_format": 2, "ops":
/// [{"op", "dtype", "inputs", "outputs", ["attrs",] "ms", "calls"}]]} in
/// that order, times rounded to the nanosecond, the fields under 0 (not
/// measured) and empty attrs left out, the ops in key order; an array of
/// numbers (a shape) on one line. parseMeasuredTimes reads it back.
std::string formatMeasuredTimes(const MeasuredTimes &times);

/// The measured time of one run of the program named `program`; `tail`
/// when a fused tail job runs it. "L.backward.recompute" and
/// "L.backward.rest" (a backward split after its recompute) take the
/// layers' recompute_ms and backward_ms; "add-grads P" takes 0 where the
/// file's backward times include the adds and times every layer of P.
/// std::nullopt: keep the model's time.
std::optional<double> measuredProgramMs(const MeasuredTimes &times,
                                        const std::string &program, bool tail);

} // namespace rp::timing

#endif // RP_TIMING_MEASURED_H
