# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %models %t | FileCheck %s

# The plan records its LoRA settings (plan.fbs's LoraSettings): rp.export
# reads rank, alpha and dropout from the run's plan, so a run folder whose
# finetune.json says nothing of LoRA (or says something else) exports the
# adapter config the plan was compiled with.

import json
import subprocess
import sys
from pathlib import Path

from rp.export import export_peft, plan_lora
from rp.tools import find_tool

models, work = sys.argv[1], Path(sys.argv[2])
run = work / "run"
(run / "checkpoints").mkdir(parents=True)
subprocess.run([str(find_tool("rp-compile")), f"{models}/llama_op17.onnx",
                "-o", str(run / "model.rpplan"), "--lora-rank", "4",
                "--lora-alpha", "8", "--lora-targets", "q_proj|v_proj",
                "--lora-dropout", "0.1"], check=True, capture_output=True)
subprocess.run([str(find_tool("rp-run")), str(run / "model.rpplan"),
                "--steps", "1", "--save", str(run / "checkpoints" / "last")],
               check=True, capture_output=True)
print("plan:", plan_lora(run / "model.rpplan"))
# CHECK: plan: {'rank': 4, 'alpha': 8.0, 'targets': 'q_proj|v_proj', 'modules_to_save': '', 'dropout': 0.1}

configs = []
for lora in (None, {"rank": 99, "alpha": 1.0}):
    record = {"model": "base", "plan": "model.rpplan", "lora": lora}
    (run / "finetune.json").write_text(json.dumps(record))
    out = export_peft(run, work / f"peft{len(configs)}")
    configs.append(json.loads((out / "adapter_config.json").read_text()))
c = configs[0]
print("config:", c["r"], c["lora_alpha"], c["lora_dropout"],
      len(c["target_modules"]))
# CHECK: config: 4 8.0 0.1 4
print("the plan's whatever the record says:", configs[0] == configs[1])
# CHECK: the plan's whatever the record says: True

subprocess.run([str(find_tool("rp-compile")), f"{models}/llama_op17.onnx",
                "-o", str(work / "full.rpplan")], check=True,
               capture_output=True)
print("no adapters:", plan_lora(work / "full.rpplan"))
# CHECK: no adapters: None
