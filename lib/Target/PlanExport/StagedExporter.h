//===- StagedExporter.h - a pipeline schedule into a staged plan -*- C++
//-*-===//
//
// The exporter behind PlanWriter::runStaged: StagedJobs.cpp reads the
// schedule and maps its stage jobs to the graph's layers and buffers;
// StagedExport.cpp writes every command as plan jobs.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_TARGET_PLANEXPORT_STAGEDEXPORTER_H
#define RP_LIB_TARGET_PLANEXPORT_STAGEDEXPORTER_H

#include "PlanWriter.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/timing/Hardware.h"
#include "rp/timing/Measured.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <set>

namespace mlir::rp {

/// The bytes of one element of a plan buffer's dtype: what the exporter's
/// read-backs of the written plan (PredictTimes.cpp, ArenaPeak.cpp) size
/// buffers with.
inline unsigned planDTypeBytes(pf::DType t) {
  switch (t) {
  case pf::DType::f64:
  case pf::DType::i64:
    return 8;
  case pf::DType::f32:
  case pf::DType::i32:
    return 4;
  case pf::DType::f16:
  case pf::DType::bf16:
    return 2;
  case pf::DType::i1:
  case pf::DType::u8:
    return 1;
  }
  return 4;
}

/// Fills the predicted start and duration of every job of the staged plan
/// in `bytes` (written with them stored): each run job's program and each
/// copy job's bytes timed on `hw` by rp/timing (as the sim device times
/// them), laid out by the timing core. False, with `error`, when the jobs
/// cannot all run (a wait no job records, a cycle).
/// With `measured`, a program of layers the file times takes their
/// measured time instead (rp/timing/Measured.h, as the sim device's
/// --measured does).
bool predictJobTimes(std::vector<uint8_t> &bytes,
                     const ::rp::timing::HardwareModel &hw, std::string &error,
                     const ::rp::timing::MeasuredTimes *measured = nullptr);

/// Each device's peak of one pass, `passPeaks` (the memory model's), raised
/// to the arena the runtime packs the staged plan in `bytes` into
/// (rp/contract/ArenaPacking.h) where that arena is over it by more than
/// its alignment padding (ArenaPeak.cpp); with `renamed` devices, the
/// arena every device allocates when the runtime renames them.
std::vector<int64_t> peaksCoveringArenas(const std::vector<uint8_t> &bytes,
                                         ArrayRef<int64_t> passPeaks,
                                         bool renamed);

/// Values keyed by their opaque pointer (op result or block argument), as
/// the exporter's buffer maps are.
inline Operation *valueKey(Value v) {
  return reinterpret_cast<Operation *>(v.getAsOpaquePointer());
}

class StagedExporter {
public:
  StagedExporter(PlanWriter &w, func::FuncOp main, ScheduleOp schedule)
      : w(w), main(main), schedule(schedule) {}
  LogicalResult run(std::vector<uint8_t> &bytes);

private:
  enum class Kind {
    compute,
    weights,
    activationIn,
    gradientIn,
    activationOut,
    gradientOut,
    weightGrads,
    optimizer
  };
  struct Cmd {
    Kind kind;
    int job = -1, mb = -1;
    unsigned device = 0, chunk = 0;
    /// Activation and gradient copies: the layer whose input they carry.
    int boundary = -1;
    SmallVector<unsigned> waits;
    double ms = 0; ///< the schedule's estimate
    /// Token slices: a copy of kept keys and values (rp.kept_keys).
    bool keys = false;
    /// Token slices: a kept-keys upload of the earlier slices [keptFirst,
    /// keptEnd) only (rp.kept_slices); -1: all of them.
    int keptFirst = -1, keptEnd = -1;
  };
  struct StageJob {
    LayerRole role;
    unsigned begin = 0, end = 0, device = 0, weightSet = 0;
    SmallVector<LayerOp> layers;
    /// Non-weight values from outside the job, in first-use order.
    llvm::SetVector<Value> outside;
    /// Results other stages (or the loss outputs) read, per microbatch.
    llvm::SetVector<Value> handedOn;
    /// Weight gradients, accumulated over the microbatches.
    SmallVector<Value> grads;
    int firstMb = -1, lastMb = -1;
    /// Token slices: the tail job whose forward sweep this job is (its
    /// forward-only commands, given a job of their own here so that their
    /// inputs and outputs have their own buffers), or -1.
    int sweepOf = -1;
    /// Token slices: the slice's own keys and values its layers yield
    /// (downloaded into the kept host rows by the rp.kept_keys copies).
    SmallVector<Value> keptOut;
  };
  /// Token slices: one slice function's binding of layers to stage jobs.
  struct SliceView {
    func::FuncOp fn;
    int64_t offset = 0, size = 0;
    std::vector<StageJob> jobs;
    llvm::DenseMap<Value, unsigned> producer;
    llvm::DenseMap<Operation *, unsigned> layerJob;
  };

  /// Buffers by value (its opaque pointer) and a number: weights by weight
  /// set, inputs and outputs by stage job and slot.
  using BufferMap = std::map<std::pair<Operation *, unsigned>, uint32_t>;

  LogicalResult readCommands();
  /// Token slices (StagedSlices.cpp): finds the slice functions and binds
  /// each one's layers to the stage jobs (a view per slice).
  LogicalResult bindSlices();
  LogicalResult classifySlice(SliceView &view, func::FuncOp whole);
  /// Makes the view of microbatch `mb`'s slice current (jobs, producer,
  /// layerJob); nothing without token slices.
  void selectSlice(int mb);
  /// The value of @main that a slice function's value stands for (its
  /// parameter, prologue result, input, loss row or weight gradient), or
  /// `v` itself.
  Value canonical(Value v) const {
    auto it = canon.find(v);
    return it == canon.end() ? v : it->second;
  }
  Operation *gradKey(Value v) const { return valueKey(canonical(v)); }
  /// Appends the copies that bring `v` of microbatch `mb` from the host to
  /// `dst`: a slice's columns of a global input, the kept prefix of keys
  /// or values, or the host row of a value handed between jobs.
  /// A kept prefix comes whole, or as the rows of slices [keptFirst,
  /// keptEnd) of the sequence where keptFirst >= 0.
  void hostCopies(Value v, unsigned mb, uint32_t dst,
                  std::vector<fb::Offset<pf::Copy>> &out, int keptFirst = -1,
                  int keptEnd = -1);
  /// The host rows of kept keys or values `name`, [M * B, H, S, d].
  uint32_t keptBuffer(const std::string &name, Type slicedType);
  /// The copies of rows [first, first + n) of sequence `m`'s kept keys or
  /// values of type `t` (`n` rows: the device buffer's) between host
  /// buffer `host` and device buffer `device`: one per batch row and head.
  /// With `rows` >= 0, only rows [first + from, first + from + rows), into
  /// the same rows of the device buffer.
  void keptRowCopies(RankedTensorType t, uint32_t host, uint32_t device,
                     unsigned m, int64_t first, bool toHost,
                     std::vector<fb::Offset<pf::Copy>> &out, int64_t from = 0,
                     int64_t rows = -1);
  /// An rp.kept_keys download: the slice's own keys and values into rows
  /// [o, o + s) of the kept host buffers.
  unsigned emitKeptDownload(unsigned index);
  /// The tail's forward sweep: the ops of `l`'s body that its own keys and
  /// values depend on.
  FailureOr<uint32_t> sweepProgram(unsigned job, unsigned mb, LayerOp l);
  /// A slice's key gradients in a program of stage job `job`: the body
  /// argument `arg` of a `grad:keys` input reads rows [o, o + s) of the
  /// job's accumulator (`prefix`); a `grad:keys` result `r` starts or adds
  /// to rows [0, o) of it (`extra`).
  uint32_t keyGradInput(Value v, unsigned job, unsigned mb,
                        std::vector<fb::Offset<pf::KernelCall>> &prefix);
  uint32_t keyGradOutput(Value r, unsigned job, unsigned mb,
                         std::vector<fb::Offset<pf::KernelCall>> &extra);
  uint32_t keyGradAccumulator(Value v, unsigned job, bool pad);
  /// The row of host value `v` (canonical) that microbatch `mb` uses.
  unsigned rowOf(Value v, unsigned mb) const {
    return rowsOf(v) == microbatches ? mb : mb / slices;
  }
  /// The offset of microbatch `mb`'s slice.
  int64_t sliceOffset(unsigned mb) const {
    return slices ? views[mb % slices].offset : 0;
  }
  LogicalResult classifyOps();
  /// What a function-level op of @main or of a slice function is. A
  /// constant is added as a weight, a layer or the return skipped (both
  /// `taken`); a parameter is left to the caller (@main adds it, a slice
  /// stands it for @main's); `prologue`: it computes from weights only.
  enum class TopLevel { taken, param, prologue, other };
  FailureOr<TopLevel> classifyTopLevel(Operation &op);
  /// Calls `visit` with each function-level op of `fn` that is not
  /// `taken`, in order, and its kind; stops at the first failure, of the
  /// classification or of `visit`. @main's and a slice's walks share it.
  LogicalResult forEachTopLevel(
      func::FuncOp fn,
      llvm::function_ref<LogicalResult(Operation &, TopLevel)> visit);
  LogicalResult bindLayers();
  void analyzeJobs();
  /// The stage job that computes `v` in microbatch `mb`: its layer's job,
  /// or for a tail run as several jobs (alternate microbatches), the one
  /// that runs `mb`.
  unsigned producerOf(Value v, unsigned mb) const;
  /// A layer run by several stage jobs (a tail as two jobs, on two
  /// devices) has its program's intermediates and constants per job: while
  /// a guard lives, the writer's buffers of the values defined in `l`'s
  /// body are `job`'s.
  struct JobBodyBuffers {
    StagedExporter &e;
    LayerOp l;
    unsigned job;
    bool active;
    JobBodyBuffers(StagedExporter &e, LayerOp l, unsigned job);
    ~JobBodyBuffers();
  };
  /// Whether `op` is one of stage job `job`'s layers.
  bool inJob(unsigned job, Operation *op) const;
  /// The host gradients of every weight: one download per value, or, for
  /// the tail's weights when the tail runs as several jobs, one per job,
  /// summed in job order into one host buffer by calls that open the
  /// epilogue (`sums`). Sets the writer's overrides for the host side.
  void bindHostGradients(std::vector<fb::Offset<pf::KernelCall>> &sums);
  LogicalResult emitCompute(unsigned index);
  void emitWeights(unsigned index);
  void emitInputs(unsigned index);
  /// `index`: the schedule's download command, or -1 for one the schedule
  /// does not list (it carries every value not downloaded yet).
  unsigned emitDownload(const Cmd &c, int index, ArrayRef<unsigned> waits,
                        const std::string &text);
  /// Which of the (job, mb) downloads carries each value it hands on.
  void assignCarriers(unsigned job, unsigned mb);
  void emitWeightGrads(unsigned index);
  /// The program that starts (`first`) or adds to the accumulators of the
  /// weight gradients `grads` of one layer of stage job `job`.
  FailureOr<uint32_t> accumulateProgram(unsigned job, LayerOp l,
                                        ArrayRef<Value> grads, bool first);
  /// Appends a job; returns the event it records.
  unsigned addJob(const Cmd &c, pf::Queue queue,
                  std::optional<uint32_t> program,
                  ArrayRef<fb::Offset<pf::Copy>> copies,
                  ArrayRef<unsigned> waits, const std::string &label,
                  bool record = true);
  std::string label(const Cmd &c) const;
  /// The events of the commands `c` waits for.
  SmallVector<unsigned> waitsOf(const Cmd &c) const {
    SmallVector<unsigned> waits;
    for (unsigned x : c.waits)
      waits.push_back(eventOf[x]);
    return waits;
  }

  bool isWeight(Value v) const { return weights.contains(v); }
  bool isGradientValue(Value v) const {
    auto l = v.getDefiningOp<LayerOp>();
    return l && l.getRole() != LayerRole::forward;
  }
  /// Round-robin double buffers by the job's own count of microbatches:
  /// a tail run as T jobs runs every T-th one.
  unsigned slotOf(unsigned job, unsigned mb) const {
    if (!roundRobin)
      return mb;
    return (jobs[job].role == LayerRole::tail ? mb / tailJobs : mb) % 2;
  }
  unsigned slotKey(unsigned job, unsigned mb) const {
    return job * microbatches + slotOf(job, mb);
  }
  /// The schedule's number of stage job `job` (a sweep's is its tail's).
  int stageOf(int job) const {
    return job >= 0 && size_t(job) < jobs.size() && jobs[job].sweepOf >= 0
               ? jobs[job].sweepOf
               : job;
  }
  /// Rows of a host value handed between jobs: one per microbatch, or with
  /// token slices one per sequence for a slice function's values (the loss
  /// rows, @main's, stay one per microbatch, that is per slice).
  unsigned rowsOf(Value v) const {
    func::FuncOp whole = main;
    return slices && v.getParentRegion() != &whole.getBody() ? sequences
                                                             : microbatches;
  }
  uint32_t hostRows(Value v);
  int64_t rowBytes(Value v, uint32_t buffer) const;
  uint32_t cached(BufferMap &map, Value v, unsigned key,
                  const std::string &name, unsigned device);
  uint32_t weightBuffer(Value v, unsigned job);
  uint32_t inputBuffer(Value v, unsigned job, unsigned mb);
  uint32_t outputBuffer(Value v, unsigned job, unsigned mb);
  /// The fixed stage job whose forward kept `v` for this backward.
  std::optional<unsigned> directSource(unsigned job, Value v) const;
  fb::Offset<pf::Copy> copy(uint32_t src, int64_t srcOffset, uint32_t dst,
                            int64_t dstOffset, int64_t bytes) {
    return pf::CreateCopy(w.fbb, src, srcOffset, dst, dstOffset, bytes);
  }

  PlanWriter &w;
  func::FuncOp main;
  ScheduleOp schedule;
  bool roundRobin = true;
  unsigned devices = 1, microbatches = 1, events = 0;
  std::vector<Cmd> cmds;
  std::vector<StageJob> jobs;
  std::vector<int> eventOf;
  llvm::DenseSet<Value> weights;
  llvm::DenseMap<Value, unsigned> producer;
  llvm::DenseMap<Operation *, unsigned> layerJob;
  SmallVector<Operation *> prologue, epilogue;
  llvm::MapVector<Value, uint32_t> hostBuffer;
  BufferMap weightBuffers, inBuffers, outBuffers;
  /// Per (weight gradient, stage job): a tail run as two jobs has its
  /// gradients and accumulators on both.
  std::map<std::pair<Operation *, unsigned>, uint32_t> accBuffer, gradBuffer;
  /// Per stage job: its buffers of the values defined in the bodies of
  /// layers it shares with other jobs (JobBodyBuffers).
  std::map<unsigned, llvm::DenseMap<Value, uint32_t>> jobBodyBuffers;
  /// Per microbatch: the tail job that runs it (-1 before it is known).
  std::vector<int> tailOfMb;
  /// The stage jobs the tail runs as (#rp.partition's tail_jobs).
  unsigned tailJobs = 1;
  /// Per (stage job, microbatch): the event of its first download, and the
  /// values not moved yet.
  std::map<std::pair<unsigned, unsigned>, unsigned> firstDownload;
  std::map<std::pair<unsigned, unsigned>, llvm::SetVector<Value>> toUpload;
  /// Per device: the event after each compute's downloads, for the
  /// double-buffer wait of downloads the schedule does not list.
  std::vector<std::vector<int>> extraDownloads;
  std::map<std::pair<unsigned, unsigned>, uint32_t> programs;
  /// Per (layer, slot) of a backward split after its recompute (`programs`
  /// holds the recompute): the program of the rest.
  std::map<std::pair<unsigned, unsigned>, uint32_t> recomputeRest;
  /// Per (layer, first microbatch or not, stage job): its accumulate
  /// program.
  std::map<std::tuple<unsigned, bool, unsigned>, uint32_t> accumulatePrograms;
  /// Weight gradients downloaded as their layer's backward finished in
  /// the job's last microbatch (the set's GRAD download skips them).
  std::set<std::pair<Operation *, unsigned>> downloadedEarly;
  std::map<unsigned, unsigned> setTurn, upCount;
  std::map<unsigned, unsigned> setFirstForward;
  std::map<unsigned, llvm::SetVector<Value>> setWeights;
  /// Per (weight gradient, stage job): its host buffer, in creation order.
  llvm::MapVector<std::pair<Operation *, unsigned>, uint32_t> gradHost;
  llvm::DenseMap<Operation *, unsigned> layerIndex;
  std::set<std::pair<unsigned, unsigned>> hasDownload;
  /// Per (stage job, microbatch): its download commands in queue order;
  /// per (value, microbatch): the command that carries it.
  std::map<std::pair<unsigned, unsigned>, std::vector<unsigned>> downloadsOf;
  std::map<std::pair<Operation *, unsigned>, int> carrier;
  std::vector<std::vector<unsigned>> computeEvents;

  /// Token slices (rp.token_slices): K slices per sequence, M sequences
  /// (K * M microbatches); 0 without.
  unsigned slices = 0, sequences = 1;
  int64_t sequenceLength = 0;
  std::vector<SliceView> views;
  int currentSlice = -1;
  llvm::DenseMap<Value, Value> canon;
  /// Slice functions' kept keys and values (`keys:L`, `values:L`) as
  /// arguments (the prefix) and results (the slice's own), and their
  /// gradients (`grad:keys:L`), by the kept buffer's name.
  llvm::DenseMap<Value, std::string> keptArgs, keptResults, keyGradArgs,
      keyGradResults;
  std::map<std::string, uint32_t> keptHost;
  /// Per (kept name, stage job): the key gradient accumulator and the
  /// padded buffer a slice's prefix gradient is added through.
  std::map<std::pair<std::string, unsigned>, uint32_t> keyGradAcc, keyGradPad;
  llvm::DenseMap<Value, uint32_t> keyGradBuffers;
};

} // namespace mlir::rp

#endif // RP_LIB_TARGET_PLANEXPORT_STAGEDEXPORTER_H
