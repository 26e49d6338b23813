"""LoRA with a quantized frozen base (issue 36): what NF4 and int8 change.

Usage: .venv/bin/python bench/lora_quant.py rows [--models 8b,32b,235b]
                                                [--no-max-seq] [--out DIR]
                                                [--only REGEX]
       .venv-torch2/bin/python bench/lora_quant.py curves [--steps 50]
                                                         [--out DIR]

`rows`: Llama-3.1-8B, Qwen3-32B and Qwen3-235B-A22B (weightless bf16 graphs
from rp.shapes, 2048-token sequences; LoRA r=32, alpha 16 on every linear
layer but the LM head, PEFT's all-linear) on 8 x RTX 4090 (the rtx4090
profile with its host model as shipped: host DRAM 200 GB/s, one GPU per
25 GB/s uplink), each with a bf16, an int8 and an NF4 base
(`rp-compile --quantize-base`, the weightless graph's weights quantized to
blobs of the right size): the host memory rp-compile plans, as a
continuous rp-run holds it (base, trained weights and gradients, the
trainer's optimizer state, pinned buffers, the second pass in flight's
buffers), the weight bytes uploaded per step, the
predicted steady-state tokens/s and bubble (microbatches of paper.py's
batching(), RoundPipe's global batch; stage-grain recompute, since layer
grain keeps each microbatch's inner activations in pinned host memory,
50 GiB more for the 8B, which `--recompute auto` takes for a 0.2 % faster
step), and the longest sequence whose plan
fits 24 GB (`--report-max-seq` on a 3000-token graph, as paper.py); beside
RoundPipe's published tokens/s and max sequence (its 8B and 32B runs train
every weight, its 235B is LoRA) and the issue's aims (the 235B within 160
GiB of host memory, an 8B LoRA within 16 GiB). Every row's stages are
rp-compile's default: the fastest stages, whatever they stage. The 8B's NF4
row also with `--host-slack-pct 5` (held near the fastest: a step within
5 % of the fastest stages' whose pinned buffers are at least 1 GiB smaller,
the fused loss's plan where it is so; the fastest stages' pinned buffers and
step in the CSV where the stages taken were held) and under
`--host-budget-gib 16`. The 235B also with adapters
on attention only, and so again in microbatches of 2 sequences (and in 8
microbatches of 4), 2 passes a step, under `--host-budget-gib 160` (the
grain rp-compile's choice, and the passes in flight: one where two do not
fit, the two-pass plan's host memory and step in the CSV). `--only REGEX`
runs the rows whose label it finds. No GPU: the compiler's
model only. Writes DIR/rows.csv (default results/lora_quant), with each
compile's wall and CPU seconds and, where its stages were held to the
budget, the memory plans and step-time estimates holding took.

`curves`: a host run of a small transformers model (examples/tiny_llama,
rp.finetune, LoRA rank 8 on every linear layer but the head, bf16 compute,
2 host devices, 50 steps): the bf16 base against the NF4 base, the loss
of every step of each, their largest difference, and the adapters' final
difference (the largest |A_nf4 - A_bf16| over the largest |A_bf16|, and
the same for B); writes DIR/curves.csv and DIR/curves.png (rp.plot, run in
.venv where matplotlib is).
"""

import argparse
import csv
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))
G = 8
MODELS = {"8b": "llama-3.1-8b", "32b": "qwen3-32b", "235b": "qwen3-235b-a22b"}
BASES = ("none", "int8", "nf4")
LORA = ["--lora-rank", "32", "--lora-alpha", "16"]
# The 235B's adapters on every expert (PEFT's all-linear, RoundPipe's run)
# are 6.5 G parameters, whose f32 master weights, gradients and AdamW
# moments alone are over 80 GiB: a row with adapters on attention only
# shows what the base's format leaves.
ATTENTION = ["--lora-targets", "q_proj|k_proj|v_proj|o_proj"]
AIMS_GIB = {"llama-3.1-8b": 16, "qwen3-235b-a22b": 160}
GIB = {"KiB": 1 / (1 << 20), "MiB": 1 / 1024, "GiB": 1.0}


def gib(text):
    value, unit = text.split()
    return float(value) * GIB[unit]


def compile_row(name, base, tmp, targets=(), batching=None, budget=(),
                slack=None):
    """rp-compile of one model and base: the summary's figures. `batching`
    (sequences a microbatch, microbatches, passes a step) replaces
    paper.py's; with `budget` (--host-budget-gib N) the grain is
    rp-compile's (--recompute auto, held to the budget); `slack`, a
    --host-slack-pct other than rp-compile's default (0: the fastest
    stages, whatever they stage in pinned memory)."""
    import paper
    from rp import shapes
    b, m, passes = batching or paper.batching(name)
    graph = Path(tmp) / f"{name}.b{b}.mlir"
    if not graph.exists():
        graph.write_text(shapes.build(shapes.SHAPES[name], b, 2048, "bf16"))
    start = time.perf_counter()
    # CPU seconds as well as wall: on a shared box the wall says little.
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([str(BIN / "rp-compile"), str(graph), "-o",
                        str(Path(tmp) / f"{name}-{base}.rpplan"),
                        "--devices", str(G), "--microbatches", str(m),
                        "--hw", "rtx4090", "--quantize-base", base, *LORA,
                        *targets,
                        *(budget or ["--recompute", "stage"]),
                        *([] if slack is None else
                          ["--host-slack-pct", str(slack)])],
                       capture_output=True, text=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
    if r.returncode:
        raise SystemExit(f"rp-compile {name} {base}:\n{r.stderr}")
    # The host memory a continuous rp-run holds (docs/nf4.md): the base,
    # the trained weights and gradients, the trainer's optimizer state,
    # one pass's pinned buffers and the second pass in flight's buffers.
    host = re.search(r"host memory ([0-9.]+ .iB): base ([0-9.]+ .iB), "
                     r"trained weights and gradients ([0-9.]+ .iB), "
                     r"optimizer state ([0-9.]+ .iB), pinned buffers "
                     r"([0-9.]+ .iB)(?:, the second pass in flight "
                     r"([0-9.]+ .iB))?; weight uploads ([0-9.]+) MiB per "
                     r"step", r.stderr)
    step = re.search(r"predicted step ([0-9.]+) ms on \S+ in the steady "
                     r"state.*?, (\d+)% bubble", r.stderr)
    # What holding the stages to the host budget cost, where they were.
    hold = re.search(r"held (?:to the host budget|near the fastest stages "
                     r"\(--host-slack-pct\)) with (\d+) memory plans"
                     r"(?: and (\d+) step-time estimates)?", r.stderr)
    # Where the stages were held near the fastest (--host-slack-pct), the
    # fastest stages' pinned buffers and step, which the summary names.
    near = re.search(r"where the fastest stages found stage ([0-9.]+ .iB) "
                     r"for ([0-9.]+) ms", r.stderr)
    # Over --host-budget-gib with two passes in flight and within it with
    # one, rp-compile compiles the plan with one and says what two needed.
    one = re.search(r"compiled with one pass in flight .*?two passes in "
                    r"flight need ([0-9.]+ .iB) of host memory[^\n]*",
                    r.stderr)
    two_ms = re.search(r"their plan predicted ([0-9.]+) ms a step",
                       one.group(0)) if one else None
    one_pass = one is not None or "--passes-in-flight" in budget
    tokens = b * m * 2048
    return {"model": name, "base": "bf16" if base == "none" else base,
            "adapters": "attention" if targets else "all-linear",
            "microbatch": b, "microbatches": m, "passes": passes,
            "host_budget_gib": float(budget[1]) if budget else None,
            "passes_in_flight": 1 if one_pass else 2,
            "two_pass_host_gib": gib(one.group(1)) if one else None,
            "two_pass_step_ms": float(two_ms.group(1)) if two_ms else None,
            "host_slack_pct": slack,
            "fastest_pinned_gib": gib(near.group(1)) if near else None,
            "fastest_step_ms": float(near.group(2)) if near else None,
            "host_gib": gib(host.group(1)), "base_gib": gib(host.group(2)),
            "trained_gib": gib(host.group(3)),
            "optimizer_gib": gib(host.group(4)),
            "pinned_gib": gib(host.group(5)),
            "second_pass_gib": gib(host.group(6)) if host.group(6) else 0.0,
            "uploads_gib": float(host.group(7)) / 1024,
            "step_ms": float(step.group(1)),
            "tokens_per_s": tokens / float(step.group(1)) * 1000,
            "bubble_pct": float(step.group(2)), "compile_s": took,
            "compile_cpu_s": cpu_s,
            "hold_plans": int(hold.group(1)) if hold else None,
            "hold_estimates": (int(hold.group(2)) if hold and hold.group(2)
                               else None)}


def rows(args):
    import paper
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [MODELS.get(m, m) for m in args.models.split(",")]
    table = []
    with tempfile.TemporaryDirectory(prefix="rp-lora-quant-") as tmp:
        for name in names:
            runs = [(base, (), None, (), None) for base in BASES]
            if name == "llama-3.1-8b":
                # rp-compile's default takes the fastest stages; held near
                # them (--host-slack-pct 5), and the aim as a flag
                # (--host-budget-gib 16).
                runs.append(("nf4", (), None, (), 5))
                # Two passes in flight hold the pinned buffers twice: 16
                # GiB only with one, which rp-compile then takes.
                runs.append(("nf4", (), None,
                             ["--host-budget-gib", str(AIMS_GIB[name])],
                             None))
            if name == "qwen3-235b-a22b":
                runs.append(("nf4", ATTENTION, None, (), None))
                # The aim: microbatches of 2 sequences, 2 passes
                # a step (rp-run --accumulate 2: RoundPipe's 64 a step),
                # under --host-budget-gib 160.
                runs.append(("nf4", ATTENTION, (2, 16, 2),
                             ["--host-budget-gib", str(AIMS_GIB[name])],
                             None))
                # And in 8 microbatches of 4 sequences, 2 passes a step,
                # the stages held to the same budget.
                runs.append(("nf4", ATTENTION, (4, 8, 2),
                             ["--host-budget-gib", str(AIMS_GIB[name])],
                             None))
            for base, targets, batching, budget, slack in runs:
                label = " ".join(
                    ["bf16" if base == "none" else base,
                     "attention" if targets else "all-linear"]
                    + ([f"{batching[0]}x{batching[1]}"] if batching else [])
                    + list(budget) + ([f"slack {slack}"] if slack else []))
                if args.only and not re.search(args.only, label):
                    continue
                row = compile_row(name, base, tmp, targets, batching, budget,
                                  slack)
                if not args.no_max_seq:
                    extra = [*LORA, *targets, "--quantize-base", base]
                    row["max_seq"] = paper.max_seq(name, tmp, extra)[0]
                table.append(row)
                print(f"{name} {row['base']} {row['adapters']} "
                      f"{row['microbatch']}x{row['microbatches']}: "
                      f"{row['host_gib']:.1f} GiB "
                      f"host, {row['uploads_gib']:.1f} GiB uploads, "
                      f"{row['tokens_per_s']:,.0f} tokens/s "
                      f"({row['compile_s']:.0f} s, "
                      f"{row['compile_cpu_s']:.0f} s of CPU"
                      + (f"; held with {row['hold_plans']} memory plans, "
                         f"{row['hold_estimates']} step-time estimates"
                         if row['hold_plans'] is not None else "")
                      + (f"; the fastest stages: "
                         f"{row['fastest_pinned_gib']:.1f} GiB pinned, "
                         f"{row['fastest_step_ms']:.1f} ms"
                         if row['fastest_pinned_gib'] is not None else "")
                      + (f"; --host-slack-pct {slack}"
                         if slack is not None else "")
                      + ")", file=sys.stderr)
    if not table:
        raise SystemExit(f"no row's label matches --only {args.only!r}")
    with open(out / "rows.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    print("| model | base | adapters | flags | host memory GiB (base + "
          "trained + optimizer + pinned + second pass) | uploads GiB/step | "
          "tokens/s | bubble "
          "| max seq | RoundPipe tokens/s, max seq | aim |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---|---|")
    for r in table:
        tps, _, _, _, seq = paper.PUBLISHED[r["model"]]
        aim = AIMS_GIB.get(r["model"])
        verdict = (f"{'within' if r['host_gib'] <= aim else 'over'} {aim} "
                   "GiB" if aim else "")
        flags = " ".join(
            ([f"{r['microbatch']}x{r['microbatches']}, "
              f"{r['passes']} passes"] if r["host_budget_gib"] else [])
            + ([f"--host-budget-gib {r['host_budget_gib']:g}"]
               if r["host_budget_gib"] else [])
            + ([f"--host-slack-pct {r['host_slack_pct']}"]
               if r["host_slack_pct"] is not None else [])
            + (["(one pass in flight: rp-compile's)"]
               if r["two_pass_host_gib"] else
               ["--passes-in-flight 1"] if r["passes_in_flight"] == 1
               else [])) or "default"
        print(f"| {r['model']} | {r['base']} | {r['adapters']} | {flags} | "
              f"{r['host_gib']:.1f} "
              f"({r['base_gib']:.1f} + {r['trained_gib']:.1f} + "
              f"{r['optimizer_gib']:.1f} + {r['pinned_gib']:.1f} + "
              f"{r['second_pass_gib']:.1f}) | {r['uploads_gib']:.1f} | "
              f"{r['tokens_per_s']:,.0f} | {r['bubble_pct']:.0f} % | "
              f"{r.get('max_seq') or '-'} | {tps:,}, {seq:,} | {verdict} |")
    print(f"\n{out / 'rows.csv'}")


def curves(args):
    import numpy as np

    import rp
    from rp import safetensors
    sys.path.insert(0, str(ROOT / "test" / "python" / "Inputs"))
    from finetune_check import make_model
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rp-lora-curves-"))
    model_dir = make_model(work / "tiny")
    losses, adapters = {}, {}
    for base in ("none", "nf4"):
        run = work / base
        rp.finetune(model_dir, work / "tiny" / "train.jsonl", run,
                    steps=args.steps, devices=2, microbatches=3, seq_len=32,
                    lr=3e-3, lora_rank=8, lora_alpha=16, dtype="bf16",
                    quantize_base=base, sync=True)
        label = "bf16 base" if base == "none" else "nf4 base"
        losses[label] = [json.loads(line)["loss"]
                         for line in open(run / "metrics.jsonl")
                         if "loss" in json.loads(line)]
        adapters[label] = safetensors.read(
            run / "checkpoints" / "last" / "weights.safetensors")
    a, b = losses["bf16 base"], losses["nf4 base"]
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "bf16_base_loss", "nf4_base_loss"])
        for i, (x, y) in enumerate(zip(a, b)):
            w.writerow([i + 1, x, y])
    ref, q = adapters["bf16 base"], adapters["nf4 base"]
    diff = {}
    for part in ("lora_A", "lora_B"):
        names = [n for n in ref if n.endswith(part)]
        top = max(float(np.abs(ref[n]).max()) for n in names)
        diff[part] = max(float(np.abs(q[n] - ref[n]).max())
                         for n in names) / top
    print(f"{len(a)} steps: loss {a[0]:.4f} -> {a[-1]:.4f} (bf16 base), "
          f"{b[0]:.4f} -> {b[-1]:.4f} (nf4 base); largest step difference "
          f"{max(abs(x - y) for x, y in zip(a, b)):.4f}, last "
          f"{abs(a[-1] - b[-1]):.4f}; adapters' final difference "
          f"(max |nf4 - bf16| / max |bf16|): A {diff['lora_A']:.4f}, "
          f"B {diff['lora_B']:.4f}")
    # The plot in the venv that has matplotlib (the torch-2 one may not).
    code = ("import csv, sys; sys.path.insert(0, sys.argv[3]); "
            "from rp import plot; r = list(csv.DictReader(open(sys.argv[1]))); "
            "plot.loss_curve({'bf16 base': [float(x['bf16_base_loss']) for x in r],"
            " 'nf4 base': [float(x['nf4_base_loss']) for x in r]}, sys.argv[2])")
    for python in (sys.executable, str(ROOT / ".venv" / "bin" / "python")):
        done = subprocess.run([python, "-c", code, str(out / "curves.csv"),
                               str(out / "curves.png"), str(ROOT / "python")],
                              capture_output=True, text=True)
        if done.returncode == 0:
            break
    print(f"{out / 'curves.csv'}"
          + (f", {out / 'curves.png'}" if done.returncode == 0 else
             f" (no plot: {done.stderr.strip().splitlines()[-1]})"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("rows")
    r.add_argument("--models", default="8b,32b,235b")
    r.add_argument("--no-max-seq", action="store_true")
    r.add_argument("--only", help="a regex: only the rows whose label "
                   "(base, adapters, batching, flags: 'nf4 attention 2x16 "
                   "--host-budget-gib 160') it finds")
    r.add_argument("--out", default=str(ROOT / "results" / "lora_quant"))
    c = sub.add_parser("curves")
    c.add_argument("--steps", type=int, default=50)
    c.add_argument("--out", default=str(ROOT / "results" / "lora_quant"))
    args = p.parse_args()
    rows(args) if args.command == "rows" else curves(args)


if __name__ == "__main__":
    main()
