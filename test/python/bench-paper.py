# RUN: %PYTHON %s %rp_src_root %t | FileCheck %s

# bench/paper.py in modules under ~600 lines (issue 32), its compiles and
# sims through a cache keyed by what they read, and the model of
# RoundPipe's fast end at its runs' kernel speed: RoundPipe's measured
# 1-GPU rate over rp's model of that run, never below 1.

import json
import os
import shutil
import sys
from pathlib import Path

root = Path(sys.argv[1])
work = Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
os.environ["RP_PAPER_CACHE"] = str(work / "cache")
sys.path.insert(0, str(root / "bench"))
import claims  # noqa: E402
import paper  # noqa: E402
import paper_common  # noqa: E402
import paper_roundpipe  # noqa: E402

# Every part of paper.py is under ~600 lines; what bench/explain.py and
# bench/lora_quant.py read through `paper` is still there.
for f in sorted((root / "bench").glob("paper*.py")):
    print(f.name, len(f.read_text().splitlines()) <= 600)
# CHECK: paper.py True
# CHECK-NEXT: paper_common.py True
# CHECK-NEXT: paper_gap.py True
# CHECK-NEXT: paper_memory.py True
# CHECK-NEXT: paper_roundpipe.py True
print(all(callable(getattr(paper, f)) for f in (
    "simulate", "batching", "graph_for", "compile_plan", "profile_json",
    "max_seq")), sorted(paper.HW))
# CHECK-NEXT: True ['rp as built today', 'rp with library kernels']

# The cache: a second run with the same program and input bytes runs
# nothing and puts the first run's output where the second asked for it
# (its path differs); a changed input misses.
script = work / "count.sh"
counter = work / "counter"  # not an argument: the key does not read it
script.write_text(f'n=$(cat {counter} 2>/dev/null || echo 0); '
                  f'echo $((n + 1)) > {counter}; cp {counter} "$1"; '
                  'echo ran\n')
runs = []
for out in ("a.out", "b.out"):
    r = paper_common.run_cached(["/bin/sh", script, work / out],
                                [work / out])
    runs.append((r.stdout.strip(), (work / out).read_text().strip()))
print(runs, counter.read_text().strip())
# CHECK-NEXT: [('ran', '1'), ('ran', '1')] 1
script.write_text(script.read_text() + "# changed\n")
r = paper_common.run_cached(["/bin/sh", script, work / "c.out"],
                            [work / "c.out"])
print(r.stdout.strip(), (work / "c.out").read_text().strip())
# CHECK-NEXT: ran 2

# The measured times divided by the kernel speed (the fast end's).
times = json.loads(claims.measured_times(
    "qwen3-1.7b", work / "t.json", 2.0).read_text())["layers"]
print(times[1], times[-1])
# CHECK-NEXT: {'name': 'layers.0', 'forward_ms': 3.7145, 'backward_ms': 7.9155} {'name': 'head', 'forward_ms': 11.03275, 'backward_ms': 21.8535}

# The kernel speed: the measured 1-GPU rate over the model's, never below
# 1 (the 235B's 1-GPU run is slower than the model: its host loop, no
# kernel term); a model that did not compile gives 1.
fake = {"qwen3-1.7b": 8695.0, "qwen3-235b-a22b": 596.0,
        "qwen3-32b": "error"}
paper_roundpipe.one_gpu = lambda name, tmp: (None, fake[name])
for name in fake:
    print(name, f"{paper_roundpipe.kernel_speed(name, work):.4f}")
# CHECK-NEXT: qwen3-1.7b 1.0214
# CHECK-NEXT: qwen3-235b-a22b 1.0000
# CHECK-NEXT: qwen3-32b 1.0000
print(paper_roundpipe.model_ends("qwen3-1.7b"))
print(paper_roundpipe.model_ends("gpt-oss-20b"))
# The range is the slowest and fastest over both microbatchings.
figs = {"low": {"tokens_per_s": 64065}, "high": {"tokens_per_s": 65580},
        "run-low": {"tokens_per_s": 62990},
        "run-high": {"tokens_per_s": 64431}}
print(paper_roundpipe.model_range(figs))
del figs["run-low"], figs["run-high"]
print(paper_roundpipe.model_range(figs))
# CHECK-NEXT: ['low', 'mid', 'high', 'high-published']
# CHECK-NEXT: ['low', 'mid', 'high', 'high-published', 'mid-whole']
# CHECK-NEXT: (62990, 65580)
# CHECK-NEXT: (64065, 65580)

# A measured figure outside the range says which end it misses.
print(paper.gap_note(64065, 65580, 65417))
print(paper.gap_note(23544, 24153, 24275))
print(paper.gap_note(5564, 5780, 5516))
# CHECK-NEXT: inside
# CHECK-NEXT: OUTSIDE (+0.5%): faster than the fast end (the fastest host, its kernels at its 1-GPU run's speed); no stated term closes it
# CHECK-NEXT: OUTSIDE (-0.9%): slower than the slow end (the slowest host, its per-kernel launches on one interpreter at bench/layer_host.py's most loaded figure): no stated term closes it

# The model of RoundPipe's per-kernel host work: bench/layer_host.py's
# time per layer spread over rp's kernel calls per decoder layer, read
# from the plan's program names (a middle layer's forward and backward
# programs, each shared among the layers it spans; the embedding's and
# the head's programs and unnamed ones left out).
fake = {"programs": [
    {"name": "embed..layers.1 slot0", "calls": [{"op": "matmul"}] * 30},
    {"name": "layers.2..layers.3 slot0", "calls": [{"op": "matmul"}] * 20},
    {"name": "layers.2..layers.3 slot1", "calls": [{"op": "matmul"}] * 20},
    {"name": "layers.2 slot0", "calls": [{"op": "matmul"}] * 99},  # another layer's
    {"name": "layers.2..layers.3.backward.rest slot0", "calls": [{"op": "matmul"}] * 50},
    {"name": "layers.3.backward.recompute slot0",
     "calls": [{"op": "matmul"}] * 7 + [{"op": "reshape"}] * 3
     + [{"op": "moe_dispatch"}, {"op": "moe_combine_grad", "ints": [1]},
        {"op": "moe_combine_grad", "ints": [0]}]},
    {"name": "layers.3.backward.recompute slot1", "calls": [{"op": "matmul"}] * 7},
    {"name": "start-grads layers.2..layers.3.backward", "calls": [{"op": "matmul"}] * 9},
    {"name": "add-grads layers.2..layers.3.backward", "calls": [{"op": "matmul"}] * 8},
    {"name": "layers.1.backward slot0", "calls": [{"op": "matmul"}] * 40},
    {"name": "epilogue", "calls": [{"op": "matmul"}] * 5},
    {"name": "layers.4..layers.5 slot0", "calls": [{"op": "matmul"}] * 10},
    {"name": "layers.6..head slot0", "calls": [{"op": "matmul"}] * 60}]}
saved = paper_roundpipe.run_cached
paper_roundpipe.run_cached = lambda argv, outputs=(): type(
    "R", (), {"stdout": json.dumps(fake)})()
# Layers 1-5 named (the head's span left out); the middle is layer 3:
# slot0's 20 / 2 + 50 / 2 + 7 (its reshapes launch nothing) + 13 (a MoE
# dispatch's 4 launches, a weighted combine gradient's 5, an unweighted
# one's 4: as the cuda device launches them) and the add-grads' 8 / 2.
print(paper_roundpipe.calls_per_layer("p.rpplan"))
paper_roundpipe.run_cached = saved
# CHECK-NEXT: 59.0
host = claims.roundpipe_host({"host_dram_gbps": 100}, "low", "qwen3-32b",
                             12.5)
print(host["kernel_host_us"], host["host_interpreters"],
      "kernel_host_us" in claims.roundpipe_host({}, "mid", "qwen3-32b"))
# CHECK-NEXT: 12.5 1 False
print(all(len(v) == 2 and v[0] <= v[1]
          for v in claims.LAYER_HOST_US.values()))
# CHECK-NEXT: True

# The 20B's run at its own batching (paper_gap): RoundPipe's 4-sequence
# times per token at 8 sequences, less the one gradient add its
# 4-sequence backward held of the two the doubled time counts; the file
# says its backward holds the add it keeps.
import paper_gap  # noqa: E402
acc = {f"layers.{i}": 6.0 for i in range(24)} | {"head": 4.0}
run = json.loads(paper_gap.run_times("gpt-oss-20b", work / "run.json",
                                     acc).read_text())
print(run["backward_includes_accumulation"], run["layers"][1],
      run["layers"][-1])
# CHECK-NEXT: True {'name': 'layers.0', 'forward_ms': 43.289125, 'backward_ms': 157.56175} {'name': 'head', 'forward_ms': 88.585, 'backward_ms': 168.528}
# The run's kernels as the sim charges those times: a layer its forward,
# its recompute at the forward time and its backward; the head (the fused
# tail) its forward and backward, no recompute; 16 microbatches.
print(f"{paper_gap.kernel_ms(run, 16):.3f}")
# CHECK-NEXT: 97863.568
