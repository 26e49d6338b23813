//===- HostBudget.cpp - rp-compile --host-budget-gib ----------------------===//
//
// The check, the stage-grain compile's trigger and the refusal's advice
// (HostBudget.h says which choices are rp-compile's and which the user's).
// The advice is estimated from the plan in hand: the adapted weights
// quantized (each without its compute-dtype copy), the adapters left out
// taken from `trained`, and the pinned buffers scaled by the sequences of
// a microbatch (each staged activation is a microbatch's); a plan compiled
// with the advice can cut other stages (fewer adapters leave the devices
// room for longer ones, fewer staged), so the figures are "about", and
// --host-budget-gib then checks the plan itself.
//
//===----------------------------------------------------------------------===//

#include "HostBudget.h"
#include "rp/Analysis/HostMemory.h"

#include "rp/Dialect/RP/RPDialect.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;

/// The adapters the advice keeps: PEFT's attention projections, the
/// smallest set a LoRA fine-tune commonly trains.
static constexpr const char *kAttentionTargets = "q_proj|k_proj|v_proj|o_proj";

std::string mlir::rp::formatHostBytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t(1) << 30))
    snprintf(text, sizeof(text), "%.2f GiB", bytes / double(1 << 30));
  else if (bytes >= (1 << 20))
    snprintf(text, sizeof(text), "%.2f MiB", bytes / double(1 << 20));
  else
    snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  return text;
}

std::string mlir::rp::describeHostMemory(const HostMemory &m) {
  std::string text =
      formatHostBytes(m.total()) + ": base " + formatHostBytes(m.base) +
      ", trained weights and gradients " + formatHostBytes(m.trained) +
      ", optimizer state " + formatHostBytes(m.optimizer) +
      ", pinned buffers " + formatHostBytes(m.pinned);
  if (m.passes > 1)
    text += ", the second pass in flight " + formatHostBytes(m.secondPass());
  return text;
}

static int64_t ceilGiB(int64_t bytes) {
  return int64_t(std::ceil(bytes / double(int64_t(1) << 30)));
}

// The default stays the fastest stages: the compiler does not know the
// training box's memory (the compiling machine's would make a plan depend
// on where it was compiled), and holding near the fastest costs a large
// model's compile a few times its time (docs/nf4.md). So the figure and
// the flags are the summary's: Llama-3.1-8B NF4 LoRA on 8 x RTX 4090 holds
// 72.1 GiB in a continuous run, 64 GiB of it pinned (two passes), 24.1
// GiB under --host-slack-pct 5, and 15.7 GiB under --host-budget-gib 16
// with --passes-in-flight 1 (test/Target/host-slack.test).
std::string mlir::rp::hostAdvice(ModuleOp module, double budgetGiB,
                                 double slackPct) {
  if (budgetGiB > 0 || slackPct > 0)
    return "";
  HostMemory m = hostMemoryOf(module);
  // The slack's unit (SearchTarget::hostSlackBytes): below it no hold
  // takes slower stages.
  if (m.pinned < (int64_t(1) << 30))
    return "";
  return "; the pinned buffers (" + formatHostBytes(m.staged()) +
         ") stage activations at the fastest stages' boundaries: for a box "
         "of less host memory, --host-budget-gib N merges stages until the "
         "plan fits N GiB (a little slower; all but the pinned buffers "
         "are " +
         formatHostBytes(m.fixed()) +
         "), --host-slack-pct 5 takes stages at most 5 % slower that stage "
         "at least 1 GiB less";
}

namespace {

/// One change the user could make, and the host memory it would need.
struct Fix {
  bool nf4 = false, attention = false;
  /// Passes a step, each microbatch 1/accumulate of the sequences, or
  /// (`passes`) each pass 1/accumulate of the microbatches.
  unsigned accumulate = 1;
  bool passes = false;
  int64_t bytes = 0;
};

struct HostBudgetStep
    : public PassWrapper<HostBudgetStep, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(HostBudgetStep)

  HostBudgetStep(const HostBudgetRequest &request, HostBudgetOutcome &outcome)
      : request(request), outcome(outcome) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    HostMemory m = hostMemoryOf(module);
    outcome.checked = true;
    budget = int64_t(request.gib * double(int64_t(1) << 30));
    if (m.total() <= budget) {
      if (request.twoPassBytes > 0) {
        llvm::errs() << "rp-compile: --host-budget-gib "
                     << llvm::format("%g", request.gib)
                     << ": compiled with one pass in flight (the same "
                        "training; its fill and drain no longer overlap the "
                        "pass before): two passes in flight need "
                     << formatHostBytes(request.twoPassBytes)
                     << " of host memory (each holds its own pinned buffers "
                        "and trained weights)";
        for (auto s : module.getOps<ScheduleOp>())
          if (FloatAttr ms = s.getStepMsAttr();
              ms && request.twoPassStepMs > 0) {
            // Two passes held to the budget may have merged stages that
            // cost more than one pass's lost overlap.
            double one = ms.getValueAsDouble();
            double pct = 100 * (one / request.twoPassStepMs - 1);
            llvm::errs() << llvm::format(
                ", and their plan predicted %.3f ms a step against %.3f "
                "(%.1f%% %s with one)",
                request.twoPassStepMs, one, std::abs(pct),
                pct >= 0 ? "slower" : "faster");
          }
        llvm::errs() << "; --passes-in-flight 2 refuses it instead\n";
      }
      if (request.layerGrainBytes > 0)
        llvm::errs() << "rp-compile: --host-budget-gib "
                     << llvm::format("%g", request.gib)
                     << ": compiled at stage grain; --recompute auto chose "
                        "layer grain for speed, whose plan needs "
                     << formatHostBytes(request.layerGrainBytes)
                     << " of host memory (its backward stages keep each "
                        "layer's input in the pinned buffers)\n";
      return markAllAnalysesPreserved();
    }
    if (request.mayRetryAtStageGrain && autoChoseLayerGrain(module)) {
      outcome.retryAtStageGrain = true;
      outcome.layerGrainBytes = m.total();
      return signalPassFailure();
    }
    // One pass in flight holds none of the second's buffers; its own
    // stages may then be faster ones (the hold leaves a pass more).
    if (request.mayRetryWithOnePass && m.passes > 1 &&
        m.total() - m.secondPass() <= budget) {
      outcome.retryWithOnePass = true;
      outcome.twoPassBytes = m.total();
      for (auto s : module.getOps<ScheduleOp>())
        if (FloatAttr ms = s.getStepMsAttr())
          outcome.twoPassStepMs = ms.getValueAsDouble();
      return signalPassFailure();
    }
    sequences = sequencesOf(module);
    for (auto s : module.getOps<ScheduleOp>()) {
      microbatches = s.getMicrobatches();
      devices = s.getDevices();
    }
    refuse(module, m);
    signalPassFailure();
  }

  static bool autoChoseLayerGrain(ModuleOp module) {
    auto *dialect = module.getContext()->getLoadedDialect<RPDialect>();
    for (auto func : module.getOps<func::FuncOp>())
      if (StringAttr choice =
              dialect->getRecomputeChoiceAttrHelper().getAttr(func))
        // Chosen for speed ("layer: predicted ..."), not because the
        // stage-grain plan did not fit the devices.
        if (choice.getValue().starts_with("layer: predicted"))
          return true;
    return false;
  }

  /// The host memory with `fix` applied to `m`.
  int64_t estimate(const HostMemory &m, const Fix &fix,
                   int64_t attentionAdapters, int64_t allAdapters) const {
    int64_t bytes = m.total();
    if (fix.nf4)
      bytes += m.adaptedQuantized(QuantKind::nf4) - m.adapted;
    if (fix.attention)
      bytes += attentionAdapters - allAdapters;
    bytes -= m.staged() - m.staged() / fix.accumulate;
    return bytes;
  }

  void refuse(ModuleOp module, const HostMemory &m) {
    // Layer-grain backward stages the user asked for (or that did not fit
    // the device at stage grain) keep their inner layers' inputs in pinned
    // host memory.
    bool layerGrain = false;
    for (auto s : module.getOps<ScheduleOp>()) {
      PartitionAttr p = s.getPartition();
      layerGrain |= p.isMixed() || p.getRecompute() == RecomputeGrain::layer;
    }
    auto &os = llvm::errs();
    os << "rp-compile: host memory " << formatHostBytes(m.total())
       << " is over --host-budget-gib " << llvm::format("%g", request.gib)
       << " (" << formatHostBytes(budget) << "): "
       << describeHostMemory(m).substr(describeHostMemory(m).find(": ") + 2);
    if (request.layerGrainBytes > 0)
      os << " (at stage grain; the layer grain --recompute auto chose needs "
         << formatHostBytes(request.layerGrainBytes) << ")";
    os << "; ";
    // One pass in flight: the same training, the second pass's buffers not
    // held (its fill and drain no longer overlap the pass before).
    if (m.passes > 1) {
      int64_t one = m.total() - m.secondPass();
      os << "--passes-in-flight 1 would need " << formatHostBytes(one) << " ("
         << (one <= budget ? "fits" : "over") << ")";
      if (one <= budget) {
        os << "; compile with --passes-in-flight 1 (the same training, "
              "a little slower)"
           << stageGrainNote(layerGrain) << "\n";
        return;
      }
      os << "; ";
    }
    bool canQuantize = !request.quantized && request.lora && m.adapted > 0;
    if (!canQuantize)
      os << (request.quantized ? "the base is quantized already"
             : request.lora    ? "no adapted weight to quantize"
                               : "a quantized base needs LoRA (--lora-rank R "
                                 "--quantize-base nf4)");
    bool nf4Fits = false;
    if (canQuantize) {
      // The adapted weights are what --quantize-base stores quantized (the
      // router, norms and embeddings stay), each with no compute-dtype
      // copy on the host: a little high where --lora-targets leaves linear
      // weights without adapters.
      for (QuantKind kind : {QuantKind::nf4, QuantKind::int8}) {
        int64_t total = m.total() - m.adapted + m.adaptedQuantized(kind);
        os << (kind == QuantKind::nf4 ? "--quantize-base nf4" : ", int8")
           << " would need about " << formatHostBytes(total) << " ("
           << (total <= budget ? "fits" : "over") << ")";
        nf4Fits |= kind == QuantKind::nf4 && total <= budget;
      }
    }
    if (nf4Fits) {
      os << "; compile with --quantize-base nf4" << stageGrainNote(layerGrain)
         << "\n";
      return;
    }
    advise(m, canQuantize, layerGrain);
  }

  std::string stageGrainNote(bool layerGrain) const {
    return layerGrain ? "; or --recompute stage: this plan's layer-grain "
                        "stages keep activations in the pinned buffers"
                      : "";
  }

  /// The least change that fits, by the estimates: the training itself
  /// kept before what it trains (smaller microbatches before fewer
  /// adapters), the base quantized first.
  void advise(const HostMemory &m, bool canQuantize, bool layerGrain) {
    llvm::Regex attention(kAttentionTargets);
    int64_t attentionAdapters = 0, allAdapters = 0;
    for (const auto &entry : m.adapters) {
      allAdapters += entry.getValue();
      if (attention.match(entry.getKey()))
        attentionAdapters += entry.getValue();
    }
    // Fewer adapters is advice only where some are off attention and some
    // on it (a model without those names has nothing to keep).
    bool canNarrow = attentionAdapters > 0 && attentionAdapters < allAdapters;
    // Fewer sequences a microbatch, as many microbatches, and as many more
    // passes a step: the same global batch, each staged activation smaller.
    // Or fewer microbatches a pass and more passes a step, the graph as it
    // is: a pass stages its own microbatches' activations only, as long as
    // a pass keeps a microbatch for every device (fewer leave some idle).
    // Per k, the smaller microbatches first (more passes cost each pass's
    // fill and drain, smaller ones only their kernels' efficiency).
    SmallVector<std::pair<unsigned, bool>> accumulate;
    for (unsigned k = 1; k <= std::max(sequences, microbatches); ++k) {
      if (k <= sequences && sequences % k == 0)
        accumulate.push_back({k, false});
      if (k > 1 && k <= microbatches && microbatches % k == 0 &&
          microbatches / k >= devices)
        accumulate.push_back({k, true});
    }
    std::optional<Fix> found, least;
    for (bool narrow : {false, true}) {
      if (narrow && !canNarrow)
        continue;
      for (auto [k, passes] : accumulate)
        for (bool nf4 : {false, true}) {
          if ((nf4 && !canQuantize) || (!nf4 && !narrow && k == 1))
            continue;
          Fix fix{nf4, narrow, k, passes, 0};
          fix.bytes = estimate(m, fix, attentionAdapters, allAdapters);
          if (!least || fix.bytes < least->bytes)
            least = fix;
          if (!found && fix.bytes <= budget)
            found = fix;
        }
    }
    auto &os = llvm::errs();
    os << "; ";
    if (found) {
      os << "it would fit with " << flagsOf(*found) << ": about "
         << formatHostBytes(found->bytes)
         << (found->attention ? ", or less" : "")
         << " (estimated from this plan's stages: --host-budget-gib checks "
            "the plan they make)"
         << stageGrainNote(layerGrain);
      // The same fix as fewer microbatches a pass, where it divides them.
      if (found->accumulate > 1 && !found->passes &&
          microbatches % found->accumulate == 0 &&
          microbatches / found->accumulate >= devices) {
        Fix other = *found;
        other.passes = true;
        os << "; or, the graph as it is, " << flagsOf(other);
      }
      os << "\n";
      return;
    }
    os << "nothing rp-compile's flags change fits";
    if (least)
      os << " (the least: about " << formatHostBytes(least->bytes) << " with "
         << flagsOf(*least) << ")";
    // The box for the plan as it trains: its base quantized, if it can be.
    int64_t box = canQuantize ? estimate(m, Fix{true, false, 1, false, 0}, 0, 0)
                              : m.total();
    os << ": give a box of at least " << formatHostBytes(box)
       << " (--host-budget-gib " << ceilGiB(box) << ")"
       << (canQuantize ? " with --quantize-base nf4" : "")
       << stageGrainNote(layerGrain) << "\n";
  }

  std::string flagsOf(const Fix &fix) const {
    std::string text;
    llvm::raw_string_ostream os(text);
    const char *sep = "";
    if (fix.nf4) {
      os << "--quantize-base nf4";
      sep = " ";
    }
    if (fix.attention) {
      os << sep << "--lora-targets '" << kAttentionTargets << "'";
      sep = " ";
    }
    if (fix.accumulate > 1 && fix.passes)
      os << (*sep ? " and " : "") << "--microbatches "
         << microbatches / fix.accumulate << " (this plan has " << microbatches
         << ") and rp-run --accumulate " << fix.accumulate
         << " (the same global batch; a pass stages its own microbatches' "
            "activations)";
    else if (fix.accumulate > 1)
      os << (*sep ? " and " : "") << "a graph of " << sequences / fix.accumulate
         << " sequence" << (sequences / fix.accumulate == 1 ? "" : "s")
         << " a microbatch (this one has " << sequences
         << "), the same --microbatches, and rp-run --accumulate "
         << fix.accumulate << " (the same global batch; the pinned buffers "
         << "hold each microbatch's staged activations)";
    return text;
  }

  /// The sequences of a microbatch: the leading dimension of the graph's
  /// first input (its tokens), 1 where it has none.
  static unsigned sequencesOf(ModuleOp module) {
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.getNumArguments() == 0)
      return 1;
    auto type = dyn_cast<RankedTensorType>(main.getArgument(0).getType());
    if (!type || type.getRank() < 2 || type.isDynamicDim(0))
      return 1;
    return unsigned(std::max<int64_t>(1, type.getDimSize(0)));
  }

  HostBudgetRequest request;
  HostBudgetOutcome &outcome;
  int64_t budget = 0;
  unsigned sequences = 1;
  unsigned microbatches = 1, devices = 1;
};

} // namespace

std::unique_ptr<Pass>
mlir::rp::createHostBudgetStep(const HostBudgetRequest &request,
                               HostBudgetOutcome &outcome) {
  return std::make_unique<HostBudgetStep>(request, outcome);
}
