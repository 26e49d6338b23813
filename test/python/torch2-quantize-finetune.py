# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# rp.finetune with an NF4 frozen base (quantize_base="nf4", LoRA rank 4 on
# every linear layer but the LM head): the run records the format, its
# checkpoints hold the adapters alone (the base is the plan's, never
# trained), and the exports work: --peft (the adapters, PEFT's names) gives
# rp's eval loss within 1e-5 on the base with its quantized weights
# dequantized (rp.quant: what the devices computed with), and --merged
# (from the best checkpoint copied away from its run) dequantizes the base
# and merges into it, so that from_pretrained gives rp's eval loss within
# 1e-5; merging into the original weights instead would not.

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model, rel, rp_loss, torch_loss  # noqa: E402

import rp  # noqa: E402
from rp import export, safetensors  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
run = out / "nf4"
rp.finetune(model_dir, out / "tiny" / "train.jsonl", run,
            eval_data=out / "tiny" / "eval.jsonl", steps=4, devices=2,
            microbatches=3, seq_len=32, lr=1e-2, lora_rank=4, lora_alpha=8,
            quantize_base="nf4", sync=True)
record = json.loads((run / "finetune.json").read_text())
print("recorded:", record["lora"])
print("quantized weights beside the plan:", (run / "model.quant.bin").is_file())
saved = safetensors.read(run / "checkpoints" / "last" / "weights.safetensors")
print("checkpoint:", len(saved), "tensors, all adapters:",
      all(".lora_" in n for n in saved))
ours = rp_loss(run)

from peft import PeftModel  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from rp.export import _quantized_base  # noqa: E402
from rp import quant  # noqa: E402
import torch  # noqa: E402

blobs = _quantized_base(run, record)
print("dequantized:", len(blobs), "weights, e.g.", sorted(blobs)[0])


def dequantized_base():
    base = AutoModelForCausalLM.from_pretrained(str(model_dir))
    state = base.state_dict()
    with torch.no_grad():
        for name, (kind, blob) in blobs.items():
            state[name].copy_(torch.from_numpy(quant.dequantize(
                kind, blob, state[name].numel()).reshape(state[name].shape)))
    return base


adapter = export.export_peft(run, out / "peft")
config = json.loads((adapter / "adapter_config.json").read_text())
print("adapter:", config["r"], config["lora_alpha"],
      len(config["target_modules"]), "modules")
peft_model = PeftModel.from_pretrained(dequantized_base(), str(adapter)).eval()
print("export --peft on the dequantized base: loss within 1e-5 of rp's:",
      rel(ours, torch_loss(peft_model, run / "eval.rpds")) <= 1e-5)
shutil.copytree(run / "checkpoints" / "best", out / "moved")
merged = export.export_merged(out / "moved", out / "merged")
model = AutoModelForCausalLM.from_pretrained(str(merged)).eval()
print("export --merged (dequantized, then merged): loss within 1e-5 of rp's:",
      rel(rp_loss(run, "best"), torch_loss(model, run / "eval.rpds")) <= 1e-5)
# The run folder itself (the plan's LoRA settings read, the record's
# quantize_base kept): before, the settings read from the plan replaced the
# record's and dropped the format, so `rp export RUN --hf` merged into the
# original weights, 2e-4 off rp's loss, and said nothing.
model = AutoModelForCausalLM.from_pretrained(
    str(export.export_hf(run, out / "hf"))).eval()
print("export --hf of the run folder: loss within 1e-5 of rp's:",
      rel(ours, torch_loss(model, run / "eval.rpds")) <= 1e-5)
original = PeftModel.from_pretrained(
    AutoModelForCausalLM.from_pretrained(str(model_dir)), str(adapter)).eval()
print("on the original base the loss differs by more than 1e-5:",
      rel(ours, torch_loss(original, run / "eval.rpds")) > 1e-5)

# CHECK: recorded: {'rank': 4, 'alpha': 8.0, 'targets': '', 'modules_to_save': '', 'dropout': 0.0, 'quantize_base': 'nf4'}
# CHECK-NEXT: quantized weights beside the plan: True
# CHECK-NEXT: checkpoint: 28 tensors, all adapters: True
# CHECK-NEXT: dequantized: 14 weights, e.g. model.layers.0.mlp.down_proj.weight
# CHECK-NEXT: adapter: 4 8.0 14 modules
# CHECK-NEXT: export --peft on the dequantized base: loss within 1e-5 of rp's: True
# CHECK-NEXT: export --merged (dequantized, then merged): loss within 1e-5 of rp's: True
# CHECK-NEXT: export --hf of the run folder: loss within 1e-5 of rp's: True
# CHECK-NEXT: on the original base the loss differs by more than 1e-5: True
