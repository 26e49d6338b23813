"""What the comparisons with Hugging Face's Trainer share
(torch2-finetune-vs-trainer.py, torch2-finetune-lora-vs-trainer.py,
torch2-finetune-lora-dropout-vs-trainer.py): rp's fine-tune of the bundled
tiny Llama with the settings Trainer can match (6 steps of 6 packed rows,
AdamW with weight decay 0, a cosine schedule with 2 warmup steps, the
gradient norm clipped at 1, sync mode on 2 host devices as 3 microbatches of
2 rows), the same rows in rp's order as a torch Dataset (each row's
block-diagonal causal mask and per-document position ids, as TRL's
padding-free packing gives them; labels unshifted, since the model shifts
them), a Trainer that takes them in that order and records every step's
loss, learning rate and gradient norm, PEFT's model started from rp's
initial adapters, and the lines the tests check."""
import json
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, Trainer, TrainerCallback,
                          TrainingArguments)

import rp
from rp import data, safetensors
from rp.driver import train_steps

from finetune_check import make_model

STEPS, ROWS_PER_STEP, SHUFFLE_SEED = 6, 6, 11


def peft():
    """PEFT's LoraConfig and get_peft_model, or exit saying how to get it
    (before any work)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as err:
        sys.exit(f"error: peft is not in the torch-2 venv ({err}): run "
                 "scripts/setup.sh (scripts/torch2-requirements.txt pins it)")
    return LoraConfig, get_peft_model


def finetune(out: Path, lr: float, **options):
    """rp's run in out/run on the tiny model made in out/tiny: (the model
    folder, each step's metrics)."""
    model_dir = make_model(out / "tiny")
    rp.finetune(model_dir, out / "tiny" / "train.jsonl", out / "run",
                steps=STEPS, devices=2, microbatches=3, batch_size=2,
                seq_len=32, lr=lr, lr_schedule="cosine", warmup_steps=2,
                sync=True, shuffle_seed=SHUFFLE_SEED, clip_grad_norm=1.0,
                weight_decay=0.0, **options)
    return model_dir, [json.loads(line)
                       for line in open(out / "run" / "metrics.jsonl")]


def adapters_before_and_after(out: Path, **options):
    """rp's initial weights (a step at lr 0 changes none, saved to out/init)
    and the run's last checkpoint."""
    for _ in train_steps(out / "run" / "model.rpplan", steps=1, lr=0.0,
                         sync=True, dataset=str(out / "run" / "train.rpds"),
                         save=str(out / "init"), weight_decay=0.0, **options):
        pass
    return (safetensors.read(out / "init" / "weights.safetensors"),
            safetensors.read(out / "run" / "checkpoints" / "last" /
                             "weights.safetensors"))


class Rows(torch.utils.data.Dataset):
    """The run's rows in the order rp-run reads them (rp.data.batch_rows)."""

    def __init__(self, out: Path):
        self.d = data.read(out / "run" / "train.rpds")
        self.order = [r for k in range(STEPS) for r in data.batch_rows(
            self.d["rows"], ROWS_PER_STEP, k, SHUFFLE_SEED)]

    def __len__(self):
        return len(self.order)

    def __getitem__(self, i):
        d, r = self.d, self.order[i]
        labels = np.full(d["seq_len"], -100, np.int64)
        labels[1:] = d["labels"][r][:-1]        # the model shifts them back
        seg = torch.from_numpy(d["segments"][r].astype(np.int64))
        keep = (seg[:, None] == seg[None, :]).tril()
        return {"input_ids": torch.from_numpy(d["tokens"][r].astype(np.int64)),
                "labels": torch.from_numpy(labels),
                "attention_mask": keep[None], "position_ids": keep.sum(-1) - 1}


def base_model(model_dir: Path):
    model = AutoModelForCausalLM.from_pretrained(str(model_dir),
                                                 dtype=torch.float32)
    model.config.use_cache = False
    return model


def set_initial_adapters(model, init):
    """Copies rp's initial adapters into PEFT's model (PEFT's
    base_model.model.<module>.lora_A.default.weight is rp's
    <module>.weight.lora_A) and says how many: {rp's name: PEFT's
    parameter}."""
    adapters = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            module, part = name.split(".lora_")
            ours_name = (module.removeprefix("base_model.model.") +
                         ".weight.lora_" + part.split(".")[0])
            p.copy_(torch.from_numpy(np.array(init[ours_name])))
            adapters[ours_name] = p
    print("adapters:", len(adapters), "of",
          len([n for n in init if "lora_" in n]), "set from rp's initial ones")
    return adapters


class _InOrder(Trainer):
    def _get_train_sampler(self, *args, **kwargs):
        return torch.utils.data.SequentialSampler(self.train_dataset)


def train(model, out: Path, lr: float, on_step=None):
    """Trainer's run of `model` on Rows(out) with rp's settings: each
    step's (losses, learning rates, gradient norms); `on_step(step)` is
    called as each step begins."""
    losses, lrs, norms = [], [], []

    class Record(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if on_step:
                on_step(state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(logs["loss"])
                lrs.append(float(logs["learning_rate"]))
                norms.append(float(logs["grad_norm"]))

    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=ROWS_PER_STEP, max_steps=STEPS,
        learning_rate=lr, lr_scheduler_type="cosine", warmup_steps=2,
        weight_decay=0.0, max_grad_norm=1.0, logging_steps=1, report_to=[],
        save_strategy="no", use_cpu=True, seed=0, dataloader_drop_last=False,
        disable_tqdm=True)
    _InOrder(model=model, args=args, train_dataset=Rows(out),
             callbacks=[Record()]).train()
    return losses, lrs, norms


def compare(ours, trainer, name: str, loss_tolerance: str) -> float:
    """Prints the steps and whether every loss (relative, within
    `loss_tolerance`, as the test spells it), learning rate and gradient
    norm agree; returns the worst relative loss difference."""
    losses, lrs, norms = trainer
    worst = max(abs(a["loss"] - b) / abs(b) for a, b in zip(ours, losses))
    print(f"steps: rp {len(ours)}, {name} {len(losses)}")
    print(f"losses within {loss_tolerance}: "
          f"{worst <= float(loss_tolerance)}")
    print("learning rates within 1e-12:",
          all(abs(a["lr"] - b) <= 1e-12 for a, b in zip(ours, lrs)))
    print("gradient norms within 1e-4:",
          all(abs(a["grad_norm"] - b) <= 1e-4 * b
              for a, b in zip(ours, norms)))
    return worst


def compare_adapters(init, trained, adapters, worst: float):
    """Prints whether rp's adapters moved and agree with PEFT's after the
    last update (and the figures, on stderr)."""
    moved = max(float(np.abs(np.asarray(trained[n]) -
                             np.asarray(init[n])).max()) for n in adapters)
    apart = max(float(np.abs(np.asarray(trained[n]) -
                             p.detach().numpy()).max())
                for n, p in adapters.items())
    print(f"adapters moved: {moved > 1e-3}; rp's and PEFT's within 1e-4: "
          f"{apart <= 1e-4}")
    print(f"worst relative loss difference {worst:.1e}, adapters apart "
          f"{apart:.1e}, moved {moved:.1e}", file=sys.stderr)
