//===- Hardware.h - a hardware profile and how long work takes --*- C++ -*-===//
//
// A hardware profile (docs/hardware-profiles.md): peak rates, efficiencies,
// device memory, the host links and the host's optimizer rate, and the
// functions that turn work into milliseconds. The one parser of profiles:
// the compiler (through its adapter, lib/Analysis/HardwareProfile.cpp,
// which turns errors into diagnostics) and the runtime's sim device read
// profiles here, and the shipped ones (profiles/*.json) are compiled in
// here, once.
//
// Per op kind efficiency (the optional "op_efficiency" object) is what
// calibration edits: for each op kind (plan.fbs names: "matmul",
// "attention", ...) a share of peak compute and/or of memory bandwidth,
// either one number or a curve of [work, share] points over the call's
// FLOPs (compute) or bytes (memory), interpolated linearly in log(work)
// and held flat beyond its ends. Op kinds it leaves out use
// compute_efficiency and memory_efficiency.
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_HARDWARE_H
#define RP_TIMING_HARDWARE_H

#include "rp/timing/KernelCost.h"
#include "rp/timing/Timeline.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rp::timing {

/// A share of peak as a function of a call's work: one point is a
/// constant.
struct Curve {
  std::vector<std::pair<double, double>> points; ///< sorted by work
  double at(double work) const;
};

struct OpEfficiency {
  std::optional<Curve> compute, memory;
};

/// Bytes the host streams per trainable parameter for one update: the
/// downloaded f16 gradient made f32 (read 2, write 4), AdamW (reads the
/// f32 master weight, gradient and both moments, writes all but the
/// gradient: 28) and the master weight copied to the f16 upload copy
/// (read 4, write 2). AdamW alone was 28; the two conversions are as real.
inline constexpr double kAdamWBytesPerParam = 28;
inline constexpr double kOptimizerBytesPerParam = 6 + kAdamWBytesPerParam + 6;

/// The host optimizer's rate `bench/adamw_vs_torch.py` measured on the
/// development machine (the `host` profile), GB/s: what a profile says
/// when it has no measurement of its own ("optimizer_gbps" absent).
inline constexpr double kMeasuredOptimizerGBps = 58;

/// The CPUs this process may run on (its affinity mask; the machine's
/// count where that cannot be read): a profile's "host_cores": "machine".
unsigned machineCores();

/// How each op kind is implemented on a profile's card (its "kernels"
/// field): a name, and an achieved rate that replaces the peak x
/// efficiency estimate for that op kind only.
struct KernelImpl {
  std::string name;
  /// Achieved TFLOP/s of the implementation (0: the profile's estimate).
  double tflops = 0;
};

struct HardwareModel {
  std::string name;
  /// Peak dense TFLOP/s by element type name (f32, bf16, ...).
  std::map<std::string, double> tflops;
  double computeEfficiency = 1, memoryGBps = 0, memoryEfficiency = 1;
  /// Device memory; 0 when the profile does not say (the sim needs none).
  double memoryGiB = 0;
  double h2dGBps = 0, d2hGBps = 0;
  /// GPUs that share one uplink (a PCIe switch or root port): their
  /// copies contend.
  unsigned gpusPerLink = 1;
  /// The uplink's bandwidth per direction; 0: one GPU link's (the GPUs
  /// behind it share one link, the model before the host model).
  double uplinkGBps = 0;
  /// Host DRAM bandwidth, shared by every copy and the host's streaming
  /// work; 0: unlimited.
  double hostDramGBps = 0;
  /// Whether the host buffers copies read and write are pinned; pageable
  /// copies run at pageableGBps and move their bytes through DRAM 3 times.
  bool pinned = true;
  double pageableGBps = 0;
  double launchUs = 0;
  /// The host's hand-off to a job waiting on an event another queue
  /// records (Graph::handoffMs): the job starts this long after the event.
  double jobUs = 0;
  /// The host's work per MoE layer each time a program runs its routing
  /// (moe_route: a forward or recompute; moe_route_grad: a backward), with
  /// the GPU waiting for it: a framework's expert loop that reads the
  /// per-expert token counts back (a device sync) and launches each
  /// expert's kernels from the host (RoundPipe's sort-by-expert preset).
  /// rp's own runtime does neither (its grouped kernels take the counts
  /// on the device): 0 in every shipped profile; bench/paper.py's
  /// held-out model of RoundPipe sets it (docs/sim-roundpipe.md).
  double moeHostUs = 0;
  /// The host's work issuing each kernel call, run beside the device's
  /// kernels (Task::issueMs): a framework's eager dispatch (Python, its
  /// op dispatcher, autograd) before each launch, so a program takes the
  /// larger of its kernels' time and its calls x this, and on shared
  /// interpreters every device's issue work shares them. rp's executors
  /// charge their per-call cost serially instead (launch_us: the host
  /// backend's thread runs each kernel itself, measured by
  /// bench/launch_cost.py; cuda's is an estimate): 0 in every shipped
  /// profile; the model of RoundPipe sets it (bench/layer_host.py).
  double kernelHostUs = 0;
  /// Host threads that run that dispatch work at once, every GPU's
  /// together (HostModel::interpreters): 1 for a framework whose device
  /// threads share one Python interpreter (RoundPipe: the GIL), 0 for one
  /// per GPU (rp's executor). Only the model of RoundPipe sets it.
  unsigned hostInterpreters = 0;
  /// The host's CPU cores that the devices' compute and the host's own
  /// work (prologue, epilogue, optimizer) share (HostModel::cores): set
  /// only where the devices are host threads (a host profile: the cores
  /// of the machine rp runs on, "host_cores": "machine"); 0: each
  /// device and host thread a processor of its own (GPU profiles). A
  /// fraction: the share of the machine a run gets beside other work.
  double hostCores = 0;
  /// The host's streaming rate for its optimizer and host programs; 0
  /// leaves them untimed.
  double optimizerGBps = 0;
  /// By op kind name.
  std::map<std::string, OpEfficiency> opEfficiency;
  /// By op kind name, the implementation the plan's backend runs.
  std::map<std::string, KernelImpl> kernels;

  /// The memory bandwidth a kernel reaches.
  double bytesPerSecond() const { return memoryGBps * 1e9 * memoryEfficiency; }
  double memoryBytes() const { return memoryGiB * double(1ull << 30); }

  /// One kernel call: launch_us for each of its launches
  /// (KernelWork::launches, as the cuda device makes them) plus the
  /// larger of its FLOPs at the
  /// element type's rate (`dtype`: a plan dtype name; integer types and
  /// types without a rate run at f32's) and its bytes at the memory
  /// bandwidth, each at the op kind's efficiency for that much work.
  double kernelMs(uint16_t op, const KernelWork &work,
                  const std::string &dtype) const;
  /// A copy of `bytes` over the host link, alone on it.
  double copyMs(double bytes, bool toDevice) const;
  /// The host side of copies, for the timing core (Timeline.h).
  HostModel hostModel() const;
  /// A copy within one device's memory (read and write).
  double deviceCopyMs(double bytes) const;
  /// The host's dispatch work a call of op kind `op` stands for beyond its
  /// launch (moeHostUs for a MoE routing or its gradient), charged on top
  /// of the program's kernel time even where measured times replace it.
  double hostDispatchMs(uint16_t op) const;
  /// The host's issue work for a program of `calls` kernel launches
  /// (kernelHostUs each; kernelLaunches), and that program's time given
  /// its kernels' time
  /// and its dispatch work: the dispatch, then the larger of the kernels
  /// and the issue work (the device cannot run ahead of its host).
  double issueMs(size_t calls) const {
    return double(calls) * kernelHostUs * 1e-3;
  }
  double programMs(double kernelsMs, double dispatchMs, size_t calls) const {
    return dispatchMs + std::max(kernelsMs, issueMs(calls));
  }
  /// The host optimizer step over `params` trainable parameters.
  double optimizerMs(double params) const;
  /// Host work that streams `bytes` through host memory.
  double hostMs(double bytes) const;
};

/// A call's element type for its rate: its first floating-point operand's.
struct CallOperands {
  std::vector<Operand> inputs, outputs;
  std::string dtype = "f32";
};

/// The time of one kernel call: kernelWork, then HardwareModel::kernelMs.
double callMs(const HardwareModel &hw, uint16_t op, const CallOperands &call,
              const std::vector<int64_t> &ints);

/// Parses profile JSON; on failure returns std::nullopt with `error` saying
/// what and where (`source` names the file and is the profile's name when
/// it has none). Unknown fields are errors; "memory_gib" is one only when
/// `needMemory` (a compile plans memory with it; the sim needs none).
std::optional<HardwareModel> parseHardwareModel(const std::string &text,
                                                const std::string &source,
                                                std::string &error,
                                                bool needMemory = false);

/// The profile every tool uses when none is named: the compiler's --hw
/// (rp-compile, rp-opt's pipelines), rp-run --profile-hw, and the sim when
/// neither the plan nor --hw names one. One default, so that a plan
/// compiled and timed without --hw is compiled and timed for one machine.
inline constexpr const char *kDefaultHardware = "host";

/// The profiles shipped in profiles/ (compiled in), sorted.
std::vector<std::string> shippedHardwareNames();

/// Whether `nameOrPath` names a profile file rather than a shipped profile:
/// it contains '/' or ends in ".json".
bool namesProfileFile(const std::string &nameOrPath);

/// The JSON text of a shipped profile by name, or of a file when
/// `nameOrPath` contains '/' or ends in ".json"; `source` is set to what
/// names it in messages. False with `error` when there is no such profile
/// or the file cannot be read.
bool readHardwareProfile(const std::string &nameOrPath, std::string &text,
                         std::string &source, std::string &error);

/// readHardwareProfile, then parseHardwareModel.
std::optional<HardwareModel> loadHardwareModel(const std::string &nameOrPath,
                                               std::string &error,
                                               bool needMemory = false);

} // namespace rp::timing

#endif // RP_TIMING_HARDWARE_H
