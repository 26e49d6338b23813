//===- ClassifierPlans.h - the two-layer classifier as plans -*- C++ -*-===//
//
// logits = (x @ W0) @ W1 with a cross-entropy loss, as an unstaged
// one-device plan and as a staged two-device plan, and the labels the
// StagedTrainingTest runs train it on.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_CLASSIFIERPLANS_H
#define RP_RUNTIME_TEST_CLASSIFIERPLANS_H

#include "PlanTestUtil.h"
#include "rp/runtime/Npy.h"

#include <cstring>

namespace rp::runtime::test::classifier {

constexpr int64_t R = 3, D = 5, H = 4, C = 6;

/// The unstaged plan: one program, microbatch-shaped inputs.
inline Plan unstagedPlan(unsigned M) {
  PlanBuilder b(1, M, false);
  uint32_t x = b.buffer("x", {R, D}),
           labels = b.buffer("labels", {R}, -1, DType::i64),
           scale = b.buffer("loss_scale", {});
  uint32_t w0 = b.param("w0", {D, H}), w1 = b.param("w1", {H, C});
  uint32_t h = b.buffer("h", {R, H}), logits = b.buffer("logits", {R, C}),
           loss = b.buffer("loss", {}),
           count = b.buffer("count", {}, -1, DType::i64),
           dlogits = b.buffer("dlogits", {R, C}), gw1 = b.buffer("gw1", {H, C}),
           dh = b.buffer("dh", {R, H}), gw0 = b.buffer("gw0", {D, H});
  uint32_t p = b.program(
      "step",
      {call(OpKind::matmul, {x, w0}, {h}, {0, 0}),
       call(OpKind::matmul, {h, w1}, {logits}, {0, 0}),
       call(OpKind::cross_entropy, {logits, labels}, {loss, count}, {-100}),
       call(OpKind::cross_entropy_grad, {logits, labels, scale}, {dlogits},
            {-100}),
       call(OpKind::matmul, {h, dlogits}, {gw1}, {1, 0}),
       call(OpKind::matmul, {dlogits, w1}, {dh}, {0, 1}),
       call(OpKind::matmul, {x, dh}, {gw0}, {1, 0})});
  b.run(0, p, {}, {}, "step");
  b.input("x", x);
  b.input("labels", labels, C);
  b.input("loss_scale", scale);
  b.output("loss_sum", loss);
  b.output("count", count);
  b.output("grad:w0", gw0);
  b.output("grad:w1", gw1);
  return b.plan;
}

/// The staged plan: device buffers per microbatch, so that the events only
/// order producers before consumers. `fusedLoss`: the head and loss as
/// rp-compile emits them by default, linear_cross_entropy and its gradient
/// (in chunks of 2 rows) on the transposed head.
inline Plan stagedPlan(unsigned M, bool fusedLoss = false) {
  PlanBuilder b(2, M, true);
  int64_t G = int64_t(M) * R;
  uint32_t X = b.buffer("x", {G, D}),
           L = b.buffer("labels", {G}, -1, DType::i64),
           scale = b.buffer("loss_scale", {});
  uint32_t W0 = b.param("w0", {D, H}), W1 = b.param("w1", {H, C});
  uint32_t loss = b.buffer("loss", {int64_t(M)}),
           count = b.buffer("count", {int64_t(M)}, -1, DType::i64),
           Hh = b.buffer("h.host", {G, H}), DHh = b.buffer("dh.host", {G, H}),
           GW0 = b.buffer("grad.w0", {D, H}), GW1 = b.buffer("grad.w1", {H, C});
  uint32_t w0 = b.buffer("w0.d", {D, H}, 0), w1 = b.buffer("w1.d", {H, C}, 1),
           s1 = b.buffer("scale.d", {}, 1);
  b.input("x", X);
  b.input("labels", L, C);
  b.input("loss_scale", scale);
  b.output("loss_sum", loss);
  b.output("count", count);
  b.output("grad:w0", GW0);
  b.output("grad:w1", GW1);

  uint32_t eW0 = b.event(), eW1 = b.event();
  b.copy(0, QueueKind::weight_h2d, {b.whole(W0, w0)}, {}, {eW0}, "UP s0");
  b.copy(1, QueueKind::weight_h2d, {b.whole(W1, w1), b.whole(scale, s1)}, {},
         {eW1}, "UP s1");
  std::vector<uint32_t> parts0, parts1;
  std::vector<std::function<void()>> later[8];
  for (unsigned m = 0; m < M; ++m) {
    std::string mb = " mb" + std::to_string(m), n = std::to_string(m);
    uint32_t x0 = b.buffer("x0." + n, {R, D}, 0),
             h0 = b.buffer("h0." + n, {R, H}, 0),
             dh0 = b.buffer("dh0." + n, {R, H}, 0),
             gw0 = b.buffer("gw0." + n, {D, H}, 0);
    uint32_t h1 = b.buffer("h1." + n, {R, H}, 1),
             l1 = b.buffer("l1." + n, {R}, 1, DType::i64),
             logits = b.buffer("logits." + n, {R, C}, 1),
             lossd = b.buffer("loss." + n, {}, 1),
             countd = b.buffer("count." + n, {}, 1, DType::i64),
             dlogits = b.buffer("dlogits." + n, {R, C}, 1),
             gw1 = b.buffer("gw1." + n, {H, C}, 1),
             dh1 = b.buffer("dh1." + n, {R, H}, 1);
    uint32_t p0 = b.buffer("grad.w0." + n, {D, H}),
             p1 = b.buffer("grad.w1." + n, {H, C});
    parts0.push_back(p0);
    parts1.push_back(p1);
    uint32_t f0 =
        b.program("F0" + mb, {call(OpKind::matmul, {x0, w0}, {h0}, {0, 0})});
    std::vector<KernelCallDesc> tailCalls = {
        call(OpKind::matmul, {h1, w1}, {logits}, {0, 0}),
        call(OpKind::cross_entropy, {logits, l1}, {lossd, countd}, {-100}),
        call(OpKind::cross_entropy_grad, {logits, l1, s1}, {dlogits}, {-100}),
        call(OpKind::matmul, {h1, dlogits}, {gw1}, {1, 0}),
        call(OpKind::matmul, {dlogits, w1}, {dh1}, {0, 1})};
    if (fusedLoss) {
      uint32_t w1t = b.buffer("w1t." + n, {C, H}, 1),
               gw1t = b.buffer("gw1t." + n, {C, H}, 1);
      tailCalls = {call(OpKind::transpose, {w1}, {w1t}, {1, 0}),
                   call(OpKind::linear_cross_entropy, {h1, w1t, l1},
                        {lossd, countd}, {-100, 2}),
                   call(OpKind::linear_cross_entropy_grad, {h1, w1t, l1, s1},
                        {dh1, gw1t}, {-100, 2}),
                   call(OpKind::transpose, {gw1t}, {gw1}, {1, 0})};
    }
    uint32_t tail = b.program("T1" + mb, tailCalls);
    uint32_t b0 =
        b.program("B0" + mb, {call(OpKind::matmul, {x0, dh0}, {gw0}, {1, 0})});
    uint64_t xs = R * D * 4, hs = R * H * 4;
    uint32_t eX = b.event(), eF = b.event(), eH = b.event(), eH1 = b.event(),
             eT = b.event(), eD = b.event(), eDin = b.event(), eB = b.event(),
             eG = b.event();
    // Each queue's jobs go in queue order; the jobs of one microbatch are
    // spread over the queues and interleave with the others'.
    later[0].push_back([=, &b] {
      b.copy(0, QueueKind::activation_h2d, {b.part(X, m * xs, x0)}, {}, {eX},
             "IN" + mb, m);
    });
    later[1].push_back([=, &b] {
      b.run(0, f0, {eX, eW0}, {eF}, "F0" + mb, m);
    });
    later[2].push_back([=, &b] {
      b.copy(0, QueueKind::d2h, {b.whole(h0, Hh, m * hs)}, {eF}, {eH},
             "OUT" + mb, m);
    });
    later[3].push_back([=, &b] {
      b.copy(1, QueueKind::activation_h2d,
             {b.part(Hh, m * hs, h1), b.part(L, m * R * 8, l1)}, {eH}, {eH1},
             "IN1" + mb, m);
    });
    later[4].push_back([=, &b] {
      b.run(1, tail, {eH1, eW1}, {eT}, "T1" + mb, m);
    });
    later[5].push_back([=, &b] {
      b.copy(1, QueueKind::d2h,
             {b.whole(dh1, DHh, m * hs), b.whole(lossd, loss, m * 4),
              b.whole(countd, count, m * 8), b.whole(gw1, p1)},
             {eT}, {eD}, "DOUT" + mb, m);
    });
    later[6].push_back([=, &b] {
      b.copy(0, QueueKind::activation_h2d, {b.part(DHh, m * hs, dh0)}, {eD},
             {eDin}, "DIN" + mb, m);
    });
    later[7].push_back([=, &b] {
      b.run(0, b0, {eDin}, {eB}, "B0" + mb, m);
      b.copy(0, QueueKind::d2h, {b.whole(gw0, p0)}, {eB}, {eG}, "GRAD" + mb, m);
    });
  }
  for (auto &list : later)
    for (auto &add : list)
      add();
  // The epilogue adds the microbatches' gradients in microbatch order.
  std::vector<KernelCallDesc> sums;
  auto sum = [&](const std::vector<uint32_t> &parts, uint32_t out,
                 const std::string &name) {
    if (parts.size() == 1) {
      sums.push_back(call(OpKind::reshape, {parts[0]}, {out}));
      return;
    }
    uint32_t acc = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
      uint32_t next = k + 1 == parts.size()
                          ? out
                          : b.buffer(name + ".sum" + std::to_string(k),
                                     b.plan.buffers[out].shape);
      sums.push_back(call(OpKind::add, {acc, parts[k]}, {next}));
      acc = next;
    }
  };
  sum(parts0, GW0, "grad.w0");
  sum(parts1, GW1, "grad.w1");
  b.plan.epilogue = int32_t(b.program("epilogue", sums));
  return b.plan;
}

/// Labels with some ignored positions, the same for every step.
inline NpyArray labelsArray(unsigned M) {
  NpyArray a;
  a.dtype = DType::i64;
  a.shape = {int64_t(M) * R};
  a.data.resize(a.shape[0] * 8);
  for (int64_t i = 0; i < a.shape[0]; ++i) {
    int64_t v = i % 4 == 3 ? -100 : (i * 5 + 1) % C;
    std::memcpy(a.data.data() + i * 8, &v, 8);
  }
  return a;
}

} // namespace rp::runtime::test::classifier

#endif // RP_RUNTIME_TEST_CLASSIFIERPLANS_H
