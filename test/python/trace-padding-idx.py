# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %PYTHON %s %t/old | FileCheck %s
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t/new | FileCheck %s

# An embedding with a padding_idx (any transformers config with a
# pad_token_id) through rp.trace, on torch 1.13 and torch 2: the forward is
# unchanged and the padding row's gradient is zero, as in PyTorch. The
# batch holds the padding token, so a plain gather would give that row a
# gradient. Llama's padding row is made nonzero (it is read as a constant),
# Qwen2's is nn.Embedding's zero row (a splat).

import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402
import tiny_gpt  # noqa: E402
import transformers as T  # noqa: E402
from rp import safetensors as rp_safetensors  # noqa: E402

out = Path(sys.argv[1])
M, PAD = 2, 3
tokens, labels = tiny_gpt.batch(vocab=hf_models.VOCAB, b=M, s=16)
tokens[:, ::3] = PAD
EMB = "lm.model.embed_tokens.weight"

for name, cfg, zero_row in (("llama", T.LlamaConfig, False),
                            ("qwen2", T.Qwen2Config, True)):
    torch.manual_seed(0)
    lm = hf_models._llama_like(cfg, getattr(T, cfg.__name__.replace(
        "Config", "ForCausalLM")), pad_token_id=PAD)
    lm.config.use_cache = False
    lm.eval()
    model = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
    if zero_row:
        with torch.no_grad():
            lm.model.embed_tokens.weight[PAD].zero_()
    ref_loss, ref_grads = tiny_gpt.reference(model, tokens, labels)
    src = rp.trace(model, (tokens[:1],), out / name)
    plan = rp.compile(src, out / f"{name}.rpplan", devices=1, microbatches=M)
    loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                         sync=True, dump_grads=out / f"{name}.safetensors"))[0]
    grads = rp_safetensors.read(out / f"{name}.safetensors")
    errs = {n: np.linalg.norm(grads[n] - g) / np.linalg.norm(g)
            for n, g in ref_grads.items() if n in grads}
    print(f"{name}: loss within 1e-4: "
          f"{abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)}")
    print(f"{name}: gradients {len(errs)} of {len(ref_grads)} within 1e-4: "
          f"{all(e <= 1e-4 for e in errs.values())}")
    print(f"{name}: torch padding row zero: {not ref_grads[EMB][PAD].any()},"
          f" rp padding row zero: {not grads[EMB][PAD].any()}")

# CHECK:      llama: loss within 1e-4: True
# CHECK-NEXT: llama: gradients 21 of 21 within 1e-4: True
# CHECK-NEXT: llama: torch padding row zero: True, rp padding row zero: True
# CHECK-NEXT: qwen2: loss within 1e-4: True
# CHECK-NEXT: qwen2: gradients 27 of 27 within 1e-4: True
# CHECK-NEXT: qwen2: torch padding row zero: True, rp padding row zero: True
