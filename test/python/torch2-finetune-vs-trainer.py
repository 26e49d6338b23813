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
# step's learning rate and gradient norm (before clipping). The set-up is
# Inputs/trainer_check.py's.

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
import trainer_check as tc  # noqa: E402

from rp import data  # noqa: E402

out = Path(sys.argv[1])
lr = 3e-3
model_dir, ours = tc.finetune(out, lr)
d = data.read(out / "run" / "train.rpds")
print("packed:", d["packed"], d["documents"] > d["rows"])
worst = tc.compare(ours, tc.train(tc.base_model(model_dir), out, lr),
                   "Trainer", "1e-4")
print(f"worst relative difference {worst:.1e}", file=sys.stderr)

# CHECK: packed: True True
# CHECK: steps: rp 6, Trainer 6
# CHECK-NEXT: losses within 1e-4: True
# CHECK-NEXT: learning rates within 1e-12: True
# CHECK-NEXT: gradient norms within 1e-4: True
