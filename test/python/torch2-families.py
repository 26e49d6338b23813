# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 1 | FileCheck %s --check-prefix=S1 --implicit-check-not=CHANGED

# A fixed sample of transformers' causal-LM families (bench/families.py:
# configs shrunk from each family's defaults by one rule) through rp.trace,
# TorchScript ONNX and dynamo ONNX: loss within 1e-4 of PyTorch, every
# gradient by name within 1e-4, 2 devices bitwise equal to 1. Each cell
# must agree with the checked-in table families-expected.json (written by
# the whole-mapping run, `bench/families.py --write-expected`): a listed
# failure that starts passing fails this test as a passing cell that
# breaks does, so the table stays true. docs/models.md is that run's table.
#
# The sample runs as SHARDS lit tests (this file runs the first,
# torch2-families-K.test the K-th, each checked by this file's SK lines),
# of about the same time each, so that lit's workers share it: as one test
# it took 192 s on one worker, the end of the lit run waiting on it.
# Usage: torch2-families.py OUT SHARD (1-based).

import json
import os
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "bench"))
import families  # noqa: E402

# deepseek_v3 and glm4_moe: DeepSeek-V3's router through ONNX; youtu: MLA
# keys written by ScatterND; afmoe: a top-k router traced op by op over
# stacked experts; roberta and bert: CumSum and GatherElements (and cumsum,
# gather in rp.trace); plbart: the shrink rule's encoder-decoder sizes;
# mixtral, glm4_moe and deepseek_v3 on dynamo: batched_mm experts and
# DeepSeek-V3's router as dynamo writes them; axk2: scatter of a constant
# and bool and in rp.trace; apertus: XIELU's one-element alpha parameters
# through ONNX; rwkv: a recurrence written one step at a time into a
# fresh tensor (x[:, t] = h in rp.trace, ScatterElements on dynamo);
# lara_mini: a gated-delta layer, whose torch.eye dynamo writes as an
# arange cast to UINT8 (folded at import), and on TorchScript its
# triangular solve (rp.onnx_symbolics); glm and apertus on TorchScript:
# rp.onnx_symbolics' repeat_interleave and expm1; kolibri1 and minimax_m3_vl_text
# on dynamo: a router imported op by op in front of batched_mm experts,
# SiLU-gated and with another activation (docs/moe.md), and on TorchScript
# in front of the eager experts loop (MoERoutedLoop.cpp); flex_olmo on
# TorchScript: a stacked expert loop over fewer experts than the stacks
# hold. lfm2_moe on dynamo: a sigmoid router whose chosen scores dynamo
# takes back to the logits' type (CastLike) before normalising them (the
# normalisation was dropped: its router gradient was off by 0.11); xmod
# on both ONNX paths: its language mask's NonZero folded at import.
SHARDS = [["llama", "gemma2", "qwen3", "gpt2", "glm", "mixtral", "glm4_moe"],
          ["deepseek_v3", "youtu", "afmoe", "roberta", "bert", "plbart"],
          ["axk2", "apertus", "rwkv", "lara_mini"],
          ["kolibri1", "minimax_m3_vl_text", "flex_olmo", "lfm2_moe", "xmod"]]
SAMPLE = [name for shard in SHARDS for name in shard]
assert len(set(SAMPLE)) == len(SAMPLE), "a family in two shards"
expected = json.loads((here / "families-expected.json").read_text())
out, shard = Path(sys.argv[1]), int(sys.argv[2])
for name in SHARDS[shard - 1]:
    start = sum(os.times()[:4])
    result = families.run_family(name, out / name)
    # Where the shard's time goes, in CPU seconds (its own and its tools'),
    # which a loaded machine does not stretch (stderr: FileCheck reads
    # stdout).
    print(f"{name}: {sum(os.times()[:4]) - start:.1f} CPU s", file=sys.stderr)
    for path in families.PATHS:
        got, want = families.status(result, path), expected[name][path]
        same = (got == "pass") == (want == "pass")
        print(f"{name}/{path}: {'as expected' if same else 'CHANGED'} "
              f"({'pass' if got == 'pass' else 'fails'})"
              + ("" if same else f": expected {want!r}, got {got!r}"))

# The first shard (this file's RUN line).
# S1: llama/trace: as expected (pass)
# S1: glm/torchscript: as expected (pass)
# S1: mixtral/dynamo: as expected (pass)
# S1: glm4_moe/dynamo: as expected (pass)
# The second (torch2-families-2.test).
# S2: deepseek_v3/dynamo: as expected (pass)
# S2: plbart/dynamo: as expected
# The third (torch2-families-3.test).
# S3: axk2/trace: as expected (pass)
# S3: apertus/torchscript: as expected (pass)
# S3: apertus/dynamo: as expected (pass)
# S3: rwkv/dynamo: as expected (pass)
# S3: lara_mini/torchscript: as expected (pass)
# S3: lara_mini/dynamo: as expected (pass)
# The fourth (torch2-families-4.test).
# S4: kolibri1/torchscript: as expected (pass)
# S4: kolibri1/dynamo: as expected (pass)
# S4: minimax_m3_vl_text/torchscript: as expected (pass)
# S4: minimax_m3_vl_text/dynamo: as expected (pass)
# S4: flex_olmo/torchscript: as expected (pass)
# S4: lfm2_moe/dynamo: as expected (pass)
# S4: xmod/torchscript: as expected (pass)
# S4: xmod/dynamo: as expected (pass)
