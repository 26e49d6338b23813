# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# LoRA dropout through rp and through Hugging Face's Trainer with PEFT:
# torch2-finetune-lora-vs-trainer.py's run with lora_dropout 0.1, and each
# PEFT lora_dropout module replaced by one applying rp's mask
# (python/rp/_philox.py: Philox of the run's seed, the Trainer's step, the
# weight's tensor_id and each element's index in the global batch of 6 rows,
# which rp computes on 2 devices as 3 microbatches of 2 rows at their
# offsets). The bundled tiny Llama, LoRA rank 4, alpha 8 on every linear
# layer but the LM head (rp's default targets, PEFT's "all-linear");
# PEFT's model starts from rp's initial adapters (rp-run's seeded A, B = 0,
# read from a checkpoint after a step at lr 0), then as
# torch2-finetune-vs-trainer.py: the same packed rows in the same order,
# each row's block-diagonal mask and per-document positions, AdamW (weight
# decay 0), a cosine schedule with 2 warmup steps, the gradient norm
# clipped at 1, sync mode on 2 host devices. Every step's loss agrees
# within 1e-5 relative (measured: about 1e-7), every learning rate within
# 1e-12 and every gradient norm within 1e-4; the adapters moved.

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import (AutoModelForCausalLM, Trainer,  # noqa: E402
                          TrainerCallback, TrainingArguments)

import rp  # noqa: E402
from rp import _philox, data, safetensors  # noqa: E402
from rp.driver import train_steps  # noqa: E402

try:
    from peft import LoraConfig, get_peft_model
except ImportError as err:
    sys.exit(f"error: peft is not in the torch-2 venv ({err}): run "
             "scripts/setup.sh (scripts/torch2-requirements.txt pins it)")

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
steps, lr, rows_per_step, rank, alpha = 6, 1e-2, 6, 4, 8
P, SEED = 0.1, 3
rp.finetune(model_dir, out / "tiny" / "train.jsonl", out / "run", steps=steps,
            devices=2, microbatches=3, batch_size=2, seq_len=32, lr=lr,
            lr_schedule="cosine", warmup_steps=2, sync=True, shuffle_seed=11,
            clip_grad_norm=1.0, weight_decay=0.0, lora_rank=rank,
            lora_alpha=alpha, lora_dropout=P, seed=SEED)
ours = [json.loads(l) for l in open(out / "run" / "metrics.jsonl")]

# rp's initial adapters: a step at lr 0 changes no weight.
for _ in train_steps(out / "run" / "model.rpplan", steps=1, lr=0.0, sync=True,
                     dataset=str(out / "run" / "train.rpds"),
                     save=str(out / "init"), weight_decay=0.0, seed=SEED):
    pass
init = safetensors.read(out / "init" / "weights.safetensors")
trained = safetensors.read(out / "run" / "checkpoints" / "last" /
                           "weights.safetensors")

d = data.read(out / "run" / "train.rpds")
order = [r for k in range(steps)
         for r in data.batch_rows(d["rows"], rows_per_step, k, 11)]


class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return len(order)

    def __getitem__(self, i):
        r = order[i]
        labels = np.full(d["seq_len"], -100, np.int64)
        labels[1:] = d["labels"][r][:-1]        # the model shifts them back
        seg = torch.from_numpy(d["segments"][r].astype(np.int64))
        keep = (seg[:, None] == seg[None, :]).tril()
        return {"input_ids": torch.from_numpy(d["tokens"][r].astype(np.int64)),
                "labels": torch.from_numpy(labels),
                "attention_mask": keep[None], "position_ids": keep.sum(-1) - 1}


class InOrder(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        return torch.utils.data.SequentialSampler(self.train_dataset)


losses, lrs, norms = [], [], []
step = [0]


class RpDropout(torch.nn.Module):
    """rp's mask for the adapter of `weight` at the Trainer's step."""

    def __init__(self, weight):
        super().__init__()
        self.tensor = _philox.tensor_id(weight)

    def forward(self, x):
        keep = _philox.dropout_mask(SEED, step[0], self.tensor, tuple(x.shape), P)
        return x * torch.from_numpy(keep.astype(np.float32)) * float(
            _philox.dropout_scale(P))


class Record(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        step[0] = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            losses.append(logs["loss"])
            lrs.append(float(logs["learning_rate"]))
            norms.append(float(logs["grad_norm"]))


base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
base.config.use_cache = False
model = get_peft_model(base, LoraConfig(r=rank, lora_alpha=alpha,
                                        target_modules="all-linear",
                                        lora_dropout=P))
replaced = 0
for name, module in model.named_modules():
    if hasattr(module, "lora_dropout") and "default" in module.lora_dropout:
        module.lora_dropout["default"] = RpDropout(
            name.removeprefix("base_model.model.") + ".weight")
        replaced += 1
print("dropout modules given rp's mask:", replaced)
# PEFT's base_model.model.<module>.lora_A.default.weight is rp's
# <module>.weight.lora_A.
adapters = {}
with torch.no_grad():
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        module, part = name.split(".lora_")
        ours_name = (module.removeprefix("base_model.model.") + ".weight.lora_"
                     + part.split(".")[0])
        p.copy_(torch.from_numpy(np.array(init[ours_name])))
        adapters[ours_name] = p
print("adapters:", len(adapters), "of", len([n for n in init if "lora_" in n]),
      "set from rp's initial ones")
args = TrainingArguments(
    output_dir=str(out / "trainer"), per_device_train_batch_size=rows_per_step,
    max_steps=steps, learning_rate=lr, lr_scheduler_type="cosine",
    warmup_steps=2, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1,
    report_to=[], save_strategy="no", use_cpu=True, seed=0,
    dataloader_drop_last=False, disable_tqdm=True)
InOrder(model=model, args=args, train_dataset=Rows(),
        callbacks=[Record()]).train()
worst = max(abs(a["loss"] - b) / abs(b) for a, b in zip(ours, losses))
print(f"steps: rp {len(ours)}, Trainer + PEFT {len(losses)}")
print(f"losses within 1e-5: {worst <= 1e-5}")
print("learning rates within 1e-12:",
      all(abs(a["lr"] - b) <= 1e-12 for a, b in zip(ours, lrs)))
print("gradient norms within 1e-4:",
      all(abs(a["grad_norm"] - b) <= 1e-4 * b for a, b in zip(ours, norms)))
moved = max(float(np.abs(np.asarray(trained[n]) - np.asarray(init[n])).max())
            for n in adapters)
# The adapters after the last update, rp's and PEFT's.
apart = max(float(np.abs(np.asarray(trained[n]) - p.detach().numpy()).max())
            for n, p in adapters.items())
print(f"adapters moved: {moved > 1e-3}; rp's and PEFT's within 1e-4: "
      f"{apart <= 1e-4}")
print(f"worst relative loss difference {worst:.1e}, adapters apart "
      f"{apart:.1e}, moved {moved:.1e}", file=sys.stderr)

# CHECK: dropout modules given rp's mask: 14
# CHECK: adapters: 28 of 28 set from rp's initial ones
# CHECK: steps: rp 6, Trainer + PEFT 6
# CHECK-NEXT: losses within 1e-5: True
# CHECK-NEXT: learning rates within 1e-12: True
# CHECK-NEXT: gradient norms within 1e-4: True
# CHECK-NEXT: adapters moved: True; rp's and PEFT's within 1e-4: True
