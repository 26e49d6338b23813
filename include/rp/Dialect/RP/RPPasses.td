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

#endif // RP_DIALECT_RP_RPPASSES_TD
