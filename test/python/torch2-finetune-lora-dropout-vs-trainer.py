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
# 1e-12 and every gradient norm within 1e-4; the adapters moved. The set-up
# is Inputs/trainer_check.py's.

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
import trainer_check as tc  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rp import _philox  # noqa: E402

LoraConfig, get_peft_model = tc.peft()
out = Path(sys.argv[1])
lr, rank, alpha = 1e-2, 4, 8
P, SEED = 0.1, 3
model_dir, ours = tc.finetune(out, lr, lora_rank=rank, lora_alpha=alpha,
                              lora_dropout=P, seed=SEED)
init, trained = tc.adapters_before_and_after(out, seed=SEED)
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


model = get_peft_model(tc.base_model(model_dir),
                       LoraConfig(r=rank, lora_alpha=alpha,
                                  target_modules="all-linear",
                                  lora_dropout=P))
replaced = 0
for name, module in model.named_modules():
    if hasattr(module, "lora_dropout") and "default" in module.lora_dropout:
        module.lora_dropout["default"] = RpDropout(
            name.removeprefix("base_model.model.") + ".weight")
        replaced += 1
print("dropout modules given rp's mask:", replaced)
adapters = tc.set_initial_adapters(model, init)
worst = tc.compare(ours, tc.train(model, out, lr,
                                  on_step=lambda s: step.__setitem__(0, s)),
                   "Trainer + PEFT", "1e-5")
tc.compare_adapters(init, trained, adapters, worst)

# CHECK: dropout modules given rp's mask: 14
# CHECK: adapters: 28 of 28 set from rp's initial ones
# CHECK: steps: rp 6, Trainer + PEFT 6
# CHECK-NEXT: losses within 1e-5: True
# CHECK-NEXT: learning rates within 1e-12: True
# CHECK-NEXT: gradient norms within 1e-4: True
# CHECK-NEXT: adapters moved: True; rp's and PEFT's within 1e-4: True
