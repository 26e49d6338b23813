# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# rp's quantizer (rp-quantize-base, contract/lib/Quantize.cpp) against
# bitsandbytes (pinned in scripts/torch2-requirements.txt), on weights of
# several shapes and scales, one of 63 values (a partial block) and one with
# outliers: rp-opt quantizes them into a weights file, and the blobs are
# compared part by part.
# - nf4: the 4-bit codes bit for bit with bitsandbytes' quantize_4bit
#   (blocksize 64); the offset (the mean of the absmax values) within 2 ulp
#   of torch's f32 mean (the last bit depends on the summation order); the
#   8-bit absmax codes and the absmax of their blocks of 256 bit for bit
#   with bitsandbytes' portable quantize_blockwise at that offset (its
#   native CPU kernel's search is approximate: Inputs/bnb_reference.py);
#   the dequantized weight (Quantize.h's formula, which the host kernel
#   computes) bit for bit with bitsandbytes' dequantize_4bit of the same
#   state; the round-trip error within half the widest gap of
#   the NF4 levels times the block's absmax, plus the absmax's own error.
# - int8: codes and absmax bit for bit with numpy from the definition; the
#   error within absmax / 254.

import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
import bnb_reference as ref  # noqa: E402
from rp.tools import find_tool  # noqa: E402

out = Path(sys.argv[1])
rng = np.random.default_rng(0)
shapes = {"a": (64, 64), "b": (96, 130), "c": (7, 9), "d": (300, 320),
          "e": (48, 1024)}
weights = {}
for i, (name, shape) in enumerate(shapes.items()):
    scale = [1.0, 0.02, 3.0, 0.005, 0.1][i]
    w = (rng.standard_normal(shape) * scale).astype(np.float32)
    if name == "d":  # outliers, as real weights have
        w.reshape(-1)[::997] *= 40
    weights[name] = w

# One layer per weight: y = x W^T + r (the add of another input, a
# residual, keeps the matmul from being the output layer, which stays
# whole; a tanh no longer does: Gemma 2 softcaps its logits so), and LoRA
# adapters.
blob = b""
params, layers, rets = [], [], []
for name, w in weights.items():
    o, i = w.shape
    params.append(f'  %w{name} = rp.param "{name}" trainable at "w.bin"[{len(blob)}] '
                  f': tensor<{o}x{i}xf32>')
    blob += w.tobytes()
    blob += b"\0" * (-len(blob) % 64)
    layers.append(f'''  %y{name} = rp.layer "{name}" (%x{name}, %w{name}, %r{name}) : (tensor<1x{i}xf32>, tensor<{o}x{i}xf32>, tensor<1x{o}xf32>) -> tensor<1x{o}xf32> {{
  ^bb0(%a: tensor<1x{i}xf32>, %b: tensor<{o}x{i}xf32>, %c: tensor<1x{o}xf32>):
    %m = rp.matmul %a, %b transpose_b : (tensor<1x{i}xf32>, tensor<{o}x{i}xf32>) -> tensor<1x{o}xf32>
    %t = rp.add %m, %c : (tensor<1x{o}xf32>, tensor<1x{o}xf32>) -> tensor<1x{o}xf32>
    rp.yield %t : tensor<1x{o}xf32>
  }}''')
    rets.append((f"%y{name}", f"tensor<1x{o}xf32>"))
(out / "w.bin").write_bytes(blob)
args = ", ".join(f"%x{n}: tensor<1x{w.shape[1]}xf32>, %r{n}: tensor<1x{w.shape[0]}xf32>"
                 for n, w in weights.items())
ir = (f"func.func @main({args}) -> ({', '.join(t for _, t in rets)}) {{\n"
      + "\n".join(params) + "\n" + "\n".join(layers) + "\n"
      + f"  return {', '.join(v for v, _ in rets)} : {', '.join(t for _, t in rets)}\n}}\n")
(out / "model.mlir").write_text(ir)


def quantized(kind):
    text = subprocess.run(
        [find_tool("rp-opt"), str(out / "model.mlir"), "-rp-add-lora=rank=1",
         f"-rp-quantize-base=kind={kind} weights-file={out}/{kind}.bin ir-dir={out}"],
        check=True, capture_output=True, text=True).stdout
    data = (out / f"{kind}.bin").read_bytes()
    found = {}
    for name, offset, size in re.findall(
            r'rp.param "(\w+)" at "\w+.bin"\[(\d+)\] : tensor<(\d+)xi8>', text):
        found[name] = data[int(offset):int(offset) + int(size)]
    return found


def align4(n):
    return (n + 3) // 4 * 4


def nf4_parts(b, n):
    blocks = -(-n // 64)
    scales = align4(-(-n // 2))
    scales2 = align4(scales + blocks)
    offset = scales2 + 4 * -(-blocks // 256)
    assert len(b) == offset + 4, (len(b), offset + 4)
    a = np.frombuffer(b, np.uint8)
    return (a[:-(-n // 2)], a[scales:scales + blocks],
            np.frombuffer(b[scales2:offset], np.float32),
            struct.unpack("<f", b[offset:offset + 4])[0])


def ulps(a, b):
    ia, ib = np.float32(a).view(np.int32), np.float32(b).view(np.int32)
    return abs(int(ia) - int(ib))


blobs = quantized("nf4")
levels = ref.nf4_levels()
gap = np.max(np.diff(levels)) / 2
dynamic = None
for name, w in weights.items():
    n = w.size
    codes, qabsmax, absmax2, offset = nf4_parts(blobs[name], n)
    bnb_codes, bnb_absmax, torch_mean = ref.nf4(w)
    ref_q, ref_absmax2 = ref.quantize_blockwise(bnb_absmax - np.float32(offset), 256)
    dq = ref.dequantize_nf4(codes, qabsmax, absmax2, offset, w.shape)
    # The block scales the dequantization uses, and the error bound.
    import bitsandbytes.functional as F
    dynamic = F.create_dynamic_map(signed=True).numpy()
    absmax_dq = (dynamic[qabsmax] * np.repeat(absmax2, 256)[:len(qabsmax)]
                 ).astype(np.float32) + np.float32(offset)
    flat = w.reshape(-1)
    nibbles = np.stack([codes >> 4, codes & 15], 1).reshape(-1)[:n]
    formula = (levels[nibbles] * np.repeat(absmax_dq, 64)[:n]).astype(np.float32)
    true_absmax = np.repeat(bnb_absmax, 64)[:n]
    bound = true_absmax * gap + np.abs(np.repeat(bnb_absmax - absmax_dq, 64)[:n]) + 1e-7
    err = np.abs(flat - dq.reshape(-1))
    print(f"nf4 {name} {w.shape}: codes {np.array_equal(codes, bnb_codes)}, "
          f"offset within 2 ulp {ulps(offset, torch_mean) <= 2}, "
          f"absmax codes {np.array_equal(qabsmax, ref_q)}, "
          f"absmax2 {np.array_equal(absmax2, ref_absmax2)}, "
          f"dequantized as bitsandbytes {np.array_equal(formula, dq.reshape(-1))}, "
          f"within the bound {bool(np.all(err <= bound))}, "
          f"mean error / mean |w| {err.mean() / np.abs(flat).mean():.2f}")
# CHECK: nf4 a (64, 64): codes True, offset within 2 ulp True, absmax codes True, absmax2 True, dequantized as bitsandbytes True, within the bound True, mean error / mean |w| 0.0{{[0-9]}}
# CHECK: nf4 b (96, 130): codes True, offset within 2 ulp True, absmax codes True, absmax2 True, dequantized as bitsandbytes True, within the bound True
# CHECK: nf4 c (7, 9): codes True, offset within 2 ulp True, absmax codes True, absmax2 True, dequantized as bitsandbytes True, within the bound True
# CHECK: nf4 d (300, 320): codes True, offset within 2 ulp True, absmax codes True, absmax2 True, dequantized as bitsandbytes True, within the bound True
# CHECK: nf4 e (48, 1024): codes True, offset within 2 ulp True, absmax codes True, absmax2 True, dequantized as bitsandbytes True, within the bound True

blobs = quantized("int8")
for name, w in weights.items():
    n = w.size
    b = blobs[name]
    codes = np.frombuffer(b[:n], np.int8)
    blocks = -(-n // 64)
    absmax = np.frombuffer(b[align4(n):align4(n) + 4 * blocks], np.float32)
    flat = np.concatenate([w.reshape(-1), np.zeros((-n) % 64, np.float32)])
    ref_absmax = np.abs(flat.reshape(-1, 64)).max(1).astype(np.float32)
    recip = (np.float32(1) / np.maximum(ref_absmax, np.float32(1e-38))).astype(np.float32)
    scaled = np.clip((flat.reshape(-1, 64) * recip[:, None]).astype(np.float32), -1, 1)
    ref_codes = np.rint((scaled * np.float32(127)).astype(np.float32)).astype(np.int8).reshape(-1)[:n]
    dq = codes.astype(np.float32) * np.repeat((absmax / np.float32(127)).astype(np.float32), 64)[:n]
    err = np.abs(w.reshape(-1) - dq)
    bound = np.repeat(absmax, 64)[:n] / 254 * (1 + 1e-6)
    print(f"int8 {name}: codes {np.array_equal(codes, ref_codes)}, "
          f"absmax {np.array_equal(absmax, ref_absmax)}, "
          f"within absmax/254 {bool(np.all(err <= bound))}")
# CHECK: int8 a: codes True, absmax True, within absmax/254 True
# CHECK: int8 b: codes True, absmax True, within absmax/254 True
# CHECK: int8 c: codes True, absmax True, within absmax/254 True
# CHECK: int8 d: codes True, absmax True, within absmax/254 True
# CHECK: int8 e: codes True, absmax True, within absmax/254 True
