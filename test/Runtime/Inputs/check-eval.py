"""Checks rp-run --eval-dataset's losses against the restart path (a new
rp-run at each checkpoint's master weights: rp.finetune.evaluate, --lr 0
--sync, a step per global batch): for each EVAL_METRICS AFTER CHECKPOINT,
the eval line after AFTER updates equals evaluate()'s within 1e-7 relative
(the file's 9 digits)."""
import json
import sys

from rp.finetune import evaluate

plan, dataset, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]
for i in range(0, len(args), 3):
    path, after, ckpt = args[i], int(args[i + 1]), args[i + 2]
    evals = {m["after_updates"]: m["eval_loss"]
             for m in map(json.loads, open(path)) if "eval_loss" in m}
    want = evaluate(plan, f"{ckpt}/weights.safetensors", dataset, rows)
    got = evals[after]
    print(f"after {after}: in-process eval equals the restart path's "
          f"within 1e-7: {abs(got - want) <= 1e-7 * abs(want)}")
