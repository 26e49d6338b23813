"""Runs the ```bash block of README.md's quick start as written, in the
current folder (which holds `examples/`), with `.venv-torch2/bin/python` as
this interpreter; then loads the exported folder with transformers, checks
its loss against rp's at the same weights and generates from it.
Usage: readme_quickstart.py README.md"""

import shlex
import subprocess
import sys
from pathlib import Path

text = open(sys.argv[1]).read()
section = text.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
block = section.split("```bash\n", 1)[1].split("```", 1)[0]
script = block.replace(".venv-torch2/bin/python", shlex.quote(sys.executable))
done = subprocess.run(["bash", "-euo", "pipefail", "-c", script],
                      capture_output=True, text=True)
if done.returncode:
    sys.exit(f"the quick start failed ({done.returncode}):\n{done.stderr[-3000:]}")
for line in done.stderr.replace("\r", "\n").splitlines():
    if line.startswith("rp finetune:") or "eval after" in line:
        print(line)

sys.path.insert(0, str(Path(__file__).parent))
from finetune_check import rel, rp_loss, torch_loss  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

run, folder = Path("demo-out/run"), "demo-out/run-hf"
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder).eval()
print("export --hf: loss within 1e-5 of rp's:",
      rel(torch_loss(model, run / "eval.rpds"), rp_loss(run)) <= 1e-5)
ids = tok.apply_chat_template([{"role": "user", "content": "What comes after two?"}],
                              add_generation_prompt=True, return_tensors="pt",
                              return_dict=True)["input_ids"]
out = model.generate(ids, max_new_tokens=6, do_sample=False,
                     eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
print("generate: What comes after two? ->",
      repr(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)))
