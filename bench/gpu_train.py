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
devices (round-robin). `run` trains each plan on the host backend and on
the cuda backend, the four devices on one GPU when the box has fewer
(RP_CUDA_GPUS=0,0,0,0: four sets of streams on one GPU), prints both loss
curves and their largest relative difference, and the step times; then
PyTorch eager on the GPU (forward, cross-entropy, backward, AdamW) on the
same batch for the step-time ratio. rp keeps weights and optimizer state in
host memory and runs AdamW on the CPU; PyTorch keeps everything on the GPU.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEQ, BATCH, VOCAB = 256, 8, 4096
PLANS = [("f32-1", ["--devices", "1"]), ("f32-4", ["--devices", "4"]),
         ("bf16-4", ["--devices", "4", "--dtype", "bf16"])]
# The 4-device plans take devices + 1 = 5 microbatches of [BATCH, SEQ].
MICROBATCHES = {1: 1, 4: 5}
# Qwen3's stage-grain 4-device plans keep more than the memory model counts
# (rp-run refuses them: arenas 1.34x the planned peak); layer grain fits.
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
ids = torch.zeros(%d, %d, dtype=torch.long)
torch.onnx.export(LogitsOnly(lm), (ids,), sys.argv[1], opset_version=17,
                  dynamo=False, input_names=["tokens"],
                  output_names=["logits"])
""" % (VOCAB, SEQ, BATCH, SEQ)


def prepare(out):
    sys.path.insert(0, str(ROOT / "bench"))
    from forward_vs_ort import export
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for m in sorted(set(MICROBATCHES.values())):
        tokens = rng.integers(0, VOCAB, (m * BATCH, SEQ), dtype=np.int64)
        np.save(out / f"tokens{m}.npy", tokens)
        np.save(out / f"labels{m}.npy", np.roll(tokens, -1, 1))
    export(out / "gpt.onnx", 6, 256, SEQ, BATCH, vocab=VOCAB)
    py2 = ROOT / ".venv-torch2" / "bin" / "python"
    subprocess.run([str(py2), "-c", QWEN3_EXPORT, str(out / "qwen3.onnx")],
                   check=True)
    bin_dir = ROOT / "build" / "bin"
    for model in ("gpt", "qwen3"):
        first = None
        for name, flags in PLANS:
            d = out / f"{model}-{name}"
            d.mkdir(exist_ok=True)
            subprocess.run([str(bin_dir / "rp-compile"),
                            str(out / f"{model}.onnx"), "-o",
                            str(d / "m.rpplan")] + flags +
                           EXTRA.get(model, {}).get(name, []), check=True)
            w = d / "m.weights.bin"
            if first is None:
                first = d
            elif w.read_bytes() == (first / "m.weights.bin").read_bytes():
                # One copy travels: the plans share their weights.
                w.unlink()
                w.symlink_to(Path("..") / first.name / "m.weights.bin")
        for f in (out / f"{model}.onnx",):
            f.unlink()
        for f in out.glob(f"{model}.onnx.data"):
            f.unlink()
    print(f"prepared {out}")


def rp_run(bin_dir, plan, backend, steps, data, env, microbatches,
           extra=()):
    m = microbatches
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


def host_reference(data, steps, bin_dir):
    """Each plan's host-backend losses and step times, into data/host.json:
    a GPU box may lack OpenBLAS, and its plain GEMM makes the host backend
    slow there; here the host runs as it would for a user."""
    out = {}
    for model in ("gpt", "qwen3"):
        for name, _ in PLANS:
            devices = 1 if name.endswith("-1") else 4
            row, err = rp_run(bin_dir, data / f"{model}-{name}" / "m.rpplan",
                              "host", steps, data, dict(os.environ),
                              MICROBATCHES[devices])
            if err:
                raise SystemExit(f"{model}-{name} on the host: {err}")
            out[f"{model}-{name}"] = row
            print(f"{model}-{name}: host losses {row['losses']}")
    (data / "host.json").write_text(json.dumps(out, indent=1))


def run(data, steps, bin_dir, trace_dir, torch_baseline=True):
    results = {}
    ok = True
    saved = {}
    if (data / "host.json").exists():
        saved = json.loads((data / "host.json").read_text())
    for model in ("gpt", "qwen3"):
        for name, _ in PLANS:
            plan = data / f"{model}-{name}" / "m.rpplan"
            devices = 1 if name.endswith("-1") else 4
            env = dict(os.environ)
            env.setdefault("RP_CUDA_GPUS", ",".join(["0"] * devices))
            m = MICROBATCHES[devices]
            key = f"{model}-{name}"
            if key in saved and len(saved[key]["losses"]) >= steps:
                host, herr = saved[key], None
            else:
                host, herr = rp_run(bin_dir, plan, "host", steps, data, env,
                                    m)
            extra = []
            if trace_dir:
                extra = ["--trace", str(trace_dir / f"trace-{key}.json")]
            cuda, cerr = rp_run(bin_dir, plan, "cuda", steps, data, env, m,
                                extra)
            row = {"host": host, "cuda": cuda, "host_error": herr,
                   "cuda_error": cerr}
            print(f"== {model} {name}")
            if herr or cerr:
                ok = False
                print("host error:", herr, "\ncuda error:", cerr)
            else:
                diff = max(abs(a - b) / max(abs(a), 1e-9)
                           for a, b in zip(host["losses"], cuda["losses"]))
                row["max_rel_loss_diff"] = diff
                tokens = m * BATCH * SEQ
                print(f"   host losses {host['losses'][0]:.6f} .. "
                      f"{host['losses'][steps - 1]:.6f}; cuda "
                      f"{cuda['losses'][0]:.6f} .. {cuda['losses'][-1]:.6f};"
                      f" max rel diff over {steps} steps {diff:.2e}")
                print(f"   step best/mean: host {host['best_ms']:.2f}/"
                      f"{host['mean_ms']:.2f} ms, cuda {cuda['best_ms']:.2f}/"
                      f"{cuda['mean_ms']:.2f} ms "
                      f"({tokens / cuda['best_ms'] * 1e3:,.0f} tokens/s)")
                for line in cuda["tail"]:
                    print("   " + line)
            results[key] = row
        for dtype in ("f32", "bf16") if torch_baseline else ():
            try:
                ms = torch_step_ms(model, dtype, steps)
            except Exception as e:  # report, keep going
                print(f"torch {model} {dtype}: {e}")
                continue
            results[f"{model}-torch-{dtype}"] = ms
            # Throughputs, not step times: rp's 4-device step trains
            # MICROBATCHES[4] batches, PyTorch's one.
            torch_tps = BATCH * SEQ / ms * 1e3
            rp = results.get(f"{model}-{dtype}-4", {}).get("cuda")
            ratio = ""
            if rp:
                rp_tps = MICROBATCHES[4] * BATCH * SEQ / rp["best_ms"] * 1e3
                ratio = f"; rp 4-device tokens/s / PyTorch's {rp_tps / torch_tps:.2f}x"
            print(f"== {model} PyTorch eager {dtype} on the GPU: best step "
                  f"{ms:.2f} ms ({torch_tps:,.0f} tokens/s){ratio}")
    return results, ok


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
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
    r.add_argument("--no-torch", action="store_true",
                   help="leave out PyTorch's step on the GPU")
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare(args.out)
        return 0
    if args.cmd == "host":
        host_reference(args.data, args.steps, args.bin)
        return 0
    results, ok = run(args.data, args.steps, args.bin, args.trace,
                      not args.no_torch)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
