//===- RPTrainPasses.td - training graph passes ------------*- tablegen -*-===//

#ifndef RP_DIALECT_RP_RPTRAINPASSES_TD
#define RP_DIALECT_RP_RPTRAINPASSES_TD

include "mlir/Pass/PassBase.td"

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

def FuseMatmulEpiloguePass : Pass<"rp-fuse-matmul-epilogue"> {
  let summary = "marks the matmuls whose bias, gelu or gelu gradient the "
                "plan fuses into the matmul's call";
  let description = [{
    Sets `rp.epilogue` on each `rp.matmul` whose result feeds only an
    `rp.add` of a `[N]` bias vector (`"bias"`), that add then read by an
    `rp.gelu` (`"bias_gelu"`; the sum may have other readers, the gelu's
    gradient), or only the gradient input of a gelu's `rp.unary_grad`
    (`"dgelu"`). The ops stay: the plan exporter writes each marked matmul
    and the ops it absorbs as one `matmul` kernel call with the epilogue
    (cuBLASLt's BIAS and GELU_BIAS epilogues on the cuda device), after
    checking the pattern again within the call's program. The host computes
    the fused call bitwise as the unfused calls. Runs last in
    rp-train-pipeline with `fuse-matmul-epilogue`, after autodiff, so that
    it sees the backward's gelu gradients.

    ```mlir
    %p = rp.matmul %x, %w transpose_b : ...
    %s = rp.add %b, %p : ...
    %g = rp.gelu %s approximate = tanh : ...
    // becomes
    %p = rp.matmul %x, %w transpose_b {rp.epilogue = "bias_gelu"} : ...
    ```
  }];
}

def ChooseLossFusionPass : Pass<"rp-choose-loss-fusion", "::mlir::ModuleOp"> {
  let summary = "keeps the fused LM-head loss only where it pays";
  let description = [{
    After rp-partition, on a graph whose loss rp-fuse-linear-cross-entropy
    fused: plans the step both ways with the models the plan is made with
    (the layer costs, the partitioner, the schedule with its transfers, the
    steady-state timing and the memory plan) and keeps
    `rp.linear_cross_entropy` only where it pays: where the unfused plan
    does not fit the memory budget (its `[tokens, vocabulary]` logits), or
    where the fused plan is predicted no slower (within 0.1 %, a tie: a
    step bound by uploads or the optimizer hides the tail's extra GEMM). Otherwise every
    `rp.linear_cross_entropy` becomes the `rp.matmul` and `rp.cross_entropy`
    it was fused from (a transposed `[K, vocabulary]` head reads its weight
    as before), and the function's `rp.partition` becomes the one the
    partitioner chooses for that graph: the same IR as compiling with the
    loss unfused. The fused backward recomputes the logits in the tail
    (the head's GEMMs three times instead of two), so where the logits fit,
    the unfused plan is usually faster. The choice and its reason are
    recorded as the function's `rp.loss_fusion` (rp-compile prints it in
    its summary). A graph with no fused loss is left alone.

    ```mlir
    // before (partitioned, fused)
    %s, %n = rp.linear_cross_entropy %h, %w, %y ignore_index = -100
        chunk = 128 : (tensor<1x64x32xf16>, tensor<1000x32xf16>,
        tensor<1x64xi64>) -> (tensor<f32>, tensor<i64>)
    // after, where the logits fit and the unfused plan is faster
    %l = rp.matmul %h, %w transpose_b : (tensor<1x64x32xf16>,
        tensor<1000x32xf16>) -> tensor<1x64x1000xf16>
    %s, %n = rp.cross_entropy %l, %y ignore_index = -100
        : (tensor<1x64x1000xf16>, tensor<1x64xi64>) -> (tensor<f32>, tensor<i64>)
    // func.func @main(...) attributes {rp.loss_fusion = "unfused: ..."}
    ```
  }];
  let options = [
    Option<"budgetGiB", "budget-gib", "double", "0",
           "device memory to fit in GiB; 0 takes the profile's">,
    Option<"stages", "stages", "std::string", "\"\"",
           "the user partition rp-partition was given (fwd:...;bwd:...), "
           "kept for the unfused graph">,
    Option<"weightBudget", "weight-budget", "double", "0.6",
           "rp-partition's share of device memory for weights and "
           "gradients">,
    Option<"stageBytes", "stage-bytes", "int64_t", "0",
           "rp-partition's per-stage byte cap; 0 derives it from the "
           "profile">,
    Option<"dispatch", "dispatch", "::mlir::rp::Dispatch",
           "::mlir::rp::Dispatch::modulo",
           "round-robin: how the jobs move from pass to pass, as "
           "rp-insert-transfers's dispatch",
           "::mlir::rp::dispatchValues()">,
    Option<"passShift", "pass-shift", "int", "-1",
           "round-robin: the device shift per pass, as "
           "rp-insert-transfers's (-1: dispatch's)">,
    Option<"tailJobs", "tail-jobs", "int", "-1",
           "rp-partition's tail-jobs, for the unfused graph (0: the faster "
           "of one and two tail jobs; -1: the partition's tail_jobs)">,
    Option<"hostBudgetGiB", "host-budget-gib", "double", "0",
           "rp-partition's host-budget-gib: the unfused graph's stages are "
           "held to it as the fused graph's were, and a plan over it is not "
           "chosen over one within it (0: unchecked)">,
    Option<"hostSlackPct", "host-slack-pct", "double", "0",
           "rp-partition's host-slack-pct: the unfused graph's stages are "
           "held near its fastest as the fused graph's were">
  ];
}

def AttachLossPass : Pass<"rp-attach-loss", "::mlir::ModuleOp"> {
  let summary = "makes the model's last layer compute the training loss";
  let description = [{
    `loss=cross-entropy` (the default) takes the model's only output, logits
    `[..., C]`, adds an i64 `labels` input of the logits' shape without the
    class dimension, and computes `rp.cross_entropy` (ignore index -100) in
    the layer that produces the logits. `loss=output:NAME` uses the scalar
    output NAME as the loss. `loss=cross-entropy+output:NAME` takes the
    cross-entropy of the other output (the model has two) plus the scalar
    output NAME, an auxiliary loss such as MoE load balancing computed per
    microbatch, added to `loss_sum` times the microbatch's `count` (so the
    step loss gets the token-weighted mean of the microbatches' auxiliary
    losses). Either way `@main` then returns `loss_sum` and
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
           "cross-entropy, output:NAME for a scalar output of the model, "
           "or cross-entropy+output:NAME to add that output to it">
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
    each layer its own backward; the grain is each backward stage's in the
    partition (rp-partition's `recompute`, or one per stage after
    rp-choose-recompute; `auto` not yet chosen is `stage`) unless this
    pass is given one for all. Without a partition the tail is the last
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
    matches every linear layer but the output layer, as PEFT's
    `all-linear`), adds two trainable parameters,
    `<param>.lora_A` `[rank, in]` (uniform in +-1/sqrt(in), as PEFT's
    kaiming init) and `<param>.lora_B` `[out, rank]` (zeros), and the update
    `y + ((alpha / rank) * x A^T) B^T`. Every other parameter is frozen,
    but the trainable ones matching `keep-trainable` (PEFT's
    `modules_to_save`, e.g. `lm_head`), which train whole.
    The scale multiplies the rank-wide `x A^T`, which follows the matmul;
    the B side and the sum come right before `y`'s first reader, so `x` is
    freed where it was and no more than `y`, the update and their sum are
    live at once.
    The experts of a mixture-of-experts layer (`rp.moe.grouped_matmul` of a
    3-D parameter `[E, out, in]`) get stacked adapters `[E, rank, in]` and
    `[E, out, rank]` applied per group with two more grouped matmuls: each
    expert trains its own pair and its frozen weight produces no gradient.
    An expert output read only by `rp.moe.combine` gets its update combined
    on its own and added in token space (`combine(y) + combine(update)`;
    combine is linear in its rows), so the `[tokens x top_k, out]` output,
    update and sum are never live together: a third of Qwen3-235B's MoE
    layer working memory.

    With `dropout` p > 0, each 2-D adapter reads `rp.dropout(x)` instead of
    `x`, as PEFT applies `lora_dropout` to x before `lora_A` (the frozen
    matmul keeps x): `y + ((alpha / rank) * dropout(x) A^T) B^T`. The mask
    is keyed by a new `@main` input `dropout_key` (one i64 row of seed,
    step, microbatch and on per microbatch, filled by the trainer) and by
    the op's `tensor`: FNV-1a (32 bits) of the weight's name, plus one per
    earlier adapter of the same weight, so a PyTorch reference finds each
    module's mask by name (python/rp/_philox.py's tensor_id). Expert
    adapters get none (PEFT's target_parameters take no lora_dropout).

    The output layer is the matmul whose result reaches a result of `@main`
    or the logits of an `rp.cross_entropy` through views, casts and layer
    boundaries only (the LM head, tied or not). The default leaves it out:
    its update would add `[tokens, vocabulary]` values and keep
    rp-fuse-linear-cross-entropy from removing the logits. Targets that
    name its weight (e.g. `lm_head`) adapt it.

    ```mlir
    %y = rp.matmul %x, %w transpose_b : (tensor<2x64xf32>, tensor<32x64xf32>)
        -> tensor<2x32xf32>
    // becomes
    %y = rp.matmul %x, %w transpose_b : ...
    %xa = rp.matmul %x, %a transpose_b : (tensor<2x64xf32>, tensor<8x64xf32>)
        -> tensor<2x8xf32>
    %s = rp.mul %xa, %scale : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %xb = rp.matmul %s, %b transpose_b : (tensor<2x8xf32>, tensor<32x8xf32>)
        -> tensor<2x32xf32>
    %y2 = rp.add %y, %xb : ...
    ```
  }];
  let options = [
    Option<"rank", "rank", "int64_t", "8", "adapter rank r">,
    Option<"alpha", "alpha", "double", "16.0", "scaling numerator (alpha / r)">,
    Option<"targets", "targets", "std::string", "\"\"",
           "regular expression on weight names; empty: every linear layer "
           "but the output layer">,
    Option<"keep", "keep-trainable", "std::string", "\"\"",
           "regular expression on parameter names that stay trainable beside "
           "the adapters (PEFT's modules_to_save); empty: none">,
    Option<"dropout", "dropout", "double", "0.0",
           "PEFT's lora_dropout: the probability that rp.dropout zeroes an "
           "element of each 2-D adapter's input (0: none)">
  ];
}

def QuantizeBasePass : Pass<"rp-quantize-base", "::mlir::ModuleOp"> {
  let summary = "stores the frozen linear and expert weights of a LoRA model quantized";
  let description = [{
    For every frozen parameter read only as the weight of `rp.matmul` (the
    right operand) or `rp.moe.grouped_matmul` inside layers, but the output
    layer's (kept whole, as bitsandbytes and PEFT keep `lm_head`) and the
    router's (its scores pick the experts), quantizes
    its stored values once as `kind` (QLoRA's NF4 with double quantization,
    or int8; contract/include/rp/contract/Quantize.h), appends the blob to
    `weights-file`, and replaces the parameter by an i8 parameter of the
    same name holding the blob, read in each layer through an
    `rp.dequantize` into the weight's type. Norms, embeddings, the router,
    the adapters and every trained weight stay as they are. The model must
    have LoRA adapters (rp-add-lora): a trained weight cannot be quantized.
    Parameter files are read relative to `ir-dir`.

    ```mlir
    %w = rp.param "q.weight" at "w.bin"[0] : tensor<64x64xf32>
    rp.layer "h.0" (%x, %w) { ^bb0(%a, %b): ... rp.matmul %a, %b ... }
    // becomes
    %w = rp.param "q.weight" at "q.bin"[0] : tensor<2180xi8>
    rp.layer "h.0" (%x, %w) {
    ^bb0(%a, %blob):
      %b = rp.dequantize nf4 %blob : tensor<2180xi8> -> tensor<64x64xf32>
      ... rp.matmul %a, %b ...
    }
    ```
  }];
  let options = [
    Option<"kind", "kind", "::mlir::rp::QuantKind", "::mlir::rp::QuantKind::nf4",
           "the storage format", [{::llvm::cl::values(
             clEnumValN(::mlir::rp::QuantKind::nf4, "nf4",
                        "4-bit NormalFloat, double-quantized absmax (QLoRA)"),
             clEnumValN(::mlir::rp::QuantKind::int8, "int8",
                        "per-block absmax int8"))}]>,
    Option<"weightsFile", "weights-file", "std::string", "\"\"",
           "the file the blobs are appended to (made when missing)">,
    Option<"irDir", "ir-dir", "std::string", "\".\"",
           "the folder parameter files are relative to">
  ];
  let statistics = [
    Statistic<"numQuantized", "quantized", "weights stored quantized">
  ];
}

#endif // RP_DIALECT_RP_RPTRAINPASSES_TD
