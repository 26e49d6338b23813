# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s
# RUN: FileCheck %s --check-prefix=LOG --input-file=%t/err.txt

# `python -m rp finetune ... --steps 2 --epochs 3`: --steps wins (as Hugging
# Face's Trainer's max_steps over num_train_epochs); it did silently, now the
# run's summary line says so and the record keeps the epochs it ignored. With
# --epochs alone the line says nothing of it.

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
for name, flags in (("both", ["--steps", "2", "--epochs", "3"]),
                    ("epochs", ["--epochs", "0.1"])):
    run = out / name
    subprocess.run([sys.executable, "-m", "rp", "finetune", str(model_dir),
                    "--data", str(out / "tiny" / "train.jsonl"), "--out",
                    str(run), "--seq-len", "32", "--batch-size", "2",
                    "--sync", *flags], check=True)
    record = json.loads((run / "finetune.json").read_text())
    steps = [json.loads(l) for l in open(run / "metrics.jsonl")]
    print(f"{name}: {len([m for m in steps if 'loss' in m])} steps run, "
          f"recorded steps {record['options']['steps']}, epochs beside "
          f"{record['steps_beside_epochs']}")

# CHECK: both: 2 steps run, recorded steps 2, epochs beside 3.0
# CHECK-NEXT: epochs: 2 steps run, recorded steps 2, epochs beside None
# LOG: rp finetune: training 2 steps of 2 rows (0.15 epochs: --steps 2 wins over --epochs 3, which is ignored; linear schedule
# LOG: rp finetune: training 2 steps of 2 rows (0.15 epochs; linear schedule
