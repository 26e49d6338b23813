# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# The LoRA fine-tune through rp and through Hugging Face's Trainer with
# PEFT: the bundled tiny Llama, LoRA rank 4, alpha 8 on every linear layer
# but the LM head (rp's default targets, PEFT's "all-linear"), dropout 0;
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

LoraConfig, get_peft_model = tc.peft()
out = Path(sys.argv[1])
lr, rank, alpha = 1e-2, 4, 8
model_dir, ours = tc.finetune(out, lr, lora_rank=rank, lora_alpha=alpha)
init, trained = tc.adapters_before_and_after(out)
model = get_peft_model(tc.base_model(model_dir),
                       LoraConfig(r=rank, lora_alpha=alpha,
                                  target_modules="all-linear",
                                  lora_dropout=0.0))
adapters = tc.set_initial_adapters(model, init)
worst = tc.compare(ours, tc.train(model, out, lr), "Trainer + PEFT", "1e-5")
tc.compare_adapters(init, trained, adapters, worst)

# CHECK: adapters: 28 of 28 set from rp's initial ones
# CHECK: steps: rp 6, Trainer + PEFT 6
# CHECK-NEXT: losses within 1e-5: True
# CHECK-NEXT: learning rates within 1e-12: True
# CHECK-NEXT: gradient norms within 1e-4: True
# CHECK-NEXT: adapters moved: True; rp's and PEFT's within 1e-4: True
