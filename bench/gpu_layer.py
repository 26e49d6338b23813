"""One decoder layer on a GPU: rp's cuda device against PyTorch 2 (SDPA +
cuBLAS) on the same GPU and shapes (issue 31). Two halves, since the plans
need the compiler (MLIR), which a GPU box may not have:

    # here: compile the plans into DIR (3-layer models, random weights
    # made on the GPU box by rp-run --init-weights random)
    .venv/bin/python bench/gpu_layer.py prepare build-gpu-layer
    # on the GPU box, after scripts/gpu-test.sh built build-gpu/:
    .venv-torch2/bin/python bench/gpu_layer.py run build-gpu-layer

Shapes: Qwen3-1.7B's layer (hidden 2048, 16 query heads over 8, head 128,
q/k RMSNorm, SwiGLU 6144) and Llama-3.1-8B's (hidden 4096, 32 over 8, head
128, SwiGLU 14336), bf16, at 4 x 2048 and 1 x 8192 tokens: the layer of
`python -m rp.shapes` (no rotary embedding, in both). rp: the middle layer
(layers.1) of a 3-layer plan for 2 devices (both on GPU 0) at layer grain (vocabulary 1024, so
that the head is small), its measured forward, recompute and backward
(`rp-run --profile`, the mean per microbatch, warm-up step left out).
PyTorch: the same layer as an nn.Module in bf16 on the GPU: forward under
no_grad (rp's forward stage keeps nothing), forward with autograd (the
recompute), backward; CUDA events, median of 10 after 3 warm-ups; plus the
SDPA alone and the seven projections alone, for TFLOP/s as a fraction of
the card's dense bf16 peak.

Writes bench/results/gpu_layer.json: device, date, commit, rows (one per
shape: times, ratio_vs_torch = rp / torch, TFLOP/s and fractions; with
`--graphs` first (the default) or all, `rp_graphs`: rp's times again with
each job's program replayed as a CUDA graph, and `graphs_speedup`). Without
a GPU, `run` exits 1 saying so.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gpu_layer.json"
# name: (hidden, heads, kv_heads, head_dim, ffn, qk_norm)
MODELS = {
    "qwen3-1.7b": (2048, 16, 8, 128, 6144, True),
    "llama-3.1-8b": (4096, 32, 8, 128, 14336, False),
}
SHAPES = [(4, 2048), (1, 8192)]
VOCAB = 1024
# embed, layers.0 and layers.1 a forward stage; layers.2 and the head the
# fused tail; backward stages at layer grain: layers.1 has a forward, a
# recompute and a backward of its own (a one-device plan is all tail).
STAGES = "fwd:3;bwd:2,3"
# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), by a name's substring.
PEAKS = [("H200", 989.0), ("H100", 989.0), ("A100", 312.0), ("L40S", 362.0),
         ("RTX 4090", 165.2), ("RTX 3090", 71.0), ("A800", 312.0)]


def plan_name(model, batch, seq):
    return f"{model}-{batch}x{seq}"


def prepare(out: Path):
    """Compiles one bf16 plan per (model, shape) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(os.environ.get("RP_BIN", ROOT / "build" / "bin"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    for model, (hidden, heads, kv, hd, ffn, qk) in MODELS.items():
        custom = (f"layers=3,hidden={hidden},heads={heads},kv_heads={kv},"
                  f"head_dim={hd},ffn={ffn},vocab={VOCAB},tied=0,"
                  f"qk_norm={int(qk)}")
        for batch, seq in SHAPES:
            name = plan_name(model, batch, seq)
            graph = out / f"{name}.mlir"
            subprocess.run([sys.executable, "-m", "rp.shapes", "--custom",
                            custom, "--batch", str(batch), "--seq", str(seq),
                            "--dtype", "bf16", "-o", str(graph)],
                           check=True, env=env)
            subprocess.run([str(bin_dir / "rp-compile"), str(graph), "-o",
                            str(out / f"{name}.rpplan"), "--devices", "2",
                            "--microbatches", "2", "--stages", STAGES,
                            "--dtype", "bf16", "--recompute", "layer",
                            "--hw", "h100", "--budget-gib", "70"], check=True)
            print(f"prepare: {name}.rpplan")


def gpu_or_exit():
    """The torch device and its name; exit 1 saying why when there is none."""
    try:
        import torch
    except ImportError as e:
        sys.exit(f"gpu_layer: no PyTorch ({e}); run with .venv-torch2/bin/python")
    if not torch.cuda.is_available():
        print("gpu_layer: no CUDA GPU here (torch.cuda.is_available() is "
              "False); run this on a GPU box", file=sys.stderr)
        sys.exit(1)
    return torch, torch.cuda.get_device_name(0)


def peak_of(name):
    for key, peak in PEAKS:
        if key in name:
            return peak
    return None


def flops(batch, seq, hidden, heads, kv, hd, ffn):
    """Forward FLOPs of the layer's projections and of causal attention."""
    tokens = batch * seq
    gemm = 2 * tokens * (hidden * (heads + 2 * kv) * hd + heads * hd * hidden
                         + 3 * hidden * ffn)
    # QK^T and PV, half the scores under the causal mask.
    attn = 2 * 2 * batch * heads * seq * seq * hd / 2
    return gemm, attn


def time_ms(torch, fn, warmup=3, reps=10):
    times = []
    for i in range(warmup + reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def torch_layer(torch, batch, seq, hidden, heads, kv, hd, ffn, qk):
    """Times of the layer, its attention and its projections in PyTorch."""
    nn, F = torch.nn, torch.nn.functional
    dev, dt = "cuda", torch.bfloat16

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.RMSNorm(hidden), nn.RMSNorm(hidden)
            self.q = nn.Linear(hidden, heads * hd, bias=False)
            self.k = nn.Linear(hidden, kv * hd, bias=False)
            self.v = nn.Linear(hidden, kv * hd, bias=False)
            self.o = nn.Linear(heads * hd, hidden, bias=False)
            self.qn = nn.RMSNorm(hd) if qk else nn.Identity()
            self.kn = nn.RMSNorm(hd) if qk else nn.Identity()
            self.gate = nn.Linear(hidden, ffn, bias=False)
            self.up = nn.Linear(hidden, ffn, bias=False)
            self.down = nn.Linear(ffn, hidden, bias=False)

        def forward(self, x):
            h = self.ln1(x)
            q = self.qn(self.q(h).view(batch, seq, heads, hd)).transpose(1, 2)
            k = self.kn(self.k(h).view(batch, seq, kv, hd)).transpose(1, 2)
            v = self.v(h).view(batch, seq, kv, hd).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(batch, seq, heads * hd))
            h = self.ln2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    torch.manual_seed(0)
    layer = Layer().to(dev, dt)
    x = torch.randn(batch, seq, hidden, device=dev, dtype=dt,
                    requires_grad=True)
    dy = torch.randn_like(x)

    def forward():
        with torch.no_grad():
            layer(x)
    fwd = time_ms(torch, forward)
    state = {}

    def recompute():
        state["y"] = layer(x)
    rec = time_ms(torch, recompute)

    # The backward alone: a fresh graph each time, timed from its start.
    bwd_times = []
    for i in range(13):
        y = layer(x)
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        y.backward(dy)
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            bwd_times.append(start.elapsed_time(end))
    bwd_times.sort()
    bwd = bwd_times[len(bwd_times) // 2]

    q = torch.randn(batch, heads, seq, hd, device=dev, dtype=dt,
                    requires_grad=True)
    k = torch.randn(batch, kv, seq, hd, device=dev, dtype=dt,
                    requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    do = torch.randn(batch, heads, seq, hd, device=dev, dtype=dt)

    def attention():
        F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                       enable_gqa=True).backward(do)
    attn = time_ms(torch, attention)
    mats = [(hidden, heads * hd), (hidden, kv * hd), (hidden, kv * hd),
            (heads * hd, hidden), (hidden, ffn), (hidden, ffn), (ffn, hidden)]
    ins = [torch.randn(batch * seq, a, device=dev, dtype=dt,
                       requires_grad=True) for a, _ in mats]
    ws = [torch.randn(a, b, device=dev, dtype=dt, requires_grad=True)
          for a, b in mats]

    def gemms():
        for i, w in zip(ins, ws):
            (i @ w).sum().backward()
    gemm = time_ms(torch, gemms)
    return {"forward_ms": fwd, "recompute_ms": rec, "backward_ms": bwd,
            "total_ms": fwd + rec + bwd, "attention_fwd_bwd_ms": attn,
            "gemms_fwd_bwd_ms": gemm}


def rp_layer(plan: Path, build: Path, graphs=False):
    """rp-run's measured times of layers.1 (forward, recompute, backward);
    `graphs`: each job's program replayed as a CUDA graph (RP_CUDA_GRAPHS)."""
    profile = plan.with_suffix(".graphs.profile.json" if graphs
                               else ".profile.json")
    cmd = [str(build / "bin" / "rp-run"), str(plan), "--backend", "cuda",
           "--init-weights", "random", "--steps", "4", "--sync",
           "--profile", str(profile)]
    env = dict(os.environ, RP_CUDA_GPUS="0,0",
               RP_CUDA_GRAPHS="on" if graphs else "off")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"gpu_layer: {' '.join(cmd)} failed ({done.returncode}):\n"
                 f"{done.stderr.strip()}")
    fallbacks = [l for l in done.stderr.splitlines()
                 if l.startswith("rp: attention on CUDA cores")]
    layers = {l["name"]: l for l in json.loads(profile.read_text())["layers"]}
    l = layers["layers.1"]
    fwd = l["forward_ms"]
    rec = l.get("recompute_ms", fwd)
    return {"forward_ms": fwd, "recompute_ms": rec,
            "backward_ms": l["backward_ms"],
            "total_ms": fwd + rec + l["backward_ms"],
            "attention_fallbacks": fallbacks}


def commit():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(plans: Path, build: Path, graphs="first"):
    torch, device = gpu_or_exit()
    peak = peak_of(device)
    rows = []
    for model, (hidden, heads, kv, hd, ffn, qk) in MODELS.items():
        for batch, seq in SHAPES:
            name = plan_name(model, batch, seq)
            plan = plans / f"{name}.rpplan"
            if not plan.exists():
                sys.exit(f"gpu_layer: {plan} is missing; run "
                         f"`bench/gpu_layer.py prepare {plans}` where the "
                         f"compiler is built")
            t = torch_layer(torch, batch, seq, hidden, heads, kv, hd, ffn, qk)
            r = rp_layer(plan, build)
            gemm_f, attn_f = flops(batch, seq, hidden, heads, kv, hd, ffn)
            # fwd + recompute + backward (2x): 4x the forward's FLOPs, the
            # attention's backward 2.5x its forward.
            attn_tf = attn_f * 3.5 / t["attention_fwd_bwd_ms"] / 1e9
            gemm_tf = gemm_f * 3 / t["gemms_fwd_bwd_ms"] / 1e9
            layer_tf = (gemm_f + attn_f) * 4 / r["total_ms"] / 1e9
            row = {"model": model, "batch": batch, "seq": seq,
                   "rp": r, "torch": t,
                   "ratio_vs_torch": r["total_ms"] / t["total_ms"],
                   "torch_attention_tflops": attn_tf,
                   "torch_gemm_tflops": gemm_tf,
                   "rp_layer_tflops": layer_tf}
            # The same layer with CUDA graphs (the first shape only by
            # default: a short device lease).
            if graphs == "all" or (graphs == "first" and not rows):
                g = rp_layer(plan, build, graphs=True)
                row["rp_graphs"] = g
                row["graphs_speedup"] = r["total_ms"] / g["total_ms"]
            if peak:
                row["torch_attention_of_peak"] = attn_tf / peak
                row["torch_gemm_of_peak"] = gemm_tf / peak
                row["rp_layer_of_peak"] = layer_tf / peak
            rows.append(row)
            print(f"{name}: rp {r['total_ms']:.2f} ms (fwd "
                  f"{r['forward_ms']:.2f}, rec {r['recompute_ms']:.2f}, bwd "
                  f"{r['backward_ms']:.2f}), torch {t['total_ms']:.2f} ms, "
                  f"ratio {row['ratio_vs_torch']:.2f}; torch attention "
                  f"{attn_tf:.0f} TFLOP/s, GEMMs {gemm_tf:.0f} TFLOP/s"
                  + (f" ({attn_tf / peak:.2f}, {gemm_tf / peak:.2f} of "
                     f"{peak:.0f})" if peak else "")
                  + (f"; fallbacks: {r['attention_fallbacks']}"
                     if r["attention_fallbacks"] else "")
                  + (f"; with CUDA graphs {row['rp_graphs']['total_ms']:.2f}"
                     f" ms ({row['graphs_speedup']:.3f}x)"
                     if "rp_graphs" in row else ""))
    result = {"device": device, "peak_bf16_tflops": peak,
              "date": datetime.date.today().isoformat(), "commit": commit(),
              "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(f"gpu_layer: wrote {RESULTS}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare").add_argument("dir", type=Path)
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--build", type=Path, default=ROOT / "build-gpu")
    r.add_argument("--graphs", choices=["none", "first", "all"],
                   default="first",
                   help="shapes also timed with RP_CUDA_GRAPHS=on")
    args = p.parse_args(argv)
    if args.cmd == "prepare":
        prepare(args.dir)
    else:
        run(args.dir, args.build, args.graphs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
