//===- PredictTokenSlicesMaxSeq.cpp - the longest sliced sequence ---------===//
//
// rp-predict-token-slices' remark under report-max-seq: the longest
// sequence whose slices fit the devices' linear memory model (and the
// host, where a host budget is given), a bisection on TeraPipe's program's
// feasibility with the stages the graph was cut with.
//
//===----------------------------------------------------------------------===//

#include "PredictTokenSlices.h"

#include "rp/timing/Assumptions.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::token_slices;

std::string mlir::rp::token_slices::gib(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream(s)
      << llvm::format("%.2f GiB", bytes / double(1ull << 30));
  return s;
}

std::string mlir::rp::token_slices::size(int64_t bytes) {
  if (bytes >= int64_t(1) << 30)
    return gib(bytes);
  bool mib = bytes >= (1 << 20);
  return fmt(mib ? "%.2f MiB" : "%.2f KiB",
             bytes / double(mib ? 1 << 20 : 1 << 10));
}

namespace {

std::string joined(llvm::ArrayRef<int64_t> sizes) {
  std::string s;
  for (int64_t v : sizes)
    s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

} // namespace

void mlir::rp::token_slices::reportSlicedStep(func::FuncOp func,
                                              const StepRemark &r) {
  int64_t tokens = r.tokens;
  auto rate = [&](double ms) { return ms > 0 ? tokens / (ms / 1e3) : 0.0; };
  // " (fast - slow end: A - B ms, C - D tokens/s)" where there are ends.
  auto range = [&](const double(&ends)[2]) -> std::string {
    if (r.unknown.empty())
      return "";
    return fmt(" (%.3f - %.3f ms, %.0f - %.0f tokens/s over the unknown "
               "inputs)",
               ends[0], ends[1], rate(ends[1]), rate(ends[0]));
  };
  InFlightDiagnostic report = emitRemark(func.getLoc());
  report << "token slices (a prediction of the compiler's model): "
         << r.sizes.size() << " slice" << (r.sizes.size() == 1 ? "" : "s")
         << " of " << joined(r.sizes) << " tokens (" << r.how << ") on "
         << r.devices << " devices, " << r.hw.name << "; "
         << fmt("predicted step %.3f ms, %.0f%% bubble, %.0f "
                "tokens/s",
                r.sliced.plan.stepMs, 100 * r.sliced.plan.bubble,
                rate(r.sliced.plan.stepMs))
         << range(r.slicedEnds) << "; unsliced "
         << fmt("%.3f ms, %.0f%% bubble, %.0f tokens/s", r.plain.stepMs,
                100 * r.plain.bubble, rate(r.plain.stepMs))
         << range(r.plainEnds)
         << fmt(" (sliced %.2fx",
                r.plain.stepMs / std::max(1e-12, r.sliced.plan.stepMs))
         << (r.unknown.empty()
                 ? std::string(")")
                 : fmt(", %.2fx at the fast end, %.2fx at the slow end)",
                       r.plainEnds[0] / std::max(1e-12, r.slicedEnds[0]),
                       r.plainEnds[1] / std::max(1e-12, r.slicedEnds[1])))
         << "; peak " << gib(r.sliced.plan.peak) << " on device "
         << r.sliced.plan.device << " of " << gib(r.budget) << " ("
         << (r.sliced.plan.fits ? "fits" : "does NOT fit") << "; unsliced "
         << gib(r.plain.peak) << "), keys and values kept "
         << "by one job up to " << gib(r.sliced.keptBytes)
         << " (their copies through host rows and the tail's forward "
            "sweep timed as rp-insert-transfers writes them); not modelled: "
            "the pinned host rows that hold every layer's keys and values "
            "between a forward job and its backward";
  // What every prediction says (rp/timing/Assumptions.h): its profile's
  // terms, what the model leaves out, and what its range is over.
  report << "; both predictions assume " << ::rp::timing::describeAssumed(r.hw)
         << "; they leave out " << ::rp::timing::modelLeavesOut(r.hw);
  if (!r.unknown.empty())
    report << "; their ranges are over what " << r.hw.name << " cannot know ("
           << ::rp::timing::describeUnknown(r.unknown)
           << "), each end timed with its own layer costs";
  else
    report << "; no range: '" << r.hw.name << "' names no unknown inputs";
  report.report();
}

LogicalResult
mlir::rp::token_slices::reportSlicedMaxSeq(func::FuncOp func,
                                           const MaxSeqInputs &in) {
  // A peak that does not grow with the sequence (or keys and values that
  // cost nothing) leaves the linear model without a limit: say so rather
  // than report one.
  if (in.perToken <= 0 || in.kvPerToken <= 0) {
    emitRemark(func.getLoc())
        << "token slices: no largest sequence reported: in the compiler's "
           "model the peak at "
        << in.small << " tokens is " << gib(in.smallPeak) << " and at "
        << in.seq0 << " tokens " << gib(in.seqPeak)
        << ", which does not grow with the sequence, so the linear memory "
           "model has no limit";
    return success();
  }
  auto hostFits = [&](int64_t seq) {
    return in.hostBudget == 0 || in.host.at(seq) <= in.hostBudget;
  };
  // The longest sequence whose last slice of one grain still fits the
  // linear model (and the host its rows), then its plan checked at the
  // slices auto picks there.
  auto devicesAt = [&](int64_t seq, std::vector<int64_t> &picked) -> int {
    FailureOr<std::optional<SliceChoice>> c = in.searchAt(seq);
    if (failed(c))
      return -1;
    if (!*c)
      return 0;
    picked = (*c)->sizes;
    return 1;
  };
  auto at = [&](int64_t seq, std::vector<int64_t> &picked) -> int {
    return hostFits(seq) ? devicesAt(seq, picked) : 0;
  };
  int64_t lo = 0, hi = int64_t(1) << 24;
  std::vector<int64_t> picked, best;
  // Feasibility is monotone in the sequence: a bisection on the model.
  for (int64_t probe = std::max<int64_t>(in.seq0, 1); probe < hi;) {
    int ok = at(probe, picked);
    if (ok < 0)
      return failure();
    if (ok) {
      lo = probe;
      best = picked;
      probe = std::min(hi - 1, probe * 2);
      if (probe == lo)
        break;
    } else {
      hi = probe;
      break;
    }
  }
  while (lo > 0 && hi - lo > std::max<int64_t>(1, lo / 256)) {
    int64_t mid = lo + (hi - lo) / 2;
    int ok = at(mid, picked);
    if (ok < 0)
      return failure();
    if (ok) {
      lo = mid;
      best = picked;
    } else {
      hi = mid;
    }
  }
  // Which bound holds: the host's where the devices alone would take
  // the next length the bisection refused.
  std::vector<int64_t> unused;
  int hostBinds = 0;
  if (in.hostBudget > 0 && !hostFits(hi)) {
    hostBinds = devicesAt(hi, unused);
    if (hostBinds < 0)
      return failure();
  }
  int64_t shown = std::max(lo, in.seq0);
  const SlicedHostModel &host = in.host;
  std::string hostText =
      "; the host holds about " + size(host.at(shown)) +
      " there (base, adapters and optimizer " + size(host.fixed) +
      ", every layer's kept keys and values " + size(host.kept(shown)) +
      ", activation rows " + size(host.rows(shown)) +
      ", linear in the sequence from the sliced plan at " +
      std::to_string(in.seq0) + " tokens)";
  if (in.hostBudget == 0)
    hostText += ", not bounded: the profile names no host memory, "
                "--host-budget-gib N bounds it";
  else if (hostBinds)
    hostText += " of the --host-budget-gib " + size(in.hostBudget) +
                ", the bound: at " + std::to_string(hi) +
                " tokens the slices still fit the devices, the host would "
                "need " +
                size(host.at(hi));
  else
    hostText += " of the --host-budget-gib " + size(in.hostBudget) +
                "; the devices are the bound";
  InFlightDiagnostic max = emitRemark(func.getLoc());
  if (lo == 0) {
    max << "token slices: no sequence of " << in.seq0
        << " tokens or more fits ";
    if (hostFits(in.seq0))
      max << gib(in.budget) << " in slices";
    else
      max << "in slices: the host would need " << size(host.at(in.seq0))
          << " at " << in.seq0 << " tokens, over the --host-budget-gib "
          << size(in.hostBudget);
  } else {
    max << "with token slices (a prediction) the largest sequence that "
           "fits is "
        << lo << " tokens (microbatch " << in.rows << " x " << lo
        << ", the function's stages), in " << best.size() << " slices from "
        << best.front() << " down to " << best.back()
        << " tokens; a job keeps up to "
        << gib(in.kvPerToken * (lo - best.back()))
        << " of keys, values and their gradients there" << hostText;
  }
  max.report();
  return success();
}
