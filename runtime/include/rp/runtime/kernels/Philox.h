//===- Philox.h - counter-based random numbers for dropout ------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; Random123's philox4x32 with 10 rounds): a bijection of a
// 128-bit counter under a 64-bit key, so any element's random value is a
// pure function of where it is, computed alone. That is what makes dropout
// (LoRA's lora_dropout) the same bits on 1, 2 or 4 devices, in any
// microbatch split, on the host and on the GPU, and lets the backward
// recompute the forward's mask instead of keeping it.
//
// The dropout mask of element `index` (its row-major index in the global
// batch, so microbatch m of M starts at m times its size) of the tensor
// numbered `tensor` at training step `step`, under the run's `seed`:
//   key     = (seed low 32 bits, seed high 32 bits)
//   counter = (index / 4 low 32 bits, index / 4 high 32 bits, tensor, step)
//   r       = word index % 4 of philox4x32_10(counter, key)
//   keep    = r >= threshold, threshold = p * 2^32 rounded down
//   y       = keep ? x * scale : 0, scale = 1 / (1 - p) in f32
// python/rp/_philox.py is the same in numpy (a test's PyTorch model applies
// its mask); runtime/test/PhiloxTest.cpp holds Random123's known answers.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_PHILOX_H
#define RP_RUNTIME_KERNELS_PHILOX_H

#include "rp/runtime/kernels/Annotations.h"

#include <cstdint>

namespace rp::runtime::kernels {

struct Philox4 {
  uint32_t v[4];
};

/// philox4x32 with 10 rounds of `counter` under the key (k0, k1).
RP_HD inline Philox4 philox4x32(Philox4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += kW0;
      k1 += kW1;
    }
    uint64_t p0 = uint64_t(kM0) * c.v[0], p1 = uint64_t(kM1) * c.v[2];
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c = Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

/// Where a dropout's mask comes from: the run's seed, the step, the
/// tensor's number, the global index of the tensor's first element here
/// (a microbatch's offset in the global batch), and the drop probability.
struct DropoutKey {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t tensor = 0;
  uint64_t offset = 0;
  float p = 0;
};

/// A plan's dropout call reads its key from the `dropout_key` input, one
/// i64 row per microbatch that the trainer fills each step: (seed, step,
/// global microbatch index, on). A microbatch's first element is global
/// element microbatch * `elements` (x's elements per microbatch: x's
/// dimension 0 is the batch's, split evenly). `on` is 0 where no mask
/// applies (an eval pass): the call copies x.
RP_HD inline DropoutKey dropoutKeyOfRow(const int64_t *row, uint32_t tensor,
                                        float p, uint64_t elements) {
  DropoutKey key;
  key.seed = uint64_t(row[0]);
  key.step = uint32_t(row[1]);
  key.tensor = tensor;
  key.offset = uint64_t(row[2]) * elements;
  key.p = p;
  return key;
}

/// Elements below this 32-bit value are dropped: p * 2^32 rounded down.
RP_HD inline uint64_t dropoutThreshold(float p) {
  return uint64_t(double(p) * 4294967296.0);
}

/// The 32-bit random value of global element `index`.
RP_HD inline uint32_t dropoutBits(const DropoutKey &key, uint64_t index) {
  uint64_t group = index >> 2;
  Philox4 r = philox4x32(
      Philox4{{uint32_t(group), uint32_t(group >> 32), key.tensor, key.step}},
      uint32_t(key.seed), uint32_t(key.seed >> 32));
  return r.v[index & 3];
}

/// The multiplier of kept elements, 1 / (1 - p) in f32.
RP_HD inline float dropoutScale(float p) { return 1.0f / (1.0f - p); }

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_PHILOX_H
