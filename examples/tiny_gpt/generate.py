"""Writes model.mlir and weights.bin: a 2-layer GPT (d=32, 4 heads,
vocabulary 64, sequence 16, microbatch 2) in rp's graph form, with weights
drawn from N(0, 0.02) with seed 0.

This hand-built graph is the demo model until rp-import and the tracer
produce it from a real exporter; it uses the graph form they emit (one
rp.layer per block, params referenced by file and offset, a tied LM head).
"""

import sys
from pathlib import Path

import numpy as np

B, S, D, H, F, V = 2, 16, 32, 4, 128, 64
HD = D // H
LAYERS = 2


def t(*shape, dt="f32"):
    return "tensor<" + "x".join(str(s) for s in shape) + ("x" if shape else "") + dt + ">"


class Weights:
    def __init__(self):
        self.rng = np.random.default_rng(0)
        self.blobs = []
        self.offset = 0
        self.lines = []

    def param(self, name, shape, init="normal"):
        if init == "normal":
            data = self.rng.normal(0.0, 0.02, size=shape).astype(np.float32)
        elif init == "ones":
            data = np.ones(shape, np.float32)
        else:
            data = np.zeros(shape, np.float32)
        self.blobs.append(data.tobytes())
        ssa = "%" + name.replace(".", "_")
        self.lines.append(
            f'  {ssa} = rp.param "{name}" trainable at "weights.bin"[{self.offset}] : {t(*shape)}'
        )
        self.offset += data.nbytes
        return ssa, t(*shape)


def block(w, i, x):
    p = f"h.{i}"
    names = [
        (f"{p}.ln_1.weight", (D,), "ones"), (f"{p}.ln_1.bias", (D,), "zeros"),
        (f"{p}.attn.c_attn.weight", (3 * D, D), "normal"), (f"{p}.attn.c_attn.bias", (3 * D,), "zeros"),
        (f"{p}.attn.c_proj.weight", (D, D), "normal"), (f"{p}.attn.c_proj.bias", (D,), "zeros"),
        (f"{p}.ln_2.weight", (D,), "ones"), (f"{p}.ln_2.bias", (D,), "zeros"),
        (f"{p}.mlp.c_fc.weight", (F, D), "normal"), (f"{p}.mlp.c_fc.bias", (F,), "zeros"),
        (f"{p}.mlp.c_proj.weight", (D, F), "normal"), (f"{p}.mlp.c_proj.bias", (D,), "zeros"),
    ]
    params = [w.param(n, s, init) for n, s, init in names]
    args = [x] + [ssa for ssa, _ in params]
    types = [t(B, S, D)] + [ty for _, ty in params]
    xt, qt = t(B, S, D), t(B, H, S, HD)
    out = f"%h{i + 1}"
    body = f"""  {out} = rp.layer "{p}" ({", ".join(args)}) : ({", ".join(types)}) -> {xt} {{
  ^bb0(%x: {xt}, %g1: {t(D)}, %b1: {t(D)}, %wqkv: {t(3 * D, D)}, %bqkv: {t(3 * D)}, %wo: {t(D, D)}, %bo: {t(D)}, %g2: {t(D)}, %b2: {t(D)}, %wfc: {t(F, D)}, %bfc: {t(F)}, %wpr: {t(D, F)}, %bpr: {t(D)}):
    %n1 = rp.layer_norm %x scale(%g1) bias(%b1) axis = 2 epsilon = 1.0e-05 : ({xt}, {t(D)}, {t(D)}) -> {xt}
    %qkv0 = rp.matmul %n1, %wqkv transpose_b : ({xt}, {t(3 * D, D)}) -> {t(B, S, 3 * D)}
    %qkv = rp.add %qkv0, %bqkv : ({t(B, S, 3 * D)}, {t(3 * D)}) -> {t(B, S, 3 * D)}
"""
    for j, n in enumerate("qkv"):
        body += f"""    %{n}0 = rp.slice %qkv offsets = [0, 0, {j * D}] strides = [1, 1, 1] : {t(B, S, 3 * D)} -> {xt}
    %{n}1 = rp.reshape %{n}0 : {xt} to {t(B, S, H, HD)}
    %{n} = rp.transpose %{n}1 permutation = [0, 2, 1, 3] : {t(B, S, H, HD)} -> {qt}
"""
    body += f"""    %a0 = rp.attention %q, %k, %v causal : ({qt}, {qt}, {qt}) -> {qt}
    %a1 = rp.transpose %a0 permutation = [0, 2, 1, 3] : {qt} -> {t(B, S, H, HD)}
    %a2 = rp.reshape %a1 : {t(B, S, H, HD)} to {xt}
    %o0 = rp.matmul %a2, %wo transpose_b : ({xt}, {t(D, D)}) -> {xt}
    %o1 = rp.add %o0, %bo : ({xt}, {t(D)}) -> {xt}
    %r1 = rp.add %x, %o1 : ({xt}, {xt}) -> {xt}
    %n2 = rp.layer_norm %r1 scale(%g2) bias(%b2) axis = 2 epsilon = 1.0e-05 : ({xt}, {t(D)}, {t(D)}) -> {xt}
    %f0 = rp.matmul %n2, %wfc transpose_b : ({xt}, {t(F, D)}) -> {t(B, S, F)}
    %f1 = rp.add %f0, %bfc : ({t(B, S, F)}, {t(F)}) -> {t(B, S, F)}
    %f2 = rp.gelu %f1 approximate = tanh : {t(B, S, F)}
    %m0 = rp.matmul %f2, %wpr transpose_b : ({t(B, S, F)}, {t(D, F)}) -> {xt}
    %m1 = rp.add %m0, %bpr : ({xt}, {t(D)}) -> {xt}
    %r2 = rp.add %r1, %m1 : ({xt}, {xt}) -> {xt}
    rp.yield %r2 : {xt}
  }}
"""
    return out, body


def main(out_dir: Path):
    w = Weights()
    wte, wte_t = w.param("wte.weight", (V, D))
    wpe, wpe_t = w.param("wpe.weight", (S, D))
    xt = t(B, S, D)
    text = [f"  %h0 = rp.layer \"embed\" (%tokens, {wte}, {wpe}) : ({t(B, S, dt='i64')}, {wte_t}, {wpe_t}) -> {xt} {{",
            f"  ^bb0(%ids: {t(B, S, dt='i64')}, %te: {wte_t}, %pe: {wpe_t}):",
            f"    %e = rp.gather %te[%ids] axis = 0 : ({wte_t}, {t(B, S, dt='i64')}) -> {xt}",
            # An exporter's leftover shape arithmetic: canonicalize folds it.
            f"    %one = rp.constant dense<1.0> : {t(S, D)}",
            f"    %pe1 = rp.mul %pe, %one : ({t(S, D)}, {t(S, D)}) -> {t(S, D)}",
            f"    %h = rp.add %e, %pe1 : ({xt}, {t(S, D)}) -> {xt}",
            f"    rp.yield %h : {xt}", "  }"]
    x = "%h0"
    for i in range(LAYERS):
        x, body = block(w, i, x)
        text.append(body.rstrip("\n"))
    g, g_t = w.param("ln_f.weight", (D,), "ones")
    b, b_t = w.param("ln_f.bias", (D,), "zeros")
    lt = t(B, S, V)
    text += [f"  %logits = rp.layer \"head\" ({x}, {g}, {b}, {wte}) : ({xt}, {g_t}, {b_t}, {wte_t}) -> {lt} {{",
             f"  ^bb0(%x: {xt}, %g: {g_t}, %b: {b_t}, %te: {wte_t}):",
             f"    %n = rp.layer_norm %x scale(%g) bias(%b) axis = 2 epsilon = 1.0e-05 : ({xt}, {g_t}, {b_t}) -> {xt}",
             f"    %l = rp.matmul %n, %te transpose_b : ({xt}, {wte_t}) -> {lt}",
             f"    rp.yield %l : {lt}", "  }"]
    module = [f"// Generated by examples/tiny_gpt/generate.py; do not edit.",
              f"func.func @main(%tokens: {t(B, S, dt='i64')}) -> {lt} {{"] + w.lines + text + [
              f"  return %logits : {lt}", "}", ""]
    (out_dir / "model.mlir").write_text("\n".join(module))
    (out_dir / "weights.bin").write_bytes(b"".join(w.blobs))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
