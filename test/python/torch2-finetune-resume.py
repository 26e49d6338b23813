# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s
# RUN: FileCheck %s --check-prefix=LOG --input-file=%t/err.txt

# `python -m rp finetune --resume OUT` (rp.resume_finetune): a LoRA run
# with dropout, a shuffled dataset, a cosine schedule with warmup and an
# eval every 2 steps, stopped after 3 of its 6 steps (as an interruption
# would leave it: checkpoints/last at step 3), then resumed with nothing but
# its folder, ends bitwise the uninterrupted run: every step's loss, lr and
# gradient norm, the evals at the same steps (4 and 6: the resumed rp-run
# keeps the --eval-every cadence of the whole run, not of its own start),
# the final weights and optimizer state, and the best checkpoint's eval.

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model  # noqa: E402

import rp  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
options = dict(eval_data=out / "tiny" / "eval.jsonl", steps=6, eval_every=2,
               devices=2, batch_size=2, seq_len=32, lr=1e-2,
               lr_schedule="cosine", warmup_steps=1, lora_rank=2,
               lora_dropout=0.1, shuffle_seed=3, seed=5)
train = out / "tiny" / "train.jsonl"
rp.finetune(model_dir, train, out / "whole", **options)
rp.finetune(model_dir, train, out / "cut", _stop_after=3, **options)
cut = json.loads((out / "cut" / "finetune.json").read_text())
# CHECK: stopped: 3 steps done
print(f"stopped: {cut['steps_done']} steps done")
run = subprocess.run([sys.executable, "-m", "rp", "finetune", "--resume",
                      str(out / "cut")], capture_output=True, text=True)
sys.stderr.write(run.stderr)
# CHECK-NEXT: resumed: exit 0
print(f"resumed: exit {run.returncode}")


def lines(name):
    return [json.loads(x) for x in
            (out / name / "metrics.jsonl").read_text().splitlines()]


def steps(name):
    return [(m["step"], m["loss"], m["lr"], m["grad_norm"])
            for m in lines(name) if "eval_loss" not in m]


def evals(name):
    return {m["after_updates"]: m["eval_loss"] for m in lines(name)
            if "eval_loss" in m}


same = lambda f: (out / "whole" / f).read_bytes() == (out / "cut" / f).read_bytes()
whole, resumed = evals("whole"), evals("cut")
# CHECK-NEXT: steps 0-5 bitwise: True (6 steps)
print(f"steps 0-5 bitwise: {steps('whole') == steps('cut')} "
      f"({len(steps('cut'))} steps)")
# CHECK-NEXT: evals: whole [2, 4, 6], resumed [2, 3, 4, 6], the same at 2, 4, 6: True
print(f"evals: whole {sorted(whole)}, resumed {sorted(resumed)}, the same at "
      f"2, 4, 6: {all(whole[k] == resumed[k] for k in whole)}")
# CHECK-NEXT: weights and optimizer bitwise: True True
print("weights and optimizer bitwise:",
      same("checkpoints/last/weights.safetensors"),
      same("checkpoints/last/optimizer.safetensors"))
record = json.loads((out / "cut" / "finetune.json").read_text())
best = record["best"]["eval_loss"]
# CHECK-NEXT: best: the lowest eval: True, 6 steps done
print(f"best: the lowest eval: {best == min(resumed.values())}, "
      f"{record['steps_done']} steps done")
# TensorBoard reads every event file in the folder: after the resume it
# holds the whole run once, as metrics.jsonl does (before, the first
# stretch's file stayed beside the resumed one's, steps 0-2 twice).
sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from tensorboard_reader import scalars  # noqa: E402


def board(name):
    got = {}
    for f in sorted((out / name / "tensorboard").glob("events.out.tfevents.*")):
        for tag, points in scalars(f).items():
            got.setdefault(tag, []).extend(points)
    return {tag: sorted(points) for tag, points in got.items()}


tb = board("cut")
# CHECK-NEXT: tensorboard after the resume: train/loss steps [0, 1, 2, 3, 4, 5], the same as the whole run's: True
print(f"tensorboard after the resume: train/loss steps "
      f"{[s for s, _ in tb['train/loss']]}, the same as the whole run's: "
      f"{tb['train/loss'] == board('whole')['train/loss']}")
again = subprocess.run([sys.executable, "-m", "rp", "finetune", "--resume",
                        str(out / "cut"), "--lr", "1"], capture_output=True,
                       text=True)
# CHECK-NEXT: --resume with an option: 1 rp finetune: error: --resume takes the options the run recorded (OUT/finetune.json); not --lr
print(f"--resume with an option: {again.returncode} {again.stderr.strip()}")

# LOG: rp finetune: stopped after 3 of 6 steps; go on with python -m rp finetune --resume
# LOG: rp finetune: resuming {{.*}}cut after 3 of 6 steps
# LOG: rp finetune: training 6 steps of 6 rows {{.*}}, from step 3
# LOG: rp-run: eval after 4 steps
# LOG: rp-run: eval after 6 steps
