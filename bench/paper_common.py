"""What every part of bench/paper.py shares: RoundPipe's published figures
and runs, rp's batching of them, and the compile and sim calls, each
through a cache of its outputs (paper.py took about an hour on the loaded
development machine; a rerun with the same binaries and inputs reads the
cache instead of compiling again) and a pool that runs the models' compiles
and sims side by side (issue 32).

The cache key is the binary's bytes, the arguments with every input file
replaced by its bytes and every output file by its position: a rebuilt
rp-compile or rp-run, a changed profile, graph or measured times all miss.
RP_PAPER_CACHE names its folder (default: the system temp folder's
rp-paper-cache); "off" turns it off. RP_PAPER_JOBS sets how many compiles
and sims run at once (default: the machine's cores).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from rp import shapes  # noqa: E402

BIN = Path(os.environ.get("RP_BIN", ROOT / "build/bin"))
G = 8
M = 10

# reference/roundpipe.md §6.
RUNS = {  # global batch, accumulation steps
    "qwen3-1.7b": (512, 4),
    "llama-3.1-8b": (256, 2),
    "qwen3-32b": (128, 2),
    "gpt-oss-20b": (128, 1),
    "qwen3-235b-a22b": (64, 1),
}
# The others: M. GPT-OSS-20B at RoundPipe's global batch of 128 sequences,
# but in 32 microbatches of 4 rather than its 16 of 8: 8 x 2048 tokens no
# longer fit 24 GB once the memory model counts each backward job's
# weight gradients (device 1 needs 25.5 GiB at either grain).
MICROBATCHES = {"gpt-oss-20b": 32}
# Throughput runs only (not the max sequence): GPT-OSS-20B's head is
# unfused, since its logits fit at 4 x 2048 tokens and the fused loss,
# which recomputes them in its backward, makes the tail (the head alone)
# slower per microbatch than a two-layer backward stage, which it then
# paces (docs/moe.md).
THROUGHPUT_FLAGS = {"gpt-oss-20b": ["--fuse-loss=false"]}
LORA = {"qwen3-235b-a22b": ["--lora-rank", "32", "--lora-alpha", "16"]}
PUBLISHED = {  # async tok/s, sync tok/s, async bubble, sync bubble, max seq
    "qwen3-1.7b": (65417, 56489, 4.0, 19.1, 73000),
    "llama-3.1-8b": (24275, 18888, 1.3, 14.3, 49000),
    "qwen3-32b": (5516, 4164, 2.6, 6.7, 28000),
    "gpt-oss-20b": (18122, 12549, 3.3, 14.0, 39000),
    "qwen3-235b-a22b": (1820, 1592, 1.0, 3.3, 31000),
}
BASELINE_BUBBLES = {  # RoundPipe's simulated 1F1B, GPipe, interleaved 1F1B,
    "qwen3-1.7b": (35.2, 36.1, 27.8, 25.0),  # Looped-BFS
    "llama-3.1-8b": (42.1, 42.1, 30.6, 29.2),
    "qwen3-32b": (34.9, 34.9, 15.1, 13.7),
    "gpt-oss-20b": (41.7, 41.7, 30.9, 30.4),
    "qwen3-235b-a22b": (31.2, 31.2, 6.0, 4.4),
}
SCHEDULES = ("round-robin", "1f1b", "gpipe", "interleaved-1f1b",
             "looped-bfs")
# reference/roundpipe.md §6, "Scaling from 1 to 8 RTX 4090s": measured
# tokens/s on 1 GPU (its 8-GPU figure is PUBLISHED's async one).
ONE_GPU = {"qwen3-1.7b": 8881, "llama-3.1-8b": 3142, "gpt-oss-20b": 3022,
           "qwen3-32b": 740, "qwen3-235b-a22b": 480}
# The largest microbatch (sequences) each model's round-robin plan fits
# 24 GB with; batching() picks the largest divisor of a pass's sequences
# up to it, so every row trains RoundPipe's global batch exactly.
MAX_MICROBATCH = {"qwen3-1.7b": 13, "llama-3.1-8b": 13, "qwen3-32b": 6,
                  "gpt-oss-20b": 4, "qwen3-235b-a22b": 6}
HW = {"rp as built today": "rtx4090:as-built",
      "rp with library kernels": "rtx4090"}


def split(tps, bubble_pct, name):
    """rp's ratio to RoundPipe split into (rate per busy GPU) x (scaling
    from 1 to 8 GPUs): rp's rate per busy GPU is its tokens/s over the
    GPUs' busy share (8 x (1 - steady bubble)), RoundPipe's is its measured
    1-GPU rate; the scalings are 8-GPU tokens/s over those rates."""
    per_gpu = tps / (G * (1 - bubble_pct / 100))
    one, eight = ONE_GPU[name], PUBLISHED[name][0]
    return per_gpu / one, (tps / per_gpu) / (eight / one), tps / eight


def batching(name):
    """(sequences per microbatch, microbatches per pass, passes per step)
    with exactly RoundPipe's global batch (RoundPipe's 10 microbatches of
    12.8 sequences are uneven; rp's are not)."""
    batch, passes = RUNS[name]
    per_pass = batch // passes
    b = max(d for d in range(1, MAX_MICROBATCH[name] + 1)
            if per_pass % d == 0)
    return b, per_pass // b, passes


def profile_json(hw):
    """The profile `hw` names (NAME or NAME:as-built) as a dict, with its
    as-built kernels applied as rp's loader applies them."""
    name, _, form = hw.partition(":")
    p = json.loads((ROOT / "profiles" / f"{name}.json").read_text())
    built = p.get("as_built_kernels", {})
    if form == "as-built":
        p["kernels"] = {**p.get("kernels", {}), **built}
        p["name"] = hw
    return p


# --- the cache and the pool ----------------------------------------------

_write_lock = threading.Lock()


def write_text(path, text):
    """Writes `path` whole or not at all (a temporary name, then a rename),
    so that two threads writing the same input never leave a torn one."""
    path = Path(path)
    with _write_lock:
        if path.exists() and path.read_text() == text:
            return path
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def _digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_binary_digests = {}


def cache_dir():
    where = os.environ.get("RP_PAPER_CACHE",
                           str(Path(tempfile.gettempdir()) / "rp-paper-cache"))
    return None if where == "off" else Path(where)


def cache_key(argv, outputs):
    """The key of a run of `argv` writing `outputs`: the binary's bytes,
    then each argument, an existing file by its bytes, an output by its
    position (its path differs from run to run, its name in a temporary
    folder means nothing)."""
    h = hashlib.sha256()
    binary = str(argv[0])
    if binary not in _binary_digests:
        _binary_digests[binary] = _digest(binary)
    h.update(_binary_digests[binary].encode())
    # A profile named rather than given as a file (--hw rtx4090, or the
    # plan's own) is read from profiles/: every one is part of the key.
    for profile in sorted((ROOT / "profiles").glob("*.json")):
        h.update(f"\0{profile.name}{_digest(profile)}".encode())
    outs = [str(o) for o in outputs]
    for a in map(str, argv[1:]):
        if a in outs:
            h.update(f"\0out{outs.index(a)}".encode())
        elif os.path.isfile(a):
            h.update(f"\0file{_digest(a)}".encode())
        else:
            h.update(f"\0arg{a}".encode())
    return h.hexdigest()


def run_cached(argv, outputs=()):
    """subprocess.run(argv) with its stdout, stderr, exit status, output
    files and wall seconds (`.seconds`: the run's own, also on a hit) kept
    in the cache under cache_key(); a hit copies the outputs into place
    and runs nothing."""
    where = cache_dir()
    key = cache_key(argv, outputs) if where else None
    entry = where / key if where else None
    if entry and (entry / "result.json").exists():
        result = json.loads((entry / "result.json").read_text())
        for i, out in enumerate(outputs):
            if (entry / f"out{i}").exists():
                shutil.copyfile(entry / f"out{i}", out)
        r = subprocess.CompletedProcess(argv, result["rc"],
                                        result["stdout"], result["stderr"])
        r.seconds = result["seconds"]
        return r
    start = time.perf_counter()
    r = subprocess.run([str(a) for a in argv], capture_output=True,
                       text=True)
    r.seconds = time.perf_counter() - start
    if entry:
        stage = entry.with_name(f".{key}.{threading.get_ident()}")
        stage.mkdir(parents=True, exist_ok=True)
        for i, out in enumerate(outputs):
            if Path(out).exists():
                shutil.copyfile(out, stage / f"out{i}")
        (stage / "result.json").write_text(json.dumps(
            {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr,
             "seconds": r.seconds}))
        try:
            os.replace(stage, entry)
        except OSError:  # another thread stored it first
            shutil.rmtree(stage, ignore_errors=True)
    return r


def jobs():
    return max(1, int(os.environ.get("RP_PAPER_JOBS", os.cpu_count() or 1)))


POOL = ThreadPoolExecutor(max_workers=jobs())


class Once:
    """A value computed by the first caller and waited for by the others
    (the 1-GPU plan the held-out check and the model of RoundPipe share)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._events = {}
        self._values = {}

    def get(self, key, compute):
        with self._lock:
            event = self._events.get(key)
            first = event is None
            if first:
                event = self._events[key] = threading.Event()
        if first:
            try:
                self._values[key] = compute()
            finally:
                event.set()
        event.wait()
        return self._values.get(key)


# --- compiling and simulating ---------------------------------------------

def compile_plan(graph, plan, schedule, m=M, extra=(), hw="rtx4090"):
    """Compiles with rp-compile's default recompute grain (`--recompute
    auto`: chosen per backward stage by rp-choose-recompute); the grain it
    chose comes back from its summary."""
    micro = m if schedule != "interleaved-1f1b" else -(-m // G) * G
    r = run_cached([BIN / "rp-compile", graph, "-o", plan, "--devices",
                    str(G), "--microbatches", str(micro), "--hw", hw,
                    "--dtype", "f16", "--schedule", schedule, *extra],
                   [plan])
    took = r.seconds
    chosen = re.search(r"(\S+)-grain recompute", r.stderr)
    grain = chosen.group(1) if chosen else "?"
    if r.returncode:
        lines = [l for l in r.stderr.strip().splitlines() if "error" in l]
        return None, took, re.sub(r"^.*?error: ", "", (lines or ["?"])[0])
    peaks = re.search(r"peak device memory ([^;]*) of", r.stderr)
    steady = re.search(r"predicted step ([0-9.]+) ms on \S+ in the steady "
                       r"state.*?, (\d+)% bubble", r.stderr)
    return ((peaks.group(1) if peaks else "", micro, grain,
             (float(steady.group(1)), float(steady.group(2))) if steady
             else None), took, "")


def simulate(plan, sync, passes, hw=None, measured=None):
    r = run_cached([BIN / "rp-run", plan, "--backend", "sim", "--accumulate",
                    str(passes)]
                   + (["--sync"] if sync else [])
                   + (["--hw", hw] if hw else [])
                   + (["--measured", measured] if measured else []))
    if r.returncode:
        raise subprocess.CalledProcessError(r.returncode, r.args, r.stdout,
                                            r.stderr)
    return {k: float(v) for k, v in
            (line.split() for line in r.stdout.splitlines() if " " in line)}


def graph_for(name, tmp, b):
    graph = Path(tmp) / f"{name}.b{b}.mlir"
    if not graph.exists():
        write_text(graph, shapes.build(shapes.SHAPES[name], b, 2048, "f16"))
    return graph
