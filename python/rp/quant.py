"""The quantized frozen base's format (rp-compile --quantize-base), read
back in numpy: ``dequantize(kind, blob, n)`` gives the f32 values every
device computes from the blob (contract/include/rp/contract/Quantize.h has
the layout and arithmetic; contract/lib/Quantize.cpp the tables, copied
here as hex floats). ``rp.export --merged`` merges the adapters into these
values, the weights the run trained against, not the unquantized ones.
"""

from __future__ import annotations

import numpy as np

BLOCK = 64
SCALE_BLOCK = 256

# QLoRA's NF4 levels and bitsandbytes' signed dynamic 8-bit map, bit for bit.
_NF4 = """
    -0x1p+0 -0x1.647362p-1 -0x1.0cd66p-1 -0x1.94654p-2
    -0x1.23449ap-2 -0x1.7a6a7ep-3 -0x1.74f0e2p-4 0x0p+0
    0x1.45f5fep-4 0x1.4995c6p-3 0x1.f809bap-3 0x1.5a0674p-2
    0x1.c3497p-2 0x1.200f56p-1 0x1.722766p-1 0x1p+0
"""
_DYNAMIC = """
    -0x1.fc6666p-1 -0x1.f53334p-1 -0x1.eep-1 -0x1.e6ccccp-1
    -0x1.df999ap-1 -0x1.d86666p-1 -0x1.d13334p-1 -0x1.cap-1
    -0x1.c2ccccp-1 -0x1.bb999ap-1 -0x1.b46666p-1 -0x1.ad3334p-1
    -0x1.a6p-1 -0x1.9eccccp-1 -0x1.97999ap-1 -0x1.906666p-1
    -0x1.893334p-1 -0x1.82p-1 -0x1.7accccp-1 -0x1.73999ap-1
    -0x1.6c6668p-1 -0x1.653334p-1 -0x1.5ep-1 -0x1.56ccccp-1
    -0x1.4f999ap-1 -0x1.486668p-1 -0x1.413334p-1 -0x1.3ap-1
    -0x1.32ccccp-1 -0x1.2b999ap-1 -0x1.246668p-1 -0x1.1d3334p-1
    -0x1.16p-1 -0x1.0eccccp-1 -0x1.079998p-1 -0x1.006666p-1
    -0x1.f26664p-2 -0x1.e4p-2 -0x1.d59998p-2 -0x1.c73334p-2
    -0x1.b8ccccp-2 -0x1.aa6666p-2 -0x1.9cp-2 -0x1.8d9998p-2
    -0x1.7f3334p-2 -0x1.70ccccp-2 -0x1.626666p-2 -0x1.54p-2
    -0x1.459998p-2 -0x1.373334p-2 -0x1.28ccccp-2 -0x1.1a6668p-2
    -0x1.0cp-2 -0x1.fb3332p-3 -0x1.de6666p-3 -0x1.c1999ap-3
    -0x1.a4ccccp-3 -0x1.88p-3 -0x1.6b3334p-3 -0x1.4e6666p-3
    -0x1.31999ap-3 -0x1.14ccccp-3 -0x1.fp-4 -0x1.b66668p-4
    -0x1.93d70ap-4 -0x1.8851eep-4 -0x1.7ccccep-4 -0x1.7147aep-4
    -0x1.65c29p-4 -0x1.5a3d7p-4 -0x1.4eb854p-4 -0x1.433334p-4
    -0x1.37ae14p-4 -0x1.2c28f6p-4 -0x1.20a3d6p-4 -0x1.151ebap-4
    -0x1.09999ap-4 -0x1.fc28f6p-5 -0x1.e51ebap-5 -0x1.ce147ap-5
    -0x1.b70a3ep-5 -0x1.ap-5 -0x1.88f5c2p-5 -0x1.71eb86p-5
    -0x1.5ae146p-5 -0x1.43d70ap-5 -0x1.2ccccep-5 -0x1.15c29p-5
    -0x1.fd70a4p-6 -0x1.cf5c2ap-6 -0x1.a147aep-6 -0x1.733334p-6
    -0x1.451ebap-6 -0x1.170a3ep-6 -0x1.d1eb86p-7 -0x1.75c29p-7
    -0x1.3e76c8p-7 -0x1.2c083p-7 -0x1.19999ap-7 -0x1.072b02p-7
    -0x1.e978d4p-8 -0x1.c49ba6p-8 -0x1.9fbe76p-8 -0x1.7ae148p-8
    -0x1.56041ap-8 -0x1.3126e8p-8 -0x1.0c49bap-8 -0x1.ced914p-9
    -0x1.851eb8p-9 -0x1.3b645ap-9 -0x1.e353f8p-10 -0x1.4fdf3ap-10
    -0x1.eecbfep-11 -0x1.b3d07cp-11 -0x1.78d5p-11 -0x1.3dd982p-11
    -0x1.02de02p-11 -0x1.8fc506p-12 -0x1.19ce0ap-12 -0x1.47ae16p-13
    -0x1.743e96p-14 -0x1.15df66p-14 -0x1.6f0068p-15 -0x1.64840cp-16
    -0x1.040bfep-17 -0x1.b43528p-19 -0x1.27476ep-21 0x0p+0
    0x1.27476ep-21 0x1.b43528p-19 0x1.040bfep-17 0x1.64840cp-16
    0x1.6f0068p-15 0x1.15df66p-14 0x1.743e96p-14 0x1.47ae16p-13
    0x1.19ce0ap-12 0x1.8fc506p-12 0x1.02de02p-11 0x1.3dd982p-11
    0x1.78d5p-11 0x1.b3d07cp-11 0x1.eecbfep-11 0x1.4fdf3ap-10
    0x1.e353f8p-10 0x1.3b645ap-9 0x1.851eb8p-9 0x1.ced914p-9
    0x1.0c49bap-8 0x1.3126e8p-8 0x1.56041ap-8 0x1.7ae148p-8
    0x1.9fbe76p-8 0x1.c49ba6p-8 0x1.e978d4p-8 0x1.072b02p-7
    0x1.19999ap-7 0x1.2c083p-7 0x1.3e76c8p-7 0x1.75c29p-7
    0x1.d1eb86p-7 0x1.170a3ep-6 0x1.451ebap-6 0x1.733334p-6
    0x1.a147aep-6 0x1.cf5c2ap-6 0x1.fd70a4p-6 0x1.15c29p-5
    0x1.2ccccep-5 0x1.43d70ap-5 0x1.5ae146p-5 0x1.71eb86p-5
    0x1.88f5c2p-5 0x1.ap-5 0x1.b70a3ep-5 0x1.ce147ap-5
    0x1.e51ebap-5 0x1.fc28f6p-5 0x1.09999ap-4 0x1.151ebap-4
    0x1.20a3d6p-4 0x1.2c28f6p-4 0x1.37ae14p-4 0x1.433334p-4
    0x1.4eb854p-4 0x1.5a3d7p-4 0x1.65c29p-4 0x1.7147aep-4
    0x1.7ccccep-4 0x1.8851eep-4 0x1.93d70ap-4 0x1.b66668p-4
    0x1.fp-4 0x1.14ccccp-3 0x1.31999ap-3 0x1.4e6666p-3
    0x1.6b3334p-3 0x1.88p-3 0x1.a4ccccp-3 0x1.c1999ap-3
    0x1.de6666p-3 0x1.fb3332p-3 0x1.0cp-2 0x1.1a6668p-2
    0x1.28ccccp-2 0x1.373334p-2 0x1.459998p-2 0x1.54p-2
    0x1.626666p-2 0x1.70ccccp-2 0x1.7f3334p-2 0x1.8d9998p-2
    0x1.9cp-2 0x1.aa6666p-2 0x1.b8ccccp-2 0x1.c73334p-2
    0x1.d59998p-2 0x1.e4p-2 0x1.f26664p-2 0x1.006666p-1
    0x1.079998p-1 0x1.0eccccp-1 0x1.16p-1 0x1.1d3334p-1
    0x1.246668p-1 0x1.2b999ap-1 0x1.32ccccp-1 0x1.3ap-1
    0x1.413334p-1 0x1.486668p-1 0x1.4f999ap-1 0x1.56ccccp-1
    0x1.5ep-1 0x1.653334p-1 0x1.6c6668p-1 0x1.73999ap-1
    0x1.7accccp-1 0x1.82p-1 0x1.893334p-1 0x1.906666p-1
    0x1.97999ap-1 0x1.9eccccp-1 0x1.a6p-1 0x1.ad3334p-1
    0x1.b46666p-1 0x1.bb999ap-1 0x1.c2ccccp-1 0x1.cap-1
    0x1.d13334p-1 0x1.d86666p-1 0x1.df999ap-1 0x1.e6ccccp-1
    0x1.eep-1 0x1.f53334p-1 0x1.fc6666p-1 0x1p+0
"""
NF4_LEVELS = np.array([float.fromhex(v) for v in _NF4.split()], np.float32)
DYNAMIC_MAP = np.array([float.fromhex(v) for v in _DYNAMIC.split()],
                       np.float32)


def _align4(a: int) -> int:
    return (a + 3) & ~3


def layout(kind: str, n: int) -> dict:
    """Byte offsets of the parts of an n-value blob, and its size."""
    blocks = -(-n // BLOCK)
    if kind == "int8":
        scales = _align4(n)
        return {"codes": 0, "scales": scales, "bytes": scales + 4 * blocks}
    if kind != "nf4":
        raise ValueError(f"unknown quantized format {kind!r}: nf4 or int8")
    scales = _align4(-(-n // 2))
    scales2 = _align4(scales + blocks)
    offset = scales2 + 4 * -(-blocks // SCALE_BLOCK)
    return {"codes": 0, "scales": scales, "scales2": scales2,
            "offset": offset, "bytes": offset + 4}


def dequantize(kind: str, blob, n: int) -> np.ndarray:
    """The n f32 values of a blob, as the devices compute them: each
    product and sum rounded to f32 (never fused)."""
    blob = np.frombuffer(bytes(blob), np.uint8)
    lay = layout(kind, n)
    if blob.size != lay["bytes"]:
        raise ValueError(f"a {kind} blob of {n} values has {lay['bytes']} "
                         f"bytes, not {blob.size}")
    blocks = -(-n // BLOCK)
    block_of = np.arange(n) // BLOCK
    if kind == "int8":
        codes = blob[:n].view(np.int8).astype(np.float32)
        absmax = blob[lay["scales"]:lay["scales"] + 4 * blocks].view(np.float32)
        step = absmax / np.float32(127)
        return codes * step[block_of]
    packed = blob[:-(-n // 2)]
    codes = np.empty(2 * packed.size, np.uint8)
    codes[0::2], codes[1::2] = packed >> 4, packed & 15
    q = blob[lay["scales"]:lay["scales"] + blocks]
    absmax2 = blob[lay["scales2"]:lay["offset"]].view(np.float32)
    offset = blob[lay["offset"]:lay["offset"] + 4].view(np.float32)[0]
    absmax = DYNAMIC_MAP[q] * absmax2[np.arange(blocks) // SCALE_BLOCK]
    absmax = (absmax + offset).astype(np.float32)
    return NF4_LEVELS[codes[:n]] * absmax[block_of]
