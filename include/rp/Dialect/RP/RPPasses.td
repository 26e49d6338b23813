//===- RPPasses.td - rp dialect passes ---------------------*- tablegen -*-===//

#ifndef RP_DIALECT_RP_RPPASSES_TD
#define RP_DIALECT_RP_RPPASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyGraphPass : Pass<"rp-verify-graph", "::mlir::ModuleOp"> {
  let summary = "checks the module-wide rules of an rp graph";
  let description = [{
    Op verifiers see one op at a time; this pass checks what needs the whole
    module, the contract every later pass relies on:

    - a parameter name means one weight: every `rp.param` of that name has
      the same type, trainable flag and storage location;
    - stored parameters of one file do not overlap;
    - layer names are unique within a function;
    - layers sit directly in a function body, so that stages are cut from
      one ordered list of layers.

    It changes nothing. On this input it reports both `rp.param` ops:

    ```mlir
    %0 = rp.param "w" at "weights.bin"[0] : tensor<4xf32>
    %1 = rp.param "w" at "weights.bin"[0] : tensor<8xf32>
    ```
  }];
  let statistics = [
    Statistic<"numParams", "params", "Number of distinct parameters">,
    Statistic<"numLayers", "layers", "Number of layers">
  ];
}

def ExternalizeConstantsPass
    : Pass<"rp-externalize-constants", "::mlir::ModuleOp"> {
  let summary = "moves large constants out of the IR text into a weights file";
  let description = [{
    Folding at import (rotary tables, masks: anything input-independent)
    can leave constants whose text grows with the sequence length. Every
    `rp.constant` with more than `max-inline-elements` elements, not a
    splat and not `i1` (those print as one value or as bits), becomes a
    frozen `rp.param` whose bytes are appended to `weights` (the file the
    import wrote, or a new one), named after its location and `:folded`.
    Param paths are written relative to `ir-dir`, the folder of the IR
    file. Without `weights` the pass changes nothing: an IR that never had
    a weights file (rp.trace's, a hand-written one) keeps its constants.
    Part of `rp-prepare`, after the fusions (which read constant masks) and
    before rp-group-layers (which passes params into layers).

    ```mlir
    %c = rp.constant dense<[...]> : tensor<2x65536xf32> loc("rope")
    // becomes, with weights=model.weights.bin
    %c = rp.param "rope:folded" at "model.weights.bin"[4096]
        : tensor<2x65536xf32>
    ```
  }];
  let options = [
    Option<"weights", "weights", "std::string", "\"\"",
           "the weights file to append to (empty: keep every constant)">,
    Option<"irDir", "ir-dir", "std::string", "\".\"",
           "the folder param paths are relative to">,
    Option<"maxInlineElements", "max-inline-elements", "int64_t", "65536",
           "constants with more elements leave the IR">
  ];
}

def GroupLayersPass : Pass<"rp-group-layers", "::mlir::ModuleOp"> {
  let summary = "groups the ops of a flat graph into rp.layer ops";
  let description = [{
    Turns the flat graph an importer produces into the ordered list of
    layers that pipeline stages are cut from. Layers come from the exporter's
    name scopes in op locations (`/h.3/attn/MatMul` is in layer `h.3`), or,
    when the locations carry none, from repeated structure: the points where
    one activation is live (the residual stream) cut the graph into
    segments, and the longest run of identical segment groups are the
    layers. Ops before the first layer form a `prefix` layer, ops after the
    last a `suffix` layer. Constants are copied into each layer that uses
    them; parameters stay outside and become layer operands, so a tied
    embedding feeds two layers. Functions that already have layers are left
    alone.

    Before:

    ```mlir
    %1 = rp.gather %wte[%ids] axis = 0 : ... loc("/wte/Gather")
    %2 = rp.layer_norm %1 ... loc("/h.0/ln_1/LayerNormalization")
    %3 = rp.layer_norm %2 ... loc("/h.1/ln_1/LayerNormalization")
    ```

    After:

    ```mlir
    %1 = rp.layer "prefix" (%ids, %wte) : ... { ... }
    %2 = rp.layer "h.0" (%1, ...) : ... { ... }
    %3 = rp.layer "h.1" (%2, ...) : ... { ... }
    ```
  }];
  let options = [
    Option<"source", "source", "::mlir::rp::LayerSource",
           "::mlir::rp::LayerSource::automatic",
           "where the layers come from",
           [{::llvm::cl::values(
             clEnumValN(::mlir::rp::LayerSource::automatic, "auto",
                        "scopes, then structure, then one layer"),
             clEnumValN(::mlir::rp::LayerSource::scope, "scope",
                        "exporter scopes only"),
             clEnumValN(::mlir::rp::LayerSource::structure, "structure",
                        "repeated structure only"))}]>
  ];
  let dependentDialects = ["::mlir::rp::RPDialect"];
}

def FuseLayerNormPass : Pass<"rp-fuse-layer-norm"> {
  let summary = "rewrites decomposed layer norms into rp.layer_norm";
  let description = [{
    Exporters before opset 17 write layer norm out. This pass finds
    `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)` over trailing
    dimensions, with the elementwise scale and bias that follow it when they
    have the normalized shape, and replaces it with one `rp.layer_norm`.

    ```mlir
    %m = rp.reduce mean %x dims = [2] keep_dims : ...
    %d = rp.sub %x, %m : ...
    %p = rp.pow %d, %two : ...
    %v = rp.reduce mean %p dims = [2] keep_dims : ...
    %e = rp.add %v, %eps : ...
    %s = rp.sqrt %e : ...
    %n = rp.div %d, %s : ...
    %y = rp.mul %n, %gamma : ...
    %z = rp.add %y, %beta : ...
    // becomes
    %z = rp.layer_norm %x scale(%gamma) bias(%beta) axis = 2 epsilon = ...
    ```
  }];
}

def FuseRmsNormPass : Pass<"rp-fuse-rms-norm"> {
  let summary = "rewrites decomposed RMS norms into rp.rms_norm";
  let description = [{
    Finds `x / sqrt(mean(x^2) + eps)` (or `x * (1 / sqrt(...))`) over
    trailing dimensions, with the scale that follows it, as Llama and Qwen
    exports write RMSNorm, and replaces it with one `rp.rms_norm`.

    ```mlir
    %p = rp.pow %x, %two : ...
    %v = rp.reduce mean %p dims = [2] keep_dims : ...
    %e = rp.add %v, %eps : ...
    %s = rp.sqrt %e : ...
    %n = rp.div %x, %s : ...
    %y = rp.mul %n, %w : ...
    // becomes
    %y = rp.rms_norm %x scale(%w) axis = 2 epsilon = ...
    ```
  }];
}

def FuseGeluPass : Pass<"rp-fuse-gelu"> {
  let summary = "rewrites elementwise GELU formulas into rp.gelu";
  let description = [{
    Finds `0.5 * x * (1 + erf(x / sqrt(2)))` (exact GELU) and
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))` (its tanh
    approximation) in any association order and replaces each with
    `rp.gelu` (`approximate = tanh` for the second).

    ```mlir
    %a = rp.div %x, %sqrt2 : ...
    %b = rp.erf %a : ...
    %c = rp.add %b, %one : ...
    %d = rp.mul %x, %c : ...
    %y = rp.mul %d, %half : ...
    // becomes
    %y = rp.gelu %x : ...
    ```
  }];
}

def FuseSiluPass : Pass<"rp-fuse-silu"> {
  let summary = "rewrites x * sigmoid(x) into rp.silu";
  let description = [{
    ```mlir
    %s = rp.sigmoid %x : tensor<2x8xf32>
    %y = rp.mul %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    // becomes
    %y = rp.silu %x : tensor<2x8xf32>
    ```
  }];
}

def FuseAttentionPass : Pass<"rp-fuse-attention"> {
  let summary = "rewrites softmax(Q K^T * s + mask) V into rp.attention";
  let description = [{
    Finds scaled dot-product attention written out and replaces it with
    `rp.attention`, which devices run fused with memory linear in the
    sequence length. It takes the scale on Q or on the scores (a multiply or
    a divide by a constant), K^T as a transpose or a transposed matmul, a
    mask as `where(masked, -big, scores)`, `where(kept, scores, -big)` or an
    added float tensor (a constant 0 / -big mask becomes an i1 mask, and a
    causal one the `causal` flag), `[batch*heads, seq, dim]` tensors, and
    key/value heads repeated for grouped-query attention (the repeat is
    dropped). The probabilities may pass through torch 2's NaN guard
    `where(p != p, 0, p)` when no row can be fully masked (no mask, a causal
    one, or a constant mask keeping a position in every row), where the
    guard changes nothing.

    ```mlir
    %kt = rp.transpose %k permutation = [0, 1, 3, 2] : ...
    %s = rp.matmul %q, %kt : ...
    %s2 = rp.mul %s, %scale : ...
    %s3 = rp.where %upper, %ninf, %s2 : ...
    %p = rp.softmax %s3 dim = 3 : ...
    %o = rp.matmul %p, %v : ...
    // becomes
    %o = rp.attention %q, %k, %v causal : ...
    ```
  }];
}

def ConvertFloatTypePass : Pass<"rp-convert-float-type", "::mlir::ModuleOp"> {
  let summary = "runs the model's f32 compute in bf16 or f16";
  let description = [{
    Mixed precision the way rp trains: parameters stay f32 in their weight
    files (the master copy), every f32 tensor inside the layers becomes the
    chosen type (storage and compute; kernels accumulate in f32), f32
    parameters and inputs are cast to it where layers read them, and the
    model's outputs are cast back to f32. Constants are rounded to the type.
    Integer and f64 tensors are left alone.

    ```mlir
    %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
    %y = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>)
        -> tensor<2x8xf32> { ... }
    // with to=bf16 becomes
    %wb = rp.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
    %xb = rp.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
    %y = rp.layer "h.0" (%xb, %wb) : (tensor<2x8xbf16>, tensor<8x8xbf16>)
        -> tensor<2x8xbf16> { ... }
    %r = rp.cast %y : tensor<2x8xbf16> to tensor<2x8xf32>
    ```
  }];
  let options = [
    Option<"to", "to", "::mlir::rp::ComputeType",
           "::mlir::rp::ComputeType::bf16", "the compute type",
           [{::llvm::cl::values(
             clEnumValN(::mlir::rp::ComputeType::bf16, "bf16", "bfloat16"),
             clEnumValN(::mlir::rp::ComputeType::f16, "f16", "IEEE half"),
             clEnumValN(::mlir::rp::ComputeType::f32, "f32",
                        "leave the model as it is"))}]>
  ];
}

def FuseLinearCrossEntropyPass : Pass<"rp-fuse-linear-cross-entropy"> {
  let summary = "fuses the LM head and the cross-entropy so no logits exist";
  let description = [{
    Rewrites `rp.cross_entropy(rp.matmul(hidden, weight))` with a 2-D weight
    (`[classes, K]` with `transpose_b`, tied embeddings included, or
    `[K, classes]`, transposed once) into one `rp.linear_cross_entropy`
    when the logits feed nothing but the loss. Its kernels hold `chunk`
    rows of logits at a time, forward and backward, instead of `[tokens,
    classes]`. Logits that anything else reads are left alone. Runs after
    rp-attach-loss.

    ```mlir
    %l = rp.matmul %h, %w transpose_b : ...
    %s, %n = rp.cross_entropy %l, %labels ignore_index = -100 : ...
    // becomes
    %s, %n = rp.linear_cross_entropy %h, %w, %labels ignore_index = -100
        chunk = 128 : ...
    ```
  }];
  let options = [
    Option<"chunk", "chunk", "int64_t", "0",
           "rows of logits per chunk; 0 chooses as many as fit 64 MiB of f32 "
           "logits, in multiples of 128">
  ];
}

def AttachLossPass : Pass<"rp-attach-loss", "::mlir::ModuleOp"> {
  let summary = "makes the model's last layer compute the training loss";
  let description = [{
    `loss=cross-entropy` (the default) takes the model's only output, logits
    `[..., C]`, adds an i64 `labels` input of the logits' shape without the
    class dimension, and computes `rp.cross_entropy` (ignore index -100) in
    the layer that produces the logits. `loss=output:NAME` uses the scalar
    output NAME as the loss. Either way `@main` then returns `loss_sum` and
    `count`: the step loss is the sum of `loss_sum` over the microbatches of
    a step divided by the sum of `count` (token-weighted; for an output
    loss `count` is 1, so the step loss is the mean over microbatches).

    ```mlir
    func.func @main(%tokens: tensor<2x16xi64>) -> tensor<2x16x64xf32>
    // becomes
    func.func @main(%tokens: tensor<2x16xi64>, %labels: tensor<2x16xi64>)
        -> (tensor<f32>, tensor<i64>)
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"cross-entropy\"",
           "cross-entropy, or output:NAME for a scalar output of the model">
  ];
}

def RecomputeSharedPass : Pass<"rp-recompute-shared", "::mlir::ModuleOp"> {
  let summary = "recomputes in each layer the values it reads that depend "
                "only on weights and constants";
  let description = [{
    A layer result that another layer reads and that the producing layer
    computes from parameters and constants alone (a causal mask reshaped
    from a float initializer, rotary tables, position ids, a relative
    position bias gathered from a learned table) is recomputed at the top of
    every layer that reads it; the layer then reads the parameters instead
    of the result, and the producer stops yielding it when nothing else
    reads it. A staged plan then never transfers such a value between
    stages, and when it needs a gradient each layer's contribution goes to
    the parameter it came from, where per-use weight gradients are summed
    in one fixed order for any number of stages (bitwise across device
    counts). Values that depend on an input stay layer results.

    Before:

    ```mlir
    %m:2 = rp.layer "h.0"(%x, %mask) ... {
    ^bb0(%a: tensor<1x16x32xf32>, %k: tensor<16x16xf32>):
      %r = rp.reshape %k : tensor<16x16xf32> to tensor<1x1x16x16xf32>
      ...
      rp.yield %r, %h : ...
    }
    %y = rp.layer "h.1"(%m#1, %m#0) ...
    ```

    After:

    ```mlir
    %m = rp.layer "h.0"(%x, %mask) ... { ... rp.yield %h : ... }
    %y = rp.layer "h.1"(%m, %mask) ... {
    ^bb0(%a: tensor<1x16x32xf32>, %k: tensor<16x16xf32>):
      %r = rp.reshape %k : tensor<16x16xf32> to tensor<1x1x16x16xf32>
      ...
    }
    ```
  }];
}

def AutodiffPass : Pass<"rp-autodiff", "::mlir::ModuleOp"> {
  let summary = "derives the backward of every layer from the per-op VJPs";
  let description = [{
    Turns the loss graph of rp-attach-loss into a training step. The last
    layer becomes the fused tail (`role = tail`): forward, loss and
    backward in one region, seeded with a new `loss_scale` input (d loss /
    d loss_sum). Every earlier layer whose results get a gradient gets a
    backward layer (`role = backward`) after it in reverse order: it takes
    the forward layer's inputs again and recomputes its forward from them
    (RoundPipe's recompute), then applies the VJP rules of its ops in
    reverse. Only values on a path from a trainable parameter to the loss
    through differentiable operands get gradients (activity analysis), so
    frozen parameters, masks and trainable parameters that never reach the
    loss (a float initializer that only feeds an attention mask) cost
    nothing and get no `grad:` result. An attention whose float mask needs
    a gradient is first expanded into matmul, add, softmax and matmul. A
    weight used by several layers (a tied embedding) gets the sum of its
    per-use gradients; an activation read by layers in several backward
    stages gets a running sum that each backward layer takes, adds to and
    hands on, so no gradient is summed between layers. `@main` returns `loss_sum`, `count`, then one gradient per
    trainable parameter, named `grad:<param>`.

    ```mlir
    %h = rp.layer "h.0" (%x, %w) ...
    %s, %n = rp.layer "head" (%h, %labels) ...
    // becomes
    %h = rp.layer "h.0" (%x, %w) ...
    %s, %n, %dh = rp.layer "head" role = tail (%h, %labels, %scale) ...
    %dw = rp.layer "h.0.backward" role = backward (%x, %w, %dh) ...
    ```

    When the function carries an `rp.partition` (rp-partition ran), its
    stages decide the layout: the last `backward[0]` layers become one
    fused tail, and `recompute` chooses the groups a backward recomputes:
    `stage` (the default, RoundPipe's) gives each backward stage one
    backward layer that recomputes the stage from its input; `layer` gives
    each layer its own backward; the grain is the partition's (rp-partition
    `recompute`) unless this pass is given one. Without a partition the tail is the last
    layer and the backward stage is every layer before it. Every layer gets
    `span`, the forward layers it covers.
  }];
  let options = [
    Option<"recompute", "recompute", "::mlir::rp::RecomputeGrain",
           "::mlir::rp::RecomputeGrain::stage", "recompute grain",
           [{::llvm::cl::values(
             clEnumValN(::mlir::rp::RecomputeGrain::stage, "stage",
                        "one group: every layer before the tail"),
             clEnumValN(::mlir::rp::RecomputeGrain::layer, "layer",
                        "each layer recomputed alone"))}]>
  ];
}

def AddLoraPass : Pass<"rp-add-lora", "::mlir::ModuleOp"> {
  let summary = "adds rank-r LoRA adapters to linear layers, freezes the rest";
  let description = [{
    For every `rp.matmul` whose right operand is a 2-D parameter whose name
    matches `targets` (a regular expression, e.g. `q_proj|v_proj`; empty
    matches every linear layer), adds two trainable parameters,
    `<param>.lora_A` `[rank, in]` (uniform in +-1/sqrt(in), as PEFT's
    kaiming init) and `<param>.lora_B` `[out, rank]` (zeros), and the update
    `y + (alpha / rank) * (x A^T) B^T`. Every other parameter is frozen.
    The experts of a mixture-of-experts layer (`rp.moe.grouped_matmul` of a
    3-D parameter `[E, out, in]`) get stacked adapters `[E, rank, in]` and
    `[E, out, rank]` applied per group with two more grouped matmuls: each
    expert trains its own pair and its frozen weight produces no gradient.

    ```mlir
    %y = rp.matmul %x, %w transpose_b : (tensor<2x64xf32>, tensor<32x64xf32>)
        -> tensor<2x32xf32>
    // becomes
    %y = rp.matmul %x, %w transpose_b : ...
    %xa = rp.matmul %x, %a transpose_b : (tensor<2x64xf32>, tensor<8x64xf32>)
        -> tensor<2x8xf32>
    %xb = rp.matmul %xa, %b transpose_b : (tensor<2x8xf32>, tensor<32x8xf32>)
        -> tensor<2x32xf32>
    %s = rp.mul %xb, %scale : ...
    %y2 = rp.add %y, %s : ...
    ```
  }];
  let options = [
    Option<"rank", "rank", "int64_t", "8", "adapter rank r">,
    Option<"alpha", "alpha", "double", "16.0", "scaling numerator (alpha / r)">,
    Option<"targets", "targets", "std::string", "\"\"",
           "regular expression on weight names; empty: every linear layer">
  ];
}

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
    `host`) or the path of a profile JSON file (docs/hardware-profiles.md);
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
    Option<"partitioner", "partitioner", "std::string", "\"rp\"",
           "rp (least estimated step time), roundpipe (RoundPipe's procedure), or exhaustive (every partition; at most 10 layers)">,
    Option<"microbatches", "microbatches", "unsigned", "0",
           "microbatches per step for the timing estimate; 0 means devices + 1 (1 on one device)">,
    Option<"stages", "stages", "std::string", "\"\"",
           "a user partition, fwd:A,B,...;bwd:X,Y,... (DESIGN.md), checked "
           "against the cap and scored instead of partitioning">,
    Option<"dispatch", "dispatch", "std::string", "\"modulo\"",
           "how round-robin moves its jobs from pass to pass: modulo (the job counter carries on) or rounds (the pass shift the timing model finds best); include/rp/Analysis/Continuous.h">
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
    time) or RoundPipe's (`partitioner=roundpipe`); the static schedules
    (`gpipe`, `1f1b`: one stage per device; `interleaved-1f1b`: two) cut
    balanced symmetric stages. `stages=fwd:A,...;bwd:X,...` takes a user
    partition, checked against the per-stage byte cap (half of
    `weight-budget` of the device memory: the running and the prefetched
    stage are resident together). The attribute also records the
    partitioner and the `recompute` grain rp-autodiff applies, so the
    schedule is decided here once and later passes read it typed.
    `microbatches=0` takes the default of `defaultMicrobatches`
    (include/rp/Analysis/Pipeline.h): 1 on one device, else devices + 1.

    ```mlir
    func.func @main(...) attributes {rp.partition = #rp.partition<
        schedule = "round-robin", devices = 2, microbatches = 3,
        hw = "rtx4090", forward = [2, 2], backward = [1, 2, 1]>}
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", "\"round-robin\"",
           "round-robin, gpipe, 1f1b or interleaved-1f1b">,
    Option<"devices", "devices", "unsigned", "1", "devices to run on">,
    Option<"microbatches", "microbatches", "unsigned", "0",
           "microbatches per step; 0 means devices + 1 (1 on one device)">,
    Option<"hw", "hw", "std::string", "\"host\"",
           "hardware profile: a shipped name or a JSON file">,
    Option<"measured", "measured", "std::string", "\"\"",
           "measured per-layer times (JSON) that override the model">,
    Option<"partitioner", "partitioner", "std::string", "\"rp\"",
           "rp (least estimated step time), roundpipe, or exhaustive (every partition; at most 10 layers)">,
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
                        "each layer recomputed alone"))}]>,
    Option<"dispatch", "dispatch", "std::string", "\"modulo\"",
           "how round-robin moves its jobs from pass to pass: modulo (the job counter carries on) or rounds (the pass shift the timing model finds best); include/rp/Analysis/Continuous.h">
  ];
}

def LowerSchedulePass : Pass<"rp-lower-schedule", "::mlir::ModuleOp"> {
  let summary = "binds stage jobs to devices and orders their compute";
  let description = [{
    Turns the function's `rp.partition` into an `rp.schedule` with one
    `rp.compute` per stage job and microbatch: round-robin puts job n on
    device n mod G; the static schedules bind stage s to device s mod G
    and order each device's work as GPipe, 1F1B or Megatron's interleaved
    1F1B do. Each compute waits for the compute whose result it reads
    (the previous stage; for a backward, also the forward that computed
    its saved input); rp-insert-transfers turns those waits into copies.
    The commands are listed in order of their estimated start.

    ```mlir
    rp.schedule @main "round-robin" devices = 2 microbatches = 1
        hw = "rtx4090" {
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
    Continuous.h), or `pass-shift` >= 0 sets it (to compare), and `step_ms`
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
    Option<"dispatch", "dispatch", "std::string", "\"modulo\"",
           "how round-robin moves its jobs from pass to pass: modulo (the job counter carries on) or rounds (the pass shift the timing model finds best); include/rp/Analysis/Continuous.h">
  ];
}

def ReportMaxSeqPass : Pass<"rp-report-max-seq", "::mlir::ModuleOp"> {
  let summary = "reports the largest sequence length whose plan fits";
  let description = [{
    After rp-partition: finds, by bisection, the largest sequence length
    whose training step still fits every device's memory with the
    function's stages, schedule and microbatch (its batch rows unchanged),
    and reports it as a remark with the peak it reaches. Each trial scales
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
      73728): device 3 peaks at 23.9 GiB of 24 GiB; at 2048 tokens the
      peak is 2.9 GiB
    ```
  }];
  let options = [
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to fit in GiB; 0 takes the profile's">,
    Option<"limit", "limit", "int64_t", "1048576",
           "the longest sequence to try">
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
    schedule's `peak_bytes`, `budget_bytes` and `pinned_bytes`.

    A device over its budget (the profile's memory, or `budget-gib`) is an
    error that gives the peak, the budget, the biggest buffers and what to
    change: smaller stages when weights dominate, layer-grain recompute or
    a smaller microbatch when working memory does.

    ```mlir
    rp.schedule @main "round-robin" devices = 2 microbatches = 3
        hw = "rtx4090" attributes {budget_bytes = 25769803776 : i64,
        peak_bytes = array<i64: 2048, 2048>, pinned_bytes = 4096 : i64} {
      %c = rp.compute forward job 0 layers 0 to 2 mb 0 device 0 weights 0
          {ms = 1.5 : f64, offsets = array<i64: 0, 512, 768, 1024>}
    }
    ```
  }];
  let options = [
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to plan against in GiB; 0 takes the profile's">
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

#endif // RP_DIALECT_RP_RPPASSES_TD
