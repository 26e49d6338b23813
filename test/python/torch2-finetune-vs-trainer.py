# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# The same fine-tuning run through rp and through Hugging Face's Trainer:
# the bundled tiny Llama, full fine-tune, the same rows in the same order
# (rp.data.batch_rows gives the shuffled order rp-run reads; the Trainer
# takes them in that order), AdamW (weight decay 0, as Trainer's default),
# a cosine schedule with 2 warmup steps, the gradient norm clipped at 1,
# sync mode on 2 host devices (3 microbatches of 2 rows), the rows packed
# (several documents each): Trainer's model gets each row's block-diagonal
# causal mask (4D, a token sees its own document's earlier tokens) and
# per-document position ids, as TRL's padding-free packing does. Trainer's
# model shifts labels itself, so it gets rp's labels unshifted. Every step's loss
# agrees within 1e-4 relative (measured: about 1e-7), and so do every
# step's learning rate and gradient norm (before clipping).

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
from rp import data  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
steps, lr, rows_per_step = 6, 3e-3, 6
rp.finetune(model_dir, out / "tiny" / "train.jsonl", out / "run", steps=steps,
            devices=2, microbatches=3, batch_size=2, seq_len=32, lr=lr,
            lr_schedule="cosine", warmup_steps=2, sync=True, shuffle_seed=11,
            clip_grad_norm=1.0, weight_decay=0.0)
ours = [json.loads(l) for l in open(out / "run" / "metrics.jsonl")]

d = data.read(out / "run" / "train.rpds")
print("packed:", d["packed"], d["documents"] > d["rows"])
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


class Record(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            losses.append(logs["loss"])
            lrs.append(float(logs["learning_rate"]))
            norms.append(float(logs["grad_norm"]))


model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
model.config.use_cache = False
args = TrainingArguments(
    output_dir=str(out / "trainer"), per_device_train_batch_size=rows_per_step,
    max_steps=steps, learning_rate=lr, lr_scheduler_type="cosine",
    warmup_steps=2, weight_decay=0.0, max_grad_norm=1.0, logging_steps=1,
    report_to=[], save_strategy="no", use_cpu=True, seed=0,
    dataloader_drop_last=False, disable_tqdm=True)
InOrder(model=model, args=args, train_dataset=Rows(),
        callbacks=[Record()]).train()
worst = max(abs(a["loss"] - b) / abs(b) for a, b in zip(ours, losses))
print(f"steps: rp {len(ours)}, Trainer {len(losses)}")
print(f"losses within 1e-4: {worst <= 1e-4}")
print("learning rates within 1e-12:",
      all(abs(a["lr"] - b) <= 1e-12 for a, b in zip(ours, lrs)))
print("gradient norms within 1e-4:",
      all(abs(a["grad_norm"] - b) <= 1e-4 * b for a, b in zip(ours, norms)))
print(f"worst relative difference {worst:.1e}", file=sys.stderr)

# CHECK: packed: True True
# CHECK: steps: rp 6, Trainer 6
# CHECK-NEXT: losses within 1e-4: True
# CHECK-NEXT: learning rates within 1e-12: True
# CHECK-NEXT: gradient norms within 1e-4: True
