//===- RPTypes.td - rp dialect types and attributes --------*- tablegen -*-===//
//
// The plan level: the token that orders schedule commands, and the
// partition the pipeline passes hand to each other.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPTYPES_TD
#define RP_DIALECT_RP_RPTYPES_TD

include "rp/Dialect/RP/RPDialect.td"
include "rp/Dialect/RP/RPAttrs.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def RP_TokenType : TypeDef<RP_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "completion of one schedule command";
  let description = [{
    Every command of an `rp.schedule` (compute, copy, optimizer step)
    produces a token that is ready when the command has finished; a command
    lists the tokens it waits for. Ordering is data, not side effects: the
    runtime turns each token that crosses queues into an event record and
    wait, and the verifier reads the happens-before relation off the SSA
    graph and the queue order.

    ```mlir
    %w = rp.copy h2d weights job 1 device 1 bytes 4096 {ms = 0.1 : f64}
    %c = rp.compute forward job 1 layers 2 to 4 mb 0 device 1 weights 1
        after(%w) {ms = 1.5 : f64}
    ```
  }];
}

def RP_HardwareAttr : AttrDef<RP_Dialect, "Hardware"> {
  let mnemonic = "hw";
  let summary = "the hardware profile a pipeline is planned for";
  let description = [{
    A shipped profile's name (`rtx4090`, `rtx3090`, `a800`, `h100`,
    `h200`, `host`) or the path of a profile JSON file (docs/hardware-profiles.md).
    The partition carries it (and the schedule reads it there), so every
    pass after rp-partition costs the layers with the same profile. Inside
    `#rp.partition` it is written as the bare string.

    ```mlir
    #rp.hw<"rtx4090">
    ```
  }];
  let parameters = (ins StringRefParameter<"profile name or JSON path">:$profile);
  let assemblyFormat = "`<` $profile `>`";
  let genVerifyDecl = 1;
}

def RP_PartitionAttr : AttrDef<RP_Dialect, "Partition"> {
  let mnemonic = "partition";
  let summary = "the schedule a training compile decided, and its stages";
  let description = [{
    What `rp-partition` decides once and every later pass and the plan
    export read: the schedule kind, the device count, the microbatches per
    step, the hardware profile, the partitioner that cut the stages and the
    recompute grain of the backward, and the stage sizes in layers in
    DESIGN.md's `--stages` form: `forward` from the first layer, `backward`
    in execution order starting with the fused tail (which the forward list
    leaves out), so sum(forward) + backward[0] = sum(backward) = the number
    of layers. `partitioner` and `recompute` are written only when they are
    not the defaults (`rp`, `stage`), and so is `tail_jobs`: round-robin's
    fused tail as 2 stage jobs on consecutive devices, the first taking the
    even microbatches and the second the odd ones (default 1). With 2 the
    plan's gradient of every tail parameter is defined as the even
    microbatches' fold plus the odd ones' (docs/pipeline.md, "The tail as
    two jobs"), on any device count.

    `recompute` is one grain for every backward stage (`"stage"`,
    `"layer"`, or `"auto"`: not chosen yet, which `rp-choose-recompute`
    resolves), or a list with one grain per backward stage in the
    `backward` list's order, the tail left out (the tail recomputes
    nothing): `recompute = ["layer", "stage"]` with `backward = [1, 2, 2]`
    recomputes the deeper backward stage one layer at a time. A list
    whose grains are all equal reads as that one grain.

    ```mlir
    func.func @main(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 2, microbatches = 3,
        hw = "rtx4090", forward = [2, 2], backward = [1, 2, 1]>}
    func.func @other(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 2, microbatches = 3,
        hw = "rtx4090", partitioner = "roundpipe", recompute = "layer",
        forward = [2, 2], backward = [1, 2, 1]>}
    func.func @split(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 4, microbatches = 5,
        hw = "rtx4090", tail_jobs = 2, forward = [2], backward = [2, 2]>}
    func.func @mixed(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 2, microbatches = 3,
        hw = "rtx4090", recompute = ["layer", "stage"],
        forward = [2, 2], backward = [1, 2, 1]>}
    ```
  }];
  let parameters = (ins
    "ScheduleKind":$schedule,
    "unsigned":$devices,
    "unsigned":$microbatches,
    "HardwareAttr":$hw,
    "Partitioner":$partitioner,
    "RecomputeGrain":$recompute,
    ArrayRefParameter<"int64_t", "forward stage sizes">:$forward,
    ArrayRefParameter<"int64_t", "backward stage sizes, the tail first">:$backward,
    "unsigned":$tailJobs,
    ArrayRefParameter<"RecomputeGrain", "per backward stage after the tail, its grain (empty: `recompute` for all)">:$grains
  );
  let builders = [
    // One grain for every backward stage.
    AttrBuilder<(ins "ScheduleKind":$schedule, "unsigned":$devices,
                     "unsigned":$microbatches, "HardwareAttr":$hw,
                     "Partitioner":$partitioner, "RecomputeGrain":$recompute,
                     "::llvm::ArrayRef<int64_t>":$forward,
                     "::llvm::ArrayRef<int64_t>":$backward,
                     CArg<"unsigned", "1">:$tailJobs), [{
      return $_get($_ctxt, schedule, devices, microbatches, hw, partitioner,
                   recompute, forward, backward, tailJobs,
                   ::llvm::ArrayRef<RecomputeGrain>{});
    }]>
  ];
  let extraClassDeclaration = [{
    /// The grain of backward stage `b` (0: the first after the tail).
    RecomputeGrain getGrain(unsigned b) const {
      return b < getGrains().size() ? getGrains()[b] : getRecompute();
    }
    /// Whether the backward stages recompute at different grains.
    bool isMixed() const { return !getGrains().empty(); }
    /// This partition with one grain per backward stage after the tail; a
    /// list of equal grains becomes that one grain.
    PartitionAttr withGrains(::llvm::ArrayRef<RecomputeGrain> grains) const;
  }];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // RP_DIALECT_RP_RPTYPES_TD
