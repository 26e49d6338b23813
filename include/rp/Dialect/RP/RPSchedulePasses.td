//===- RPSchedulePasses.td - schedule and plan passes ------*- tablegen -*-===//

#ifndef RP_DIALECT_RP_RPSCHEDULEPASSES_TD
#define RP_DIALECT_RP_RPSCHEDULEPASSES_TD

include "mlir/Pass/PassBase.td"

def PrintLayerCostsPass : Pass<"rp-print-layer-costs", "::mlir::ModuleOp"> {
  let summary = "prints what each layer costs on a hardware profile";
  let description = [{
    Runs the layer cost analysis (include/rp/Analysis/LayerCost.h) on every
    function with layers and prints one line per layer to stdout: forward,
    recompute and backward FLOPs and device memory traffic; parameter,
    gradient, input activation, output activation and peak intermediate
    bytes; and the times the hardware profile gives them, or a measured
    profile where it names the layer. The IR is unchanged. Run it on the
    forward graph: backward FLOPs are derived from which values need a
    gradient, so a frozen weight adds no weight-gradient matmul.

    ```mlir
    %h = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>)
        -> tensor<2x8xf32> { ... rp.matmul ... }
    ```

    prints, with `hw=rtx4090`:

    ```
    layer "h.0" forward_flops=256 recompute_flops=256 backward_flops=512 ...
    ```

    `hw` is a shipped profile (`rtx4090`, `rtx3090`, `a800`, `h100`,
    `h200`, `host`) or the path of a profile JSON file (docs/hardware-profiles.md);
    `measured` is the path of per-layer times written by `rp-run --profile`.
  }];
  let options = [
    Option<"hw", "hw", "std::string", "\"rtx4090\"",
           "hardware profile: a shipped name or a JSON file">,
    Option<"measured", "measured", "std::string", "\"\"",
           "measured per-layer times (JSON) that override the model">
  ];
}

def PrintPartitionPass : Pass<"rp-print-partition", "::mlir::ModuleOp"> {
  let summary = "prints the pipeline stages a partitioner cuts the layers into";
  let description = [{
    Runs the layer cost analysis and a partitioner on every function with
    layers and prints its stage lists: forward stages ascending, the fused
    tail, backward stages from deep to shallow, each as inclusive layer
    index ranges and sizes, with the bottleneck and the proxy cost. The IR
    is unchanged.

    `partitioner=rp` (the default) minimizes the estimated step time of
    the partition's round-robin schedule (include/rp/Analysis/
    PartitionSearch.h) and also prints RoundPipe's estimate and the ratio;
    `partitioner=roundpipe` is RoundPipe's procedure (reference/roundpipe.md
    §3), which minimizes the proxy max(stages, devices) x W. The per-stage byte cap is half of
    `weight-budget` times the profile's device memory (the running and the
    prefetched stage are resident together), or `stage-bytes` when given.
    `stages=fwd:A,B,...;bwd:X,Y,...` checks and scores a user partition
    instead (a stage over the cap is an error); every partition is also
    printed in that form. The `timing` line is the event-driven estimate
    of one iteration of the round-robin schedule of that partition
    (include/rp/Analysis/Pipeline.h) over `microbatches` microbatches.

    `tail-jobs=2` times the fused tail as two stage jobs on consecutive
    devices taking alternate microbatches, so a tail up to twice as slow
    per microbatch as the backward stages does not pace them (with
    `stages`, that partition; without, rp's partitioner searches such
    partitions); `tail-jobs=0` lets rp's partitioner take the faster of
    one and two. `tail-pair=N` times the tail split by layers instead:
    its first N layers a job that runs their forward and, one microbatch
    later, their backward without recompute, the rest a fused job on the
    next device; `tail-jobs=3` has rp's partitioner time every tail of
    two or more layers as such a pair. Plans run the first
    (rp-partition's `tail-jobs`, rp-compile `--tail-jobs`); the pair is
    the timing model's only (docs/pipeline.md, "The tail as two jobs",
    says why and what it would give).

    ```
    partition @main partitioner=roundpipe layers=6 stages=5 ...
    forward sizes=5 ranges=0-4
    tail sizes=1 ranges=5-5
    backward sizes=1,2,2 ranges=4-4 2-3 0-1
    ```
  }];
  let options = [
    Option<"hw", "hw", "std::string", "\"rtx4090\"",
           "hardware profile: a shipped name or a JSON file">,
    Option<"measured", "measured", "std::string", "\"\"",
           "measured per-layer times (JSON) that override the model">,
    Option<"devices", "devices", "unsigned", "8",
           "GPUs the stages are dispatched over (RoundPipe's min_stages)">,
    Option<"weightBudget", "weight-budget", "double", "0.6",
           "share of device memory for weights and gradients">,
    Option<"stageBytes", "stage-bytes", "int64_t", "0",
           "per-stage byte cap; 0 derives it from the profile">,
    Option<"partitioner", "partitioner", "::mlir::rp::Partitioner",
           "::mlir::rp::Partitioner::rp",
           "rp (least estimated step time), roundpipe (RoundPipe's procedure), or exhaustive (every partition; at most 10 layers)",
           "::mlir::rp::partitionerValues()">,
    Option<"microbatches", "microbatches", "unsigned", "0",
           "microbatches per step for the timing estimate; 0 means devices + 1 (1 on one device)">,
    Option<"stages", "stages", "std::string", "\"\"",
           "a user partition, fwd:A,B,...;bwd:X,Y,... (DESIGN.md), checked "
           "against the cap and scored instead of partitioning">,
    Option<"dispatch", "dispatch", "::mlir::rp::Dispatch",
           "::mlir::rp::Dispatch::modulo",
           "how round-robin moves its jobs from pass to pass: modulo (the job counter carries on) or rounds (the pass shift the timing model finds best); include/rp/Analysis/SteadyState.h",
           "::mlir::rp::dispatchValues()">,
    Option<"tailJobs", "tail-jobs", "unsigned", "1",
           "the stage jobs the fused tail is timed as: 1, 2 (alternate microbatches on two devices, as rp-partition tail-jobs=2 plans run it), 3 (rp's partitioner: a pair split by layers, as tail-pair; timing model only), or 0 to let rp's partitioner choose between 1 and 2 (a user partition is timed with 1)">,
    Option<"tailPair", "tail-pair", "unsigned", "0",
           "> 0: time the fused tail split by layers instead, its first N layers a job that runs their forward and, one microbatch later, their backward without recompute, the rest a fused job on the next device (timing model only)">
  ];
}

def PartitionPass : Pass<"rp-partition", "::mlir::ModuleOp"> {
  let summary = "cuts the layers into pipeline stages for a schedule";
  let description = [{
    Runs the layer cost analysis on the function with layers (after
    rp-attach-loss, before rp-autodiff) and records the stages a
    partitioner cuts as its `rp.partition` attribute, with the schedule,
    device count, microbatches and hardware profile the later pipeline
    passes use. Round-robin uses rp's partitioner (least estimated step
    time among the partitions whose memory plan fits `budget-gib`, at the
    `recompute` grain: when the fastest does not fit, lean stages, a short
    tail and one-layer backward stages, are searched for the fastest that
    fits; include/rp/Analysis/PartitionMemory.h) or RoundPipe's
    (`partitioner=roundpipe`); the static schedules
    (`gpipe`, `1f1b`: one stage per device; `interleaved-1f1b`: two) cut
    balanced symmetric stages, ties on the slowest stage broken by the
    schedule's predicted step (staticPartitionForStep, Pipeline.h). `stages=fwd:A,...;bwd:X,...` takes a user
    partition, checked against the per-stage byte cap (half of
    `weight-budget` of the device memory: the running and the prefetched
    stage are resident together). The attribute also records the
    partitioner and the `recompute` grain rp-autodiff applies, so the
    schedule is decided here once and later passes read it typed.
    `recompute=auto` with rp's partitioner (round-robin, no `stages`)
    chooses the grain for speed: the partitioner searches at stage grain
    and at layer grain, both plans are predicted as they will run
    (include/rp/Analysis/PlanPrediction.h) and the faster one that fits
    is kept, stage grain unless layer grain is more than 0.1 % faster;
    layer grain is recorded as `recompute = "layer"`, stage grain as
    `"auto"` (rp-choose-recompute then puts stages at layer grain only
    where they do not fit), and the function's `rp.recompute_choice`
    says which and why. Elsewhere `auto` is recorded as it is.
    `tail-jobs=2` (round-robin, at least 2 microbatches) records
    `tail_jobs = 2`: the fused tail runs as two stage jobs on consecutive
    devices taking alternate microbatches, and every tail parameter's
    gradient is the even microbatches' fold plus the odd ones' on any
    device count, one device included; `tail-jobs=0` lets rp's
    partitioner take the faster of one and two tail jobs (a user's
    `stages` then run one).
    `microbatches=0` takes the default of `defaultMicrobatches`
    (include/rp/Analysis/Pipeline.h): 1 on one device, else devices + 1.

    ```mlir
    func.func @main(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 2, microbatches = 3,
        hw = "rtx4090", forward = [2, 2], backward = [1, 2, 1]>}
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "::mlir::rp::ScheduleKind",
           "::mlir::rp::ScheduleKind::roundRobin",
           "round-robin, gpipe, 1f1b, interleaved-1f1b or looped-bfs",
           "::mlir::rp::scheduleKindValues()">,
    Option<"devices", "devices", "unsigned", "1", "devices to run on">,
    Option<"microbatches", "microbatches", "unsigned", "0",
           "microbatches per step; 0 means devices + 1 (1 on one device)">,
    Option<"hw", "hw", "std::string", "\"host\"",
           "hardware profile: a shipped name or a JSON file">,
    Option<"measured", "measured", "std::string", "\"\"",
           "measured per-layer times (JSON) that override the model">,
    Option<"partitioner", "partitioner", "::mlir::rp::Partitioner",
           "::mlir::rp::Partitioner::rp",
           "rp (least estimated step time), roundpipe, or exhaustive (every partition; at most 10 layers)",
           "::mlir::rp::partitionerValues()">,
    Option<"stages", "stages", "std::string", "\"\"",
           "a user partition, fwd:A,B,...;bwd:X,Y,... (DESIGN.md)">,
    Option<"weightBudget", "weight-budget", "double", "0.6",
           "share of device memory for weights and gradients">,
    Option<"stageBytes", "stage-bytes", "int64_t", "0",
           "per-stage byte cap; 0 derives it from the profile">,
    Option<"recompute", "recompute", "::mlir::rp::RecomputeGrain",
           "::mlir::rp::RecomputeGrain::stage",
           "what rp-autodiff recomputes from a stage's saved input",
           [{::llvm::cl::values(
             clEnumValN(::mlir::rp::RecomputeGrain::stage, "stage",
                        "one group: every layer before the tail"),
             clEnumValN(::mlir::rp::RecomputeGrain::layer, "layer",
                        "each layer recomputed alone"),
             clEnumValN(::mlir::rp::RecomputeGrain::automatic, "auto",
                        "chosen per backward stage by rp-choose-recompute"))}]>,
    Option<"dispatch", "dispatch", "::mlir::rp::Dispatch",
           "::mlir::rp::Dispatch::modulo",
           "how round-robin moves its jobs from pass to pass: modulo (the job counter carries on) or rounds (the pass shift the timing model finds best); include/rp/Analysis/SteadyState.h",
           "::mlir::rp::dispatchValues()">,
    Option<"tailJobs", "tail-jobs", "unsigned", "1",
           "round-robin: the stage jobs the fused tail runs as, 1 or 2 (alternate microbatches on two devices; every tail gradient is then the even microbatches' fold plus the odd ones'), or 0 to let rp's partitioner take the faster (a user partition then runs 1)">,
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory the partition's memory plan must fit (rp's partitioner), in GiB; 0 takes the profile's">,
    Option<"hostBudgetGiB", "host-budget-gib", "double", "0",
           "host memory the plan may hold, in GiB (0: unchecked): rp's partitioner holds the pinned staging buffers to what the module's weights and optimizer state leave of it, merging stages where the fastest partition stages more (include/rp/Analysis/PartitionMemory.h holdToHostBudget)">,
    Option<"hostSlackPct", "host-slack-pct", "double", "0",
           "without host-budget-gib: rp's partitioner takes a partition whose step is within this many percent of the fastest's and whose pinned staging buffers are at least 1 GiB smaller, the one staging the least it reaches (0: the fastest, whatever it stages; rp-train-pipeline's default is 5); recompute=auto then takes layer grain for speed only where it is faster by more than this or stages less than 1 GiB more">,
    Option<"deferGrainRange", "defer-grain-range", "bool", "false",
           "recompute=auto: leave the note's ranges over the profile's unknown inputs to rp-choose-loss-fusion, which follows and prints them only where it keeps this graph's note (rp-train-pipeline with fuse-loss=auto)">
  ];
}

def LowerSchedulePass : Pass<"rp-lower-schedule", "::mlir::ModuleOp"> {
  let summary = "binds stage jobs to devices and orders their compute";
  let description = [{
    Turns the function's `rp.partition` into an `rp.schedule` of that
    function (which reads kind, devices, microbatches and hardware from the
    partition rather than copying them) with one
    `rp.compute` per stage job and microbatch: round-robin puts job n on
    device n mod G; the static schedules bind stage s to device s mod G
    and order each device's work as GPipe, 1F1B or Megatron's interleaved
    1F1B do. Each compute waits for the compute whose result it reads
    (the previous stage; for a backward, also the forward that computed
    its saved input); rp-insert-transfers turns those waits into copies.
    The commands are listed in order of their estimated start.

    ```mlir
    rp.schedule @main {
      %0 = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0
          {ms = 1.0 : f64}
      %1 = rp.compute tail job 1 layers 1 to 2 mb 0 device 1 weights 1
          after(%0) {ms = 3.0 : f64}
      %2 = rp.compute backward job 2 layers 0 to 1 mb 0 device 0 weights 2
          after(%1, %0) {ms = 3.0 : f64}
    }
    ```
  }];
}

def InsertTransfersPass : Pass<"rp-insert-transfers", "::mlir::ModuleOp"> {
  let summary = "adds the copies and the optimizer step a schedule needs";
  let description = [{
    Rewrites the `rp.schedule` of rp-lower-schedule so that every value a
    compute needs is on its device (include/rp/Analysis/Pipeline.h):
    weight uploads of each weight set in chunks of at most 256 MiB on the
    weight queue, prefetched during the previous job and (round-robin)
    started only once the job two turns back on the device has finished,
    so a device holds two weight sets; activations, saved inputs and
    activation gradients through pinned host memory (D2H on the producer's
    queue, H2D on the consumer's activation queue, which has priority over
    weights), with at most two inputs and two outputs in flight per
    device; weight gradients accumulated on the device and downloaded once
    per weight set; and the host optimizer step after every gradient
    download. Static schedules keep weights resident (no weight traffic)
    when every device's stages fit `weight-budget` of its memory, and
    keep a stage's saved input on its device.

    Round-robin: `dispatch` decides the schedule's `pass_shift`, how many
    devices the next pass's jobs move on (`modulo`, the default: the stage
    job count, the job counter carrying on; `rounds`: the shift whose
    steady step the timing model finds shortest, include/rp/Analysis/
    SteadyState.h), or `pass-shift` >= 0 sets it (to compare), and `step_ms`
    is the steady step with that shift.

    ```mlir
    %w = rp.copy h2d weights job 1 device 1 bytes 4096 {ms = 0.1 : f64}
    %in = rp.copy h2d activation job 1 mb 0 device 1 bytes 512 boundary 1
        after(%out) {ms = 0.01 : f64}
    %c = rp.compute tail job 1 layers 1 to 2 mb 0 device 1 weights 1
        after(%w, %in) {ms = 3.0 : f64}
    ```
  }];
  let options = [
    Option<"weightBudget", "weight-budget", "double", "0.6",
           "share of device memory for resident weights and gradients">,
    Option<"passShift", "pass-shift", "int", "-1",
           "round-robin: this device shift per pass instead of dispatch's (-1: dispatch's)">,
    Option<"dispatch", "dispatch", "::mlir::rp::Dispatch",
           "::mlir::rp::Dispatch::modulo",
           "how round-robin moves its jobs from pass to pass: modulo (the job counter carries on) or rounds (the pass shift the timing model finds best); include/rp/Analysis/SteadyState.h",
           "::mlir::rp::dispatchValues()">
  ];
}

def ReportMaxSeqPass : Pass<"rp-report-max-seq", "::mlir::ModuleOp"> {
  let summary = "reports the largest sequence length whose plan fits";
  let description = [{
    After rp-partition: finds, by a bisection whose probes follow the
    peak's near-linear growth (the secant's crossing of the budget, with
    bisection steps where the peak jumps), the largest sequence length
    whose training step still fits every device's memory with the
    function's schedule and microbatch (its batch rows unchanged), and
    reports it as a remark with the peak it reaches. With `repartition`
    (rp-compile's default unless given `--stages`), and when rp-partition
    used rp's partitioner for a round-robin schedule, the stages are the
    partitioner's at each length: a trial fits when the partitioner's
    memory objective finds a partition that fits (the leanest it tries,
    include/rp/Analysis/PartitionMemory.h), and the remark prints the
    stages the partitioner cuts at the answer, so the answer is the
    longest sequence rp-compile compiles by itself. Otherwise every length
    is tried with the function's stages. Each trial scales
    every tensor dimension equal to the graph's sequence length (dimension
    1 of the first input of rank 2 or more), then costs the layers, lowers
    the schedule with its transfers (weights uploaded every step) and plans
    the memory. The memory model is that of rp-plan-memory: attention is
    the fused `rp.attention` kernel, whose memory is linear in the
    sequence, so the peak grows linearly; an unfused graph that
    materializes S x S scores grows quadratically and is reported as such.
    Every dimension equal to the sequence length is taken to be it, so
    compile at a length no other dimension of the model shares (a model
    with head_dim 16 compiled at 16 tokens would scale its heads too).

    ```
    remark: the largest sequence that fits is 73728 tokens (microbatch 1 x
      73728, stage-grain recompute, rp's stages at each length): device 3
      peaks at 23.9 GiB of 24 GiB (its biggest buffer: ...); rp's
      partitioner cuts fwd:3,3,...;bwd:1,1,... there; at 2048 tokens the
      peak is 2.9 GiB
    ```
  }];
  let options = [
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to fit in GiB; 0 takes the profile's">,
    Option<"limit", "limit", "int64_t", "1048576",
           "the longest sequence to try">,
    Option<"repartition", "repartition", "bool", "false",
           "try each length with the stages rp's partitioner cuts for it (when the function's partition is round-robin and partitioner=rp; rp-compile sets it unless given --stages)">,
    Option<"dispatch", "dispatch", "::mlir::rp::Dispatch",
           "::mlir::rp::Dispatch::modulo",
           "the dispatch rp-partition was given (rp's partitioner times partitions with it)",
           "::mlir::rp::dispatchValues()">
  ];
}

def PredictTokenSlicesPass
    : Pass<"rp-predict-token-slices", "::mlir::ModuleOp"> {
  let summary = "predicts a causal model's step with each sequence cut into "
                "token slices, and chooses the slices (and with "
                "search-stages the stages) for them";
  let description = [{
    After rp-partition (rp-compile --token-slices K|auto|s1,s2,...): cuts
    each sequence of a causal model into token slices that the round-robin
    runs as microbatches (TeraPipe), and reports as a remark the slices, the
    predicted step, bubble and tokens/s beside the unsliced plan's, and the
    peak memory with the keys and values the jobs keep across slices;
    `auto` chooses the sizes by TeraPipe's dynamic program
    (include/rp/Analysis/TokenSlices.h), `report-max-seq` adds the longest
    sequence whose slices fit. With `search-stages` (rp-compile, where rp's
    partitioner cut the stages) the stages are searched again with the
    slices (include/rp/Analysis/SlicedStages.h), each candidate timed as the
    sliced plan, and #rp.partition is rewritten where they are faster; a
    second remark says which. With `cut` the slices chosen are recorded for
    rp-slice-tokens; alone the pass refuses to go on (a plan run unsliced
    under a sliced prediction would be a silent wrong answer). A model whose
    attention is not causal, carries a mask, or whose ops mix tokens across
    the sequence otherwise is refused. docs/token-slices.md.

    ```
    remark: token slices (a prediction of the compiler's model): 16 slices
      of 4096,... tokens (even) on 8 devices, rtx4090; predicted step ...
    remark: token slices: stages chosen with the slices: fwd:2,2,...
    ```
  }];
let options = [
    Option<"slices", "slices", "std::string", "\"auto\"",
           "K (that many even slices), auto (TeraPipe's dynamic program) or the sizes s1,s2,... summing to the sequence">,
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to fit in GiB; 0 takes the profile's">,
    Option<"reportMaxSeq", "report-max-seq", "bool", "false",
           "also report the longest sequence whose slices fit">,
    Option<"hostBudgetGiB", "host-budget-gib", "double", "0",
           "with report-max-seq: the host memory the plan may hold in GiB (the base, adapters, optimizer state and pinned buffers, as rp-compile --host-budget-gib); the longest sequence must fit it too. 0: no host bound (the profiles name no host memory); the remark still gives the host memory at the answer">,
    Option<"dispatch", "dispatch", "::mlir::rp::Dispatch",
           "::mlir::rp::Dispatch::modulo",
           "how round-robin moves its jobs from pass to pass (as rp-insert-transfers)",
           "::mlir::rp::dispatchValues()">,
    Option<"passShift", "pass-shift", "int", "-1",
           "round-robin's device shift per pass; -1 takes dispatch's">,
    Option<"cut", "cut", "bool", "false",
           "instead of refusing, record the slices chosen (module attribute rp.token_slice_sizes) for rp-slice-tokens=slices=auto and go on (rp-compile's pipeline)">,
    Option<"searchStages", "search-stages", "bool", "false",
           "search the stages again with the slices (each candidate timed as the sliced plan) and rewrite #rp.partition where they are faster; rp-compile sets it unless --stages or another partitioner gave the stages">,
    Option<"tailJobs", "tail-jobs", "unsigned", "0",
           "the fused tail as 1 or 2 jobs (2: alternate slices, each job's last first; a tail that keeps no keys, the head alone); 0: with slices=auto and one sequence a step the faster of the two in the prediction (each with its stages searched), else the partition's">
  ];
}

def SliceTokensPass : Pass<"rp-slice-tokens", "::mlir::ModuleOp"> {
  let summary = "cuts a causal model's sequence into token slices, one "
                "function per slice";
  let description = [{
    After rp-partition (docs/token-slices.md): adds beside the layered
    function `@F` one function `@F.slice<k>` per token slice [o, o + s) of
    its sequence S (dimension 1 of its first input of rank 2 or more),
    marked `rp.token_slice = {index, offset, size, sequence}`, which the
    pipeline passes skip. Each is `@F` with every dimension equal to S
    scaled to s (as rp-report-max-seq's trials; parameters keep theirs),
    with these changes:
    - a constant with a dimension S (RoPE's cos/sin tables, position ids)
      is read through an `rp.slice` at offset o on that dimension;
    - each causal `rp.attention` of layer L (the i-th of it: `:i` after
      the first) reads the keys and values of the slices before it: the
      layer gains two inputs, function arguments `keys:L` and `values:L`
      of `[B, Hkv, o, d]` (absent in slice 0), concatenated before its
      own keys and values on dimension 2; and, except in the last slice,
      two results, its own keys and values `[B, Hkv, s, d]`, returned as
      function results of the same names. Bottom-right causal alignment
      (`rp.attention` with fewer queries than keys) places query i at
      position o + i, so a sliding window needs nothing more.
    Graphs the prediction refuses are refused here (attention not causal
    or masked, ops that mix tokens otherwise). `slices` is K (even) or the
    sizes s1,s2,...; `auto` takes the sizes rp-predict-token-slices=cut=1
    chose (the module's `rp.token_slice_sizes`, which it removes). One
    slice cuts nothing: the graph is its own one-slice plan.

    ```mlir
    func.func @main.slice1(%tokens: tensor<1x4xi64>,
        %kpre: tensor<1x2x4x16xf32> {rp.name = "keys:layers.0"}, ...)
        attributes {rp.token_slice = {index = 1, offset = 4, size = 4,
                                      sequence = 12}}
      %x1:3 = rp.layer "layers.0" (%x0, ..., %kpre, %vpre) ... {
        %k = rp.concat %kpre, %kh dim = 2 : ... -> tensor<1x2x8x16xf32>
        %att = rp.attention %qh, %k, %v causal : (tensor<1x4x4x16xf32>, ...
        rp.yield %y, %kh, %vh ...
    ```
  }];
  let options = [
    Option<"slices", "slices", "std::string", "\"2\"",
           "K (that many even slices) or the sizes s1,s2,... summing to the sequence">
  ];
}

def ChooseRecomputePass : Pass<"rp-choose-recompute", "::mlir::ModuleOp"> {
  let summary = "chooses the recompute grain of each backward stage";
  let description = [{
    Resolves `recompute = "auto"` in the function's `#rp.partition` into
    one grain per backward stage (include/rp/Analysis/RecomputeChoice.h):
    stage grain (the whole stage recomputed at once: fewer bytes over the
    host link, its recompute ahead of the gradient) wherever the plan fits
    the device budget (the profile's memory, or `budget-gib`), layer grain
    (each layer recomputed alone from its input, the inner layers' inputs
    kept in pinned host memory and uploaded for the backward) for the
    stages on a device over budget whose layer grain lowers the bytes over
    it, largest saving first, until every device fits. A plan that still
    does not fit keeps the grains that got it closest; rp-plan-memory
    refuses it with the numbers. A partition whose grain is given
    (`stage`, `layer` or a list; `layer` also where rp-partition's `auto`
    chose it for speed) is left as it is. `grains=layer,stage,...`
    sets each backward stage's grain instead (one per stage after the
    tail, in the `backward` list's order), whatever the partition holds.
    Run after rp-partition (and rp-choose-loss-fusion), before
    rp-lower-schedule.

    ```mlir
    // Before: recompute = "auto", backward = [1, 3, 2]; the 3-layer
    // stage's intermediates do not fit.
    func.func @main(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 3, microbatches = 4,
        hw = "rtx4090", recompute = ["layer", "stage"],
        forward = [5], backward = [1, 3, 2]>}
    ```
  }];
  let options = [
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to plan against in GiB; 0 takes the profile's">,
    Option<"grains", "grains", "std::string", "\"\"",
           "each backward stage's grain after the tail, stage or layer, "
           "comma separated (instead of choosing)">
  ];
}

def PlanMemoryPass : Pass<"rp-plan-memory", "::mlir::ModuleOp"> {
  let summary = "places every buffer of a schedule at a static offset";
  let description = [{
    Plans the buffers of the `rp.schedule` (include/rp/Analysis/
    MemoryPlan.h): per weight set its weights and gradients, per compute
    its input, output and working memory, each at a fixed offset of its
    device's arena; two buffers share bytes only when every command of one
    happens before every command of the other, whatever the timing. Writes
    each compute's `offsets` (weights, input, output, work) and the
    schedule's `peak_bytes` (one pass's), `budget_bytes` and `pinned_bytes`.

    It also records how a continuous run holds its passes: two in flight
    (`passes_in_flight`; `passes-in-flight` 1 forces one, where a pass
    starts once the one before has finished) on `arena_copies` copies of
    the device arenas: 2, one per pass, when two copies fit every device's
    budget (with renamed devices each copy is the largest device's), else
    1, one set the two passes share, a device taking up the next pass's
    jobs once its own part of the pass before is done; `arena-copies`
    forces 1 or 2. With one copy on a round-robin schedule, the steady
    step (`step_ms`, `bubble`) is timed again as the run holds its
    passes.

    A device over its budget (the profile's memory, or `budget-gib`) is an
    error that gives the peak, the budget, the biggest buffers and what to
    change: smaller stages when weights dominate, layer-grain recompute or
    a smaller microbatch when working memory does.

    ```mlir
    rp.schedule @main attributes {arena_copies = 2 : i64,
        budget_bytes = 25769803776 : i64,
        passes_in_flight = 2 : i64, peak_bytes = array<i64: 2048, 2048>,
        pinned_bytes = 4096 : i64} {
      %c = rp.compute forward job 0 layers 0 to 2 mb 0 device 0 weights 0
          {ms = 1.5 : f64, offsets = array<i64: 0, 512, 768, 1024>}
    }
    ```
  }];
  let options = [
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to plan against in GiB; 0 takes the profile's">,
    Option<"passesInFlight", "passes-in-flight", "unsigned", "0",
           "passes a continuous run keeps in flight: 1, or 2 (0)">,
    Option<"arenaCopies", "arena-copies", "unsigned", "0",
           "copies of the device arenas a continuous run allocates: 1 "
           "(the passes in flight share it), 2 (one per pass), or 0 for "
           "2 when two fit, else 1">
  ];
}

def VerifySchedulePass : Pass<"rp-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "checks that a schedule is safe to run";
  let description = [{
    Checks the `rp.schedule` against the rules a plan must keep before it
    runs, each with its own error:
    - no deadlock: the waits and the queues' orders form no cycle (the
      body lists every command after what it waits for);
    - read after event: every compute happens after its weight set's
      uploads, and after each input arrives on its device: an upload of
      that job, microbatch and boundary which happens after a download of
      it from the job that produced it (or, in a static schedule, after
      the forward of the same stage, which kept its input);
    - gradients: every weight set that computes gradients downloads them
      once, after its last compute, and the optimizer step happens after
      every download (async and sync modes both need all of a step's
      gradients before its update);
    - memory (after rp-plan-memory): buffers that share bytes are never
      live together, and every device's peak is within its budget.
    The IR is unchanged.
  }];
}

#endif // RP_DIALECT_RP_RPSCHEDULEPASSES_TD
