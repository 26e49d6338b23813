//===- CudnnAttention.cpp - attention through cuDNN's fused SDPA ----------===//
//
// The frontend is used with its dynamic loading (every cuDNN call through
// dlsym on the handle CudnnLibrary.cpp opened), so this library has no
// link-time dependency on libcudnn.
//
//===----------------------------------------------------------------------===//

#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>

#include "CudnnAttention.h"
#include "CudnnLibrary.h"

#include "../CudaDispatch.h"

#include <array>
#include <cstring>
#include <map>
#include <mutex>

// The frontend's dynamic loading looks every cuDNN symbol up in this
// handle; set from processCudnn() before the first frontend call.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend

namespace fe = cudnn_frontend;

using namespace rp::runtime;
using namespace rp::runtime::cuda;

namespace {

// The tensors' uids in every graph.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kDO, kDQ, kDK, kDV };

/// Everything a graph depends on: the kind, the dtype, the shapes, the
/// mask's kind and layout, the scale's bits, and the GPU model.
using Key = std::array<int64_t, 20>;

Key keyOf(bool backward, DType dtype, const AttentionShape &sh, int sm,
          int smCount) {
  float scale = static_cast<float>(sh.scale);
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof(bits));
  // A soft-capped call never reaches cuDNN (AttentionPath.h), so the
  // cap's bits are not part of the key.
  return {backward ? 1 : 0,
          static_cast<int64_t>(dtype),
          sh.b,
          sh.h,
          sh.hkv,
          sh.s,
          sh.t,
          sh.d,
          sh.dv,
          sh.causal ? 1 : 0,
          sh.maskKind,
          sh.maskKind ? sh.maskStrides[0] : 0,
          sh.maskKind ? sh.maskStrides[1] : 0,
          sh.maskKind ? sh.maskStrides[2] : 0,
          sh.maskKind ? sh.maskStrides[3] : 0,
          int64_t(bits),
          sm,
          smCount,
          sh.window,
          0};
}

/// rp's causal mask and sliding window as cuDNN's diagonal band: causal is
/// aligned bottom-right (the queries are the last s of t positions; with
/// s == t that is the top-left causal mask), and the window is cuDNN's
/// left bound (it keeps key j when j + window > query position, the keys
/// in (p - window, p]).
template <typename Options>
void setDiagonalBand(Options &options, const AttentionShape &sh) {
  if (!sh.causal)
    return;
  if (sh.s == sh.t)
    options.set_causal_mask(true);
  else
    options.set_causal_mask_bottom_right(true);
  if (sh.window > 0)
    options.set_sliding_window_length(static_cast<int>(sh.window));
}

/// Row-major strides of `dims`.
std::vector<int64_t> rowMajor(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

std::shared_ptr<fe::graph::Tensor_attributes>
tensorOf(fe::graph::Graph &g, const char *name, int64_t uid,
         const std::vector<int64_t> &dims) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(dims)
                      .set_stride(rowMajor(dims)));
}

/// The additive mask as cuDNN's bias: [B or 1, H or 1, S, T], a broadcast
/// axis (stride 0) as a dimension of 1.
std::shared_ptr<fe::graph::Tensor_attributes> biasOf(fe::graph::Graph &g,
                                                     const AttentionShape &sh) {
  const int64_t *st = sh.maskStrides;
  std::vector<int64_t> dims{st[0] ? sh.b : 1, st[1] ? sh.h : 1, sh.s, sh.t};
  std::vector<int64_t> strides{st[0] ? st[0] : sh.h * sh.s * sh.t,
                               st[1] ? st[1] : sh.s * sh.t, st[2], st[3]};
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("bias")
                      .set_uid(kBias)
                      .set_dim(dims)
                      .set_stride(strides));
}

/// Declares the forward (with the row statistics when `stats`) or the
/// backward graph of `sh` on `g`.
void declare(fe::graph::Graph &g, bool backward, bool stats, DType dtype,
             const AttentionShape &sh) {
  g.set_io_data_type(dtype == DType::bf16 ? fe::DataType_t::BFLOAT16
                                          : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = tensorOf(g, "q", kQ, {sh.b, sh.h, sh.s, sh.d});
  auto k = tensorOf(g, "k", kK, {sh.b, sh.hkv, sh.t, sh.d});
  auto v = tensorOf(g, "v", kV, {sh.b, sh.hkv, sh.t, sh.dv});
  const float scale = static_cast<float>(sh.scale);
  if (!backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_generate_stats(stats)
                       .set_attn_scale(scale);
    setDiagonalBand(options, sh);
    if (sh.maskKind == 2)
      options.set_bias(biasOf(g, sh));
    auto [o, st] = g.sdpa(q, k, v, options);
    o->set_output(true)
        .set_uid(kO)
        .set_dim({sh.b, sh.h, sh.s, sh.dv})
        .set_stride(rowMajor({sh.b, sh.h, sh.s, sh.dv}));
    if (stats)
      st->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
    return;
  }
  auto o = tensorOf(g, "o", kO, {sh.b, sh.h, sh.s, sh.dv});
  auto dO = tensorOf(g, "do", kDO, {sh.b, sh.h, sh.s, sh.dv});
  auto st = tensorOf(g, "stats", kStats, {sh.b, sh.h, sh.s, 1});
  st->set_data_type(fe::DataType_t::FLOAT);
  // The deterministic algorithm: no float atomics in dq's sum, so a run
  // repeats bit for bit (rp's contract, DESIGN.md "GPU kernels").
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_grad")
                     .set_attn_scale(scale)
                     .set_deterministic_algorithm(true);
  setDiagonalBand(options, sh);
  if (sh.maskKind == 2)
    options.set_bias(biasOf(g, sh));
  auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dO, st, options);
  dq->set_output(true)
      .set_uid(kDQ)
      .set_dim({sh.b, sh.h, sh.s, sh.d})
      .set_stride(rowMajor({sh.b, sh.h, sh.s, sh.d}));
  dk->set_output(true)
      .set_uid(kDK)
      .set_dim({sh.b, sh.hkv, sh.t, sh.d})
      .set_stride(rowMajor({sh.b, sh.hkv, sh.t, sh.d}));
  dv->set_output(true)
      .set_uid(kDV)
      .set_dim({sh.b, sh.hkv, sh.t, sh.dv})
      .set_stride(rowMajor({sh.b, sh.hkv, sh.t, sh.dv}));
}

/// The plan index chosen for each key, shared by every device of the
/// process (the same engine on each: bitwise equal results).
std::mutex planLock;
std::map<Key, int64_t> &chosenPlans() {
  static std::map<Key, int64_t> plans;
  return plans;
}

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan = -1;
  int64_t workspace = 0;
  std::string refused; ///< cuDNN's reason; empty when built.
};

} // namespace

struct CudnnAttention::State {
  int gpu;
  cudaStream_t stream;
  int sm, smCount;
  cudnnHandle_t handle = nullptr;
  std::string handleError;
  std::map<Key, Built> graphs;

  /// The graph of `key`, built on first use.
  Built &graph(const Key &key, bool backward, bool stats, DType dtype,
               const AttentionShape &sh) {
    auto found = graphs.find(key);
    if (found != graphs.end())
      return found->second;
    Built &b = graphs[key];
    b.graph = std::make_shared<fe::graph::Graph>();
    // The GPU model named, not read from the current device: the key's.
    b.graph->set_sm_version(sm).set_sm_count(smCount);
    try {
      declare(*b.graph, backward, stats, dtype, sh);
      auto fail = [&](const char *stage, fe::error_t e) {
        b.refused = std::string(stage) + ": " + e.get_message();
      };
      fe::error_t e = b.graph->validate();
      if (e.is_bad())
        return fail("validate", e), b;
      if ((e = b.graph->build_operation_graph(handle)).is_bad())
        return fail("build_operation_graph", e), b;
      if ((e = b.graph->create_execution_plans({fe::HeurMode_t::A})).is_bad())
        return fail("create_execution_plans", e), b;
      if ((e = b.graph->check_support()).is_bad())
        return fail("check_support", e), b;
      std::lock_guard<std::mutex> hold(planLock);
      auto chosen = chosenPlans().find(key);
      if (chosen != chosenPlans().end()) {
        // Another device chose: build that plan or refuse (a different
        // engine here would break bitwise equality across devices).
        if ((e = b.graph->build_plan_at_index(chosen->second)).is_bad())
          return fail("build_plan_at_index", e), b;
        b.plan = chosen->second;
      } else {
        int64_t count = b.graph->get_execution_plan_count();
        std::string why = "no execution plan";
        for (int64_t i = 0; i < count && b.plan < 0; ++i) {
          if ((e = b.graph->build_plan_at_index(i)).is_good())
            b.plan = i;
          else
            why = e.get_message();
        }
        if (b.plan < 0)
          return b.refused = "build_plans: " + why, b;
        chosenPlans()[key] = b.plan;
      }
      if ((e = b.graph->get_workspace_size_plan_at_index(b.plan, b.workspace))
              .is_bad())
        return fail("get_workspace_size", e), b;
    } catch (const std::exception &ex) {
      b.refused = ex.what();
    }
    return b;
  }

  /// Makes the handle on first use; false with `why` when it cannot.
  bool ready(std::string &why) {
    if (handle)
      return true;
    if (!handleError.empty())
      return why = handleError, false;
    const LoadedCudnn &lib = processCudnn();
    if (!lib.info.loaded)
      return why = handleError = "no cuDNN: " + lib.info.where, false;
    fe::cudnn_dlhandle = lib.handle;
    cudaSetDevice(gpu);
    try {
      cudnnStatus_t s = fe::detail::create_handle(&handle);
      if (s != CUDNN_STATUS_SUCCESS) {
        handle = nullptr;
        return why = handleError =
                   "cudnnCreate failed (status " + std::to_string(int(s)) + ")",
               false;
      }
      fe::detail::set_stream(handle, stream);
    } catch (const std::exception &ex) {
      handle = nullptr;
      return why = handleError = std::string("cudnnCreate: ") + ex.what(),
             false;
    }
    return true;
  }

  /// Runs `b` with `pack` and a workspace from the stream's pool.
  Status run(Built &b, std::unordered_map<int64_t, void *> &pack,
             const char *op) {
    Scratch workspace(stream);
    if (Status s = workspace.allocate(size_t(b.workspace), op); s.failed())
      return s;
    fe::error_t e;
    try {
      e = b.graph->execute_plan_at_index(handle, pack, workspace.get(), b.plan);
    } catch (const std::exception &ex) {
      return internalError(std::string(op) + ": cuDNN: " + ex.what());
    }
    if (e.is_bad())
      return internalError(std::string(op) +
                           ": cuDNN execute: " + e.get_message());
    return Status::ok();
  }
};

CudnnAttention::CudnnAttention(int gpu, cudaStream_t stream, int sm,
                               int smCount)
    : state(new State{gpu, stream, sm, smCount, nullptr, {}, {}}) {}

CudnnAttention::~CudnnAttention() {
  if (state->handle) {
    try {
      fe::detail::destroy_handle(state->handle);
    } catch (...) {
    }
  }
}

Status CudnnAttention::forward(DType dtype, const AttentionShape &sh,
                               const void *q, const void *k, const void *v,
                               const void *mask, void *out,
                               CudnnOutcome &outcome) {
  State &st = *state;
  if (!st.ready(outcome.why))
    return outcome.refused = true, Status::ok();
  Key key = keyOf(false, dtype, sh, st.sm, st.smCount);
  Built &b = st.graph(key, false, false, dtype, sh);
  if (!b.refused.empty())
    return outcome.refused = true, outcome.why = b.refused, Status::ok();
  std::unordered_map<int64_t, void *> pack{{kQ, const_cast<void *>(q)},
                                           {kK, const_cast<void *>(k)},
                                           {kV, const_cast<void *>(v)},
                                           {kO, out}};
  if (mask)
    pack[kBias] = const_cast<void *>(mask);
  return st.run(b, pack, "attention");
}

Status CudnnAttention::backward(DType dtype, const AttentionShape &sh,
                                const void *q, const void *k, const void *v,
                                const void *mask, const void *dy, void *dq,
                                void *dk, void *dv, CudnnOutcome &outcome) {
  State &st = *state;
  if (!st.ready(outcome.why))
    return outcome.refused = true, Status::ok();
  // The forward with statistics (the key's slot 18 tells it from the plain
  // forward), then the backward: both must build before anything runs.
  Key fwdKey = keyOf(false, dtype, sh, st.sm, st.smCount);
  fwdKey[18] = 1;
  Built &f = st.graph(fwdKey, false, true, dtype, sh);
  if (!f.refused.empty())
    return outcome.refused = true, outcome.why = f.refused, Status::ok();
  Built &b = st.graph(keyOf(true, dtype, sh, st.sm, st.smCount), true, false,
                      dtype, sh);
  if (!b.refused.empty())
    return outcome.refused = true, outcome.why = b.refused, Status::ok();
  // O (the storage type) and the row statistics (f32) in scratch.
  const size_t rows = size_t(sh.b * sh.h * sh.s);
  const size_t oBytes = (rows * size_t(sh.dv) * 2 + 255) / 256 * 256;
  Scratch saved(st.stream);
  if (Status s = saved.allocate(oBytes + rows * 4, "attention_grad");
      s.failed())
    return s;
  void *o = saved.get();
  void *stats = static_cast<char *>(saved.get()) + oBytes;
  std::unordered_map<int64_t, void *> fwd{{kQ, const_cast<void *>(q)},
                                          {kK, const_cast<void *>(k)},
                                          {kV, const_cast<void *>(v)},
                                          {kO, o},
                                          {kStats, stats}};
  if (mask)
    fwd[kBias] = const_cast<void *>(mask);
  if (Status s = st.run(f, fwd, "attention_grad (forward)"); s.failed())
    return s;
  std::unordered_map<int64_t, void *> bwd{{kQ, const_cast<void *>(q)},
                                          {kK, const_cast<void *>(k)},
                                          {kV, const_cast<void *>(v)},
                                          {kO, o},
                                          {kDO, const_cast<void *>(dy)},
                                          {kStats, stats},
                                          {kDQ, dq},
                                          {kDK, dk},
                                          {kDV, dv}};
  if (mask)
    bwd[kBias] = const_cast<void *>(mask);
  return st.run(b, bwd, "attention_grad");
}

DevicelessVerdict rp::runtime::cuda::planCudnnAttentionDeviceless(
    const std::string &device, int sm, int smCount, DType dtype,
    const AttentionShape &sh, bool backward) {
  DevicelessVerdict v;
  const LoadedCudnn &lib = processCudnn();
  if (!lib.info.loaded)
    return v.refused = "no cuDNN: " + lib.info.where, v;
  fe::cudnn_dlhandle = lib.handle;
  try {
    auto props = std::make_shared<fe::DeviceProperties>();
    std::vector<uint8_t> bytes(device.begin(), device.end());
    fe::error_t e = props->deserialize(bytes);
    if (e.is_bad())
      return v.refused =
                 "the device descriptor does not load: " + e.get_message(),
             v;
    // attention_grad: the forward with statistics, then the backward.
    std::vector<std::pair<bool, bool>> graphs{{false, false}};
    if (backward)
      graphs = {{false, true}, {true, false}};
    for (auto [isBackward, stats] : graphs) {
      fe::graph::Graph g;
      g.set_device_properties(props);
      g.set_sm_version(sm).set_sm_count(smCount);
      declare(g, isBackward, stats, dtype, sh);
      const char *stage = "validate";
      if ((e = g.validate()).is_good()) {
        stage = "build_operation_graph";
        e = g.build_operation_graph();
      }
      if (e.is_good()) {
        stage = "create_execution_plans";
        e = g.create_execution_plans({fe::HeurMode_t::A});
      }
      if (e.is_good()) {
        stage = "check_support";
        e = g.check_support();
      }
      const std::string which = isBackward ? "backward" : "forward";
      if (e.is_bad())
        return v.refused = which + " graph, " + stage + ": " + e.get_message(),
               v;
      if (v.notFinalized.empty() &&
          (e = g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE))
              .is_bad())
        v.notFinalized = which + " graph: " + e.get_message();
    }
  } catch (const std::exception &ex) {
    v.refused = ex.what();
  }
  return v;
}

Expected<std::string> rp::runtime::cuda::captureCudnnDevice(int gpu) {
  const LoadedCudnn &lib = processCudnn();
  if (!lib.info.loaded)
    return unavailable("no cuDNN: " + lib.info.where);
  fe::cudnn_dlhandle = lib.handle;
  try {
    if (cudaSetDevice(gpu) != cudaSuccess)
      return unavailable("no GPU " + std::to_string(gpu));
    fe::DeviceProperties props;
    props.set_device_id(gpu);
    fe::error_t e = props.build();
    std::vector<uint8_t> bytes;
    if (e.is_good())
      e = props.serialize(bytes);
    if (e.is_bad())
      return unavailable("cuDNN's device properties of GPU " +
                         std::to_string(gpu) + ": " + e.get_message());
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception &ex) {
    return unavailable(ex.what());
  }
}
