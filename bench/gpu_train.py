"""Training on a GPU with the cuda backend, against the host backend and
PyTorch on the same GPU. Two halves, since the plans need the compiler
(MLIR), which a GPU box may not have:

    # here: export the models, compile their plans into DIR
    .venv/bin/python bench/gpu_train.py prepare build-gpu-plans
    # here: the host backend's losses and times, into DIR/host.json
    .venv/bin/python bench/gpu_train.py host build-gpu-plans [--steps 6]
    # on the GPU box, after scripts/gpu-test.sh built build-gpu/:
    python3 bench/gpu_train.py run build-gpu-plans [--steps 6]

Models: a GPT-2-style model exported by torch.onnx (6 layers, width 256,
vocabulary 4096, 5.8 M parameters) and a Qwen3 causal LM from transformers'
own code (GQA, RoPE, q/k RMSNorm; 4 layers, hidden 256, vocabulary 4096),
batch 8 x 256 tokens. Plans: f32 on one device, f32 and bf16 on four
devices (round-robin); and the Qwen3 at one sequence of 8,192 tokens on
two devices (f32 and bf16, fused loss, layer grain; 2 steps). `run` trains each plan on the host backend and on
the cuda backend, the four devices on one GPU when the box has fewer
(RP_CUDA_GPUS=0,0,0,0: four sets of streams on one GPU), prints both loss
curves and their largest relative difference, and the step times; then
PyTorch eager on the GPU (forward, cross-entropy, backward, AdamW) on the
same batch, compared by tokens/s. rp keeps weights and optimizer state in
host memory and runs AdamW on the CPU; PyTorch keeps everything on the GPU.

A real width (issue 31), with weights made on the GPU box from the plan
alone (rp-run --init-weights random: kilobytes travel, not gigabytes):

    # here (or on the GPU box if it has rp-compile): the Qwen3-1.7B shape
    .venv/bin/python bench/gpu_train.py prepare-real build-real-plans
    # on the GPU box:
    python3 bench/gpu_train.py real build-real-plans [--steps 4]

(`prepare-real --hw rtx4090` plans for a 24 GB card; h100 by default.)
`real` first checks the cuda paths on a small f32 shape with random
weights (run to run and 2 plan devices on one GPU bitwise equal to 1, the
host's losses within 1e-4), then trains the Qwen3-1.7B-shaped plan (bf16, one GPU, 4 x 2048 tokens,
weights and AdamW on the host) with random weights, then PyTorch training
the same model (transformers' Qwen3, bf16 autocast, AdamW) resident on the
GPU, and prints both tokens/s and rp's step split from its trace: kernels
(the compute queue's busy time), weight uploads, the host's optimizer, and
the rest of the step (host). Without a GPU it stops and says so.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEQ, BATCH, VOCAB = 256, 8, 4096
LONG = 8192  # the long-sequence plans: one sequence of LONG tokens
# (model, plan, rp-compile flags, plan devices, input tag): the inputs are
# DIR/tokens{tag}.npy and labels{tag}.npy, one microbatch per
# [BATCH, SEQ] block (tags 1 and 5), or one sequence of LONG tokens.
# The 4-device plans take devices + 1 = 5 microbatches of [BATCH, SEQ]. The
# long plans train one 8,192-token sequence on 2 devices with the fused
# LM-head loss (issue 20's long sequences on a GPU: the tiled attention at
# 8k, the fused loss's chunk loops). Above 8,192 tokens the importer
# refuses transformers' export: it would fold an S x S causal mask.
LONG_FLAGS = ["--devices", "2", "--microbatches", "1", "--fuse-loss=true",
              "--recompute=layer"]
PLANS = [(model, name, flags, devices, tag)
         for model in ("gpt", "qwen3")
         for name, flags, devices, tag in (
             ("f32-1", ["--devices", "1"], 1, "1"),
             ("f32-4", ["--devices", "4"], 4, "5"),
             ("bf16-4", ["--devices", "4", "--dtype", "bf16"], 4, "5"))] + [
    ("qwen3-long", "f32-2", LONG_FLAGS, 2, "long"),
    ("qwen3-long", "bf16-2", LONG_FLAGS + ["--dtype", "bf16"], 2, "long")]
# G plan devices bitwise equal to one on a GPU (issue 31; cuDNN's
# deterministic attention backward): bf16 Qwen3, 5 microbatches, the tail
# as two jobs on every device count (README: the one-device reference is
# compiled with --tail-jobs 2 too). bench/gpu_bitwise.py compares them.
BITWISE = [("qwen3", f"bf16-{g}-tail2",
            ["--devices", str(g), "--microbatches", "5", "--tail-jobs", "2",
             "--dtype", "bf16", "--recompute=layer"], g, "5")
           for g in (1, 2, 4)]
PLANS += BITWISE
# GPT-2's linear layers with their bias and gelu fused into the matmul
# calls (rp-compile --fuse-matmul-epilogue: cuBLASLt's BIAS and GELU_BIAS
# epilogues, the backward's gelu gradient), against the host's losses.
PLANS += [("gpt", "f32-1-epilogue", ["--devices", "1",
                                     "--fuse-matmul-epilogue"], 1, "1"),
          ("gpt", "bf16-4-epilogue", ["--devices", "4", "--dtype", "bf16",
                                      "--fuse-matmul-epilogue"], 4, "5")]
# LoRA with an NF4 frozen base (issue 36): rp-compile quantizes the Qwen3's
# linear weights offline, and the cuda backend dequantizes them on the GPU
# (CudaQuant.cu) where the host backend does on the CPU. f32 compute on two
# plan devices; `run` compares the losses and the adapters each backend
# trained (rp-run --save: weights.safetensors) and prints one line.
NF4 = "qwen3-nf4-lora-2"
PLANS += [("qwen3", "nf4-lora-2",
           ["--devices", "2", "--microbatches", "5", "--lora-rank", "8",
            "--quantize-base", "nf4"], 2, "5")]
NF4_LOSS_TOL, NF4_ADAPTER_TOL = 1e-4, 1e-3
TOKENS = {"1": BATCH * SEQ, "5": 5 * BATCH * SEQ, "long": LONG}


def steps_for(tag, steps):
    """The long plans train 2 steps: a host step takes minutes there."""
    return min(steps, 2) if tag == "long" else steps
# Qwen3's 4-device plans at layer grain (layer-grain Qwen3 on a GPU).
EXTRA = {"qwen3": {"f32-4": ["--recompute=layer"],
                   "bf16-4": ["--recompute=layer"]}}

QWEN3_EXPORT = r"""
import os, sys
os.environ["HF_HUB_OFFLINE"] = "1"
import torch, transformers as T
torch.manual_seed(0)
cfg = T.Qwen3Config(vocab_size=%d, hidden_size=256, intermediate_size=768,
                    num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=64,
                    max_position_embeddings=%d, tie_word_embeddings=False)
lm = T.Qwen3ForCausalLM(cfg).eval()
class LogitsOnly(torch.nn.Module):
    def __init__(self, lm):
        super().__init__(); self.lm = lm
    def forward(self, input_ids):
        return self.lm(input_ids=input_ids,
                       attention_mask=torch.ones_like(input_ids),
                       use_cache=False, return_dict=False)[0]
batch, seq = int(sys.argv[2]), int(sys.argv[3])
ids = torch.zeros(batch, seq, dtype=torch.long)
torch.onnx.export(LogitsOnly(lm), (ids,), sys.argv[1], opset_version=17,
                  dynamo=False, input_names=["tokens"],
                  output_names=["logits"])
""" % (VOCAB, LONG)


def prepare(out):
    sys.path.insert(0, str(ROOT / "bench"))
    from forward_vs_ort import export
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for tag, shape in (("1", (BATCH, SEQ)), ("5", (5 * BATCH, SEQ)),
                       ("long", (1, LONG))):
        tokens = rng.integers(0, VOCAB, shape, dtype=np.int64)
        np.save(out / f"tokens{tag}.npy", tokens)
        np.save(out / f"labels{tag}.npy", np.roll(tokens, -1, 1))
    export(out / "gpt.onnx", 6, 256, SEQ, BATCH, vocab=VOCAB)
    py2 = ROOT / ".venv-torch2" / "bin" / "python"
    for model, batch, seq in (("qwen3", BATCH, SEQ), ("qwen3-long", 1, LONG)):
        subprocess.run([str(py2), "-c", QWEN3_EXPORT,
                        str(out / f"{model}.onnx"), str(batch), str(seq)],
                       check=True)
    bin_dir = ROOT / "build" / "bin"
    first = {}
    for model, name, flags, _, _ in PLANS:
        d = out / f"{model}-{name}"
        d.mkdir(exist_ok=True)
        subprocess.run([str(bin_dir / "rp-compile"),
                        str(out / f"{model}.onnx"), "-o",
                        str(d / "m.rpplan")] + flags +
                       EXTRA.get(model, {}).get(name, []), check=True)
        w = d / "m.weights.bin"
        if model not in first:
            first[model] = d
        elif w.read_bytes() == (first[model] / "m.weights.bin").read_bytes():
            # One copy travels: the plans share their weights.
            w.unlink()
            w.symlink_to(Path("..") / first[model].name / "m.weights.bin")
    for f in out.glob("*.onnx*"):
        f.unlink()
    print(f"prepared {out}")


def rp_run(bin_dir, plan, backend, steps, data, env, tag, extra=()):
    m = tag
    cmd = [str(bin_dir / "rp-run"), str(plan), "--backend", backend,
           "--steps", str(steps), "--sync", "--input",
           f"tokens={data / f'tokens{m}.npy'}", "--labels",
           str(data / f"labels{m}.npy")] + list(extra)
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if run.returncode:
        return None, run.stderr[-3000:]
    losses = [float(x) for x in re.findall(
        r"^step \d+ loss ([-0-9.e+naif]+)$", run.stdout + run.stderr, re.M)]
    best = re.search(r"best step ([0-9.]+) ms, mean ([0-9.]+) ms",
                     run.stderr)
    return {"losses": losses, "best_ms": float(best.group(1)),
            "mean_ms": float(best.group(2)),
            "tail": run.stderr.strip().splitlines()[-12:]}, None


def torch_step_ms(model_name, dtype, steps):
    import torch
    sys.path.insert(0, str(ROOT / "bench"))
    if model_name == "gpt":
        from forward_vs_ort import gpt_model
        model = gpt_model(6, 256, SEQ, vocab=VOCAB)
    else:
        os.environ["HF_HUB_OFFLINE"] = "1"
        import transformers as T
        cfg = T.Qwen3Config(vocab_size=VOCAB, hidden_size=256,
                            intermediate_size=768, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2,
                            head_dim=64, max_position_embeddings=SEQ,
                            tie_word_embeddings=False)
        lm = T.Qwen3ForCausalLM(cfg)

        class LogitsOnly(torch.nn.Module):
            def __init__(self, lm):
                super().__init__()
                self.lm = lm

            def forward(self, ids):
                return self.lm(input_ids=ids, use_cache=False,
                               return_dict=False)[0]
        model = LogitsOnly(lm)
    dev = torch.device("cuda")
    model = model.to(dev).train()
    gen = np.random.default_rng(0)
    tokens = torch.from_numpy(
        gen.integers(0, VOCAB, (BATCH, SEQ), dtype=np.int64)).to(dev)
    labels = torch.roll(tokens, -1, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    best = float("inf")
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16,
                            enabled=dtype == "bf16"):
            logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, VOCAB), labels.reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def read_safetensors(path):
    """name -> f32 array of a safetensors file (f32 tensors only)."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b],
                                  dtype=np.float32).reshape(t["shape"])
    return out


def compare_nf4(data, host, cuda, n):
    """One line: the NF4 LoRA plan's losses and trained adapters, cuda
    against host; True when both are within their bounds."""
    diff = max(abs(a - b) / max(abs(a), 1e-9)
               for a, b in zip(host["losses"][:n], cuda["losses"][:n]))
    h = read_safetensors(data / NF4 / "host-ckpt" / "weights.safetensors")
    c = read_safetensors(data / NF4 / "cuda-ckpt" / "weights.safetensors")
    names = [k for k in h if "lora" in k]
    worst = max((float(np.abs(c[k] - h[k]).max() /
                       max(float(np.abs(h[k]).max()), 1e-12)), k)
                for k in names) if names and set(names) <= set(c) else None
    ok = (diff <= NF4_LOSS_TOL and worst is not None
          and worst[0] <= NF4_ADAPTER_TOL)
    print(f"NF4 LoRA on cuda vs host (2 plan devices, f32 compute, {n} "
          f"steps): losses max rel diff {diff:.2e} (<= {NF4_LOSS_TOL:g}), "
          + (f"{len(names)} adapters max rel diff {worst[0]:.2e} ({worst[1]};"
             f" <= {NF4_ADAPTER_TOL:g})" if worst else
             "adapters MISSING from a checkpoint")
          + f" -> {'ok' if ok else 'FAILED'}")
    return ok


def host_reference(data, steps, bin_dir):
    """Each plan's host-backend losses and step times, into data/host.json:
    a GPU box may lack OpenBLAS, and its plain GEMM makes the host backend
    slow there; here the host runs as it would for a user."""
    out = {}
    for model, name, _, _, tag in PLANS:
        key = f"{model}-{name}"
        save = (["--save", str(data / key / "host-ckpt")]
                if key == NF4 else [])
        row, err = rp_run(bin_dir, data / key / "m.rpplan",
                          "host", steps_for(tag, steps), data,
                          dict(os.environ), tag, save)
        if err:
            raise SystemExit(f"{model}-{name} on the host: {err}")
        out[f"{model}-{name}"] = row
        print(f"{model}-{name}: host losses {row['losses']}")
    (data / "host.json").write_text(json.dumps(out, indent=1))


def run(data, steps, bin_dir, trace_dir, torch_baseline=True, models=None):
    results = {}
    ok = True
    saved = {}
    if (data / "host.json").exists():
        saved = json.loads((data / "host.json").read_text())
    for model, name, _, devices, tag in PLANS:
        if models and model not in models:
            continue
        n = steps_for(tag, steps)
        plan = data / f"{model}-{name}" / "m.rpplan"
        env = dict(os.environ)
        env.setdefault("RP_CUDA_GPUS", ",".join(["0"] * devices))
        key = f"{model}-{name}"
        if key in saved and len(saved[key]["losses"]) >= n:
            host, herr = saved[key], None
        else:
            host, herr = rp_run(bin_dir, plan, "host", n, data, env, tag,
                                ["--save", str(data / key / "host-ckpt")]
                                if key == NF4 else [])
        extra = []
        if trace_dir:
            extra = ["--trace", str(trace_dir / f"trace-{key}.json")]
        if key == NF4:
            shutil.rmtree(data / key / "cuda-ckpt", ignore_errors=True)
            extra += ["--save", str(data / key / "cuda-ckpt")]
        cuda, cerr = rp_run(bin_dir, plan, "cuda", n, data, env, tag, extra)
        row = {"host": host, "cuda": cuda, "host_error": herr,
               "cuda_error": cerr}
        print(f"== {model} {name}")
        if herr or cerr:
            ok = False
            print("host error:", herr, "\ncuda error:", cerr)
        else:
            n = min(n, len(host["losses"]), len(cuda["losses"]))
            diff = max(abs(a - b) / max(abs(a), 1e-9)
                       for a, b in zip(host["losses"][:n], cuda["losses"]))
            row["max_rel_loss_diff"] = diff
            tokens = TOKENS[tag]
            print(f"   host losses {host['losses'][0]:.6f} .. "
                  f"{host['losses'][n - 1]:.6f}; cuda "
                  f"{cuda['losses'][0]:.6f} .. {cuda['losses'][n - 1]:.6f};"
                  f" max rel diff over {n} steps {diff:.2e}")
            print(f"   step best/mean: host {host['best_ms']:.2f}/"
                  f"{host['mean_ms']:.2f} ms, cuda {cuda['best_ms']:.2f}/"
                  f"{cuda['mean_ms']:.2f} ms "
                  f"({tokens / cuda['best_ms'] * 1e3:,.0f} tokens/s)")
            for line in cuda["tail"]:
                print("   " + line)
            if key == NF4:
                ok &= compare_nf4(data, host, cuda, n)
        results[key] = row
    for model in ("gpt", "qwen3"):
        if models and model not in models:
            continue
        for dtype in ("f32", "bf16") if torch_baseline else ():
            try:
                ms = torch_step_ms(model, dtype, steps)
            except Exception as e:  # report, keep going
                print(f"torch {model} {dtype}: {e}")
                continue
            results[f"{model}-torch-{dtype}"] = ms
            # Throughputs, not step times: rp's 4-device step trains five
            # batches, PyTorch's one.
            torch_tps = BATCH * SEQ / ms * 1e3
            rp = (results.get(f"{model}-{dtype}-4") or {}).get("cuda")
            ratio = ""
            if rp:
                rp_tps = TOKENS["5"] / rp["best_ms"] * 1e3
                ratio = (f"; rp 4-device tokens/s / PyTorch's "
                         f"{rp_tps / torch_tps:.2f}x")
            print(f"== {model} PyTorch eager {dtype} on the GPU: best step "
                  f"{ms:.2f} ms ({torch_tps:,.0f} tokens/s){ratio}")
    return results, ok


# The real-width run: the Qwen3-1.7B shape of python -m rp.shapes.
REAL_MODEL, REAL_BATCH, REAL_SEQ = "qwen3-1.7b", 4, 2048
SMALL = ("layers=2,hidden=256,heads=4,kv_heads=2,head_dim=64,ffn=512,"
         "vocab=1000,tied=0,qk_norm=1")


def check_small(data, bin_dir):
    """The cuda paths on random weights: run to run and 2 plan devices on
    one GPU bitwise equal to 1, the host's losses within 1e-4."""
    def losses(plan, gpus):
        env = dict(os.environ, RP_CUDA_GPUS=gpus)
        run = subprocess.run([str(bin_dir / "rp-run"), str(data / plan),
                              "--backend", "cuda", "--init-weights",
                              "random:1", "--steps", "3", "--sync"],
                             capture_output=True, text=True, env=env)
        if run.returncode:
            raise SystemExit(f"rp-run {plan} on cuda:\n{run.stderr[-3000:]}")
        return run.stdout
    one, again = losses("small1.rpplan", "0"), losses("small1.rpplan", "0")
    two = losses("small2.rpplan", "0,0")
    host = (data / "small-host.txt").read_text()
    parse = lambda t: [float(x) for x in re.findall(r"loss (\S+)", t)]
    diff = max(abs(a - b) / max(abs(b), 1e-9)
               for a, b in zip(parse(one), parse(host)))
    ok = one == again and one == two and diff <= 1e-4
    print(f"small f32 shape on cuda, random weights: run to run "
          f"{'bitwise' if one == again else 'DIFFERENT'}, 2 devices "
          f"{'= 1 bitwise' if one == two else 'DIFFER from 1'}, max rel "
          f"loss diff vs host {diff:.2e} -> {'ok' if ok else 'FAILED'}")
    return ok


def prepare_real(out, batch, seq, bin_dir, hw):
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    # f32 master weights on the host, bf16 compute on the GPU.
    subprocess.run([sys.executable, "-m", "rp.shapes", REAL_MODEL,
                    "--batch", str(batch), "--seq", str(seq), "--dtype",
                    "f32", "-o", str(out / "g.mlir")], check=True, env=env)
    subprocess.run([str(bin_dir / "rp-compile"), str(out / "g.mlir"), "-o",
                    str(out / "m.rpplan"), "--devices", "1", "--dtype",
                    "bf16", "--hw", hw], check=True)
    (out / "g.mlir").unlink()
    # A small f32 shape on 1 and 2 devices: the cuda paths' checks (random
    # weights run to run, 2 devices = 1 bitwise, the host's losses).
    subprocess.run([sys.executable, "-m", "rp.shapes", "--custom", SMALL,
                    "--batch", "2", "--seq", "128", "--dtype", "f32", "-o",
                    str(out / "s.mlir")], check=True, env=env)
    for g in (1, 2):
        subprocess.run([str(bin_dir / "rp-compile"), str(out / "s.mlir"),
                        "-o", str(out / f"small{g}.rpplan"), "--devices",
                        str(g), "--microbatches", "3", "--tail-jobs", "2"],
                       check=True)
    (out / "s.mlir").unlink()
    host = subprocess.run([str(bin_dir / "rp-run"), str(out / "small1.rpplan"),
                           "--init-weights", "random:1", "--steps", "3",
                           "--sync"], capture_output=True, text=True,
                          check=True)
    (out / "small-host.txt").write_text(host.stdout)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"prepared {out} ({size / 1024:.0f} KiB: no weights travel)")


def gpu_or_exit(bin_dir):
    """Stops with a clear line when this machine has no usable GPU."""
    why = None
    try:
        import torch
        if not torch.cuda.is_available():
            why = "PyTorch sees no CUDA device"
    except ImportError:
        why = "no PyTorch here"
    run = subprocess.run([str(bin_dir / "rp-run"), "--list-devices"],
                         capture_output=True, text=True)
    cuda = [l for l in run.stdout.splitlines() if l.startswith("cuda")]
    if run.returncode or not cuda or "no CUDA device" in cuda[0]:
        why = (why + "; " if why else "") + (
            cuda[0] if cuda else f"{bin_dir}/rp-run has no cuda backend")
    if why:
        raise SystemExit(f"gpu_train.py real: needs a GPU ({why}); run it "
                         "on a GPU box after scripts/gpu-test.sh built "
                         "build-gpu/")


def step_split(trace_path):
    """rp's last step from its trace: (step ms, kernels, uploads,
    optimizer, host) in ms."""
    events = json.load(open(trace_path))
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    spans = [e for e in events if e.get("ph") == "X"]
    last = max(e.get("args", {}).get("step", 0) for e in spans)
    mine = [e for e in spans if e.get("args", {}).get("step") == last]
    step = sum(e["dur"] for e in mine if e["name"].startswith("step"))
    kernels = sum(e["dur"] for e in mine if e.get("cat") == "compute")
    uploads = sum(e["dur"] for e in mine if e.get("cat") == "copy" and
                  e["name"].startswith("UP "))
    optimizer = sum(e["dur"] for e in mine if e["name"] == "optimizer")
    host = max(0.0, step - kernels)
    return [x / 1e3 for x in (step, kernels, uploads, optimizer, host)]


def torch_real_ms(batch, seq, steps):
    """PyTorch training the Qwen3-1.7B shape resident on the GPU: bf16
    autocast over f32 weights, AdamW on the GPU."""
    import torch
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers as T
    sys.path.insert(0, str(ROOT / "python"))
    from rp.shapes import SHAPES
    s = SHAPES[REAL_MODEL]
    cfg = T.Qwen3Config(vocab_size=s.vocab, hidden_size=s.hidden,
                        intermediate_size=s.ffn, num_hidden_layers=s.layers,
                        num_attention_heads=s.heads,
                        num_key_value_heads=s.kv_heads, head_dim=s.head_dim,
                        max_position_embeddings=seq,
                        tie_word_embeddings=s.tied)
    dev = torch.device("cuda")
    model = T.Qwen3ForCausalLM(cfg).to(dev).train()
    tokens = torch.randint(0, s.vocab, (batch, seq), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    best = float("inf")
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=tokens, use_cache=False,
                           return_dict=False)[0]
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, s.vocab),
            torch.roll(tokens, -1, 1).reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def run_real(data, steps, bin_dir, batch, seq, torch_baseline):
    gpu_or_exit(bin_dir)
    small_ok = check_small(data, bin_dir)
    trace = data / "trace-real.json"
    cmd = [str(bin_dir / "rp-run"), str(data / "m.rpplan"), "--backend",
           "cuda", "--init-weights", "random:0", "--steps", str(steps),
           "--sync", "--trace", str(trace)]
    print("$ " + " ".join(cmd), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"rp-run failed:\n{run.stderr[-3000:]}")
    best = float(re.search(r"best step ([0-9.]+) ms", run.stderr).group(1))
    tokens = batch * seq
    result = {"rp_best_ms": best, "rp_tokens_per_s": tokens / best * 1e3,
              "small_checks_ok": small_ok}
    step, kernels, uploads, optimizer, host = step_split(trace)
    result.update(step_ms=step, kernels_ms=kernels, uploads_ms=uploads,
                  optimizer_ms=optimizer, host_ms=host)
    print(f"rp {REAL_MODEL} bf16, 1 GPU, {batch} x {seq} tokens, random "
          f"weights: best step {best:.1f} ms ({result['rp_tokens_per_s']:,.0f}"
          f" tokens/s); last step {step:.1f} ms: kernels {kernels:.1f}, "
          f"weight uploads {uploads:.1f} (overlapped), optimizer "
          f"{optimizer:.1f}, host/other {host:.1f}")
    if torch_baseline:
        try:
            ms = torch_real_ms(batch, seq, steps)
            result["torch_best_ms"] = ms
            result["torch_tokens_per_s"] = tokens / ms * 1e3
            print(f"PyTorch resident on the GPU: best step {ms:.1f} ms "
                  f"({tokens / ms * 1e3:,.0f} tokens/s); rp / PyTorch "
                  f"tokens/s {ms / best:.2f}x")
        except Exception as e:  # an OOM is a result too: report it
            result["torch_error"] = str(e)[:500]
            print(f"PyTorch: {e}")
    return result


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prepare-real")
    pr.add_argument("out", type=Path)
    pr.add_argument("--batch", type=int, default=REAL_BATCH)
    pr.add_argument("--seq", type=int, default=REAL_SEQ)
    pr.add_argument("--bin", type=Path, default=ROOT / "build" / "bin")
    pr.add_argument("--hw", default="h100", help="the card's profile "
                    "(profiles/): its memory is the plan's budget")
    rr = sub.add_parser("real")
    rr.add_argument("data", type=Path)
    rr.add_argument("--steps", type=int, default=4)
    rr.add_argument("--batch", type=int, default=REAL_BATCH,
                    help="as prepare-real was given")
    rr.add_argument("--seq", type=int, default=REAL_SEQ)
    rr.add_argument("--bin", type=Path, default=ROOT / "build-gpu" / "bin")
    rr.add_argument("--json", type=Path)
    rr.add_argument("--no-torch", action="store_true")
    p = sub.add_parser("prepare")
    p.add_argument("out", type=Path)
    h = sub.add_parser("host")
    h.add_argument("data", type=Path)
    h.add_argument("--steps", type=int, default=6)
    h.add_argument("--bin", type=Path, default=ROOT / "build" / "bin")
    r = sub.add_parser("run")
    r.add_argument("data", type=Path)
    r.add_argument("--steps", type=int, default=20)
    r.add_argument("--bin", type=Path, default=ROOT / "build-gpu" / "bin")
    r.add_argument("--json", type=Path)
    r.add_argument("--trace", type=Path, help="write each cuda run's trace "
                   "into this folder")
    r.add_argument("--models", help="comma-separated: run only these of "
                   "gpt, qwen3, qwen3-long (their plans alone may travel)")
    r.add_argument("--no-torch", action="store_true",
                   help="leave out PyTorch's step on the GPU")
    args = ap.parse_args()
    if args.cmd == "prepare-real":
        prepare_real(args.out, args.batch, args.seq, args.bin, args.hw)
        return 0
    if args.cmd == "real":
        result = run_real(args.data, args.steps, args.bin, args.batch,
                          args.seq, not args.no_torch)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return 0 if result["small_checks_ok"] else 1
    if args.cmd == "prepare":
        prepare(args.out)
        return 0
    if args.cmd == "host":
        host_reference(args.data, args.steps, args.bin)
        return 0
    results, ok = run(args.data, args.steps, args.bin, args.trace,
                      not args.no_torch,
                      args.models.split(",") if args.models else None)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
