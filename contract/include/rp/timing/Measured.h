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
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_MEASURED_H
#define RP_TIMING_MEASURED_H

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rp::timing {

struct MeasuredLayerTimes {
  /// -1: not in the file.
  double forwardMs = -1, recomputeMs = -1, backwardMs = -1;
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
};

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
/// "forward_ms", "recompute_ms", "backward_ms"}]} in that order, times
/// rounded to the nanosecond, and the fields under 0 (not measured) left
/// out. parseMeasuredTimes reads it back.
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
