# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Packed rows through GPT-OSS, whose attention has a learned sink logit per
# head (transformers' `s_aux`: one more column in each query's softmax,
# dropped after it) and alternating sliding-window layers. rp.finetune's
# trace gives such a layer one fused rp.attention with the segment ids as
# its mask, the window and the sinks operand (nothing S x S in the graph;
# before this, the decomposed rp._segments.sink_attention: S x S scores, a
# keep mask and a softmax a head); step 0's loss over packed rows on 1 and 2
# devices equals transformers' with each document run alone within 1e-5,
# and every gradient, the sinks' included (rp.attention_grad's), within
# 1e-4 of the largest.

import sys
from pathlib import Path

import numpy as np
import torch
import transformers as T

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import finetune_module as ft  # noqa: E402

import rp  # noqa: E402
from rp import data  # noqa: E402
from rp.driver import train_steps  # noqa: E402
from rp.safetensors import read as load  # noqa: E402

out = Path(sys.argv[1])
S, VOCAB, B = 32, 64, 2

torch.manual_seed(0)
model = T.GptOssForCausalLM(T.GptOssConfig(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=8, num_local_experts=4, num_experts_per_tok=2,
    sliding_window=5, max_position_embeddings=S, swiglu_limit=7.0,
    attn_implementation="eager"))
model.config.use_cache = False
model.eval()
# transformers starts the sinks at 0 in some versions: make them count.
with torch.no_grad():
    for layer in model.model.layers:
        layer.self_attn.sinks.normal_(0.0, 1.0)
kinds = [layer.self_attn.sliding_window for layer in model.model.layers]
# CHECK: layers: one sliding (window 5), one full: True
print(f"layers: one sliding (window 5), one full: "
      f"{sorted(map(str, kinds)) == ['5', 'None']}")

# Documents 3 to 14 tokens long (several longer than the window), padding
# (-1) at the end of the second row.
rng = np.random.default_rng(0)
segments = np.full((B, S), -1, dtype=np.int32)
for r, lengths in enumerate([(14, 3, 9, 6), (8, 12, 7)]):
    at = 0
    for d, n in enumerate(lengths):
        segments[r, at:at + n] = d
        at += n
tokens = rng.integers(0, VOCAB, (B, S)).astype(np.int32)
labels = np.full((B, S), -100, dtype=np.int32)
for r in range(B):
    for j in range(S - 1):
        if segments[r, j] >= 0 and segments[r, j] == segments[r, j + 1]:
            labels[r, j] = tokens[r, j + 1]
data.write(out / "rows.rpds", tokens, labels, segments, 7, VOCAB, True)

src = ft.trace_model(model, B, S, out / "trace")
text = Path(src).read_text()
fused = [l for l in text.splitlines() if "rp.attention " in l]
# (The hidden size is S too: the scores' shape is [B, heads or 1, S, S].)
square = sum(text.count(f"{B}x{h}x{S}x{S}x") for h in (1, 4))
# CHECK: traced: 2 fused attentions with sinks, 1 with window = 5; softmaxes 0, S x S tensors 0
print(f"traced: {sum('sinks(' in l for l in fused)} fused attentions with "
      f"sinks, {sum('window = 5' in l for l in fused)} with window = 5; "
      f"softmaxes {text.count('rp.softmax')}, S x S tensors {square}")
losses = {}
for devices in (1, 2):
    plan = rp.compile(src, out / f"model{devices}.rpplan", devices=devices,
                      microbatches=2)
    (_, losses[devices]), = train_steps(
        plan, steps=1, lr=0.0, sync=True, dataset=str(out / "rows.rpds"),
        dump_grads=str(out / f"grads{devices}.safetensors"))
loss = losses[2]
grads = load(out / "grads2.safetensors")

ids, lab, seg = (torch.from_numpy(a.astype(np.int64))
                 for a in (tokens, labels, segments))
model.zero_grad()
total, count = 0.0, int((lab != -100).sum())
for r in range(B):
    for s in seg[r].unique().tolist():
        if s < 0:
            continue
        where = seg[r] == s
        logits = model(input_ids=ids[r][where][None]).logits
        total = total + torch.nn.functional.cross_entropy(
            logits[0], lab[r][where], ignore_index=-100, reduction="sum")
(total / count).backward()
ref = (total / count).item()
params = dict(model.named_parameters())
worst = max((torch.from_numpy(np.array(g)) - params[n].grad).abs().max().item()
            / params[n].grad.abs().max().item() for n, g in grads.items())
sinks = [n for n in grads if n.endswith("sinks")]
# CHECK: loss within 1e-5 of the documents alone on 1 and 2 devices: True True
print(f"loss within 1e-5 of the documents alone on 1 and 2 devices: "
      f"{abs(losses[1] - ref) / ref <= 1e-5} {abs(loss - ref) / ref <= 1e-5} "
      f"({losses[1]:.7f}, {loss:.7f} vs {ref:.7f})")
# CHECK: gradients: {{[0-9]+}} weights (2 sinks), within 1e-4: True
print(f"gradients: {len(grads)} weights ({len(sinks)} sinks), within 1e-4: "
      f"{worst <= 1e-4} (worst {worst:.1e})")

# The sinks take part: their gradients are not zero (a trace that left
# them out would give none).
size = min(params[n].grad.abs().max().item() for n in sinks)
# CHECK: the sinks' gradients are not zero: True
print(f"the sinks' gradients are not zero: {size > 1e-6} ({size:.1e})")
