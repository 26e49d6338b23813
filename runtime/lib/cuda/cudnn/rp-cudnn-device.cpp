//===- rp-cudnn-device.cpp - cuDNN attention plans for a card, ahead of time
//===//
//
//   rp-cudnn-device capture [--gpu N] -o FILE.json
//       On a GPU: writes cuDNN's device-properties descriptor of GPU N
//       (scripts/cudnn-capture.sh names it after the card).
//   rp-cudnn-device check PLAN.rpplan --device FILE.json [--sm 90 --sms 132]
//       Anywhere cuDNN 9.8+ loads, without a GPU: for every attention and
//       attention_grad call of the plan, the path the card takes
//       (AttentionPath.h) and, for cuDNN, whether cuDNN builds its
//       execution plans from the descriptor (deviceless ahead-of-time
//       compilation). One line per distinct call shape; exit 1 when any
//       call falls back (--allow-fallback: exit 0 and say so).
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"
#include "CudnnLibrary.h"

#include "rp/runtime/AttentionPath.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/kernels/Checks.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

const std::string kSupported = "cuDNN supports it";

int usage() {
  std::cerr << "usage: rp-cudnn-device capture [--gpu N] -o FILE.json\n"
               "       rp-cudnn-device check PLAN.rpplan --device FILE.json "
               "[--sm N --sms N] [--allow-fallback]\n";
  return 1;
}

int capture(int gpu, const std::string &out) {
  Expected<std::string> json = captureCudnnDevice(gpu);
  if (!json) {
    std::cerr << "rp-cudnn-device: " << json.getStatus().getMessage() << "\n";
    return 1;
  }
  // The tools' one atomic writer (FileIO.h): checked writes, never a FIFO,
  // device or link replaced.
  if (Status s = writeFileAtomic(out, *json, "-o"); s.failed()) {
    std::cerr << "rp-cudnn-device: " << s.getMessage() << "\n";
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, gpu);
  std::cout << "rp-cudnn-device: wrote " << out << " (" << prop.name << ", sm_"
            << prop.major * 10 + prop.minor << ", " << prop.multiProcessorCount
            << " SMs; cuDNN " << cudnnVersionString(processCudnn().info.version)
            << ")\n";
  return 0;
}

/// The integer after `"key":` in the descriptor's JSON (cuDNN 9.19 writes
/// deviceVer, 900 for sm_90, and multiProcessorCount); 0 when absent.
int jsonInt(const std::string &json, const std::string &key) {
  size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos)
    return 0;
  at = json.find(':', at);
  return at == std::string::npos ? 0 : std::atoi(json.c_str() + at + 1);
}

TensorRef refOf(const Plan &plan, uint32_t buffer) {
  const BufferDesc &b = plan.buffers.at(buffer);
  // The checks look at shapes and dtypes, and refuse a null tensor; no
  // byte is read (a page-aligned address that is never dereferenced).
  return TensorRef{reinterpret_cast<void *>(uintptr_t(4096)), b.dtype, b.shape};
}

std::string describeShape(const Shape &s) {
  std::string text = "[";
  for (size_t i = 0; i < s.size(); ++i)
    text += (i ? "," : "") + std::to_string(s[i]);
  return text + "]";
}

/// The attention shape of `call` as the cuda dispatch sees it; empty
/// optional with `why` when the host checks refuse it.
bool shapeOf(const Plan &plan, const KernelCallDesc &call, AttentionShape &sh,
             std::string &why) {
  bool backward = call.op == OpKind::attention_grad;
  bool hasMask = call.ints.size() > 1 && call.ints[1] != 0;
  std::vector<TensorRef> in;
  in.reserve(call.inputs.size());
  for (uint32_t b : call.inputs)
    in.push_back(refOf(plan, b));
  std::vector<TensorRef> outs;
  outs.reserve(call.outputs.size());
  for (uint32_t b : call.outputs)
    outs.push_back(refOf(plan, b));
  if (in.size() < size_t(3) + (hasMask ? 1 : 0) + (backward ? 1 : 0) ||
      outs.size() < (backward ? 3u : 1u) || call.floats.empty()) {
    why = "malformed call";
    return false;
  }
  if (kernels::attentionHasSinks(call.ints)) {
    why = "attention sinks (GPT-OSS): cuDNN's SDPA has no sink column (rp's "
          "CUDA-core kernel takes them)";
    return false;
  }
  std::optional<TensorRef> mask;
  if (hasMask)
    mask = in[3];
  kernels::AttentionDims dims;
  kernels::AttentionGradRefs grads{outs[0], outs.size() > 1 ? outs[1] : outs[0],
                                   outs.size() > 2 ? outs[2] : outs[0]};
  const kernels::AttentionExtras extras =
      kernels::attentionExtrasOf(call.ints, call.floats);
  Status s = kernels::checkAttentionArgs(
      in[0], in[1], in[2], mask, call.ints[0] != 0, call.floats[0],
      backward ? in.back() : outs[0], backward ? &grads : nullptr, dims,
      extras);
  if (s.failed()) {
    why = s.getMessage();
    return false;
  }
  sh = AttentionShape{dims.b,
                      dims.h,
                      dims.s,
                      dims.d,
                      dims.hkv,
                      dims.t,
                      dims.dv,
                      {},
                      !mask ? 0 : (mask->dtype == DType::i1 ? 1 : 2),
                      call.ints[0] != 0,
                      call.floats[0],
                      extras.window,
                      extras.softcap};
  std::memcpy(sh.maskStrides, dims.maskStrides, sizeof(sh.maskStrides));
  return true;
}

int check(const std::string &planPath, const std::string &devicePath, int sm,
          int sms, bool allowFallback) {
  Expected<Plan> plan = loadPlan(planPath);
  if (!plan) {
    std::cerr << "rp-cudnn-device: " << plan.getStatus().getMessage() << "\n";
    return 1;
  }
  std::ifstream file(devicePath);
  if (!file) {
    std::cerr << "rp-cudnn-device: cannot read " << devicePath << "\n";
    return 1;
  }
  std::stringstream device;
  device << file.rdbuf();
  if (sm == 0)
    sm = jsonInt(device.str(), "deviceVer") / 10;
  if (sms == 0)
    sms = jsonInt(device.str(), "multiProcessorCount");
  if (sm == 0 || sms == 0) {
    std::cerr << "rp-cudnn-device: " << devicePath
              << " does not name the card's compute capability and SM "
                 "count; give --sm and --sms\n";
    return 1;
  }
  // cuDNN's engines compile at run time and refuse every config when the
  // CUDA driver library cannot be opened at all. Without a driver, the
  // toolkit's stub (SONAME libcuda.so.1, every call an error) lets its
  // support check run; finalizing a plan still needs the real driver.
  std::string driver = "the CUDA driver";
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    driver = "no CUDA driver";
#ifdef RP_CUDA_STUB_LIBRARY
    if (dlopen(RP_CUDA_STUB_LIBRARY, RTLD_NOW | RTLD_GLOBAL))
      driver += ", the toolkit's stub " RP_CUDA_STUB_LIBRARY;
#endif
  }
  const CudnnLibraryInfo &cudnn = processCudnn().info;
  std::cout << "rp-cudnn-device: " << driver << "\n";
  std::cout << "rp-cudnn-device: " << planPath << " on sm_" << sm << " (" << sms
            << " SMs, " << devicePath << "), "
            << (cudnn.loaded ? "cuDNN " + cudnnVersionString(cudnn.version)
                             : "no cuDNN (" + cudnn.where + ")")
            << "\n";
  std::map<std::string, std::string> seen; // call shape -> verdict
  std::string notFinalized; // the first plan build that failed here
  int calls = 0, fallbacks = 0;
  for (const ProgramDesc &program : plan->programs)
    for (const KernelCallDesc &call : program.calls) {
      if (call.op != OpKind::attention && call.op != OpKind::attention_grad)
        continue;
      ++calls;
      bool backward = call.op == OpKind::attention_grad;
      AttentionShape sh{};
      std::string why;
      std::string key =
          std::string(backward ? "attention_grad " : "attention ");
      if (!shapeOf(*plan, call, sh, why)) {
        key += call.loc;
      } else {
        DType dtype = plan->buffers.at(call.inputs[0]).dtype;
        key += std::string(dtypeName(dtype)) + " q" +
               describeShape({sh.b, sh.h, sh.s, sh.d}) + " k" +
               describeShape({sh.b, sh.hkv, sh.t, sh.d}) +
               (sh.causal ? " causal" : "") +
               (sh.window ? " window " + std::to_string(sh.window) : "") +
               (sh.softcap ? " softcap" : "") +
               (sh.maskKind == 1   ? " i1 mask"
                : sh.maskKind == 2 ? " additive mask"
                                   : "");
        if (seen.count(key)) {
          fallbacks += seen[key] != kSupported;
          continue;
        }
        AttentionProblem p;
        p.dtype = dtype;
        p.mask = sh.maskKind == 1   ? AttentionMaskKind::boolean
                 : sh.maskKind == 2 ? AttentionMaskKind::additive
                 : sh.maskKind == 3 ? AttentionMaskKind::segments
                 : sh.causal        ? AttentionMaskKind::causal
                                    : AttentionMaskKind::none;
        p.maskBroadcastsRowsOrKeys =
            sh.maskKind == 2 &&
            (sh.maskStrides[3] != 1 || (sh.maskStrides[2] == 0 && sh.s > 1));
        p.headDim = sh.d;
        p.valueDim = sh.dv;
        p.heads = sh.h;
        p.kvHeads = sh.hkv;
        p.softCap = sh.softcap;
        p.window = sh.causal ? sh.window : 0;
        p.bottomRight = sh.causal && sh.s != sh.t;
        p.backward = backward;
        AttentionChoice c = chooseAttentionPath(p, cudnn, sm);
        if (c.path != AttentionPath::cudnn) {
          why = "CUDA cores: " + c.reason;
        } else {
          DevicelessVerdict d = planCudnnAttentionDeviceless(
              device.str(), sm, sms, dtype, sh, backward);
          why = d.refused;
          if (why.empty() && !d.notFinalized.empty())
            notFinalized = d.notFinalized;
        }
      }
      std::string verdict =
          why.empty() ? kSupported : "falls back (" + why + ")";
      seen[key] = verdict;
      fallbacks += !why.empty();
      std::cout << "  " << key << ": " << verdict << "\n";
    }
  std::cout << "rp-cudnn-device: " << calls << " attention calls, " << fallbacks
            << " falling back to CUDA cores\n";
  if (!notFinalized.empty())
    std::cout << "rp-cudnn-device: execution plans not finalized here (on "
                 "the GPU they are; the engines compile at run time and load "
                 "through the CUDA driver): "
              << notFinalized << "\n";
  return fallbacks && !allowFallback ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  std::string mode = argv[1], out, devicePath, planPath;
  int gpu = 0, sm = 0, sms = 0;
  bool allowFallback = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "-o")
      out = next();
    else if (a == "--gpu")
      gpu = std::atoi(next().c_str());
    else if (a == "--device")
      devicePath = next();
    else if (a == "--sm")
      sm = std::atoi(next().c_str());
    else if (a == "--sms")
      sms = std::atoi(next().c_str());
    else if (a == "--allow-fallback")
      allowFallback = true;
    else if (planPath.empty() && a[0] != '-')
      planPath = a;
    else
      return usage();
  }
  if (mode == "capture" && !out.empty())
    return capture(gpu, out);
  if (mode == "check" && !planPath.empty() && !devicePath.empty())
    return check(planPath, devicePath, sm, sms, allowFallback);
  return usage();
}
