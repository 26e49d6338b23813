# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t 2> %t/err.txt | FileCheck %s

# rp.data with the bundled tiny model's tokenizer (trained on the fly, a
# chat template): a prompt/completion record trains its completion and EOS
# only, a chat record its assistant turn and the turn's end marker, a text
# record every next token; no label predicts past a document's end (packed
# or padded; a document cut at a row's end loses that one label), padding
# is -100. Then `python -m rp finetune --config F.yaml`
# takes its options from the file (flags win) and records them.

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model  # noqa: E402

import numpy as np  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from rp import data  # noqa: E402

out = Path(sys.argv[1])
model_dir = make_model(out / "tiny")
tok = AutoTokenizer.from_pretrained(str(model_dir))
records = [
    {"prompt": "What comes after two? ", "completion": "three."},
    {"messages": [{"role": "user", "content": "What comes after three?"},
                  {"role": "assistant", "content": "four."}]},
    {"text": "After one comes two."},
]
src = out / "three.jsonl"
src.write_text("".join(json.dumps(r) + "\n" for r in records))
info = data.build(src, tok, out / "three.rpds", 40)
d = data.read(out / "three.rpds")
print("rows", info["rows"], "documents", info["documents"], "seq_len", info["seq_len"])
for row, name in enumerate(("prompt/completion", "chat", "text")):
    labels = d["labels"][row]
    trained = [int(t) for t in labels if t != -100]
    real = int((d["segments"][row] >= 0).sum())
    next_ok = all(labels[j] in (-100, d["tokens"][row][j + 1])
                  for j in range(real - 1))
    print(f"{name}: trains {tok.decode(trained)!r}; labels are next tokens: "
          f"{next_ok}; padding ignored: {bool((labels[real - 1:] == -100).all())}")

packed = data.build(src, tok, out / "packed.rpds", 40, pack=True)
p = data.read(out / "packed.rpds")
crossing = sum(1 for r in range(p["rows"]) for j in range(39)
               if p["labels"][r][j] != -100 and
               p["segments"][r][j] != p["segments"][r][j + 1])
print("packed:", packed["rows"], "rows, flag", packed["packed"],
      "labels across a document end:", crossing,
      "documents whole:", p["documents"] == len(
          {(r, v) for r in range(p["rows"]) for v in p["segments"][r] if v >= 0}),
      "rows hold several:", bool((p["segments"].max(axis=1) > 0).any()))

# Records longer than a row (8 tokens): a text document (a .txt file with
# no blank line is one) goes on over rows, each piece its own document, its
# last token predicting the next piece's first, so every next token of the
# document is trained once; a prompt/completion is cut (a later piece would
# lose its prompt) and counted. Before, the text was cut at the row too:
# one row, all but 7 of its labels dropped, and nothing said.
long = out / "long.txt"
long.write_text("After one comes two. After two comes three. After three "
                "comes four.\nAfter four comes five.\n")
words = tok(long.read_text().strip())["input_ids"] + [tok.eos_token_id]
info = data.build(long, tok, out / "long.rpds", 8)
g = data.read(out / "long.rpds")
stream = [int(t) for r in range(g["rows"]) for t, v in
          zip(g["tokens"][r], g["segments"][r]) if v >= 0]
kept = [int(t) for t in g["labels"].reshape(-1) if t != -100]
print(f"long text: {info['rows']} rows, continued {info['continued_documents']}, "
      f"tokens in order: {stream == words}, every next token trained once: "
      f"{kept == words[1:]}")
longer = out / "long.jsonl"
longer.write_text(json.dumps({"prompt": "two? ",
                              "completion": "three. " * 6}) + "\n")
info = data.build(longer, tok, out / "cut.rpds", 8)
print(f"long prompt/completion: cut {info['cut_documents']}, "
      f"labels lost {info['cut_labels'] > 0}")

config = out / "finetune.yaml"
config.write_text(f"model: {model_dir}\ndata: {out / 'tiny' / 'train.jsonl'}\n"
                  f"out: {out / 'run'}\nsteps: 2\nseq-len: 32\nlora_rank: 2\n"
                  "lr: 0.5\n")
run = subprocess.run([sys.executable, "-m", "rp", "finetune", "--config",
                      str(config), "--lr", "0.01"], capture_output=True, text=True)
print("finetune --config exit", run.returncode)
record = json.loads((out / "run" / "finetune.json").read_text())
o = record["options"]
print("recorded:", o["steps"], o["seq_len"], o["lora_rank"], o["lr"], record["lora"])
bad = subprocess.run([sys.executable, "-m", "rp", "finetune", str(model_dir)],
                     capture_output=True, text=True)
print("no data:", bad.returncode, bad.stderr.strip())
# YAML 1.1 reads 3e-3 (no dot) as a string: the config takes each option's
# type, as its flag would, so rp-run is not handed '3e-3'; a value that is
# no number is refused by name.
config.write_text(f"model: {model_dir}\ndata: {out / 'tiny' / 'train.jsonl'}\n"
                  f"out: {out / 'run2'}\nsteps: 1\nseq-len: 32\nlr: 3e-3\n")
run = subprocess.run([sys.executable, "-m", "rp", "finetune", "--config",
                      str(config)], capture_output=True, text=True)
o = json.loads((out / "run2" / "finetune.json").read_text())["options"]
print("lr 3e-3 from YAML:", run.returncode, repr(o["lr"]))
config.write_text(f"model: {model_dir}\ndata: x.jsonl\nout: {out / 'run3'}\n"
                  "steps: two\n")
bad = subprocess.run([sys.executable, "-m", "rp", "finetune", "--config",
                      str(config)], capture_output=True, text=True)
print("steps: two:", bad.returncode, bad.stderr.strip().splitlines()[-1])

# A path that is no model folder, or data that is not there, is said so
# before anything is written (a missing folder was "Repo id must be in the
# form 'repo_name'...": transformers took it for a hub name).
for name, argv in (
        ("no folder", ["demo-out/tiny-llama/model", "--data", str(src)]),
        ("no config", [str(out), "--data", str(src)]),
        ("no data", [str(model_dir), "--data", str(out / "none.jsonl")])):
    bad = subprocess.run([sys.executable, "-m", "rp", "finetune", *argv,
                          "--out", str(out / "never")], capture_output=True,
                         text=True)
    print(f"{name}: {bad.returncode} {bad.stderr.strip().replace(str(out), 'OUT')}"
          f" (OUT/never made: {(out / 'never').exists()})")

# CHECK: rows 3 documents 3 seq_len 40
# CHECK-NEXT: prompt/completion: trains 'three.<|end|>'; labels are next tokens: True; padding ignored: True
# CHECK-NEXT: chat: trains 'four.<|end|>'; labels are next tokens: True; padding ignored: True
# CHECK-NEXT: text: trains ' one comes two.<|end|>'; labels are next tokens: True; padding ignored: True
# CHECK-NEXT: packed: {{[0-9]+}} rows, flag True labels across a document end: 0 documents whole: True rows hold several: True
# CHECK-NEXT: long text: {{[0-9]+}} rows, continued 1, tokens in order: True, every next token trained once: True
# CHECK-NEXT: long prompt/completion: cut 1, labels lost True
# CHECK-NEXT: finetune --config exit 0
# CHECK-NEXT: recorded: 2 32 2 0.01 {'rank': 2, 'alpha': 16.0, 'targets': '', 'modules_to_save': '', 'dropout': 0.0}
# CHECK-NEXT: no data: 1 rp finetune: error: give --data, --out
# CHECK-NEXT: lr 3e-3 from YAML: 0 0.003
# CHECK-NEXT: steps: two: 1 {{.*}}finetune.yaml: steps is 'two', not a number
# CHECK-NEXT: no folder: 1 rp finetune: error: demo-out/tiny-llama/model: no such folder; rp takes a local Hugging Face model folder (config.json, safetensors weights, tokenizer files: what save_pretrained writes); for a hub model, download it first (huggingface-cli download NAME --local-dir DIR) (OUT/never made: False)
# CHECK-NEXT: no config: 1 rp finetune: error: OUT has no config.json: not a Hugging Face model folder (what save_pretrained writes) (OUT/never made: False)
# CHECK-NEXT: no data: 1 rp finetune: error: OUT/none.jsonl: no such file (data: the records, .jsonl, .json or text) (OUT/never made: False)
