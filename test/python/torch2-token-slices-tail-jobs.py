# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# The fused tail as two jobs on alternate token slices (rp-compile
# --token-slices ... --tail-jobs 2; docs/token-slices.md, "The head-only
# tail as two jobs"): a tail that keeps no keys (the head alone: final
# norm, LM head, loss) runs slices 2, 0 and 3, 1 (four slices) or 2, 0 and
# 1 (three) as two jobs, so that it paces the backward chain at half its
# rate. transformers' Llama (tiny, two layers, 48 tokens, one sequence a
# step) on 1, 2 and 4 devices with the head alone as the tail: one step on
# the host gives the loss and every weight gradient of the unsliced plan
# (one tail job, the same stages) within 1e-5, no races, and 2 and 4
# devices equal 1 device bit for bit; the written schedule has two tail
# jobs. A tail that holds an attention is refused with two jobs: its next
# slice would read keys the other job made.

import re
import subprocess
import sys
from pathlib import Path

import torch
import transformers as T

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from token_slices_check import (S, VOCAB, bitwise, logits_only,  # noqa: E402
                                no_races, step, worst)

import rp  # noqa: E402
from rp.tools import find_tool  # noqa: E402

out = Path(sys.argv[1])
torch.manual_seed(0)
model = logits_only(T.LlamaForCausalLM(T.LlamaConfig(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=S)))
g = torch.Generator().manual_seed(1)
tokens = torch.randint(0, VOCAB, (1, S), generator=g)
labels = torch.randint(0, VOCAB, (1, S), generator=g)
src = rp.trace(model, (tokens,), out / "trace")

# Layers: the embedding, two decoder layers, the head (bwd's first entry:
# the tail, here the head alone).
first = {}
for devices, stages in ((1, "fwd:3;bwd:1,3"), (2, "fwd:3;bwd:1,2,1"),
                        (4, "fwd:1,2;bwd:1,2,1")):
    flags = ["--stages", stages]
    plain = rp.compile(src, out / f"{devices}.rpplan", devices=devices,
                       microbatches=1, extra_args=flags)
    loss, grads = step(plain, tokens.numpy(), labels.numpy())
    for slices in ("4", "20,16,12"):
        ir = out / f"{devices}-{slices}.mlir"
        rp.run_tool("rp-opt", [
            str(src), "--rp-train-pipeline=devices="
            f"{devices} microbatches=1 token-slices={slices} tail-jobs=2 "
            f"stages={stages}", "-o", str(ir)])
        tails = sorted(set(re.findall(r"rp\.compute tail job (\d+) ",
                                      ir.read_text())))
        plan = rp.compile(src, out / f"{devices}-{slices}.rpplan",
                          devices=devices, microbatches=1,
                          extra_args=flags + ["--token-slices", slices,
                                              "--tail-jobs", "2"])
        sl, sg = step(plan, tokens.numpy(), labels.numpy())
        line = (f"{devices} devices, slices {slices}: {len(tails)} tail "
                f"jobs, loss within 1e-5 {abs(sl - loss) <= 1e-5 * abs(loss)}"
                f", {len(sg)} gradients within 1e-5 "
                f"{worst(sg, grads) <= 1e-5}, no races {no_races(plan)}")
        if devices == 1:
            first[slices] = sg
        else:
            line += f", bitwise 1 device's {bitwise(sg, first[slices])}"
        print(line, flush=True)

# CHECK: 1 devices, slices 4: 2 tail jobs, loss within 1e-5 True, 21 gradients within 1e-5 True, no races True
# CHECK: 1 devices, slices 20,16,12: 2 tail jobs, loss within 1e-5 True, 21 gradients within 1e-5 True, no races True
# CHECK: 2 devices, slices 4: 2 tail jobs, loss within 1e-5 True, 21 gradients within 1e-5 True, no races True, bitwise 1 device's True
# CHECK: 2 devices, slices 20,16,12: 2 tail jobs, loss within 1e-5 True, 21 gradients within 1e-5 True, no races True, bitwise 1 device's True
# CHECK: 4 devices, slices 4: 2 tail jobs, loss within 1e-5 True, 21 gradients within 1e-5 True, no races True, bitwise 1 device's True
# CHECK: 4 devices, slices 20,16,12: 2 tail jobs, loss within 1e-5 True, 21 gradients within 1e-5 True, no races True, bitwise 1 device's True

# A tail holding the last decoder layer (an attention) as two jobs.
bad = subprocess.run(
    [str(find_tool("rp-compile")), str(src), "-o", str(out / "bad.rpplan"),
     "--devices", "2", "--microbatches", "1", "--stages", "fwd:2;bwd:2,2",
     "--token-slices", "2", "--tail-jobs", "2"], capture_output=True,
    text=True)
print(f"refused: exit {bad.returncode}; "
      + " ".join(l.split("error: ", 1)[1] for l in bad.stderr.splitlines()
                 if "error: " in l)[:160])
# CHECK: refused: exit 1; rp-predict-token-slices tail-jobs=2: the fused tail as 2 jobs takes alternate token slices, so it must keep no keys, but its layer 2
