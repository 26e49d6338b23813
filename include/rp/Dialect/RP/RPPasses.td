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

#endif // RP_DIALECT_RP_RPPASSES_TD
