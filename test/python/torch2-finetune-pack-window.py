# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Packed rows through models whose attention layers add to the plain causal
# mask: Mistral's sliding window (every layer) and Gemma 2's soft-capped
# scores with alternating sliding-window layers. rp.finetune's trace hands
# each attention the segments with the layer's own `window` and `softcap`
# (transformers passes them to the attention function, as to its flash
# path); step 0's loss over packed rows equals transformers' with each
# document run alone (its own masks) within 1e-5. Without the window the
# documents longer than it would differ.

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

out = Path(sys.argv[1])
S, VOCAB, B = 40, 64, 2
common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
              num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=S,
              attn_implementation="eager")


def make(name):
    torch.manual_seed(0)
    if name == "mistral":
        lm = T.MistralForCausalLM(T.MistralConfig(sliding_window=6, **common))
    else:
        lm = T.Gemma2ForCausalLM(T.Gemma2Config(
            head_dim=8, sliding_window=6, attn_logit_softcapping=5.0,
            final_logit_softcapping=None, query_pre_attn_scalar=8,
            **common))
    lm.config.use_cache = False
    return lm.eval()


# Rows of documents 3 to 17 tokens long (several longer than the window),
# padding (-1) at the end of the second row.
rng = np.random.default_rng(0)
segments = np.full((B, S), -1, dtype=np.int32)
for r, lengths in enumerate([(17, 3, 12, 8), (9, 15, 11)]):
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
ids, lab, seg = (torch.from_numpy(a.astype(np.int64))
                 for a in (tokens, labels, segments))

for name in ("mistral", "gemma2"):
    model = make(name)
    src = ft.trace_model(model, B, S, out / name)
    ir = Path(src).read_text()
    plan = rp.compile(src, out / f"{name}.rpplan")
    (_, loss), = train_steps(plan, steps=1, lr=0.0, sync=True,
                             dataset=str(out / "rows.rpds"))
    total, count = 0.0, int((lab != -100).sum())
    with torch.no_grad():
        for r in range(B):
            for s in seg[r].unique().tolist():
                if s < 0:
                    continue
                where = seg[r] == s
                logits = model(input_ids=ids[r][where][None]).logits
                total += torch.nn.functional.cross_entropy(
                    logits[0], lab[r][where], ignore_index=-100,
                    reduction="sum").item()
    ref = total / count
    # CHECK: mistral: windows 2, softcaps 0, loss within 1e-5 of the documents alone: True
    # CHECK: gemma2: windows 1, softcaps 2, loss within 1e-5 of the documents alone: True
    print(f"{name}: windows {ir.count('window = 6')}, softcaps "
          f"{ir.count('softcap = ')}, loss within 1e-5 of the documents "
          f"alone: {abs(loss - ref) / ref <= 1e-5} ({loss:.7f} vs {ref:.7f})")
