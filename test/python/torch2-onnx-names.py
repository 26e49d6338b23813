# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# What the PyTorch ONNX exporters lose, through rp-import:
# - Names: torch 2's dynamo exporter (opset 18) with its default
#   optimize=True folds Llama's linear weights into transposed constants
#   (val_43, ...); rp-import refuses that file, naming optimize=False, with
#   which every trainable weight reaches rp's gradient dump under its
#   state_dict name, within 1e-4 of PyTorch.
# - padding_idx: Gemma 2 (tied embedding, soft-capped logits, pad_token_id
#   0) through the TorchScript exporter: ONNX has no padding_idx, so a plain
#   import gives the padding row a gradient (the embedding's gradient is
#   off: this was the "tied embedding under soft-capped logits" error); with
#   --padding-idx the row gets none and every gradient matches.

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import hf_models  # noqa: E402
import rp  # noqa: E402
import step0  # noqa: E402
import tiny_gpt  # noqa: E402
from rp import safetensors as rp_safetensors  # noqa: E402

out = Path(sys.argv[1])
M = 2
tokens, labels = tiny_gpt.batch(vocab=hf_models.VOCAB, b=M, s=16)
tokens[:, ::4] = 0  # Gemma 2's padding token


def grads_of(src, tag, **flags):
    plan = rp.compile(src, out / f"{tag}.rpplan", devices=1, microbatches=M,
                      **flags)
    loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                         sync=True, dump_grads=out / f"{tag}.st"))[0]
    return loss, rp_safetensors.read(out / f"{tag}.st")


def report(tag, model, src, **flags):
    ref_loss, ref = tiny_gpt.reference(model, tokens, labels)
    loss, got = grads_of(src, tag, **flags)
    named = [n for n in ref if n in got]
    errs = {n: np.linalg.norm(got[n] - ref[n]) / np.linalg.norm(ref[n])
            for n in named}
    off = [n for n, e in errs.items() if e > 1e-4]
    print(f"{tag}: {len(named)} of {len(ref)} trainable weights by name; "
          f"loss within 1e-4: {abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)}"
          f"; gradients off: {off}")
    return got


llama = hf_models.make("llama")
for optimize in (True, False):
    path = out / f"llama-dynamo-{optimize}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(llama, (tokens[:1],), str(path),
                          input_names=["input_ids"], output_names=["logits"],
                          opset_version=18, dynamo=True, optimize=optimize)
    try:
        report(f"llama dynamo optimize={optimize}", llama, path)
    except rp.ToolError as err:
        line = next(ln for ln in err.stderr.splitlines() if "error" in ln)
        print(f"llama dynamo optimize={optimize}: refused:",
              line.split("error: ", 1)[1])
# CHECK: llama dynamo optimize=True: refused: the dynamo exporter folded parameters into derived constants
# CHECK-SAME: Export with torch.onnx.export(..., dynamo=True, optimize=False)
# CHECK: llama dynamo optimize=False: 21 of 21 trainable weights by name; loss within 1e-4: True; gradients off: []

cfg = T.Gemma2Config(vocab_size=hf_models.VOCAB, hidden_size=32,
                     intermediate_size=48, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                     max_position_embeddings=64, sliding_window=4)
torch.manual_seed(0)
lm = T.Gemma2ForCausalLM(cfg).eval()
gemma = tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))
print("gemma2: tied", cfg.tie_word_embeddings, "softcap",
      cfg.final_logit_softcapping, "padding_idx",
      lm.model.embed_tokens.padding_idx)
src = out / "gemma2.onnx"
step0.export_onnx(gemma, {"input_ids": tokens[:1]}, src)
EMB = "lm.model.embed_tokens.weight"
report("gemma2 torchscript", gemma, src)
got = report("gemma2 torchscript --padding-idx", gemma, src,
             padding_idx=f"{EMB}=0")
# Tied: the padding row still gets the output projection's gradient.
ref_row = tiny_gpt.reference(gemma, tokens, labels)[1][EMB][0]
print("gemma2: padding row within 1e-4 of torch:",
      np.linalg.norm(got[EMB][0] - ref_row) <= 1e-4 * np.linalg.norm(ref_row))
# CHECK: gemma2: tied True softcap 30.0 padding_idx 0
# CHECK-NEXT: gemma2 torchscript: 24 of 24 trainable weights by name; loss within 1e-4: True; gradients off: ['lm.model.embed_tokens.weight']
# CHECK-NEXT: gemma2 torchscript --padding-idx: 24 of 24 trainable weights by name; loss within 1e-4: True; gradients off: []
# CHECK-NEXT: gemma2: padding row within 1e-4 of torch: True
