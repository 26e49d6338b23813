//===- TokenSlicesPlanTest.cpp - a token-sliced plan on the executor ------===//
//
// The runtime layer of issue 35 (docs/token-slices.md, "The executing
// path"): a sequence cut into token slices run as microbatches is a staged
// plan of today's schema, with no new op, field or job kind. The plan here
// is what the compiler is to write for one Llama-like attention block (q,
// k, v projections with four query heads over two key/value heads, RoPE,
// causal attention, the output projection summed over heads):
//
// - the forward stage job runs the slices in order; slice k (offset o,
//   size s) uploads its rows of the input and of the RoPE tables (the
//   constants sliced at [o, o + s): positions continue), and the keys and
//   values of slices < k from host rows, which the forward jobs of those
//   slices downloaded like any saved input; its attention has s queries over
//   o + s keys, causal aligned to the end of the keys;
// - the backward stage job runs the slices last first; slice k recomputes
//   its forward from the same uploads, and its attention gradient covers
//   all o + s keys: the rows of its own slice are added to what the later
//   slices sent it, the rows of the earlier slices to a per-job key/value
//   gradient accumulator (in reverse slice order, so the sums are fixed);
// - weight gradients accumulate over the slices in the job's order.
//
// The test runs two such blocks (stage jobs F0, F1, B1, B0) cut into
// several slicings, with and without a sliding window, on one, two and
// four devices through the pipeline executor: every slicing's output,
// input gradient and weight gradients equal the unsliced plan's within
// 1e-5 (only the attention's summation order changes), and two and four
// devices equal one bit for bit. The same runs on the cuda backend where
// a GPU is (skipped, with the reason, where none is).
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/Device.h"
#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/sim/Simulate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

using namespace rp::runtime;
using namespace rp::runtime::test;

namespace {

constexpr int64_t kSeq = 16, kModel = 8, kHeads = 4, kKvHeads = 2, kHead = 4,
                  kLayers = 2;

/// The plan and the host buffers the test reads.
struct SlicedPlan {
  PlanBuilder b{1, 1, true};
  uint32_t out = 0, dx = 0;
  std::vector<uint32_t> grads; // per layer: wq, wk, wv, wo
};

std::vector<uint8_t> floatBytes(const std::vector<float> &v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

/// Per layer: its parameters and host buffers.
struct Layer {
  uint32_t wq, wk, wv, wo;
  /// The kept keys and values, [kvHeads, S, d]: per head a row per token,
  /// written slice by slice.
  uint32_t keptK, keptV;
  /// Its input (the previous layer's output) and its gradient, per token.
  uint32_t in, dIn;
};

/// A stage job's copies of its layer's weights on its device.
struct Weights {
  uint32_t wq, wk, wv, wo, rot;
};

/// What a slice's job uploads and computes in its forward (the backward
/// recomputes it).
struct Slice {
  uint32_t x, cos, sin, kpre = 0, vpre = 0, q, qr, k, kr, v, kall, vall, a;
};

/// Builds the plan of kLayers residual attention blocks for slice sizes
/// `sizes` (summing to kSeq), `window` 0 or a sliding window. The stage
/// jobs are F0, F1, B1, B0, job n on device n mod `devices`
/// (round-robin).
SlicedPlan buildPlan(const std::vector<int64_t> &sizes, uint32_t devices,
                     int64_t window) {
  SlicedPlan t;
  PlanBuilder &b = t.b;
  const unsigned K = unsigned(sizes.size());
  b.plan.devices = devices;
  b.plan.microbatches = K;
  const int64_t S = kSeq, D = kModel, H = kHeads, kvHeads = kKvHeads, d = kHead;
  const uint64_t f = sizeof(float);
  std::vector<int64_t> offsets(K, 0);
  std::partial_sum(sizes.begin(), sizes.end() - 1, offsets.begin() + 1);
  std::vector<int64_t> attnInts = {1, 0};
  if (window)
    attnInts.push_back(window);
  const double scale = 1.0 / std::sqrt(double(d));

  // Host: inputs, parameters, constants, per layer its kept keys and
  // values and the stage-crossing values, outputs and gradients.
  uint32_t X = b.buffer("x", {S, D}), dyBuffer = b.buffer("dy", {S, D});
  b.input("x", X);
  b.input("dy", dyBuffer);
  // RoPE as a rotation of pairs (i, i + d/2): x·cos + (x @ R)·sin, R the
  // rotate-half matrix; the tables hold every position of the sequence.
  std::vector<float> cosT(S * d), sinT(S * d), rot(d * d, 0.0f);
  for (int64_t p = 0; p < S; ++p)
    for (int64_t i = 0; i < d; ++i) {
      double fr = std::pow(10000.0, -double(2 * (i % (d / 2))) / double(d));
      cosT[p * d + i] = float(std::cos(double(p) * fr));
      sinT[p * d + i] = float(std::sin(double(p) * fr));
    }
  for (int64_t i = 0; i < d / 2; ++i) {
    rot[(i + d / 2) * d + i] = -1.0f; // out[i] = -x[i + d/2]
    rot[i * d + i + d / 2] = 1.0f;    // out[i + d/2] = x[i]
  }
  uint32_t cosBuffer = b.buffer("rope.cos", {S, d}),
           sinBuffer = b.buffer("rope.sin", {S, d}),
           rotBuffer = b.buffer("rope.rot", {d, d});
  b.plan.buffers[cosBuffer].constant = floatBytes(cosT);
  b.plan.buffers[sinBuffer].constant = floatBytes(sinT);
  b.plan.buffers[rotBuffer].constant = floatBytes(rot);
  std::vector<Layer> layers;
  for (int64_t l = 0; l < kLayers; ++l) {
    std::string n = "l" + std::to_string(l) + ".";
    Layer y{b.param(n + "wq", {1, H, D, d}),
            b.param(n + "wk", {1, kvHeads, D, d}),
            b.param(n + "wv", {1, kvHeads, D, d}),
            b.param(n + "wo", {1, H, d, D}),
            b.buffer(n + "kept k", {kvHeads, S, d}),
            b.buffer(n + "kept v", {kvHeads, S, d}),
            l == 0 ? X : b.buffer(n + "in", {S, D}),
            b.buffer(l == 0 ? "grad:x" : n + "grad in", {S, D})};
    layers.push_back(y);
  }
  t.out = b.buffer("out", {S, D});
  t.dx = layers[0].dIn;
  b.output("out", t.out);
  b.output("grad:x", t.dx);
  for (const Layer &y : layers)
    for (uint32_t p : {y.wq, y.wk, y.wv, y.wo}) {
      std::string name = "grad:" + b.plan.buffers[p].name;
      t.grads.push_back(b.buffer(name, b.plan.buffers[p].shape));
      b.output(name, t.grads.back());
    }

  auto weights = [&](const Layer &y, int32_t dev, const std::string &tag) {
    Weights w{b.buffer("wq." + tag, {1, H, D, d}, dev),
              b.buffer("wk." + tag, {1, kvHeads, D, d}, dev),
              b.buffer("wv." + tag, {1, kvHeads, D, d}, dev),
              b.buffer("wo." + tag, {1, H, d, D}, dev),
              b.buffer("rot." + tag, {d, d}, dev)};
    uint32_t e = b.event();
    b.copy(dev, QueueKind::weight_h2d,
           {b.whole(y.wq, w.wq), b.whole(y.wk, w.wk), b.whole(y.wv, w.wv),
            b.whole(y.wo, w.wo), b.whole(rotBuffer, w.rot)},
           {}, {e}, "UP " + tag);
    return std::pair{w, e};
  };

  std::vector<KernelCallDesc> calls;
  auto rope = [&](uint32_t x, const Slice &s, const Weights &w, int64_t heads,
                  int64_t n, const std::string &tag) {
    int32_t dev = b.plan.buffers[x].device;
    uint32_t xr = b.buffer(tag + ".r", {1, heads, n, d}, dev),
             xc = b.buffer(tag + ".c", {1, heads, n, d}, dev),
             xs = b.buffer(tag + ".s", {1, heads, n, d}, dev),
             y = b.buffer(tag + ".rope", {1, heads, n, d}, dev);
    calls.push_back(call(OpKind::matmul, {x, w.rot}, {xr}, {0, 0}));
    calls.push_back(call(OpKind::mul, {x, s.cos}, {xc}));
    calls.push_back(call(OpKind::mul, {xr, s.sin}, {xs}));
    calls.push_back(call(OpKind::add, {xc, xs}, {y}));
    return y;
  };
  // rope's gradient: dy·cos + (dy·sin) @ Rᵀ.
  auto ropeGrad = [&](uint32_t dy, const Slice &s, const Weights &w,
                      int64_t heads, int64_t n, const std::string &tag) {
    int32_t dev = b.plan.buffers[dy].device;
    uint32_t c = b.buffer(tag + ".c", {1, heads, n, d}, dev),
             sn = b.buffer(tag + ".s", {1, heads, n, d}, dev),
             r = b.buffer(tag + ".r", {1, heads, n, d}, dev),
             dx = b.buffer(tag, {1, heads, n, d}, dev);
    calls.push_back(call(OpKind::mul, {dy, s.cos}, {c}));
    calls.push_back(call(OpKind::mul, {dy, s.sin}, {sn}));
    calls.push_back(call(OpKind::matmul, {sn, w.rot}, {r}, {0, 1}));
    calls.push_back(call(OpKind::add, {c, r}, {dx}));
    return dx;
  };
  auto forward = [&](unsigned k, int32_t dev, const Weights &w,
                     const std::string &tag) {
    int64_t o = offsets[k], n = sizes[k], T = o + n;
    Slice s;
    s.x = b.buffer(tag + ".x", {1, 1, n, D}, dev);
    s.cos = b.buffer(tag + ".cos", {1, 1, n, d}, dev);
    s.sin = b.buffer(tag + ".sin", {1, 1, n, d}, dev);
    if (o > 0) {
      s.kpre = b.buffer(tag + ".kpre", {1, kvHeads, o, d}, dev);
      s.vpre = b.buffer(tag + ".vpre", {1, kvHeads, o, d}, dev);
    }
    s.q = b.buffer(tag + ".q", {1, H, n, d}, dev);
    s.k = b.buffer(tag + ".k", {1, kvHeads, n, d}, dev);
    s.v = b.buffer(tag + ".v", {1, kvHeads, n, d}, dev);
    calls.push_back(call(OpKind::matmul, {s.x, w.wq}, {s.q}, {0, 0}));
    calls.push_back(call(OpKind::matmul, {s.x, w.wk}, {s.k}, {0, 0}));
    calls.push_back(call(OpKind::matmul, {s.x, w.wv}, {s.v}, {0, 0}));
    s.qr = rope(s.q, s, w, H, n, tag + ".q");
    s.kr = rope(s.k, s, w, kvHeads, n, tag + ".k");
    s.kall = s.kr;
    s.vall = s.v;
    if (o > 0) {
      s.kall = b.buffer(tag + ".kall", {1, kvHeads, T, d}, dev);
      s.vall = b.buffer(tag + ".vall", {1, kvHeads, T, d}, dev);
      calls.push_back(call(OpKind::concat, {s.kpre, s.kr}, {s.kall}, {2}));
      calls.push_back(call(OpKind::concat, {s.vpre, s.v}, {s.vall}, {2}));
    }
    s.a = b.buffer(tag + ".a", {1, H, n, d}, dev);
    calls.push_back(call(OpKind::attention, {s.qr, s.kall, s.vall}, {s.a},
                         attnInts, {scale}));
    return s;
  };
  // The uploads of slice k: its rows of the layer's input and of the
  // tables, the prefix of the kept keys and values.
  auto inputs = [&](const Layer &y, unsigned k, const Slice &s) {
    int64_t o = offsets[k];
    std::vector<CopyDesc> c = {b.part(y.in, o * D * f, s.x),
                               b.part(cosBuffer, o * d * f, s.cos),
                               b.part(sinBuffer, o * d * f, s.sin)};
    // Per key/value head, its rows [0, o) (kept [kvHeads, S, d], prefix
    // [kvHeads, o, d]).
    for (int64_t h = 0; o > 0 && h < kvHeads; ++h)
      for (auto [kept, pre] : {std::pair{y.keptK, s.kpre}, {y.keptV, s.vpre}})
        c.push_back({kept, uint64_t(h * S * d) * f, pre,
                     uint64_t(h * o * d) * f, uint64_t(o * d) * f});
    return c;
  };
  auto mbLabel = [](unsigned k) { return " mb" + std::to_string(k); };

  // Forward stage jobs: slices in order. eOut[l][k]: slice k's downloads
  // of layer l's forward (its output, keys and values).
  std::vector<std::vector<uint32_t>> eOut(kLayers, std::vector<uint32_t>(K));
  unsigned job = 0;
  for (int64_t l = 0; l < kLayers; ++l, ++job) {
    const Layer &y = layers[l];
    int32_t dev = int32_t(job % devices);
    auto [w, eUp] = weights(y, dev, "F" + std::to_string(l));
    uint32_t next = l + 1 < kLayers ? layers[l + 1].in : t.out;
    for (unsigned k = 0; k < K; ++k) {
      std::string tag = "F" + std::to_string(l) + " s" + std::to_string(k);
      calls.clear();
      Slice s = forward(k, dev, w, tag);
      uint32_t zh = b.buffer(tag + ".zh", {1, H, sizes[k], D}, dev),
               z = b.buffer(tag + ".z", {1, 1, sizes[k], D}, dev),
               h = b.buffer(tag + ".h", {1, 1, sizes[k], D}, dev);
      calls.push_back(call(OpKind::matmul, {s.a, w.wo}, {zh}, {0, 0}));
      calls.push_back(call(OpKind::reduce, {zh}, {z}, {0, 1, 1}));
      calls.push_back(call(OpKind::add, {s.x, z}, {h}));
      uint32_t program = b.program(tag, calls);
      uint32_t eIn = b.event(), eF = b.event();
      eOut[l][k] = b.event();
      std::vector<uint32_t> waits;
      if (k > 0)
        waits.push_back(eOut[l][k - 1]);
      if (l > 0)
        waits.push_back(eOut[l - 1][k]);
      std::string mb = mbLabel(k);
      b.copy(dev, QueueKind::activation_h2d, inputs(y, k, s), waits, {eIn},
             "IN s" + std::to_string(job) + mb, k);
      b.run(dev, program, {eIn, eUp}, {eF}, "F" + std::to_string(job) + mb, k);
      int64_t o = offsets[k];
      // The output's rows, and per key/value head the slice's keys and
      // values into rows [o, o + n) of the kept ones.
      int64_t n = sizes[k];
      std::vector<CopyDesc> down = {b.whole(h, next, o * D * f)};
      for (int64_t hd = 0; hd < kvHeads; ++hd)
        for (auto [own, kept] : {std::pair{s.kr, y.keptK}, {s.v, y.keptV}})
          down.push_back({own, uint64_t(hd * n * d) * f, kept,
                          uint64_t((hd * S + o) * d) * f, uint64_t(n * d) * f});
      b.copy(dev, QueueKind::d2h, down, {eF}, {eOut[l][k]},
             "OUT s" + std::to_string(job) + mb, k);
    }
  }

  // Backward stage jobs, last layer first: slices last first. eDown[l][k]:
  // slice k's download of layer l's input gradient.
  std::vector<std::vector<uint32_t>> eDown(kLayers, std::vector<uint32_t>(K));
  for (int64_t l = kLayers; l-- > 0; ++job) {
    const Layer &y = layers[l];
    int32_t dev = int32_t(job % devices);
    auto [w, eUp] = weights(y, dev, "B" + std::to_string(l));
    uint32_t dOut = l + 1 < kLayers ? layers[l + 1].dIn : dyBuffer;
    std::string jt = "s" + std::to_string(job);
    uint32_t accK = b.buffer("acc dk " + jt, {1, kvHeads, S, d}, dev),
             accV = b.buffer("acc dv " + jt, {1, kvHeads, S, d}, dev);
    std::vector<uint32_t> gAcc;
    for (size_t i = 0; i < 4; ++i)
      gAcc.push_back(
          b.buffer("acc " + jt, b.plan.buffers[t.grads[l * 4 + i]].shape, dev));
    for (unsigned k = K; k-- > 0;) {
      std::string tag = "B" + std::to_string(l) + " s" + std::to_string(k);
      const bool last = k + 1 == K;
      int64_t o = offsets[k], n = sizes[k], T = o + n;
      calls.clear();
      Slice s = forward(k, dev, w, tag);
      for (KernelCallDesc &c : calls)
        c.recompute = true;
      uint32_t dz = b.buffer(tag + ".dz", {1, 1, n, D}, dev),
               da = b.buffer(tag + ".da", {1, H, n, d}, dev),
               gwo = b.buffer(tag + ".gwo", {1, H, d, D}, dev),
               dqr = b.buffer(tag + ".dqr", {1, H, n, d}, dev),
               dkall = b.buffer(tag + ".dkall", {1, kvHeads, T, d}, dev),
               dvall = b.buffer(tag + ".dvall", {1, kvHeads, T, d}, dev);
      calls.push_back(call(OpKind::matmul, {dz, w.wo}, {da}, {0, 1}));
      calls.push_back(call(OpKind::matmul, {s.a, dz}, {gwo}, {1, 0}));
      calls.push_back(call(OpKind::attention_grad, {s.qr, s.kall, s.vall, da},
                           {dqr, dkall, dvall}, attnInts, {scale}));
      // Own rows: this slice's gradient plus the later slices' (the
      // accumulator's rows [o, o + n)); earlier rows: into the accumulator.
      auto split = [&](uint32_t dall, uint32_t acc, const std::string &name) {
        uint32_t own = dall, pre = 0;
        std::string v = tag + ".d" + name;
        if (o > 0) {
          pre = b.buffer(v + "pre", {1, kvHeads, o, d}, dev);
          own = b.buffer(v + "own", {1, kvHeads, n, d}, dev);
          calls.push_back(
              call(OpKind::slice, {dall}, {pre}, {0, 0, 0, 0, 1, 1, 1, 1}));
          calls.push_back(
              call(OpKind::slice, {dall}, {own}, {0, 0, o, 0, 1, 1, 1, 1}));
        }
        uint32_t sum = own;
        if (!last) {
          uint32_t later = b.buffer(v + "later", {1, kvHeads, n, d}, dev);
          sum = b.buffer(v + "sum", {1, kvHeads, n, d}, dev);
          calls.push_back(
              call(OpKind::slice, {acc}, {later}, {0, 0, o, 0, 1, 1, 1, 1}));
          calls.push_back(call(OpKind::add, {own, later}, {sum}));
        }
        if (o > 0) {
          // The first slice of the sweep starts the accumulator (zeros
          // past its prefix), the others add theirs, in slice order.
          uint32_t padded =
              last ? acc : b.buffer(v + "pad", {1, kvHeads, S, d}, dev);
          calls.push_back(call(OpKind::slice_grad, {pre}, {padded},
                               {0, 0, 0, 0, 1, 1, 1, 1}));
          if (!last)
            calls.push_back(call(OpKind::add, {acc, padded}, {acc}));
        }
        return sum;
      };
      uint32_t dkr = split(dkall, accK, "k"), dv = split(dvall, accV, "v");
      uint32_t dq = ropeGrad(dqr, s, w, H, n, tag + ".dq"),
               dk = ropeGrad(dkr, s, w, kvHeads, n, tag + ".dk");
      uint32_t gwq = b.buffer(tag + ".gwq", {1, H, D, d}, dev),
               gwk = b.buffer(tag + ".gwk", {1, kvHeads, D, d}, dev),
               gwv = b.buffer(tag + ".gwv", {1, kvHeads, D, d}, dev);
      calls.push_back(call(OpKind::matmul, {s.x, dq}, {gwq}, {1, 0}));
      calls.push_back(call(OpKind::matmul, {s.x, dk}, {gwk}, {1, 0}));
      calls.push_back(call(OpKind::matmul, {s.x, dv}, {gwv}, {1, 0}));
      // The input gradient: the residual's plus the projections'.
      uint32_t dxqh = b.buffer(tag + ".dxqh", {1, H, n, D}, dev),
               dxq = b.buffer(tag + ".dxq", {1, 1, n, D}, dev),
               dxk = b.buffer(tag + ".dxk", {1, kvHeads, n, D}, dev),
               dxv = b.buffer(tag + ".dxv", {1, kvHeads, n, D}, dev),
               dxkr = b.buffer(tag + ".dxkr", {1, 1, n, D}, dev),
               dxvr = b.buffer(tag + ".dxvr", {1, 1, n, D}, dev),
               dx1 = b.buffer(tag + ".dx1", {1, 1, n, D}, dev),
               dx2 = b.buffer(tag + ".dx2", {1, 1, n, D}, dev),
               dx = b.buffer(tag + ".dx", {1, 1, n, D}, dev);
      calls.push_back(call(OpKind::matmul, {dq, w.wq}, {dxqh}, {0, 1}));
      calls.push_back(call(OpKind::reduce, {dxqh}, {dxq}, {0, 1, 1}));
      calls.push_back(call(OpKind::matmul, {dk, w.wk}, {dxk}, {0, 1}));
      calls.push_back(call(OpKind::matmul, {dv, w.wv}, {dxv}, {0, 1}));
      calls.push_back(call(OpKind::reduce, {dxk}, {dxkr}, {0, 1, 1}));
      calls.push_back(call(OpKind::reduce, {dxv}, {dxvr}, {0, 1, 1}));
      calls.push_back(call(OpKind::add, {dxq, dxkr}, {dx1}));
      calls.push_back(call(OpKind::add, {dx1, dxvr}, {dx2}));
      calls.push_back(call(OpKind::add, {dz, dx2}, {dx}));
      // Weight gradients over the slices in the job's order (last first).
      uint32_t g[] = {gwq, gwk, gwv, gwo};
      for (size_t i = 0; i < gAcc.size(); ++i)
        calls.push_back(last ? call(OpKind::reshape, {g[i]}, {gAcc[i]})
                             : call(OpKind::add, {gAcc[i], g[i]}, {gAcc[i]}));
      uint32_t program = b.program(tag, calls);
      std::vector<CopyDesc> up = inputs(y, k, s);
      up.push_back(b.part(dOut, o * D * f, dz));
      uint32_t eIn = b.event(), eB = b.event();
      eDown[l][k] = b.event();
      // The kept keys and values of every slice, the gradient from the
      // next layer's backward.
      std::vector<uint32_t> waits = {eOut[l][K - 1]};
      if (l + 1 < kLayers)
        waits.push_back(eDown[l + 1][k]);
      std::string mb = mbLabel(k);
      b.copy(dev, QueueKind::activation_h2d, up, waits, {eIn}, "DIN " + jt + mb,
             k);
      b.run(dev, program, {eIn, eUp}, {eB}, "B" + std::to_string(job) + mb, k);
      std::vector<CopyDesc> down = {b.whole(dx, y.dIn, o * D * f)};
      if (k == 0)
        for (size_t i = 0; i < gAcc.size(); ++i)
          down.push_back(b.whole(gAcc[i], t.grads[l * 4 + i]));
      b.copy(dev, QueueKind::d2h, down, {eB}, {eDown[l][k]}, "DOUT " + jt + mb,
             k);
    }
  }
  return t;
}

using Results = std::vector<std::vector<float>>;

/// One step of the plan for `sizes` on `devices` devices of `backendName`:
/// the output, the input gradient and the weight gradients, in that order;
/// nullopt when the backend is not built in or has fewer devices here.
std::optional<Results> runPlan(const char *backendName,
                               const std::vector<int64_t> &sizes,
                               uint32_t devices, int64_t window) {
  SlicedPlan t = buildPlan(sizes, devices, window);
  Results results;
  Expected<Plan> plan = writeAndLoad(t.b.plan, "token-slices.rpplan");
  EXPECT_TRUE(plan) << plan.getStatus().toString();
  if (!plan)
    return results;
  auto backend = createBackend(backendName, backendOptions(devices, 2));
  if (!backend && backend.getStatus().getCode() == StatusCode::Unavailable)
    return std::nullopt;
  EXPECT_TRUE(backend) << backend.getStatus().toString();
  if (!backend)
    return results;
  auto fwd = HostForward::create(*plan, **backend);
  EXPECT_TRUE(fwd) << fwd.getStatus().toString();
  if (!fwd)
    return results;
  EXPECT_TRUE((*fwd)->initParameters(11).isOk());
  EXPECT_TRUE((*fwd)->setInput("x", randomArray({kSeq, kModel}, 1)).isOk());
  EXPECT_TRUE((*fwd)->setInput("dy", randomArray({kSeq, kModel}, 2)).isOk());
  auto exec = PipelineExecutor::create(*plan, **fwd, PipelineOptions{});
  EXPECT_TRUE(exec) << exec.getStatus().toString();
  if (!exec)
    return results;
  ThreadPool hostPool(2);
  Status s = (*exec)->step(hostPool);
  EXPECT_TRUE(s.isOk()) << s.toString();
  std::vector<uint32_t> read = {t.out, t.dx};
  read.insert(read.end(), t.grads.begin(), t.grads.end());
  for (uint32_t buffer : read) {
    TensorRef r = (*fwd)->buffer(buffer);
    const float *p = r.as<float>();
    results.emplace_back(p, p + r.size());
  }
  return results;
}

/// The name of result `i` of runPlan.
std::string resultName(size_t i) {
  static const char *const params[] = {"wq", "wk", "wv", "wo"};
  if (i < 2)
    return i ? "grad:x" : "out";
  return "grad:l" + std::to_string((i - 2) / 4) + "." + params[(i - 2) % 4];
}

/// `more` equals `one` bit for bit, result by result.
void expectSameBits(const Results &more, const Results &one,
                    const std::string &what) {
  ASSERT_EQ(more.size(), one.size()) << what;
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(std::memcmp(more[i].data(), one[i].data(),
                          one[i].size() * sizeof(float)),
              0)
        << resultName(i) << " " << what;
}

/// The backends the plan runs on: cuda's runs are skipped, with the
/// reason, where it is not built or finds no GPU (and its 2- and 4-device
/// runs where there are fewer GPUs).
class TokenSlicesPlanTest : public ::testing::TestWithParam<const char *> {
protected:
  /// Every slicing's results equal the unsliced plan's within 1e-5 of the
  /// largest magnitude (f32; only the attention's sums are ordered
  /// differently), and 2 and 4 devices equal 1 bit for bit.
  void checkSlicings(int64_t window) {
    std::optional<Results> whole = runPlan(GetParam(), {kSeq}, 1, window);
    if (!whole)
      GTEST_SKIP() << "backend '" << GetParam()
                   << "' is not built in or finds no device here";
    ASSERT_EQ(whole->size(), 2u + 4u * kLayers);
    for (uint32_t devices : {2u, 4u})
      if (std::optional<Results> more =
              runPlan(GetParam(), {kSeq}, devices, window))
        expectSameBits(*more, *whole, "unsliced");
    for (const std::vector<int64_t> &sizes : std::vector<std::vector<int64_t>>{
             {8, 8}, {4, 4, 4, 4}, {6, 4, 3, 3}, {1, 15}, {5, 1, 10}}) {
      std::string name;
      for (int64_t s : sizes)
        name += std::to_string(s) + " ";
      SCOPED_TRACE("slices " + name);
      std::optional<Results> one = runPlan(GetParam(), sizes, 1, window);
      ASSERT_TRUE(one);
      ASSERT_EQ(one->size(), whole->size());
      bool reordered = false;
      for (size_t i = 0; i < whole->size(); ++i) {
        SCOPED_TRACE(resultName(i));
        const std::vector<float> &w = (*whole)[i], &o = (*one)[i];
        ASSERT_EQ(o.size(), w.size());
        float scale = 0.0f;
        for (float v : w)
          scale = std::max(scale, std::fabs(v));
        ASSERT_GT(scale, 0.0f); // every gradient is exercised
        for (size_t j = 0; j < w.size(); ++j)
          EXPECT_NEAR(o[j], w[j], 1e-5 * std::max(1.0f, scale))
              << "element " << j;
        reordered |= o != w;
      }
      // On the host, the sliced plan is not the unsliced one in disguise.
      if (std::string(GetParam()) == "host")
        EXPECT_TRUE(reordered);
      // Two and four devices (the stage jobs apart, the kept keys and
      // values through host rows) equal one bit for bit.
      for (uint32_t devices : {2u, 4u})
        if (std::optional<Results> more =
                runPlan(GetParam(), sizes, devices, window))
          expectSameBits(*more, *one,
                         "on " + std::to_string(devices) + " devices");
    }
  }
};

TEST_P(TokenSlicesPlanTest, SlicedEqualsUnslicedAndDevicesEqualOne) {
  checkSlicings(0);
}

// A sliding window needs no offset of its own: aligned to the end of the
// kept keys, the query at position o + i sees the keys in (o + i - window,
// o + i], as the unsliced attention's query o + i does.
TEST_P(TokenSlicesPlanTest, SlidingWindowSlicesEqualUnsliced) {
  checkSlicings(5);
}

INSTANTIATE_TEST_SUITE_P(Backends, TokenSlicesPlanTest,
                         ::testing::Values("host", "cuda"),
                         [](const auto &info) {
                           return std::string(info.param);
                         });

// The sim device times the same plan (rp-run --backend sim): the ops a
// sliced plan adds to an unsliced one (attention with fewer queries than
// keys, the prefix's concat, slice and slice_grad) have costs, and the
// jobs lay out in the order their events give.
TEST(TokenSlicesPlanSim, LaysASlicedStepOut) {
  SlicedPlan t = buildPlan({6, 4, 3, 3}, 4, 0);
  t.b.plan.path = "token-slices";
  auto backend = sim::SimBackend::create(backendOptions(4, 1));
  ASSERT_TRUE(backend) << backend.getStatus().toString();
  sim::SimulateOptions o;
  o.sync = true;
  o.stepBarrier = true;
  auto r = sim::simulate(t.b.plan, **backend, o);
  ASSERT_TRUE(r) << r.getStatus().toString();
  EXPECT_GT(r->jobsMs, 0.0);
  const Plan &plan = t.b.plan;
  for (size_t j = 0; j < plan.jobs.size(); ++j)
    for (uint32_t e : plan.jobs[j].waits)
      for (size_t k = 0; k < plan.jobs.size(); ++k)
        if (std::find(plan.jobs[k].records.begin(), plan.jobs[k].records.end(),
                      e) != plan.jobs[k].records.end())
          EXPECT_GE(r->jobStartMs[j], r->jobEndMs[k])
              << plan.jobs[j].label << " after " << plan.jobs[k].label;
}

} // namespace
