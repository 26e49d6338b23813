//===- KernelCost.h - the work of one plan kernel call ----------*- C++ -*-===//
//
// The FLOPs and bytes of one kernel call of a plan (plan.fbs KernelCall),
// from its op kind, its operands' shapes and element sizes and its integer
// attributes. The one formula the compiler's plan exporter (predicted job
// times) and the runtime's sim device (command durations) both use; turning
// work into time is the hardware model's part (Hardware.h).
//
// Per op: a matmul is 2·M·N·K; attention 2·pairs·(D + Dv) per head (a
// causal mask keeps the lower triangle's pairs; scores are never stored)
// and its gradient 2.5 times that; elementwise and normalization ops a few
// FLOPs per element; every kernel's bytes are what it reads and writes (a
// gather reads the rows it picks, not the table). A reshape is a view: no
// kernel at all.
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_KERNELCOST_H
#define RP_TIMING_KERNELCOST_H

#include "rp/contract/plan_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rp::timing {

/// How many op kinds plan.fbs's OpKind has (flatc's enum and names are
/// the only list).
inline constexpr int kNumKernelOps =
    static_cast<int>(::rp::plan::OpKind::MAX) + 1;
/// The schema's name of op kind `op` ("matmul"), "?" when out of range:
/// the key of its efficiency in a hardware profile.
const char *kernelOpName(uint16_t op);
/// The op kind named `name`, or -1.
int kernelOpIndex(const std::string &name);
/// Whether a call of op kind `op` launches a kernel (a reshape is a view:
/// no launch, no host work issuing one).
bool launchesKernel(uint16_t op);
struct Operand; // below

/// The launches the host issues for one call of op kind `op` with
/// attributes `ints` (plan.fbs's) on `inputs` writing `outputs`, as rp's
/// cuda device makes them (cudaLaunchSites lists every function that
/// launches; cuDNN's attention, where a build has it, makes as many
/// calls as rp's own kernels without sinks): 0 for a reshape (a view),
/// one for most kinds, and several where a call runs more: a matmul's
/// epilogue pass where cuBLASLt does not fuse it (the erf gelu, a kept
/// pre-activation, f64); slice_grad's zeroing and scatter; a copy per
/// concat input; a reduce's chunk pass and fold where the split
/// (rp/contract/ReduceChunks.h) cuts its elements; attention_grad's query
/// and key passes (and its sinks' gradient); norm_grad's row pass and,
/// where it writes the scale's or bias's gradient, their partial sums and
/// total; cross_entropy's rows, partials and total; linear_cross_entropy's
/// logits GEMM and rows per chunk and the total, its gradient's three
/// GEMMs and rows per chunk and, for a 16-bit weight over several chunks,
/// the f32 accumulator's store; gather_grad's bucket sort; the
/// mixture-of-experts calls' helpers (CUTLASS's weight gradient). Each
/// launch costs the device launch_us (HardwareModel::kernelMs) and the
/// host kernel_host_us (HardwareModel::issueMs). Without operands the
/// counts that depend on them take one chunk, one concat input, one
/// reduce pass and no parameter gradients.
unsigned kernelLaunches(uint16_t op, const std::vector<int64_t> &ints,
                        const std::vector<Operand> &inputs,
                        const std::vector<Operand> &outputs);
unsigned kernelLaunches(uint16_t op, const std::vector<int64_t> &ints);

/// One function of rp's cuda device, in runtime/lib/cuda/`file`, that
/// enqueues work on a stream: the kernel launches (`<<<`), memsets, copies
/// and library calls (cuBLAS, cuBLASLt, cuDNN, CUTLASS) its body writes
/// (`sites`), how many of them one call of an op kind in `ops` runs where
/// every optional one runs (`launches`: a launch written once per element
/// type or label width runs once), and the op kinds whose calls run it
/// (space-separated schema names; kNotACall for the executor's own). A
/// function written for several kinds may have a row per kind, their
/// sites summing to its own. kernelLaunches counts from these;
/// rp-contract-tests finds every launch in the cuda sources and fails on
/// one whose function has no row or whose count differs, so a launch
/// added there fails the test until the table (and the count it feeds)
/// says so.
struct CudaLaunchSite {
  const char *file;
  const char *function;
  unsigned sites;
  unsigned launches;
  const char *ops;
};
/// The `ops` of the executor's own work (copies, the per-job error
/// record, graph replays): charged as copies and job_us, not per call.
inline constexpr const char *kNotACall = "(executor)";
const std::vector<CudaLaunchSite> &cudaLaunchSites();
/// `launches` of the first row of `function` (serving op kind `op`, where
/// given); 0 where none is.
unsigned cudaLaunches(const char *function, const char *op = nullptr);
/// Whether `site` serves op kind `op` (a schema name).
bool servesOp(const CudaLaunchSite &site, const char *op);

/// One operand of a call.
struct Operand {
  std::vector<int64_t> shape;
  /// Bytes per element.
  unsigned elementBytes = 4;
  int64_t elements() const;
  int64_t bytes() const { return elements() * elementBytes; }
};

struct KernelWork {
  double flops = 0;
  double bytes = 0;
  /// The kernel launches of the call (kernelLaunches): 0 for calls that
  /// launch nothing (a reshape is a view), each costing launch_us.
  unsigned launches = 1;
  /// The independent GEMMs of a grouped call (a grouped matmul: one per
  /// expert, as many rows each at uniform routing). A GEMM's efficiency
  /// depends on its own size, so the profile's curve is read at
  /// flops / groups: 32 experts' 2,048-row GEMMs run like small matmuls,
  /// not like one matmul of all their rows.
  double groups = 1;
};

/// The work of a call of op kind `op` (plan.fbs numbering) on `inputs`,
/// writing `outputs`, with integer attributes `ints`.
KernelWork kernelWork(uint16_t op, const std::vector<Operand> &inputs,
                      const std::vector<Operand> &outputs,
                      const std::vector<int64_t> &ints);

} // namespace rp::timing

#endif // RP_TIMING_KERNELCOST_H
