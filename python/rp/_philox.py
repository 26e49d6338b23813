"""rp's dropout mask in numpy: Philox4x32-10 (Random123's philox4x32, 10
rounds) keyed by the run's seed, its counter the element's group of four,
the tensor's number and the step, as runtime/include/rp/runtime/kernels/
Philox.h computes it on the host and the GPU. A PyTorch model applying
``dropout_mask(...)`` drops what rp drops (the LoRA dropout tests do)."""

from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key):
    """philox4x32-10 of ``counter`` (4 arrays or ints of uint32 words,
    broadcast together) under ``key`` (two uint32 ints); 4 uint32 arrays."""
    c = [np.asarray(w, dtype=np.uint64) for w in counter]
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
        p0, p1 = _M0 * c[0], _M1 * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & _LOW
        hi1, lo1 = p1 >> np.uint64(32), p1 & _LOW
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
    return [w.astype(np.uint32) for w in c]


def dropout_bits(seed: int, step: int, tensor: int, index) -> np.ndarray:
    """The 32-bit random value of each global element ``index``."""
    index = np.asarray(index, dtype=np.uint64)
    group = index >> np.uint64(2)
    words = philox4x32((group & _LOW, group >> np.uint64(32),
                        np.full_like(group, tensor), np.full_like(group, step)),
                       (seed & 0xFFFFFFFF, seed >> 32))
    lane = (index & np.uint64(3)).astype(np.int64)
    return np.choose(lane, words)


def dropout_mask(seed: int, step: int, tensor: int, shape, p: float,
                 offset: int = 0) -> np.ndarray:
    """The keep mask (bool, ``shape``) of a tensor whose first element is
    global element ``offset``: kept where the value is at least
    p * 2**32 rounded down (p in f32)."""
    n = int(np.prod(shape))
    bits = dropout_bits(seed, step, tensor, offset + np.arange(n, dtype=np.uint64))
    threshold = int(float(np.float32(p)) * 4294967296.0)
    return (bits.astype(np.uint64) >= np.uint64(threshold)).reshape(shape)


def dropout_scale(p: float) -> np.float32:
    """The kept elements' multiplier, 1 / (1 - p) in f32."""
    return np.float32(1.0) / (np.float32(1.0) - np.float32(p))


def tensor_id(weight: str, occurrence: int = 0) -> int:
    """The ``tensor`` number rp-add-lora gives the dropout of the adapter
    of ``weight`` (e.g. ``model.layers.0.self_attn.q_proj.weight``): FNV-1a
    (32 bits) of the name, plus one per earlier adapter of that weight."""
    h = 2166136261
    for byte in weight.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return (h + occurrence) & 0xFFFFFFFF
