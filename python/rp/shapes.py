"""Graphs of published model shapes, without weights.

Compile-time, memory and cost benchmarks need the graph of an 8B or 32B
model, not its 16-64 GB of weights. This module writes the rp graph of a
decoder-only transformer of a given shape (the models of
reference/models.md, or any shape given on the command line) with every
parameter initialised from the run's seed (`init = 0.02`) instead of read
from a file, grouped into layers the way rp-import groups an export:
`embed`, `layers.0` ... `layers.N-1`, `head`.

Per layer: RMSNorm, Q/K/V projections (grouped-query attention), optional
Q/K RMSNorm per head (Qwen3), causal attention, output projection and
residual, RMSNorm, SiLU-gated MLP and residual. Rotary embeddings are left
out: elementwise work that costs well under 1% of a layer's FLOPs.

A mixture-of-experts shape (`experts` > 0) replaces the MLP by a router
(`router.weight` [experts, hidden]), rp.moe.route (top-`top_k`; softmax
before the top-k with renormalisation as Qwen3-MoE, or after it as
GPT-OSS), rp.moe.dispatch, the experts' gated MLPs as grouped matmuls over
stacked weights (`experts.gate_proj.weight` [experts, ffn, hidden] ...;
`ffn` is one expert's width) and rp.moe.combine. Buffers are sized for the
worst case (every token's `top_k` rows); the FLOPs are those of uniform
routing, which for a grouped matmul are the same at any routing. GPT-OSS's
expert biases, clamped SwiGLU, attention sinks and alternating sliding
windows are left out: the first three are elementwise, the last changes
only the attention of half the layers at sequences above 128.

    python -m rp.shapes qwen3-1.7b --seq 2048 -o qwen3-1.7b.mlir
"""

import argparse
import dataclasses
import sys

@dataclasses.dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool
    qk_norm: bool
    experts: int = 0
    top_k: int = 0
    softmax_after: bool = False

# reference/models.md, from each model's released config.
SHAPES = {
    "qwen3-1.7b": Shape(28, 2048, 16, 8, 128, 6144, 151936, True, True),
    "llama-3.1-8b": Shape(32, 4096, 32, 8, 128, 14336, 128256, False, False),
    "qwen3-32b": Shape(64, 5120, 64, 8, 128, 25600, 151936, False, True),
    "gpt-oss-20b": Shape(24, 2880, 64, 8, 64, 2880, 201088, False, False,
                         experts=32, top_k=4, softmax_after=True),
    "qwen3-235b-a22b": Shape(94, 4096, 64, 4, 128, 1536, 151936, False, True,
                             experts=128, top_k=8),
}

def param_count(s: Shape) -> int:
    per_layer = (s.hidden * s.heads * s.head_dim * 2 +
                 s.hidden * s.kv_heads * s.head_dim * 2 +
                 3 * s.hidden * s.ffn * max(1, s.experts) +
                 s.experts * s.hidden + 2 * s.hidden +
                 (2 * s.head_dim if s.qk_norm else 0))
    embed = s.vocab * s.hidden
    return (s.layers * per_layer + embed + s.hidden +
            (0 if s.tied else embed))

def _t(dims, dtype):
    return "tensor<" + "x".join(str(d) for d in dims) + "x" + dtype + ">"

def build(s: Shape, batch: int, seq: int, dtype: str) -> str:
    """The rp graph text of shape `s` for one microbatch of batch x seq."""
    B, S, H = batch, seq, s.hidden
    qd, kd = s.heads * s.head_dim, s.kv_heads * s.head_dim
    act = _t([B, S, H], dtype)
    out = []
    emit = out.append
    def param(name, dims):
        var = "%" + name.replace(".", "_")
        emit(f'    {var} = rp.param "{name}" trainable init = 2.000000e-02 '
             f': {_t(dims, dtype)}')
        return var
    emit("module {")
    emit(f'  func.func @main(%tokens: {_t([B, S], "i64")} {{rp.name = "tokens"}}) '
         f'-> ({_t([B, S, s.vocab], dtype)} {{rp.name = "logits"}}) {{')
    wte = param("embed_tokens.weight", [s.vocab, H])
    emit(f'    %x0 = rp.layer "embed" (%tokens, {wte}) : ({_t([B, S], "i64")}, '
         f'{_t([s.vocab, H], dtype)}) -> {act} {{')
    emit(f'    ^bb0(%t: {_t([B, S], "i64")}, %w: {_t([s.vocab, H], dtype)}):')
    emit(f'      %e = rp.gather %w[%t] axis = 0 : ({_t([s.vocab, H], dtype)}, '
         f'{_t([B, S], "i64")}) -> {act}')
    emit(f'      rp.yield %e : {act}')
    emit("    }")
    for i in range(s.layers):
        p = f"layers.{i}."
        names = [("input_layernorm.weight", [H]),
                 ("self_attn.q_proj.weight", [qd, H]),
                 ("self_attn.k_proj.weight", [kd, H]),
                 ("self_attn.v_proj.weight", [kd, H]),
                 ("self_attn.o_proj.weight", [H, qd])]
        if s.qk_norm:
            names += [("self_attn.q_norm.weight", [s.head_dim]),
                      ("self_attn.k_norm.weight", [s.head_dim])]
        names += [("post_attention_layernorm.weight", [H])]
        if s.experts:
            E = s.experts
            names += [("mlp.router.weight", [E, H]),
                      ("mlp.experts.gate_proj.weight", [E, s.ffn, H]),
                      ("mlp.experts.up_proj.weight", [E, s.ffn, H]),
                      ("mlp.experts.down_proj.weight", [E, H, s.ffn])]
        else:
            names += [("mlp.gate_proj.weight", [s.ffn, H]),
                      ("mlp.up_proj.weight", [s.ffn, H]),
                      ("mlp.down_proj.weight", [H, s.ffn])]
        vars_ = [param(p + n, d) for n, d in names]
        types = [act] + [_t(d, dtype) for _, d in names]
        args = ", ".join(f"%a{j}: {t}" for j, t in enumerate(types))
        emit(f'    %x{i + 1} = rp.layer "layers.{i}" (%x{i}, {", ".join(vars_)}) '
             f': ({", ".join(types)}) -> {act} {{')
        emit(f"    ^bb0({args}):")
        w = {n: f"%a{j + 1}" for j, (n, _) in enumerate(names)}
        body = _layer_body(s, B, S, dtype, w)
        out.extend("      " + line for line in body)
        emit("    }")
    lnf = param("norm.weight", [H])
    lm = wte if s.tied else param("lm_head.weight", [s.vocab, H])
    logits = _t([B, S, s.vocab], dtype)
    emit(f'    %y = rp.layer "head" (%x{s.layers}, {lnf}, {lm}) : ({act}, '
         f'{_t([H], dtype)}, {_t([s.vocab, H], dtype)}) -> {logits} {{')
    emit(f'    ^bb0(%x: {act}, %g: {_t([H], dtype)}, %w: {_t([s.vocab, H], dtype)}):')
    emit(f'      %n = rp.rms_norm %x scale(%g) axis = 2 epsilon = 1.0e-06 : '
         f'({act}, {_t([H], dtype)}) -> {act}')
    emit(f'      %l = rp.matmul %n, %w transpose_b : ({act}, '
         f'{_t([s.vocab, H], dtype)}) -> {logits}')
    emit(f'      rp.yield %l : {logits}')
    emit("    }")
    emit(f"    return %y : {logits}")
    emit("  }")
    emit("}")
    return "\n".join(out) + "\n"

def _layer_body(s, B, S, dtype, w):
    H, D = s.hidden, s.head_dim
    act = _t([B, S, H], dtype)
    lines = []
    def norm(dst, src, scale, dims, axis):
        lines.append(f"{dst} = rp.rms_norm {src} scale({scale}) axis = {axis} "
                     f"epsilon = 1.0e-06 : ({_t(dims, dtype)}, {_t([dims[-1]], dtype)}) "
                     f"-> {_t(dims, dtype)}")
    def proj(dst, src, weight, n_in, n_out):
        lines.append(f"{dst} = rp.matmul {src}, {weight} transpose_b : "
                     f"({_t([B, S, n_in], dtype)}, {_t([n_out, n_in], dtype)}) "
                     f"-> {_t([B, S, n_out], dtype)}")
    def heads(dst, src, n, norm_weight):
        flat, split = _t([B, S, n * D], dtype), [B, S, n, D]
        lines.append(f"{dst}_r = rp.reshape {src} : {flat} to {_t(split, dtype)}")
        cur = f"{dst}_r"
        if norm_weight:
            norm(f"{dst}_n", cur, norm_weight, split, 3)
            cur = f"{dst}_n"
        lines.append(f"{dst} = rp.transpose {cur} permutation = [0, 2, 1, 3] : "
                     f"{_t(split, dtype)} -> {_t([B, n, S, D], dtype)}")
    norm("%n1", "%a0", w["input_layernorm.weight"], [B, S, H], 2)
    proj("%q", "%n1", w["self_attn.q_proj.weight"], H, s.heads * D)
    proj("%k", "%n1", w["self_attn.k_proj.weight"], H, s.kv_heads * D)
    proj("%v", "%n1", w["self_attn.v_proj.weight"], H, s.kv_heads * D)
    heads("%qh", "%q", s.heads, w.get("self_attn.q_norm.weight"))
    heads("%kh", "%k", s.kv_heads, w.get("self_attn.k_norm.weight"))
    heads("%vh", "%v", s.kv_heads, None)
    qt, kt = _t([B, s.heads, S, D], dtype), _t([B, s.kv_heads, S, D], dtype)
    lines.append(f"%att = rp.attention %qh, %kh, %vh causal : ({qt}, {kt}, {kt}) -> {qt}")
    lines.append(f"%att_t = rp.transpose %att permutation = [0, 2, 1, 3] : "
                 f"{qt} -> {_t([B, S, s.heads, D], dtype)}")
    lines.append(f"%att_f = rp.reshape %att_t : {_t([B, S, s.heads, D], dtype)} "
                 f"to {_t([B, S, s.heads * D], dtype)}")
    proj("%o", "%att_f", w["self_attn.o_proj.weight"], s.heads * D, H)
    lines.append(f"%r = rp.add %a0, %o : ({act}, {act}) -> {act}")
    norm("%n2", "%r", w["post_attention_layernorm.weight"], [B, S, H], 2)
    if s.experts:
        lines.extend(_moe_body(s, B, S, dtype, w))
        lines.append(f"%y = rp.add %r, %d : ({act}, {act}) -> {act}")
        lines.append(f"rp.yield %y : {act}")
        return lines
    proj("%g", "%n2", w["mlp.gate_proj.weight"], H, s.ffn)
    proj("%u", "%n2", w["mlp.up_proj.weight"], H, s.ffn)
    ffn = _t([B, S, s.ffn], dtype)
    lines.append(f"%sg = rp.silu %g : {ffn}")
    lines.append(f"%m = rp.mul %sg, %u : ({ffn}, {ffn}) -> {ffn}")
    proj("%d", "%m", w["mlp.down_proj.weight"], s.ffn, H)
    lines.append(f"%y = rp.add %r, %d : ({act}, {act}) -> {act}")
    lines.append(f"rp.yield %y : {act}")
    return lines

def _moe_body(s, B, S, dtype, w):
    """%n2 [B, S, H] -> %d [B, S, H] through the experts."""
    H, E, K, F = s.hidden, s.experts, s.top_k, s.ffn
    T, R = B * S, B * S * s.top_k
    tok, rows = _t([T, H], dtype), _t([R, H], dtype)
    ffn, ct = _t([R, F], dtype), _t([E], "i32")
    softmax = "after" if s.softmax_after else "before normalize"
    def grouped(dst, src, weight, wdims, out):
        return (f"{dst} = rp.moe.grouped_matmul {src}, {weight}, %cnt "
                f"transpose_b : ({_t(src_dims[src], dtype)}, "
                f"{_t(wdims, dtype)}, {ct}) -> {out}")
    src_dims = {"%rows": [R, H], "%m": [R, F]}
    return [
        f"%flat = rp.reshape %n2 : {_t([B, S, H], dtype)} to {tok}",
        f"%logits = rp.matmul %flat, {w['mlp.router.weight']} transpose_b : "
        f"({tok}, {_t([E, H], dtype)}) -> {_t([T, E], dtype)}",
        f"%rw, %ex = rp.moe.route %logits top_k = {K} softmax = {softmax} : "
        f"{_t([T, E], dtype)} -> ({_t([T, K], dtype)}, {_t([T, K], 'i64')})",
        f"%rows, %pos, %cnt = rp.moe.dispatch %flat, %ex : ({tok}, "
        f"{_t([T, K], 'i64')}) -> ({rows}, {_t([T, K], 'i32')}, {ct})",
        grouped("%g", "%rows", w["mlp.experts.gate_proj.weight"], [E, F, H],
                ffn),
        grouped("%u", "%rows", w["mlp.experts.up_proj.weight"], [E, F, H],
                ffn),
        f"%sg = rp.silu %g : {ffn}",
        f"%m = rp.mul %sg, %u : ({ffn}, {ffn}) -> {ffn}",
        grouped("%o2", "%m", w["mlp.experts.down_proj.weight"], [E, H, F],
                rows),
        f"%c = rp.moe.combine %o2, %pos weights(%rw) : ({rows}, "
        f"{_t([T, K], 'i32')}, {_t([T, K], dtype)}) -> {tok}",
        f"%d = rp.reshape %c : {tok} to {_t([B, S, H], dtype)}",
    ]

def _parse_shape(text: str) -> Shape:
    """`layers=2,hidden=64,...` for shapes not in SHAPES."""
    fields = dict(item.split("=", 1) for item in text.split(","))
    try:
        return Shape(**{f.name: (fields.pop(f.name) in ("1", "true", "yes"))
                        if f.type in (bool, "bool") else int(fields.pop(f.name))
                        for f in dataclasses.fields(Shape)
                        if f.name in fields or
                        f.default is dataclasses.MISSING})
    except KeyError as missing:
        raise SystemExit(f"rp.shapes: --custom needs {missing.args[0]}=N; "
                         f"fields: {', '.join(f.name for f in dataclasses.fields(Shape))}")

class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error; rp's tools exit 1 on bad input and
    keep 2 for an internal error."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def main(argv=None) -> int:
    parser = _Parser(prog="python -m rp.shapes",
                     description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", choices=sorted(SHAPES),
                        help="a published shape (reference/models.md)")
    parser.add_argument("--custom", help="layers=N,hidden=N,heads=N,kv_heads=N,"
                        "head_dim=N,ffn=N,vocab=N,tied=0|1,qk_norm=0|1"
                        "[,experts=N,top_k=N,softmax_after=0|1]")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="bf16")
    parser.add_argument("--print-params", action="store_true",
                        help="print the parameter count instead of the graph")
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args(argv)
    if (args.model is None) == (args.custom is None):
        parser.error("give a model name or --custom, not both")
    if args.batch < 1 or args.seq < 1:
        parser.error("--batch and --seq must be at least 1")
    shape = SHAPES[args.model] if args.model else _parse_shape(args.custom)
    if args.print_params:
        print(param_count(shape))
        return 0
    text = build(shape, args.batch, args.seq, args.dtype)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        import os
        os.replace(tmp, args.output)
    return 0

if __name__ == "__main__":
    sys.exit(main())
