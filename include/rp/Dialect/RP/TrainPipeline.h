//===- TrainPipeline.h - the whole training compile as one pipeline -*- C++
//-*-===//
//
// `--rp-train-pipeline="devices=G microbatches=M hw=NAME schedule=S"`: from
// a prepared graph (rp-prepare) to a differentiated graph and its verified
// schedule, ready to export as a staged plan. TrainPipelineOptions is the
// one set of options of a training compile: rp-opt parses it from the
// pipeline string, and rp-compile's flags are the same options
// (`TrainPipelineOptions(ToolFlags{true})`), so a flag reaches the passes
// without being copied by hand (docs/architecture.md, Options).
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRAINPIPELINE_H
#define RP_DIALECT_RP_TRAINPIPELINE_H

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir::rp {

/// A cl modifier: when `on`, the option is also a flag of the tool's own
/// command line (the top level), besides a pipeline option.
struct ToolFlags {
  bool on = false;
  template <typename Opt> void apply(Opt &option) const {
    if (on)
      option.addSubCommand(llvm::cl::SubCommand::getTopLevel());
  }
};

/// The profile --hw names when it is not given: the contract's one default
/// for every tool (rp::timing::kDefaultHardware, "host"), returned from
/// TrainPipeline.cpp so that this header does not bring the contract's
/// `::rp` namespace into the tools' `using namespace mlir`.
const char *defaultHardware();

/// --fuse-loss: whether the LM head and the loss become one
/// rp.linear_cross_entropy. `--fuse-loss` alone is `true`.
enum class FuseLoss { always, never, automatic };

/// --quantize-base: how the frozen base of a LoRA model is stored. An enum,
/// so that a misspelt format is refused instead of read as another.
enum class QuantizeBase { none, nf4, int8 };

/// LLVM's enum parser, with an error that names the formats (LLVM's says
/// "Cannot find option named 'X'!").
struct QuantizeBaseParser : llvm::cl::parser<QuantizeBase> {
  using llvm::cl::parser<QuantizeBase>::parser;
  bool parse(llvm::cl::Option &option, StringRef, StringRef arg,
             QuantizeBase &value) {
    for (const auto &known : Values)
      if (known.Name == arg) {
        value = known.V.getValue();
        return false;
      }
    return option.error("'" + arg +
                        "' is not a storage format: give none, nf4 or int8");
  }
  static void print(llvm::raw_ostream &os, QuantizeBase value) {
    const char *names[] = {"none", "nf4", "int8"};
    os << names[static_cast<int>(value)];
  }
};

/// The largest LoRA rank the pipeline takes (checkTrainPipelineOptions).
inline constexpr int64_t kMaxLoraRank = 65536;

struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  TrainPipelineOptions() = default;
  /// Options that are also the tool's flags: construct once, before the
  /// command line is parsed.
  explicit TrainPipelineOptions(ToolFlags flags) : flags(flags) {}

  ToolFlags flags; ///< first: the options below read it as they register

  Option<std::string> loss{
      *this, "loss", flags, llvm::cl::init("cross-entropy"),
      llvm::cl::desc("training loss: cross-entropy, output:NAME or "
                     "cross-entropy+output:NAME")};
  Option<int64_t> loraRank{
      *this, "lora-rank", flags, llvm::cl::init(0),
      llvm::cl::desc(
          "add LoRA adapters of this rank and freeze the rest (0: off)")};
  Option<double> loraAlpha{*this, "lora-alpha", flags, llvm::cl::init(16.0),
                           llvm::cl::desc("LoRA scaling numerator")};
  Option<std::string> loraTargets{
      *this, "lora-targets", flags, llvm::cl::init(""),
      llvm::cl::desc("regular expression on weight names (default: every "
                     "linear layer but the output layer, as PEFT's "
                     "all-linear), e.g. q_proj|v_proj or lm_head")};
  Option<double> loraDropout{
      *this, "lora-dropout", flags, llvm::cl::init(0.0),
      llvm::cl::desc("PEFT's lora_dropout on each adapter's input, seeded "
                     "by rp-run --seed and the step, the same on any device "
                     "count (training plans; 0: none)")};
  Option<std::string> loraModulesToSave{
      *this, "lora-modules-to-save", flags, llvm::cl::init(""),
      llvm::cl::desc("regular expression on parameter names trained whole "
                     "beside the adapters (PEFT's modules_to_save), e.g. "
                     "lm_head")};
  Option<QuantizeBase, QuantizeBaseParser> quantizeBase{
      *this,
      "quantize-base",
      flags,
      llvm::cl::init(QuantizeBase::none),
      llvm::cl::desc("store the frozen linear and expert weights of a LoRA "
                     "model quantized"),
      llvm::cl::values(
          clEnumValN(QuantizeBase::none, "none", "as they are (the default)"),
          clEnumValN(QuantizeBase::nf4, "nf4",
                     "QLoRA's 4-bit NormalFloat, double-quantized scales"),
          clEnumValN(QuantizeBase::int8, "int8", "per-block absmax int8"))};
  Option<std::string> quantizeFile{
      *this, "quantize-file", llvm::cl::init(""),
      llvm::cl::desc("the file the quantized weights are written to "
                     "(rp-compile: MODEL.quant.bin beside the plan)")};
  Option<std::string> quantizeIrDir{
      *this, "quantize-ir-dir", llvm::cl::init("."),
      llvm::cl::desc("the folder parameter files are relative to")};
  Option<FuseLoss> fuseLoss{
      *this,
      "fuse-loss",
      flags,
      llvm::cl::init(FuseLoss::automatic),
      llvm::cl::ValueOptional,
      llvm::cl::desc("compute the LM head and the cross-entropy as one op, "
                     "a chunk of tokens at a time, so the [tokens, vocab] "
                     "logits never exist (rp-fuse-linear-cross-entropy): "
                     "auto where the unfused plan does not fit or is not "
                     "faster (rp-choose-loss-fusion)"),
      llvm::cl::values(
          clEnumValN(FuseLoss::always, "true", "always fuse"),
          clEnumValN(FuseLoss::always, "", "always fuse (--fuse-loss)"),
          clEnumValN(FuseLoss::never, "false", "never fuse"),
          clEnumValN(FuseLoss::automatic, "auto",
                     "fuse where it pays (the default)"))};
  Option<ComputeType> dtype{
      *this,
      "dtype",
      flags,
      llvm::cl::init(ComputeType::f32),
      llvm::cl::desc("storage and compute type (master weights stay f32)"),
      llvm::cl::values(clEnumValN(ComputeType::f32, "f32", "float32"),
                       clEnumValN(ComputeType::bf16, "bf16", "bfloat16"),
                       clEnumValN(ComputeType::f16, "f16", "IEEE half"))};
  Option<unsigned> devices{*this, "devices", flags, llvm::cl::init(1),
                           llvm::cl::desc("devices the plan runs on")};
  Option<unsigned> microbatches{
      *this, "microbatches", flags, llvm::cl::init(0),
      llvm::cl::desc("microbatches per training step (the static batch is "
                     "one); 0: 1 on one device, else devices + 1")};
  Option<std::string> hw{
      *this, "hw", flags, llvm::cl::init(defaultHardware()),
      llvm::cl::desc(
          "hardware profile: rtx4090, rtx3090, a800, h100, h200, host, "
          "or a JSON file (docs/hardware-profiles.md)")};
  Option<ScheduleKind> schedule{
      *this,
      "schedule",
      flags,
      llvm::cl::init(ScheduleKind::roundRobin),
      llvm::cl::desc(
          "round-robin, gpipe, 1f1b, interleaved-1f1b or looped-bfs"),
      scheduleKindValues()};
  Option<Partitioner> partitioner{
      *this,
      "partitioner",
      flags,
      llvm::cl::init(Partitioner::rp),
      llvm::cl::desc("rp (least estimated step time), roundpipe or "
                     "exhaustive"),
      partitionerValues()};
  Option<Dispatch> dispatch{
      *this,
      "dispatch",
      flags,
      llvm::cl::init(Dispatch::modulo),
      llvm::cl::desc("round-robin: how the jobs move from pass to pass, "
                     "modulo (the job counter carries on) or rounds (the "
                     "pass shift the timing model finds fastest; "
                     "docs/pipeline.md)"),
      dispatchValues()};
  Option<int> passShift{
      *this, "pass-shift", flags, llvm::cl::init(-1),
      llvm::cl::desc("round-robin: move the jobs by this many devices per "
                     "pass instead (to compare; -1: --dispatch decides)")};
  Option<unsigned> tailJobs{
      *this, "tail-jobs", flags, llvm::cl::init(1),
      llvm::cl::desc("round-robin: run the fused tail as 1 or 2 stage jobs "
                     "(2: alternate microbatches on two devices, each tail "
                     "gradient the even microbatches' fold plus the odd "
                     "ones'; compile the one-device reference the same "
                     "way), or 0: the faster for rp's partitioner; with "
                     "--token-slices, 2 takes alternate slices (a tail "
                     "that keeps no keys), and unset, `auto` chooses "
                     "one or two by the prediction")};
  Option<std::string> stages{
      *this, "stages", flags, llvm::cl::init(""),
      llvm::cl::desc("a partition of your own: fwd:A,B,...;bwd:X,Y,... "
                     "(layers per stage; bwd starts with the tail)")};
  Option<std::string> measured{
      *this, "measured", flags, llvm::cl::init(""),
      llvm::cl::desc("per-layer times measured by rp-run --profile, which "
                     "override the cost model")};
  Option<RecomputeGrain> recompute{
      *this,
      "recompute",
      flags,
      llvm::cl::init(RecomputeGrain::automatic),
      llvm::cl::desc("what a backward recomputes from its saved input"),
      llvm::cl::values(
          clEnumValN(RecomputeGrain::stage, "stage",
                     "every backward stage at once"),
          clEnumValN(RecomputeGrain::layer, "layer",
                     "each layer alone, in every backward stage"),
          clEnumValN(RecomputeGrain::automatic, "auto",
                     "the faster of stage and layer grain (rp's "
                     "partitioner, round-robin), then per backward stage "
                     "layer grain only where stage grain does not fit "
                     "(rp-choose-recompute)"))};
  Option<std::string> recomputeStages{
      *this, "recompute-stages", flags, llvm::cl::init(""),
      llvm::cl::desc("the grain of each backward stage after the tail, "
                     "stage or layer, comma separated in the stages' order "
                     "(overrides --recompute)")};
  Option<bool> fuseMatmulEpilogue{
      *this, "fuse-matmul-epilogue", flags, llvm::cl::init(false),
      llvm::cl::desc("write each matmul with its bias add and gelu (or the "
                     "backward's gelu gradient) as one kernel call: "
                     "cuBLASLt's epilogues on the cuda device, bitwise the "
                     "unfused calls on the host (rp-fuse-matmul-epilogue)")};
  Option<bool> reportMaxSeq{
      *this, "report-max-seq", flags, llvm::cl::init(false),
      llvm::cl::desc("also report the largest sequence length whose plan "
                     "fits the devices, with the stages rp's partitioner "
                     "cuts for each length unless --stages is given (a "
                     "remark on stderr)")};
  Option<std::string> tokenSlices{
      *this, "token-slices", flags, llvm::cl::init(""),
      llvm::cl::desc("K|auto|s1,s2,...: predict the step with each "
                     "sequence of a causal model cut into token slices run "
                     "as microbatches (TeraPipe) and write the sliced "
                     "plan, its stages searched again with the slices "
                     "unless --stages gives them (one slice: the unsliced "
                     "plan; docs/token-slices.md)")};
  Option<double> budgetGiB{
      *this, "budget-gib", flags, llvm::cl::init(0),
      llvm::cl::desc("device memory to plan against in GiB (0: the "
                     "profile's); rp's partitioner picks stages that fit "
                     "it")};
  Option<double> hostBudgetGiB{
      *this, "host-budget-gib", flags, llvm::cl::init(0),
      llvm::cl::desc("the host memory (GiB) the plan must fit, as "
                     "rp-compile's summary counts it (0: no check): rp's "
                     "partitioner holds the pinned buffers to it; "
                     "rp-compile also refuses a plan over it, with what "
                     "would fit")};
  Option<double> hostSlackPct{
      *this, "host-slack-pct", flags, llvm::cl::init(0),
      llvm::cl::desc("without --host-budget-gib: rp's partitioner takes "
                     "stages whose step is within this many percent of the "
                     "fastest's and whose pinned buffers are at least 1 GiB "
                     "smaller, the least it finds (0, the default: the "
                     "fastest stages, whatever they stage in pinned host "
                     "memory)")};
  Option<unsigned> passesInFlight{
      *this, "passes-in-flight", flags, llvm::cl::init(0),
      llvm::cl::desc("passes a continuous run keeps in flight: 1 (a pass "
                     "starts once the one before has finished), or 2 (0)")};
  Option<unsigned> arenaCopies{
      *this, "arena-copies", flags, llvm::cl::init(0),
      llvm::cl::desc("copies of the device arenas a continuous run "
                     "allocates: 1 (the passes in flight share it, each "
                     "device waiting for its own part of the pass before), "
                     "2 (one per pass), or 0 for 2 when two fit the budget, "
                     "else 1")};
};

/// rp-compile --forward-only: what changes the model alone, rp-add-lora
/// (lora-rank > 0) and rp-convert-float-type (dtype other than f32).
void buildForwardPipeline(OpPassManager &pm,
                          const TrainPipelineOptions &options);

/// add-lora, attach-loss, fuse-linear-cross-entropy (unless fuse-loss is
/// false), convert-float-type, recompute-shared, partition (which records
/// the schedule, the partitioner and the recompute grain in #rp.partition),
/// report-max-seq (when asked), choose-loss-fusion (fuse-loss=auto),
/// lower-schedule, insert-transfers (weights uploaded every
/// step: the optimizer runs on the host), plan-memory, verify-schedule,
/// autodiff, canonicalize, cse.
void buildTrainPipeline(OpPassManager &pm, const TrainPipelineOptions &options);

/// The ranges of --devices and --microbatches (the contract's plan caps),
/// that --hw names a profile, and the ranges of --lora-rank, --lora-alpha,
/// --lora-dropout (which needs a rank) and --budget-gib, checked once where
/// the options are parsed: rp-compile after its command line, rp-opt's
/// rp-train-pipeline with its pipeline string, before any pass runs. Each
/// refusal goes to `error`, the option spelled as a flag (`--devices 300`)
/// when `asFlags`, else as in a pipeline string (`devices=300`).
LogicalResult
checkTrainPipelineOptions(const TrainPipelineOptions &options, bool asFlags,
                          llvm::function_ref<void(const llvm::Twine &)> error);

void registerTrainPipeline();

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRAINPIPELINE_H
