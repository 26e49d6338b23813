"""How long rp-compile takes, as a new user runs it (issue 39).

Usage: python3 bench/compile_time.py [--models qwen3-32b,w32-64,...]
                                     [--no-max-seq] [--out FILE.md]

For Qwen3-1.7B, Llama-3.1-8B, Qwen3-32B, Qwen3-235B-A22B with LoRA r=32
(weightless bf16 graphs from rp.shapes, sequence 2048) and a model of
Qwen3-32B's width at 16, 32, 64, 128 and 256 layers (w32-N), it runs
`rp-compile --devices 8 --hw rtx4090 --dtype bf16` (every choice left
automatic: partition, recompute grain, loss fusion, tail jobs, arena
copies) and prints the wall time, the time per layer, the search's cost
(candidates timed, from the summary) and the predicted step; then the
same compile with --report-max-seq and its wall time. The graphs are
built once into a temporary folder. Wall times are of the whole process
(import of the .mlir, passes, plan export) on whatever machine runs it:
compare figures from one machine only. CPU seconds (user + system, all
threads) say what the compile costs on a loaded machine.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))

W32 = ("hidden=5120,heads=64,kv_heads=8,head_dim=128,ffn=25600,"
       "vocab=151936,tied=0,qk_norm=1")
MODELS = {
    "qwen3-1.7b": (["qwen3-1.7b"], []),
    "llama-3.1-8b": (["llama-3.1-8b"], []),
    "qwen3-32b": (["qwen3-32b"], []),
    "qwen3-235b-a22b-lora": (["qwen3-235b-a22b"],
                             ["--lora-rank", "32", "--lora-alpha", "16"]),
}
for layers in (16, 32, 64, 128, 256):
    MODELS[f"w32-{layers}"] = (["--custom", f"layers={layers}," + W32], [])


def layers_of(name):
    m = re.match(r"w32-(\d+)$", name)
    if m:
        return int(m.group(1))
    return {"qwen3-1.7b": 28, "llama-3.1-8b": 32, "qwen3-32b": 64,
            "qwen3-235b-a22b-lora": 94}[name]


def build_graph(name, folder):
    path = Path(folder) / f"{name}.mlir"
    if not path.exists():
        shape, _ = MODELS[name]
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        subprocess.run([sys.executable, "-m", "rp.shapes", *shape, "--seq",
                        "2048", "--dtype", "bf16", "-o", str(path)],
                       check=True, env=env)
    return path


def compile_once(graph, extra, folder):
    cmd = [str(BIN / "rp-compile"), str(graph), "-o",
           str(Path(folder) / "plan.rpplan"), "--devices", "8", "--hw",
           "rtx4090", "--dtype", "bf16", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, r.returncode, r.stderr


def field(pattern, text, default="-"):
    m = re.search(pattern, text)
    return m.group(1) if m else default


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--no-max-seq", action="store_true")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    rows = ["| model (layers) | compile s | CPU s | s/layer | candidates "
            "timed | search s | predicted step ms | --report-max-seq s (CPU) "
            "| max seq |",
            "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            graph = build_graph(name, folder)
            _, extra = MODELS[name]
            seconds, cpu, rc, err = compile_once(graph, extra, folder)
            layers = layers_of(name)
            step = field(r"predicted step ([0-9.]+) ms", err)
            timed = field(r"search timed ([0-9]+) candidates", err)
            search = field(r"candidates in ([0-9.]+) s", err)
            if rc != 0:
                step = f"failed (rc {rc})"
                sys.stderr.write(err[-2000:])
            seq_s, max_seq = "-", "-"
            if not args.no_max_seq:
                s2, cpu2, rc2, err2 = compile_once(
                    graph, extra + ["--report-max-seq"], folder)
                seq_s = (f"{s2:.2f} ({cpu2:.2f})" if rc2 == 0 else
                         f"failed (rc {rc2})")
                max_seq = field(r"largest sequence that fits is ([0-9]+)",
                                err2)
            row = (f"| {name} ({layers}) | {seconds:.2f} | {cpu:.2f} | "
                   f"{seconds / layers:.3f} | {timed} | {search} | {step} | "
                   f"{seq_s} | {max_seq} |")
            rows.append(row)
            print(row, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
