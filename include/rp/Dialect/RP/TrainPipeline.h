//===- TrainPipeline.h - the whole training compile as one pipeline -*- C++ -*-===//
//
// `--rp-train-pipeline="devices=G microbatches=M hw=NAME schedule=S"`: from
// a graph with layers to a differentiated graph and its verified schedule,
// ready to export as a staged plan. rp-compile runs the same pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRAINPIPELINE_H
#define RP_DIALECT_RP_TRAINPIPELINE_H

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir::rp {

struct TrainPipelineOptions
    : public PassPipelineOptions<TrainPipelineOptions> {
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("cross-entropy, or output:NAME"),
                           llvm::cl::init("cross-entropy")};
  Option<unsigned> devices{*this, "devices", llvm::cl::desc("devices"),
                           llvm::cl::init(1)};
  Option<unsigned> microbatches{
      *this, "microbatches",
      llvm::cl::desc("microbatches per step; 0: devices + 1 (1 on one)"),
      llvm::cl::init(0)};
  Option<std::string> hw{*this, "hw",
                         llvm::cl::desc("hardware profile name or JSON file"),
                         llvm::cl::init("host")};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc(
          "round-robin, gpipe, 1f1b, interleaved-1f1b or looped-bfs"),
      llvm::cl::init("round-robin")};
  Option<std::string> partitioner{*this, "partitioner",
                                  llvm::cl::desc("rp or roundpipe"),
                                  llvm::cl::init("rp")};
  Option<std::string> dispatch{
      *this, "dispatch",
      llvm::cl::desc("round-robin's pass shift: modulo or rounds "
                     "(include/rp/Analysis/Continuous.h)"),
      llvm::cl::init("modulo")};
  Option<int> passShift{
      *this, "pass-shift",
      llvm::cl::desc("round-robin: this device shift per pass (-1: "
                     "dispatch's)"),
      llvm::cl::init(-1)};
  Option<std::string> stages{*this, "stages",
                             llvm::cl::desc("fwd:A,...;bwd:X,... (DESIGN.md)"),
                             llvm::cl::init("")};
  Option<std::string> measured{
      *this, "measured",
      llvm::cl::desc("measured per-layer times (rp-run --profile)"),
      llvm::cl::init("")};
  Option<RecomputeGrain> recompute{
      *this, "recompute", llvm::cl::desc("recompute grain"),
      llvm::cl::init(RecomputeGrain::stage),
      llvm::cl::values(clEnumValN(RecomputeGrain::stage, "stage", "per stage"),
                       clEnumValN(RecomputeGrain::layer, "layer",
                                  "per layer"))};
  Option<bool> reportMaxSeq{
      *this, "report-max-seq",
      llvm::cl::desc("report the largest sequence length that fits"),
      llvm::cl::init(false)};
  Option<double> budgetGiB{
      *this, "budget-gib",
      llvm::cl::desc("device memory to plan against; 0: the profile's"),
      llvm::cl::init(0)};
};

/// attach-loss, partition, lower-schedule, insert-transfers (weights
/// uploaded every step: the optimizer runs on the host), plan-memory,
/// verify-schedule, autodiff, canonicalize, cse. `beforePartition` adds
/// passes that change what the layers cost (rp-convert-float-type).
void buildTrainPipeline(OpPassManager &pm, const TrainPipelineOptions &options,
                        llvm::function_ref<void(OpPassManager &)>
                            beforePartition = nullptr);

void registerTrainPipeline();

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRAINPIPELINE_H
