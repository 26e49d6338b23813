# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s
# RUN: FileCheck %s --check-prefix=LOG --input-file=%t/err.txt

# rp.finetune end to end, every weight trained: a tiny Llama folder saved
# with save_pretrained (pad_token_id None: tracing an embedding's
# padding_idx is another change's), SFT JSONL of chat, prompt/completion
# and text records, on 2 devices (3 microbatches, sync, shuffled, a cosine
# schedule with warmup, eval every 2 steps inside rp-run) and on 1 device with the same
# microbatches: the losses are bitwise the same; `export --hf` loads with
# AutoModelForCausalLM.from_pretrained and gives rp's eval loss at the same
# weights within 1e-5; the best checkpoint is the lowest eval loss's.

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model, rel, rp_loss, torch_loss  # noqa: E402

import rp  # noqa: E402
from rp import export  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
runs = {}
for devices in (2, 1):
    run = out / f"run{devices}"
    rp.finetune(model_dir, out / "tiny" / "train.jsonl", run,
                eval_data=out / "tiny" / "eval.jsonl", steps=4, eval_every=2,
                devices=devices, microbatches=3, seq_len=32, lr=3e-3,
                lr_schedule="cosine", warmup_steps=1, sync=True,
                shuffle_seed=3)
    runs[devices] = [json.loads(l) for l in open(run / "metrics.jsonl")]
steps = [m for m in runs[2] if "loss" in m]
evals = [m for m in runs[2] if "eval_loss" in m]
print(f"metrics: {len(steps)} steps with lr and grad_norm: "
      f"{all(m['lr'] >= 0 and m['grad_norm'] > 0 for m in steps)}, "
      f"{len(evals)} evals")
print("1 device bitwise 2 devices:",
      [m["loss"] for m in runs[1] if "loss" in m] == [m["loss"] for m in steps])
record = json.loads((out / "run2" / "finetune.json").read_text())
print("recorded:", record["options"]["devices"], record["options"]["lr_schedule"],
      record["lora"], record["steps_done"])
best = min(evals, key=lambda m: m["eval_loss"])
# rp-run's in-process eval (9 digits in the file) against a new rp-run at
# the best checkpoint's weights.
print("best checkpoint is the lowest eval loss's:",
      rel(rp_loss(out / "run2", "best"), best["eval_loss"]) < 1e-7)

from transformers import AutoModelForCausalLM  # noqa: E402
hf = export.export_hf(out / "run2", out / "hf")
model = AutoModelForCausalLM.from_pretrained(str(hf)).eval()
from safetensors import safe_open  # noqa: E402
with safe_open(str(hf / "model.safetensors"), "pt") as f:
    print("metadata:", f.metadata())
ours, theirs = rp_loss(out / "run2"), torch_loss(model, out / "run2" / "eval.rpds")
print(f"export --hf: from_pretrained loss within 1e-5 of rp's: "
      f"{rel(ours, theirs) <= 1e-5}")
print("tokenizer copied:", (hf / "tokenizer.json").is_file())
events = list((out / "run2" / "tensorboard").glob("events.out.tfevents.*"))
from tensorboard_reader import scalars  # noqa: E402
tags = scalars(events[0])
print("tensorboard:", {t: len(v) for t, v in sorted(tags.items())})

# CHECK: metrics: 4 steps with lr and grad_norm: True, 2 evals
# CHECK-NEXT: 1 device bitwise 2 devices: True
# CHECK-NEXT: recorded: 2 cosine None 4
# CHECK-NEXT: best checkpoint is the lowest eval loss's: True
# CHECK-NEXT: metadata: {'format': 'pt'}
# CHECK-NEXT: export --hf: from_pretrained loss within 1e-5 of rp's: True
# CHECK-NEXT: tokenizer copied: True
# CHECK-NEXT: tensorboard: {'eval/loss': 2, 'train/grad_norm': 4, 'train/loss': 4, 'train/lr': 4}
# LOG: rp finetune: {{.*}}train.jsonl: 48 documents in 26 rows of 32 tokens, {{.*}} (packed; attention kept within each document)
# LOG: rp-run: step 1 (2/4) loss {{[0-9.]+}} lr
# LOG: rp-run: eval after 2 steps: loss
# LOG: rp-run: step 3 (4/4) loss {{[0-9.]+}} lr
# LOG: rp-run: eval after 4 steps: loss
# LOG: rp finetune: 2 evals, the last {{[0-9.]+}}; the best {{[0-9.]+}} after {{[24]}} steps (checkpoints/best)
