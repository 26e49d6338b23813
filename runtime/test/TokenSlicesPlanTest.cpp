//===- TokenSlicesPlanTest.cpp - a token-sliced plan on the executor ------===//
//
// The runtime layer of issue 35 (docs/token-slices.md, "The executing
// path"): a sequence cut into token slices run as microbatches is a staged
// plan of today's schema, with no new op, field or job kind. The plan here
// is what the compiler is to write for one Llama-like attention block (q,
// k, v projections with two query heads over one key/value head, RoPE,
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
// The test runs the plan cut into several slicings on one and on two
// devices through the pipeline executor: every slicing's output, input
// gradient and weight gradients equal the unsliced plan's within 1e-5
// (only the attention's summation order changes), and two devices equal
// one bit for bit.
//
//===----------------------------------------------------------------------===//

#include "StagedPlans.h"

#include "rp/runtime/Pipeline.h"
#include "rp/runtime/host/HostDevice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

using namespace rp::runtime;
using namespace rp::runtime::test;

namespace {

constexpr int64_t kSeq = 16, kModel = 8, kHeads = 2, kHead = 4;

/// The plan and the host buffers the test reads.
struct SlicedPlan {
  PlanBuilder b{1, 1, true};
  uint32_t out = 0, dx = 0;
  std::vector<uint32_t> grads; // wq, wk, wv, wo
};

std::vector<uint8_t> floatBytes(const std::vector<float> &v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

/// Builds the plan for slice sizes `sizes` (summing to kSeq), forward
/// stage job on device 0 and backward on device `devices - 1`.
SlicedPlan buildPlan(const std::vector<int64_t> &sizes, uint32_t devices) {
  SlicedPlan t;
  PlanBuilder &b = t.b;
  const unsigned K = unsigned(sizes.size());
  b.plan.devices = devices;
  b.plan.microbatches = K;
  const int32_t df = 0, db = int32_t(devices) - 1;
  const int64_t S = kSeq, D = kModel, H = kHeads, d = kHead;

  // Host: inputs, parameters, constants, the kept keys and values (a row
  // per token, written slice by slice), outputs and gradients.
  uint32_t X = b.buffer("x", {S, D}), DY = b.buffer("dy", {S, D});
  b.input("x", X);
  b.input("dy", DY);
  uint32_t WQ = b.param("wq", {1, H, D, d}), WK = b.param("wk", {1, 1, D, d}),
           WV = b.param("wv", {1, 1, D, d}), WO = b.param("wo", {1, H, d, D});
  // RoPE as a rotation of pairs (i, i + d/2): x·cos + (x @ R)·sin, R the
  // rotate-half matrix; the tables hold every position of the sequence.
  std::vector<float> cosT(S * d), sinT(S * d), rot(d * d, 0.0f);
  for (int64_t p = 0; p < S; ++p)
    for (int64_t i = 0; i < d; ++i) {
      double f = std::pow(10000.0, -double(2 * (i % (d / 2))) / double(d));
      cosT[p * d + i] = float(std::cos(double(p) * f));
      sinT[p * d + i] = float(std::sin(double(p) * f));
    }
  for (int64_t i = 0; i < d / 2; ++i) {
    rot[(i + d / 2) * d + i] = -1.0f; // out[i] = -x[i + d/2]
    rot[i * d + i + d / 2] = 1.0f;    // out[i + d/2] = x[i]
  }
  uint32_t COS = b.buffer("rope.cos", {S, d}),
           SIN = b.buffer("rope.sin", {S, d}),
           ROT = b.buffer("rope.rot", {d, d});
  b.plan.buffers[COS].constant = floatBytes(cosT);
  b.plan.buffers[SIN].constant = floatBytes(sinT);
  b.plan.buffers[ROT].constant = floatBytes(rot);
  uint32_t KH = b.buffer("kept k", {S, d}), VH = b.buffer("kept v", {S, d});
  t.out = b.buffer("out", {S, D});
  t.dx = b.buffer("grad:x", {S, D});
  b.output("out", t.out);
  b.output("grad:x", t.dx);
  for (auto [name, p] :
       {std::pair{"wq", WQ}, {"wk", WK}, {"wv", WV}, {"wo", WO}}) {
    t.grads.push_back(
        b.buffer(std::string("grad:") + name, b.plan.buffers[p].shape));
    b.output(std::string("grad:") + name, t.grads.back());
  }

  // Per device of a stage job: its weights and constants, uploaded once.
  struct Weights {
    uint32_t wq, wk, wv, wo, rot;
  };
  auto weights = [&](int32_t dev, const std::string &tag) {
    return Weights{b.buffer("wq." + tag, {1, H, D, d}, dev),
                   b.buffer("wk." + tag, {1, 1, D, d}, dev),
                   b.buffer("wv." + tag, {1, 1, D, d}, dev),
                   b.buffer("wo." + tag, {1, H, d, D}, dev),
                   b.buffer("rot." + tag, {d, d}, dev)};
  };
  Weights wf = weights(df, "F"), wb = weights(db, "B");
  auto upload = [&](const Weights &w) {
    return std::vector<CopyDesc>{b.whole(WQ, w.wq), b.whole(WK, w.wk),
                                 b.whole(WV, w.wv), b.whole(WO, w.wo),
                                 b.whole(ROT, w.rot)};
  };
  uint32_t eUpF = b.event(), eUpB = b.event();
  b.copy(df, QueueKind::weight_h2d, upload(wf), {}, {eUpF}, "UP s0");
  b.copy(db, QueueKind::weight_h2d, upload(wb), {}, {eUpB}, "UP s1");

  const uint64_t f = sizeof(float);
  std::vector<int64_t> offsets(K, 0);
  std::partial_sum(sizes.begin(), sizes.end() - 1, offsets.begin() + 1);

  // What a slice's job uploads and computes in its forward (the backward
  // recomputes it): rope(x @ w) for q and k, the keys and values of the
  // whole prefix, the attention and the heads' sum of its projection.
  struct Slice {
    uint32_t x, cos, sin, kpre = 0, vpre = 0, q, qr, k, kr, v, kall, vall, a;
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
      s.kpre = b.buffer(tag + ".kpre", {1, 1, o, d}, dev);
      s.vpre = b.buffer(tag + ".vpre", {1, 1, o, d}, dev);
    }
    s.q = b.buffer(tag + ".q", {1, H, n, d}, dev);
    s.k = b.buffer(tag + ".k", {1, 1, n, d}, dev);
    s.v = b.buffer(tag + ".v", {1, 1, n, d}, dev);
    calls.push_back(call(OpKind::matmul, {s.x, w.wq}, {s.q}, {0, 0}));
    calls.push_back(call(OpKind::matmul, {s.x, w.wk}, {s.k}, {0, 0}));
    calls.push_back(call(OpKind::matmul, {s.x, w.wv}, {s.v}, {0, 0}));
    s.qr = rope(s.q, s, w, H, n, tag + ".q");
    s.kr = rope(s.k, s, w, 1, n, tag + ".k");
    s.kall = s.kr;
    s.vall = s.v;
    if (o > 0) {
      s.kall = b.buffer(tag + ".kall", {1, 1, T, d}, dev);
      s.vall = b.buffer(tag + ".vall", {1, 1, T, d}, dev);
      calls.push_back(call(OpKind::concat, {s.kpre, s.kr}, {s.kall}, {2}));
      calls.push_back(call(OpKind::concat, {s.vpre, s.v}, {s.vall}, {2}));
    }
    s.a = b.buffer(tag + ".a", {1, H, n, d}, dev);
    calls.push_back(call(OpKind::attention, {s.qr, s.kall, s.vall}, {s.a},
                         {1, 0}, {1.0 / std::sqrt(double(d))}));
    return s;
  };
  // The uploads of slice k: its rows of x and the tables, the prefix of
  // the kept keys and values.
  auto inputs = [&](unsigned k, const Slice &s) {
    int64_t o = offsets[k];
    std::vector<CopyDesc> c = {b.part(X, o * D * f, s.x),
                               b.part(COS, o * d * f, s.cos),
                               b.part(SIN, o * d * f, s.sin)};
    if (o > 0) {
      c.push_back(b.part(KH, 0, s.kpre));
      c.push_back(b.part(VH, 0, s.vpre));
    }
    return c;
  };

  // The forward stage job: slices in order.
  std::vector<uint32_t> eOut(K);
  for (unsigned k = 0; k < K; ++k) {
    std::string tag = "F s" + std::to_string(k);
    calls.clear();
    Slice s = forward(k, df, wf, tag);
    uint32_t zh = b.buffer(tag + ".zh", {1, H, sizes[k], D}, df),
             z = b.buffer(tag + ".z", {1, 1, sizes[k], D}, df);
    calls.push_back(call(OpKind::matmul, {s.a, wf.wo}, {zh}, {0, 0}));
    calls.push_back(call(OpKind::reduce, {zh}, {z}, {0, 1, 1}));
    uint32_t program = b.program(tag, calls);
    uint32_t eIn = b.event(), eF = b.event();
    eOut[k] = b.event();
    std::string mb = " mb" + std::to_string(k);
    b.copy(df, QueueKind::activation_h2d, inputs(k, s),
           k ? std::vector<uint32_t>{eOut[k - 1]} : std::vector<uint32_t>{},
           {eIn}, "IN s0" + mb, k);
    b.run(df, program, {eIn, eUpF}, {eF}, "F0" + mb, k);
    int64_t o = offsets[k];
    b.copy(df, QueueKind::d2h,
           {b.whole(z, t.out, o * D * f), b.whole(s.kr, KH, o * d * f),
            b.whole(s.v, VH, o * d * f)},
           {eF}, {eOut[k]}, "OUT s0" + mb, k);
  }

  // The backward stage job: slices last first.
  uint32_t accK = b.buffer("acc dk", {1, 1, S, d}, db),
           accV = b.buffer("acc dv", {1, 1, S, d}, db);
  std::vector<uint32_t> gAcc;
  for (uint32_t g : t.grads)
    gAcc.push_back(
        b.buffer("acc " + b.plan.buffers[g].name, b.plan.buffers[g].shape, db));
  for (unsigned k = K; k-- > 0;) {
    std::string tag = "B s" + std::to_string(k);
    const bool last = k + 1 == K;
    int64_t o = offsets[k], n = sizes[k], T = o + n;
    calls.clear();
    Slice s = forward(k, db, wb, tag);
    for (KernelCallDesc &c : calls)
      c.recompute = true;
    uint32_t dz = b.buffer(tag + ".dz", {1, 1, n, D}, db),
             da = b.buffer(tag + ".da", {1, H, n, d}, db),
             gwo = b.buffer(tag + ".gwo", {1, H, d, D}, db),
             dqr = b.buffer(tag + ".dqr", {1, H, n, d}, db),
             dkall = b.buffer(tag + ".dkall", {1, 1, T, d}, db),
             dvall = b.buffer(tag + ".dvall", {1, 1, T, d}, db);
    calls.push_back(call(OpKind::matmul, {dz, wb.wo}, {da}, {0, 1}));
    calls.push_back(call(OpKind::matmul, {s.a, dz}, {gwo}, {1, 0}));
    calls.push_back(call(OpKind::attention_grad, {s.qr, s.kall, s.vall, da},
                         {dqr, dkall, dvall}, {1, 0},
                         {1.0 / std::sqrt(double(d))}));
    // Own rows: this slice's gradient plus the later slices' (the
    // accumulator); earlier rows: into the accumulator.
    auto split = [&](uint32_t dall, uint32_t acc, const std::string &name) {
      uint32_t own = dall;
      if (o > 0) {
        uint32_t pre = b.buffer(tag + ".d" + name + "pre", {1, 1, o, d}, db);
        own = b.buffer(tag + ".d" + name + "own", {1, 1, n, d}, db);
        calls.push_back(
            call(OpKind::slice, {dall}, {pre}, {0, 0, 0, 0, 1, 1, 1, 1}));
        calls.push_back(
            call(OpKind::slice, {dall}, {own}, {0, 0, o, 0, 1, 1, 1, 1}));
        uint32_t padded =
            last ? acc : b.buffer(tag + ".d" + name + "pad", {1, 1, S, d}, db);
        // Rows [o, o + n) of the accumulator are this slice's share of the
        // later slices' gradients; the padded prefix adds zeros there.
        uint32_t later = 0;
        if (!last) {
          later = b.buffer(tag + ".d" + name + "later", {1, 1, n, d}, db);
          calls.push_back(
              call(OpKind::slice, {acc}, {later}, {0, 0, o, 0, 1, 1, 1, 1}));
        }
        calls.push_back(call(OpKind::slice_grad, {pre}, {padded},
                             {0, 0, 0, 0, 1, 1, 1, 1}));
        if (!last)
          calls.push_back(call(OpKind::add, {acc, padded}, {acc}));
        if (last)
          return own;
        uint32_t sum = b.buffer(tag + ".d" + name + "sum", {1, 1, n, d}, db);
        calls.push_back(call(OpKind::add, {own, later}, {sum}));
        return sum;
      }
      if (last)
        return own;
      uint32_t later = b.buffer(tag + ".d" + name + "later", {1, 1, n, d}, db),
               sum = b.buffer(tag + ".d" + name + "sum", {1, 1, n, d}, db);
      calls.push_back(
          call(OpKind::slice, {acc}, {later}, {0, 0, 0, 0, 1, 1, 1, 1}));
      calls.push_back(call(OpKind::add, {own, later}, {sum}));
      return sum;
    };
    uint32_t dkr = split(dkall, accK, "k"), dv = split(dvall, accV, "v");
    uint32_t dq = ropeGrad(dqr, s, wb, H, n, tag + ".dq"),
             dk = ropeGrad(dkr, s, wb, 1, n, tag + ".dk");
    uint32_t gwq = b.buffer(tag + ".gwq", {1, H, D, d}, db),
             gwk = b.buffer(tag + ".gwk", {1, 1, D, d}, db),
             gwv = b.buffer(tag + ".gwv", {1, 1, D, d}, db);
    calls.push_back(call(OpKind::matmul, {s.x, dq}, {gwq}, {1, 0}));
    calls.push_back(call(OpKind::matmul, {s.x, dk}, {gwk}, {1, 0}));
    calls.push_back(call(OpKind::matmul, {s.x, dv}, {gwv}, {1, 0}));
    uint32_t dxqh = b.buffer(tag + ".dxqh", {1, H, n, D}, db),
             dxq = b.buffer(tag + ".dxq", {1, 1, n, D}, db),
             dxk = b.buffer(tag + ".dxk", {1, 1, n, D}, db),
             dxv = b.buffer(tag + ".dxv", {1, 1, n, D}, db),
             dxqk = b.buffer(tag + ".dxqk", {1, 1, n, D}, db),
             dx = b.buffer(tag + ".dx", {1, 1, n, D}, db);
    calls.push_back(call(OpKind::matmul, {dq, wb.wq}, {dxqh}, {0, 1}));
    calls.push_back(call(OpKind::reduce, {dxqh}, {dxq}, {0, 1, 1}));
    calls.push_back(call(OpKind::matmul, {dk, wb.wk}, {dxk}, {0, 1}));
    calls.push_back(call(OpKind::matmul, {dv, wb.wv}, {dxv}, {0, 1}));
    calls.push_back(call(OpKind::add, {dxq, dxk}, {dxqk}));
    calls.push_back(call(OpKind::add, {dxqk, dxv}, {dx}));
    // Weight gradients over the slices in the job's order (last first).
    uint32_t g[] = {gwq, gwk, gwv, gwo};
    for (size_t i = 0; i < gAcc.size(); ++i)
      calls.push_back(last ? call(OpKind::reshape, {g[i]}, {gAcc[i]})
                           : call(OpKind::add, {gAcc[i], g[i]}, {gAcc[i]}));
    uint32_t program = b.program(tag, calls);
    std::vector<CopyDesc> up = inputs(k, s);
    up.push_back(b.part(DY, o * D * f, dz));
    uint32_t eIn = b.event(), eB = b.event(), eDown = b.event();
    std::string mb = " mb" + std::to_string(k);
    b.copy(db, QueueKind::activation_h2d, up, {eOut[K - 1]}, {eIn},
           "IN s1" + mb, k);
    b.run(db, program, {eIn, eUpB}, {eB}, "B1" + mb, k);
    std::vector<CopyDesc> down = {b.whole(dx, t.dx, o * D * f)};
    if (k == 0)
      for (size_t i = 0; i < gAcc.size(); ++i)
        down.push_back(b.whole(gAcc[i], t.grads[i]));
    b.copy(db, QueueKind::d2h, down, {eB}, {eDown}, "DOUT s1" + mb, k);
  }
  return t;
}

/// One step of the plan for `sizes` on `devices` devices: the output, the
/// input gradient and the weight gradients, in that order.
std::vector<std::vector<float>> runPlan(const std::vector<int64_t> &sizes,
                                        uint32_t devices) {
  SlicedPlan t = buildPlan(sizes, devices);
  std::vector<std::vector<float>> results;
  Expected<Plan> plan = writeAndLoad(t.b.plan, "token-slices.rpplan");
  EXPECT_TRUE(plan) << plan.getStatus().toString();
  if (!plan)
    return results;
  auto backend = host::HostBackend::create(backendOptions(devices, 2));
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

const char *const kNames[] = {"out",     "grad:x",  "grad:wq",
                              "grad:wk", "grad:wv", "grad:wo"};

TEST(TokenSlicesPlanTest, SlicedEqualsUnslicedAndTwoDevicesEqualOne) {
  std::vector<std::vector<float>> whole = runPlan({kSeq}, 1);
  ASSERT_EQ(whole.size(), 6u);
  // The unsliced plan on two devices is the same computation.
  EXPECT_EQ(runPlan({kSeq}, 2), whole);
  for (const std::vector<int64_t> &sizes : std::vector<std::vector<int64_t>>{
           {8, 8}, {4, 4, 4, 4}, {6, 4, 3, 3}, {1, 15}, {5, 1, 10}}) {
    std::string name;
    for (int64_t s : sizes)
      name += std::to_string(s) + " ";
    SCOPED_TRACE("slices " + name);
    std::vector<std::vector<float>> one = runPlan(sizes, 1);
    ASSERT_EQ(one.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      SCOPED_TRACE(kNames[i]);
      ASSERT_EQ(one[i].size(), whole[i].size());
      float scale = 0.0f;
      for (float v : whole[i])
        scale = std::max(scale, std::fabs(v));
      ASSERT_GT(scale, 0.0f); // every gradient is exercised
      for (size_t j = 0; j < whole[i].size(); ++j)
        EXPECT_NEAR(one[i][j], whole[i][j], 1e-5 * std::max(1.0f, scale))
            << "element " << j;
    }
    // Two devices (forward on 0, backward on 1, the kept keys and values
    // through host rows) equal one bit for bit.
    std::vector<std::vector<float>> two = runPlan(sizes, 2);
    ASSERT_EQ(two.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(std::memcmp(two[i].data(), one[i].data(),
                            one[i].size() * sizeof(float)),
                0)
          << kNames[i];
  }
}

} // namespace
