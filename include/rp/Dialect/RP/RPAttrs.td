//===- RPAttrs.td - rp dialect attributes ------------------*- tablegen -*-===//
//
// Closed sets used by rp ops, as enums (never strings).
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPATTRS_TD
#define RP_DIALECT_RP_RPATTRS_TD

include "mlir/IR/EnumAttr.td"

def RP_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>,
    I32EnumAttrCase<"min", 3>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_CmpPredicate : I32EnumAttr<"CmpPredicate", "comparison predicate", [
    I32EnumAttrCase<"eq", 0>,
    I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>,
    I32EnumAttrCase<"ge", 5>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation used by gelu", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_LayerRole : I32EnumAttr<"LayerRole", "what a layer computes", [
    I32EnumAttrCase<"forward", 0>,
    I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"tail", 2>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_CopyDirection : I32EnumAttr<"CopyDirection",
    "which way a schedule copy goes", [
    I32EnumAttrCase<"h2d", 0>,
    I32EnumAttrCase<"d2h", 1>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_CopyKind : I32EnumAttr<"CopyKind", "what a schedule copy carries", [
    I32EnumAttrCase<"weights", 0>,
    I32EnumAttrCase<"activation", 1>,
    I32EnumAttrCase<"gradient", 2>,
    I32EnumAttrCase<"weight_grads", 3>
  ]> {
  let cppNamespace = "::mlir::rp";
}

// What a training compile decides once (rp-partition records them in
// #rp.partition; the later passes and the plan export read them typed).

def RP_ScheduleKind : I32EnumAttr<"ScheduleKind",
    "the order a pipeline runs its stage jobs in", [
    I32EnumAttrCase<"roundRobin", 0, "round-robin">,
    I32EnumAttrCase<"gpipe", 1, "gpipe">,
    I32EnumAttrCase<"oneFOneB", 2, "1f1b">,
    I32EnumAttrCase<"interleaved", 3, "interleaved-1f1b">,
    I32EnumAttrCase<"loopedBfs", 4, "looped-bfs">
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_Partitioner : I32EnumAttr<"Partitioner",
    "how round-robin stages are cut", [
    I32EnumAttrCase<"rp", 0>,
    I32EnumAttrCase<"roundpipe", 1>,
    I32EnumAttrCase<"exhaustive", 2>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_Dispatch : I32EnumAttr<"Dispatch",
    "how round-robin moves its jobs from pass to pass (include/rp/Analysis/SteadyState.h)", [
    I32EnumAttrCase<"modulo", 0>,
    I32EnumAttrCase<"rounds", 1>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_RecomputeGrain : I32EnumAttr<"RecomputeGrain",
    "the groups rp-autodiff recomputes in backward (auto: chosen per stage by rp-choose-recompute)", [
    I32EnumAttrCase<"stage", 0>,
    I32EnumAttrCase<"layer", 1>,
    I32EnumAttrCase<"automatic", 2, "auto">
  ]> {
  let cppNamespace = "::mlir::rp";
}

#endif // RP_DIALECT_RP_RPATTRS_TD
