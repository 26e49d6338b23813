# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Packing keeps attention within each document: rows packed from the tiny
# Llama's JSONL (several documents a row, padding at the end) go through
# rp.finetune's traced model (input_ids and segment_ids: each attention
# keeps its document's keys from the segments, per-document positions
# built in the graph, nothing S x S) on 2 devices;
# step 0's loss and every gradient equal PyTorch's with each document run
# alone (loss within 1e-5, gradients within 1e-4 of the largest), and the
# eager wrapper with the same block mask agrees too. The same rows through
# the plain model (attention across documents, positions running on) give
# other logits: what the check would see without the mask.

import re
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import finetune_module as ft, make_model  # noqa: E402

import rp  # noqa: E402
from rp import data  # noqa: E402
from rp.driver import train_steps  # noqa: E402
from rp.safetensors import read as load  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
model, tok = ft.load_model(model_dir)
data.build(out / "tiny" / "train.jsonl", tok, out / "all.rpds", 48, pack=True)
d = data.read(out / "all.rpds")
rows = slice(0, 4)
tokens, labels, segments = (d[k][rows] for k in ("tokens", "labels", "segments"))
data.write(out / "packed.rpds", tokens, labels, segments, 0, d["vocab"], True)
docs = [len(set(r[r >= 0])) for r in segments]
# CHECK: packed: 4 rows of 48 tokens, {{[0-9]+}} documents, several in each row: True
print(f"packed: {len(tokens)} rows of 48 tokens, {sum(docs)} documents, "
      f"several in each row: {min(docs) > 1}")

src = ft.trace_model(model, 2, 48, out / "trace")
# The attention takes the segments themselves (an i64 [batch, seq] mask,
# rp._segments): no [.., 48, 48] tensor anywhere in the traced graph, where
# a block mask built from the segments was one per row (and a float copy per
# layer).
ir = Path(src).read_text()
on_segments = re.findall(r"rp\.attention .* mask\(%\w+\) causal .*"
                         r"tensor<2x48xi64>\) ->", ir)
# CHECK: attentions on segments: 2, S x S tensors: 0
print(f"attentions on segments: {len(on_segments)}, "
      f"S x S tensors: {len(re.findall(r'48x48x', ir))}")
plan = rp.compile(src, out / "model.rpplan", devices=2, microbatches=2)
(_, loss), = train_steps(plan, steps=1, lr=0.0, sync=True,
                         dataset=str(out / "packed.rpds"),
                         dump_grads=str(out / "grads.safetensors"))
grads = load(out / "grads.safetensors")

# PyTorch: each document alone (its own positions from 0, plain causal).
ids = torch.from_numpy(tokens.astype(np.int64))
lab = torch.from_numpy(labels.astype(np.int64))
seg = torch.from_numpy(segments.astype(np.int64))
model.zero_grad()
total, count = 0.0, int((lab != -100).sum())
for r in range(len(ids)):
    for s in seg[r].unique().tolist():
        if s < 0:
            continue
        where = seg[r] == s
        logits = model(input_ids=ids[r][where][None], use_cache=False).logits
        total = total + torch.nn.functional.cross_entropy(
            logits[0], lab[r][where], ignore_index=-100, reduction="sum")
(total / count).backward()
ref = (total / count).item()
params = dict(model.named_parameters())
worst = max((torch.from_numpy(np.array(g)) - params[n].grad).abs().max().item()
            / params[n].grad.abs().max().item() for n, g in grads.items())
# CHECK: loss within 1e-5 of the documents alone: True
print(f"loss within 1e-5 of the documents alone: "
      f"{abs(loss - ref) / abs(ref) <= 1e-5} ({loss:.7f} vs {ref:.7f})")
# CHECK: gradients: {{[0-9]+}} weights, within 1e-4: True
print(f"gradients: {len(grads)} weights, within 1e-4: {worst <= 1e-4} "
      f"(worst {worst:.1e})")

with torch.no_grad():
    masked = ft._logits_module(model)(ids, seg)
    plain = model(input_ids=ids, use_cache=False).logits
ce = lambda x: torch.nn.functional.cross_entropy(
    x.reshape(-1, x.shape[-1]), lab.reshape(-1), ignore_index=-100).item()
# CHECK: eager block mask within 1e-5: True
print(f"eager block mask within 1e-5: {abs(ce(masked) - ref) / ref <= 1e-5}")
# CHECK: without the mask the logits differ: True
gap = (plain - masked).abs().max().item()
print(f"without the mask the logits differ: {gap > 1e-3} ({gap:.1e}; "
      f"loss {ce(plain):.5f})")

# --data (a flat token stream): each window one document (segment_ids
# zeros), the plain causal model's loss.
stream = d["tokens"][d["segments"] >= 0]
stream.astype("<u2").tofile(out / "flat.bin")
(_, flat), = train_steps(plan, steps=1, lr=0.0, sync=True,
                         data=str(out / "flat.bin"))
windows = torch.from_numpy(np.stack([stream[i * 48:i * 48 + 49]
                                     for i in range(4)]).astype(np.int64))
with torch.no_grad():
    logits = model(input_ids=windows[:, :48], use_cache=False).logits
plain_ref = torch.nn.functional.cross_entropy(
    logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1)).item()
# CHECK: --data: one document a window, within 1e-5: True
print(f"--data: one document a window, within 1e-5: "
      f"{abs(flat - plain_ref) / plain_ref <= 1e-5}")
