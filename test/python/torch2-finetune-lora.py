# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# rp.finetune with LoRA adapters (rank 4, alpha 8, every linear layer but
# the LM head, which trains whole: --lora-modules-to-save lm_head; dropout
# 0.1, the masks keyed by seed, step and global element index) on 2 host
# devices and on 1 (same microbatches: bitwise the same losses), then `export --peft` (PEFT's names and adapter_config.json:
# PeftModel.from_pretrained loads it on the base folder) and `--merged`
# (W + alpha/r B A, from_pretrained; from the best checkpoint copied away
# from its run, which records the LoRA settings itself): each gives rp's eval loss at the same
# weights within 1e-5 (rp's eval runs without dropout, as PEFT's eval mode).
# The LoRA settings come from the plan, which records them. peft is pinned in scripts/torch2-requirements.txt.

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model, rel, rp_loss, torch_loss  # noqa: E402

import rp  # noqa: E402
from rp import export, safetensors  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
losses = {}
for devices in (2, 1):
    run = out / f"lora{devices}"
    rp.finetune(model_dir, out / "tiny" / "train.jsonl", run,
                eval_data=out / "tiny" / "eval.jsonl", steps=3,
                devices=devices, microbatches=3, seq_len=32, lr=1e-2,
                lora_rank=4, lora_alpha=8, lora_modules_to_save="lm_head",
                lora_dropout=0.1, sync=True)
    losses[devices] = [json.loads(l).get("loss") for l in open(run / "metrics.jsonl")]
print("1 device bitwise 2 devices:", losses[1] == losses[2])
run = out / "lora2"
record = json.loads((run / "finetune.json").read_text())
print("recorded:", record["lora"])
ours = rp_loss(run)

try:
    from peft import PeftModel
except ImportError as err:
    sys.exit(f"error: peft is not in the torch-2 venv ({err}): run "
             "scripts/setup.sh (scripts/torch2-requirements.txt pins it)")
from transformers import AutoModelForCausalLM  # noqa: E402

adapter = export.export_peft(run, out / "peft")
config = json.loads((adapter / "adapter_config.json").read_text())
names = sorted(safetensors.read(adapter / "adapter_model.safetensors"))
print("adapter:", config["r"], config["lora_alpha"], config["lora_dropout"],
      len(config["target_modules"]),
      "modules;", names[0], "; saved whole:", config["modules_to_save"],
      [n for n in names if "lora" not in n])
base = AutoModelForCausalLM.from_pretrained(str(model_dir))
peft_model = PeftModel.from_pretrained(base, str(adapter)).eval()
print(f"export --peft: PeftModel loss within 1e-5 of rp's: "
      f"{rel(ours, torch_loss(peft_model, run / 'eval.rpds')) <= 1e-5}")
import shutil  # noqa: E402
shutil.copytree(run / "checkpoints" / "best", out / "moved")
print("the checkpoint records:", json.loads((out / "moved" / "run.json").read_text())["lora"])
merged = export.export_merged(out / "moved", out / "merged")
model = AutoModelForCausalLM.from_pretrained(str(merged)).eval()
print(f"export --merged: from_pretrained loss within 1e-5 of rp's: "
      f"{rel(ours, torch_loss(model, run / 'eval.rpds')) <= 1e-5}")
untrained = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
print("the adapters changed the loss:",
      rel(ours, torch_loss(untrained, run / "eval.rpds")) > 1e-4)

# One export kind a folder: an adapter written into the merged model's
# folder would make from_pretrained load the adapter on the base instead
# (transformers prefers adapter_config.json), so both ways are refused.
for kind, folder in (("peft", out / "merged"), ("hf", adapter)):
    try:
        (export.export_peft if kind == "peft" else export.export_hf)(
            run, folder)
    except ValueError as err:
        print(f"--{kind} into the other's folder:",
              str(err).replace(str(out), "OUT"))

# CHECK: 1 device bitwise 2 devices: True
# CHECK-NEXT: recorded: {'rank': 4, 'alpha': 8.0, 'targets': '', 'modules_to_save': 'lm_head', 'dropout': 0.1}
# CHECK-NEXT: adapter: 4 8.0 0.1 14 modules; base_model.model.lm_head.weight ; saved whole: ['lm_head'] ['base_model.model.lm_head.weight']
# CHECK-NEXT: export --peft: PeftModel loss within 1e-5 of rp's: True
# CHECK-NEXT: the checkpoint records: {'rank': 4, 'alpha': 8.0, 'targets': '', 'modules_to_save': 'lm_head', 'dropout': 0.1}
# CHECK-NEXT: export --merged: from_pretrained loss within 1e-5 of rp's: True
# CHECK-NEXT: the adapters changed the loss: True
# CHECK-NEXT: --peft into the other's folder: OUT/merged already holds a transformers model (config.json); export --peft to another folder or empty it first
# CHECK-NEXT: --hf into the other's folder: OUT/peft already holds a PEFT adapter (adapter_config.json); export --hf to another folder or empty it first
