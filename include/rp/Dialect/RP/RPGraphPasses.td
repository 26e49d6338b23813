//===- RPGraphPasses.td - graph preparation passes ---------*- tablegen -*-===//

#ifndef RP_DIALECT_RP_RPGRAPHPASSES_TD
#define RP_DIALECT_RP_RPGRAPHPASSES_TD

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

def VerifyWeightsPass : Pass<"rp-verify-weights", "::mlir::ModuleOp"> {
  let summary = "checks that the weight files are the ones the IR was made with";
  let description = [{
    rp-import writes its weights file and its IR each atomically, weights
    first; a crash between the two renames leaves the new weights beside
    the previous IR, whose params would read other bytes at their offsets.
    So rp-import records, in the module's `rp.weight_fingerprints`, the
    fingerprint of every file its params read (the file's size and 64
    sampled 4 KiB blocks, contract/include/rp/contract/WeightFingerprint.h),
    keyed by the path as the params name it. This pass recomputes each one,
    with relative paths taken from `ir-dir` (the IR file's folder), and
    fails naming the file when it is missing or differs: re-run rp-import.
    A module without the attribute (rp.trace's, a hand-written one) passes.
    rp-opt runs it first on an IR file, rp-compile and rp-translate check
    the same before they read weights. rp-externalize-constants updates the
    entry of the file it appends to.

    It changes nothing. On this input it fails unless `model.weights.bin`
    beside the IR still has that fingerprint:

    ```mlir
    module attributes {rp.weight_fingerprints =
        {"model.weights.bin" = 1311768467463790320 : ui64}} {
      ...
    }
    ```
  }];
  let options = [
    Option<"irDir", "ir-dir", "std::string", "\".\"",
           "the folder relative weight file paths are taken from">
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
    guard changes nothing. Gemma 2's soft-cap `tanh(s / c) * c` between the
    scores and the mask becomes `softcap = c`; a mask (constant or a band
    of index ranges, also on an existing `rp.attention`) that keeps exactly
    a causal band, aligned bottom-right when there are more keys than
    queries and with a sliding window or not, becomes `causal` and
    `window`, leaving no mask operand. Attention sinks written out (GPT-OSS's
    eager attention: a softmax over `concat([scores, sink], -1)`, the row
    maximum subtracted or not, whose sink column is sliced off before the
    product with V; the sink one logit per query head, at either end of the
    concat) become rp.attention's `sinks(%s)` operand (`[heads]`); a slice
    that keeps the sink, or a column that varies by row, stays decomposed.

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

#endif // RP_DIALECT_RP_RPGRAPHPASSES_TD
