# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# The multi-step GPT-OSS fine-tune on 1 and 4 devices (torch2-finetune-
# families.py runs it on 2): a tiny GptOssForCausalLM folder (attention
# sinks, a sliding and a full layer, a biased top-k router, experts stored
# [E, in, out]) fine-tuned on packed SFT JSONL in async mode (the default),
# 4 steps of 5 microbatches, with LoRA (default targets: attention, router
# and experts) and in full. On 4 devices every step's loss and gradient
# norm, the eval loss and the last checkpoint's weights are bitwise those
# of 1 device, and the 4-device LoRA run exported --merged gives
# transformers rp's eval loss within 1e-5.

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model, rel, rp_loss, torch_loss  # noqa: E402

import rp  # noqa: E402
from rp import export  # noqa: E402
from rp.safetensors import read as load  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer,  # noqa: E402
                          GptOssConfig, GptOssForCausalLM)

out = Path(sys.argv[1])
tiny = make_model(out / "tiny")
tok = AutoTokenizer.from_pretrained(str(tiny))
folder = out / "gpt-oss"
torch.manual_seed(0)
oss = GptOssForCausalLM(GptOssConfig(
    vocab_size=len(tok), hidden_size=32, intermediate_size=48,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
    max_position_embeddings=256, eos_token_id=tok.eos_token_id,
    bos_token_id=None, pad_token_id=None))
with torch.no_grad():
    for layer in oss.model.layers:
        layer.self_attn.sinks.normal_()
oss.save_pretrained(str(folder))
tok.save_pretrained(str(folder))

for lora in (4, 0):
    kind = "LoRA" if lora else "full"
    seen = {}
    for devices in (1, 4):
        run = out / f"{kind}-{devices}"
        rp.finetune(folder, out / "tiny" / "train.jsonl", run,
                    eval_data=out / "tiny" / "eval.jsonl", steps=4,
                    devices=devices, microbatches=5, seq_len=32, lr=1e-2,
                    lora_rank=lora, lora_alpha=8)
        steps = [json.loads(line) for line in open(run / "metrics.jsonl")]
        seen[devices] = (
            [(s["loss"], s["grad_norm"]) for s in steps if "loss" in s],
            rp_loss(run),
            load(run / "checkpoints" / "last" / "weights.safetensors"))
    # The plan is 4 devices' (rp-run refuses it on another count).
    try:
        rp.run_tool("rp-run", [str(out / f"{kind}-4" / "model.rpplan"),
                               "--devices", "1", "--steps", "1"])
        planned = "run on 1 device"
    except rp.ToolError as err:
        planned = "compiled for 4 device(s)" in err.stderr
    (l1, e1, w1), (l4, e4, w4) = seen[1], seen[4]
    same_weights = sorted(w1) == sorted(w4) and all(
        np.array_equal(w1[n], w4[n]) for n in w1)
    print(f"{kind}: the plan is 4 devices': {planned}; {len(l4)} steps, "
          f"losses and gradient norms bitwise 1 device's: {l1 == l4}, eval "
          f"loss: {e1 == e4}, {len(w4)} weights: {same_weights} "
          f"(eval {e4:.7f}; trained: {rel(l4[-1][0], l4[0][0]) > 1e-4})")
    if lora:
        merged = AutoModelForCausalLM.from_pretrained(
            str(export.export_hf(out / f"{kind}-4", out / "merged"))).eval()
        theirs = torch_loss(merged, out / f"{kind}-4" / "eval.rpds")
        print(f"{kind} 4 devices --merged: transformers' loss within 1e-5 of "
              f"rp's: {rel(e4, theirs) <= 1e-5} ({e4:.7f} vs {theirs:.7f})")

# CHECK: LoRA: the plan is 4 devices': True; 4 steps, losses and gradient norms bitwise 1 device's: True, eval loss: True, {{[0-9]+}} weights: True (eval {{.*}}; trained: True)
# CHECK-NEXT: LoRA 4 devices --merged: transformers' loss within 1e-5 of rp's: True
# CHECK-NEXT: full: the plan is 4 devices': True; 4 steps, losses and gradient norms bitwise 1 device's: True, eval loss: True, 37 weights: True (eval {{.*}}; trained: True)
