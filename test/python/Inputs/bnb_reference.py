"""bitsandbytes' reference quantization, for the quantized-base tests.

bitsandbytes runs quantize_4bit on the CPU through its portable (PyTorch)
backend, which is what rp's quantizer reproduces bit for bit. Its second
level (quantize_blockwise of the absmax values) goes through its native
CPU library instead, whose approximate binary search picks a farther code
for about one value in a thousand (a value within ~1e-5 of a midpoint);
its CUDA kernel differs again. The portable backend's quantize_blockwise,
taken here from bitsandbytes' own source, is the reference for that level.
Dequantization too goes through the portable backend: the native CPU
dequantize_4bit of bitsandbytes 0.50.2 is wrong for weights whose last
dimension is under the block size (a [32, 32] weight comes back 37% off).
"""

import importlib.util
import os

import numpy as np
import torch

import bitsandbytes  # noqa: F401  (registers the ops)
import bitsandbytes._ops as _ops
import bitsandbytes.functional as F

_captured = {}
_module = []


def _load_portable_backend():
    if _captured:
        return _captured
    original = _ops.register_kernel

    def capture(name, device):
        def keep(fn):
            _captured[(name, device)] = fn
            return fn
        return keep

    path = os.path.join(os.path.dirname(bitsandbytes.__file__), "backends",
                        "default", "ops.py")
    spec = importlib.util.spec_from_file_location(
        "bitsandbytes.backends.default._rp_reference", path)
    module = importlib.util.module_from_spec(spec)
    _ops.register_kernel = capture
    try:
        spec.loader.exec_module(module)
    finally:
        _ops.register_kernel = original
    _module.append(module)
    return _captured


def quantize_blockwise(x, blocksize):
    """The portable backend's quantize_blockwise with the signed dynamic map:
    (codes uint8, absmax f32)."""
    fn = _load_portable_backend()[("bitsandbytes::quantize_blockwise", "default")]
    code = F.create_dynamic_map(signed=True)
    q, absmax = fn(torch.as_tensor(x, dtype=torch.float32), code, blocksize)
    return q.numpy(), absmax.numpy()


def nf4(w):
    """bitsandbytes' quantize_4bit (nf4, block 64) of w: packed codes and
    the f32 absmax per block, and its own torch mean of the absmax (the
    offset compress_statistics=True subtracts)."""
    q, state = F.quantize_4bit(torch.as_tensor(w, dtype=torch.float32),
                               blocksize=64, compress_statistics=False,
                               quant_type="nf4")
    absmax = state.absmax
    return q.numpy().reshape(-1), absmax.numpy(), absmax.mean().item()


def dequantize_nf4(codes, qabsmax, absmax2, offset, shape):
    """bitsandbytes' dequantization (portable backend, f32, eagerly) of a
    double-quantized state made of the given parts: the absmax values from
    their 8-bit codes, plus the offset, then the NF4 levels times them."""
    _load_portable_backend()
    module = _module[0]
    # The eager functions under the torch.compile wrappers.
    blockwise = module._dequantize_blockwise_compute.__wrapped__
    four_bit = module._dequantize_4bit_compute.__wrapped__
    absmax = blockwise(torch.as_tensor(np.array(qabsmax)).reshape(-1),
                       torch.as_tensor(np.array(absmax2)),
                       F.create_dynamic_map(signed=True), 256, torch.float32)
    absmax = absmax + torch.tensor(offset, dtype=torch.float32)
    out = four_bit(torch.as_tensor(np.array(codes)).reshape(-1), absmax,
                   F.get_4bit_type("nf4", device="cpu"), 64, tuple(shape),
                   torch.float32)
    return out.numpy()


def nf4_levels():
    return F.get_4bit_type("nf4", device="cpu").numpy()
