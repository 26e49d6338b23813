//===- StagedPlans.h - staged plans for the executor tests ---*- C++ -*-===//
//
// A two-device forward pipeline as the compiler lowers one: per
// microbatch, device 0 uploads its slice of the global input, computes
// h = x @ W0 + x and downloads h; device 1 uploads h, computes
// y = relu(h @ W1') and downloads y into its slice of the global output.
// W1' = W1 + W1 comes from the prologue (standing in for the bf16 casts),
// and the epilogue squares the output. Device buffers are reused from one
// microbatch to the next, so the events carry both kinds of order: a
// reader after its writer, and a writer after the last reader of what it
// overwrites.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_STAGEDPLANS_H
#define RP_RUNTIME_TEST_STAGEDPLANS_H

#include "PlanTestUtil.h"
#include "rp/runtime/Npy.h"

#include <random>

namespace rp::runtime::test {

struct TwoStagePlan {
  PlanBuilder b{2, 1, true};
  unsigned M = 0, rows = 0, dim = 0;
  uint32_t X = 0, W0 = 0, W1 = 0, Y = 0, Z = 0;
  /// Per microbatch: the events and jobs tests break or look for.
  std::vector<uint32_t> eIn, eF0, eOut0, eIn1, eF1, eOut1;
  std::vector<size_t> jIn, jF0, jOut0, jIn1, jF1, jOut1;
  uint32_t eW0 = 0, eW1 = 0;
  size_t jUp0 = 0, jUp1 = 0;
  uint32_t f0Program = 0;
};

inline TwoStagePlan makeTwoStagePlan(unsigned M, unsigned rows, unsigned dim) {
  TwoStagePlan t;
  PlanBuilder &b = t.b;
  b.plan.microbatches = M;
  t.M = M;
  t.rows = rows;
  t.dim = dim;
  int64_t R = rows, D = dim, G = int64_t(M) * rows;
  t.X = b.buffer("x", {G, D});
  t.W0 = b.param("w0", {D, D});
  t.W1 = b.param("w1", {D, D});
  uint32_t w1x2 = b.buffer("w1x2", {D, D});
  uint32_t H = b.buffer("h", {G, D});
  t.Y = b.buffer("y", {G, D});
  t.Z = b.buffer("z", {G, D});
  uint32_t x0 = b.buffer("x0", {R, D}, 0), w0 = b.buffer("w0.d", {D, D}, 0),
           t0 = b.buffer("t0", {R, D}, 0), h0 = b.buffer("h0", {R, D}, 0);
  uint32_t h1 = b.buffer("h1", {R, D}, 1), w1 = b.buffer("w1.d", {D, D}, 1),
           t1 = b.buffer("t1", {R, D}, 1), y1 = b.buffer("y1", {R, D}, 1);
  b.input("x", t.X);
  b.output("y", t.Y);
  b.output("z", t.Z);
  b.plan.prologue =
      int32_t(b.program("prologue", {call(OpKind::add, {t.W1, t.W1}, {w1x2})}));
  b.plan.epilogue =
      int32_t(b.program("epilogue", {call(OpKind::mul, {t.Y, t.Y}, {t.Z})}));
  t.f0Program = b.program("F0", {call(OpKind::matmul, {x0, w0}, {t0}, {0, 0}),
                                 call(OpKind::add, {t0, x0}, {h0})});
  uint32_t f1 = b.program("F1", {call(OpKind::matmul, {h1, w1}, {t1}, {0, 0}),
                                 call(OpKind::relu, {t1}, {y1})});

  t.eW0 = b.event();
  t.eW1 = b.event();
  t.jUp0 = b.copy(0, QueueKind::weight_h2d, {b.whole(t.W0, w0)}, {}, {t.eW0},
                  "UP s0");
  t.jUp1 = b.copy(1, QueueKind::weight_h2d, {b.whole(w1x2, w1)}, {}, {t.eW1},
                  "UP s1");
  uint64_t slice = uint64_t(R * D) * sizeof(float);
  for (unsigned m = 0; m < M; ++m)
    for (auto *list : {&t.eIn, &t.eF0, &t.eOut0, &t.eIn1, &t.eF1, &t.eOut1})
      list->push_back(b.event());
  auto after = [&](const std::vector<uint32_t> &events, unsigned m,
                   std::vector<uint32_t> waits) {
    if (m > 0)
      waits.push_back(events[m - 1]);
    return waits;
  };
  std::string mb;
  for (unsigned m = 0; m < M; ++m) {
    mb = " mb" + std::to_string(m);
    // x0 is overwritten: after F0 of the previous microbatch read it.
    t.jIn.push_back(b.copy(0, QueueKind::activation_h2d,
                           {b.part(t.X, m * slice, x0)}, after(t.eF0, m, {}),
                           {t.eIn[m]}, "IN" + mb, m));
    // h0 is overwritten: after the previous download read it.
    t.jF0.push_back(b.run(0, t.f0Program, after(t.eOut0, m, {t.eIn[m], t.eW0}),
                          {t.eF0[m]}, "F0" + mb, m));
    t.jOut0.push_back(b.copy(0, QueueKind::d2h, {b.whole(h0, H, m * slice)},
                             {t.eF0[m]}, {t.eOut0[m]}, "OUT0" + mb, m));
    t.jIn1.push_back(
        b.copy(1, QueueKind::activation_h2d, {b.part(H, m * slice, h1)},
               after(t.eF1, m, {t.eOut0[m]}), {t.eIn1[m]}, "IN1" + mb, m));
    t.jF1.push_back(b.run(1, f1, after(t.eOut1, m, {t.eIn1[m], t.eW1}),
                          {t.eF1[m]}, "F1" + mb, m));
    t.jOut1.push_back(b.copy(1, QueueKind::d2h, {b.whole(y1, t.Y, m * slice)},
                             {t.eF1[m]}, {t.eOut1[m]}, "OUT1" + mb, m));
  }
  return t;
}

/// A float input of `shape`, uniform in [-1, 1) from `seed`.
inline NpyArray randomArray(Shape shape, uint64_t seed) {
  NpyArray a;
  a.dtype = DType::f32;
  a.shape = std::move(shape);
  a.data.resize(numElements(a.shape) * sizeof(float));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < numElements(a.shape); ++i)
    reinterpret_cast<float *>(a.data.data())[i] = dist(rng);
  return a;
}

} // namespace rp::runtime::test

#endif // RP_RUNTIME_TEST_STAGEDPLANS_H
