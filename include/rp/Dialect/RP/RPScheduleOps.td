//===- RPScheduleOps.td - rp plan-level ops ----------------*- tablegen -*-===//
//
// The plan level: one training step as commands on per-device queues,
// ordered by tokens. rp-lower-schedule writes the compute, rp-insert-
// transfers the copies and the optimizer step, rp-plan-memory the buffer
// offsets, and rp-verify-schedule checks the result.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPSCHEDULEOPS_TD
#define RP_DIALECT_RP_RPSCHEDULEOPS_TD

include "rp/Dialect/RP/RPDialect.td"
include "rp/Dialect/RP/RPAttrs.td"
include "rp/Dialect/RP/RPTypes.td"
include "mlir/IR/RegionKindInterface.td"

def RP_ScheduleOps : OpDocGroup {
  let summary = "Schedule ops";
  let description = "One training step as commands on device queues.";
}

let opDocGroup = RP_ScheduleOps in {

def RP_ScheduleOp : RP_Op<"schedule", [SingleBlock, NoTerminator,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the commands of one training step of a function";
  let description = [{
    The dispatch plan of `function`'s training step. The function's
    `#rp.partition` is the one record of what rp-partition decided: the
    schedule kind (`round-robin`, `gpipe`, `1f1b`, `interleaved-1f1b`,
    `looped-bfs`), the device count, the microbatches per step and the
    hardware profile the commands were timed with. The schedule reads them
    from there (`getPartition()`, and `getKind()`, `getDevices()`,
    `getMicrobatches()`, `getHw()` derived from it) rather than keeping
    copies, so the verifier refuses a schedule whose function is missing
    or has no partition. Each device has four ordered queues (compute,
    weight H2D, activation H2D, D2H) and the host one (the optimizer); the
    body lists every command, and the order of the commands of one device
    and queue is that queue's order. A command starts when its queue has
    finished the one before it and every token it waits for is ready, so
    the body must list a command after the ones it waits for (SSA) and the
    verifier rejects waits that would deadlock against a queue's order.

    `resident` says the devices keep their stages' weights (static
    schedules whose weights fit): no weight uploads or gradient downloads.
    After rp-plan-memory, `peak_bytes` holds each device's planned peak,
    `budget_bytes` the device memory it was planned against and
    `pinned_bytes` the pinned host memory (the model's weights and
    gradients, and the staged activations at their peak); `peak_bytes` is
    one pass's. `passes_in_flight` (1 or 2) is how many passes a
    continuous run keeps in flight and `arena_copies` (1 or 2, no more
    than the passes) how many copies of the device arenas it allocates:
    one per pass, or one that two passes share, each device taking up the
    next pass's jobs once its own part of the pass before is done. What a
    run allocates per device is that many copies, each the largest
    device's when two passes rename the devices (runPeakBytes,
    include/rp/Analysis/PassesInFlight.h), and the plan export carries
    that as `planned_peak_bytes`. After
    rp-insert-transfers, `step_ms` is the estimated time of the step and
    `bubble` the share of it the devices' compute queues are idle
    (include/rp/Analysis/ScheduleTiming.h); for round-robin, `pass_shift`
    is how many devices the next pass's jobs move on (pass p's job on
    device d runs on (d + p * pass_shift) mod devices), decided by
    rp-insert-transfers' `dispatch` and carried into the plan.

    ```mlir
    func.func @main(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 2, microbatches = 3,
        hw = "rtx4090", forward = [2], backward = [1, 2]>} { ... }
    rp.schedule @main {
      %w = rp.copy h2d weights job 0 device 0 bytes 4096 {ms = 0.1 : f64}
      %c = rp.compute forward job 0 layers 0 to 2 mb 0 device 0 weights 0
          after(%w) {ms = 1.5 : f64}
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$function, UnitAttr:$resident,
                       OptionalAttr<DenseI64ArrayAttr>:$peak_bytes,
                       OptionalAttr<I64Attr>:$pinned_bytes,
                       OptionalAttr<I64Attr>:$budget_bytes,
                       OptionalAttr<F64Attr>:$step_ms,
                       OptionalAttr<F64Attr>:$bubble,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$pass_shift,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<2>]>>:$passes_in_flight,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>, IntMaxValue<2>]>>:$arena_copies);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $function (`resident` $resident^)? attr-dict-with-keyword $body
  }];
  let skipDefaultBuilders = 1;
  let builders = [
    /// Creates the schedule of `function` with an empty body block.
    OpBuilder<(ins "StringRef":$function)>
  ];
  let extraClassDeclaration = [{
    /// The partition of `function` that this schedule carries out; null
    /// when the module has no such function or it has no `rp.partition`
    /// (which the verifier refuses).
    PartitionAttr getPartition();
    /// What the partition decided, derived from it.
    ScheduleKind getKind() { return getPartition().getSchedule(); }
    unsigned getDevices() { return getPartition().getDevices(); }
    unsigned getMicrobatches() { return getPartition().getMicrobatches(); }
    HardwareAttr getHw() { return getPartition().getHw(); }
  }];
}

def RP_ComputeOp : RP_Op<"compute", [HasParent<"ScheduleOp">]> {
  let summary = "one microbatch of a stage job on a device's compute queue";
  let description = [{
    Runs microbatch `mb` of stage job `job`: the `forward` of layers
    [`begin`, `end`), the fused `tail` (forward, loss and backward) or the
    `backward` (recompute from the saved input, then the VJPs; weight
    gradients accumulate on the device over the microbatches). `weights`
    names the weight set it computes with (one per job under round-robin,
    one per stage in static schedules). `ms` is its modelled time,
    `work_bytes` the working memory of one microbatch; after rp-plan-memory
    `offsets` gives its buffers' places in the device arena: weights,
    input, output, work.

    ```mlir
    %c = rp.compute backward job 4 layers 0 to 2 mb 1 device 0 weights 4
        after(%in, %grad) {ms = 3.0 : f64, work_bytes = 65536 : i64}
    ```
  }];
  let arguments = (ins RP_LayerRole:$kind, I64Attr:$job, I64Attr:$begin,
                       I64Attr:$end, I64Attr:$mb, I64Attr:$device,
                       I64Attr:$weights, Variadic<RP_TokenType>:$after,
                       F64Attr:$ms,
                       DefaultValuedAttr<I64Attr, "0">:$work_bytes,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets);
  let results = (outs RP_TokenType:$done);
  let assemblyFormat = [{
    $kind `job` $job `layers` $begin `to` $end `mb` $mb `device` $device
    `weights` $weights (`after` `(` $after^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def RP_CopyOp : RP_Op<"copy", [HasParent<"ScheduleOp">]> {
  let summary = "a copy between pinned host memory and a device";
  let description = [{
    Moves `bytes` of `kind` between the host and `device`: `weights` go up
    on the weight queue (in chunks of at most 256 MiB, `chunk` numbering
    them), activations and activation gradients on the activation queue,
    every download on the D2H queue. An activation or gradient copy
    belongs to microbatch `mb` of job `job` and carries the value entering
    layer `boundary`; weight gradients go down once per weight set, after
    its last microbatch. `ms` is the modelled time.

    ```mlir
    %o = rp.copy d2h activation job 0 mb 0 device 0 bytes 2048 boundary 2
        after(%c) {ms = 0.01 : f64}
    ```
  }];
  let arguments = (ins RP_CopyDirection:$direction, RP_CopyKind:$kind,
                       I64Attr:$job, OptionalAttr<I64Attr>:$mb,
                       I64Attr:$device, I64Attr:$bytes,
                       OptionalAttr<I64Attr>:$boundary,
                       Variadic<RP_TokenType>:$after, F64Attr:$ms,
                       DefaultValuedAttr<I64Attr, "0">:$chunk);
  let results = (outs RP_TokenType:$done);
  let assemblyFormat = [{
    $direction $kind `job` $job (`mb` $mb^)? `device` $device `bytes` $bytes
    (`boundary` $boundary^)? (`after` `(` $after^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def RP_OptimizerStepOp : RP_Op<"optimizer_step", [HasParent<"ScheduleOp">]> {
  let summary = "the host optimizer's update of every trainable layer";
  let description = [{
    Runs on the host once every gradient download of the step has landed
    (global-norm clipping sees all of them): AdamW or SGD on the f32 master
    weights, then the compute-dtype copy the next step uploads (async mode:
    the step after next, DESIGN.md).

    ```mlir
    %opt = rp.optimizer_step after(%g0, %g1) {ms = 0.0 : f64}
    ```
  }];
  let arguments = (ins Variadic<RP_TokenType>:$after, F64Attr:$ms);
  let results = (outs RP_TokenType:$done);
  let assemblyFormat = "(`after` `(` $after^ `)`)? attr-dict";
}

} // opDocGroup RP_ScheduleOps

#endif // RP_DIALECT_RP_RPSCHEDULEOPS_TD
