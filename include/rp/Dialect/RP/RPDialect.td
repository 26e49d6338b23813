//===- RPDialect.td - rp dialect definition ----------------*- tablegen -*-===//
//
// The rp dialect: a static-shape tensor graph of one training model, grouped
// into layers, which the rp passes turn into a pipeline-parallel plan.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPDIALECT_TD
#define RP_DIALECT_RP_RPDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def RP_Dialect : Dialect {
  let name = "rp";
  let cppNamespace = "::mlir::rp";
  let summary = "Graph and plan dialect of the rp pipeline-training compiler";
  let description = [{
    The `rp` dialect holds a model as a graph of static-shape tensor ops
    (the *graph level*). Parameters are `rp.param` values that name where the
    weight data lives and never carry the data; `rp.layer` groups the ops of
    one layer, the unit the partitioner builds pipeline stages from.

    Element types are f32, f16, bf16 and f64 for data, i32 and i64 for
    indices and i1 for masks. Every tensor has a static shape.

    Discardable attributes: `rp.measured` on the function with layers is
    the absolute path of the measured per-layer times (rp-partition's
    `measured`) that rp-partition costed the layers with; the later
    pipeline passes and the plan's predicted times read it, so every
    consumer times the layers the same way. `rp.loss_fusion` on the same
    function is rp-choose-loss-fusion's choice and why ("fused: ..." or
    "unfused: ..."), which rp-compile's summary prints. `rp.recompute_choice`
    on the same function is the grain `recompute = "auto"` chose for speed
    (rp-partition, round-robin, rp's partitioner, no user stages) and why
    ("layer: ..." or "stage: ..."): its presence tells the later passes
    that a `recompute = "layer"` was auto's choice, not the user's, so
    rp-choose-loss-fusion chooses again for the graph it re-partitions
    and rp-report-max-seq chooses the grains at each length.

    ```mlir
    func.func @main(...) attributes {rp.measured = "/work/times.json"}
    ```
  }];
  let discardableAttrs = (ins "::mlir::StringAttr":$measured,
                              "::mlir::StringAttr":$loss_fusion,
                              "::mlir::StringAttr":$recompute_choice);
  let hasConstantMaterializer = 1;
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the plan-level types and attributes (RPScheduleOps.cpp).
    void registerScheduleTypes();
  }];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def RP_FloatElement : AnyTypeOf<[F32, F16, BF16, F64]>;
def RP_IndexElement : AnyTypeOf<[I32, I64]>;
def RP_NumericElement : AnyTypeOf<[F32, F16, BF16, F64, I32, I64]>;
def RP_Element : AnyTypeOf<[F32, F16, BF16, F64, I32, I64, I1, I8]>;

def RP_Tensor : StaticShapeTensorOf<[RP_Element]>;
def RP_NumericTensor : StaticShapeTensorOf<[RP_NumericElement]>;
def RP_FloatTensor : StaticShapeTensorOf<[RP_FloatElement]>;
def RP_IndexTensor : StaticShapeTensorOf<[RP_IndexElement]>;
def RP_BoolTensor : StaticShapeTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Base op classes
//===----------------------------------------------------------------------===//

class RP_Op<string mnemonic, list<Trait> traits = []>
    : Op<RP_Dialect, mnemonic, traits>;

class RP_PureOp<string mnemonic, list<Trait> traits = []>
    : RP_Op<mnemonic, !listconcat(traits, [Pure])>;

#endif // RP_DIALECT_RP_RPDIALECT_TD
