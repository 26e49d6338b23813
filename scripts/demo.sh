#!/usr/bin/env bash
# Sets everything up, builds rp, and runs the quick start: fine-tune the
# bundled tiny Llama folder (examples/tiny_llama/make.py makes it from a
# config object) on a JSONL file on 2 host devices, export it and generate
# from it with transformers. Then the compiler's own flow on the bundled
# default model (examples/tiny_gpt, a GPT exported by torch.onnx): import the ONNX
# file into the rp graph (layers, folded shape arithmetic, fused ops), show
# it, compile it into a plan, run the plan's forward on the host and check
# the logits against onnxruntime's, then compile a training plan and train
# the model on the host with AdamW, showing the loss fall; then compile it
# for 4 devices with RoundPipe's round-robin schedule, train it on 4 host
# devices (threads with their own queues and events), check every loss
# against the 1-device run bit for bit, show where the time went and write
# a Chrome trace; last, predict the model's step on 8 x RTX 4090 with the
# sim device and draw that timeline (demo-out/timeline-8x4090.svg).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh rp-import rp-opt rp-compile rp-run

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The quick start (README.md): fine-tune a Hugging Face model folder on a
# JSONL file on 2 host devices, export it, generate from it with
# transformers. The bundled tiny Llama folder is made from a config object
# the first time (tokenizer trained on the fly; nothing from a hub).
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error
py2=.venv-torch2/bin/python
tiny=demo-out/tiny-llama
if [ ! -f "$tiny/model/config.json" ]; then
  $py2 examples/tiny_llama/make.py "$tiny" >/dev/null
fi
echo
echo "== quick start: fine-tune $tiny/model (a 2-layer Llama saved with save_pretrained)"
echo "   on $tiny/train.jsonl (48 records: chat, prompt/completion and text; \"What comes after two?\" ->
   \"three.\") on 2 host devices"
echo "\$ .venv-torch2/bin/python -m rp finetune $tiny/model --data $tiny/train.jsonl \\"
echo "      --eval-data $tiny/eval.jsonl --out demo-out/run --devices 2 --epochs 100 \\"
echo "      --batch-size 4 --seq-len 32 --lr 1e-2 --lr-schedule cosine --warmup-steps 10 --eval-every 100"
$py2 -m rp finetune "$tiny/model" --data "$tiny/train.jsonl" \
  --eval-data "$tiny/eval.jsonl" --out demo-out/run --devices 2 --epochs 100 \
  --batch-size 4 --seq-len 32 --lr 1e-2 --lr-schedule cosine --warmup-steps 10 \
  --eval-every 100 2>&1 | tr '\r' '\n' | awk '
    /rp-run: step/ { n++; if (n % 50 == 0) print "   " $0; next }
    /^$/ { next } { print "   " $0 }'
echo "   metrics: demo-out/run/metrics.jsonl, e.g. $(sed -n 2p demo-out/run/metrics.jsonl)"
echo "\$ .venv-torch2/bin/python -m rp export demo-out/run --hf demo-out/run-hf"
rm -rf demo-out/run-hf
$py2 -m rp export demo-out/run --hf demo-out/run-hf 2>&1 | grep -v '^demo-out' | sed 's/^/   /'
echo "   $(ls demo-out/run-hf | tr '\n' ' ')"
echo "== transformers: AutoModelForCausalLM.from_pretrained('demo-out/run-hf').generate(...)"
$py2 - demo-out/run-hf <<'PY'
import sys
from transformers import AutoModelForCausalLM, AutoTokenizer
folder = sys.argv[1]
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder).eval()
for q in ("What comes after two?", "What comes after five?", "What comes after eight?"):
    ids = tok.apply_chat_template([{"role": "user", "content": q}],
                                  add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]
    out = model.generate(ids, max_new_tokens=6, do_sample=False,
                         eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.eos_token_id)
    answer = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    print(f"   {q} -> {answer!r}")
PY

model=examples/tiny_gpt/model.onnx

echo
echo "== rp demo: $model (GPT-2-style, 2 blocks, width 32, vocabulary 64, microbatch 2x16)"
nodes=$(.venv/bin/python -c "import onnx,sys; m=onnx.load(sys.argv[1]); print(len(m.graph.node))" "$model")
echo "   the ONNX export has $nodes nodes"

echo
echo "== rp-import $model -o model.mlir --print-layers"
start=$(date +%s%N)
build/bin/rp-import "$model" -o "$out/model.mlir" --print-layers | sed 's/^/   /'
ms=$(( ($(date +%s%N) - start) / 1000000 ))
ops=$(grep -cE '= rp\.[a-z_]+ ' "$out/model.mlir")
echo "   imported in $ms ms: $ops rp ops; weights in $(basename "$out"/model.weights.bin)" \
     "($(stat -c %s "$out/model.weights.bin") bytes, referenced by file and offset)"
echo "   op histogram:"
grep -oE '= rp\.[a-z_]+' "$out/model.mlir" | sed 's/= //' | sort | uniq -c | sort -rn |
  awk '{printf "     %-16s %s\n", $2, $1}'

echo
echo "== rp-opt model.mlir --rp-verify-graph --canonicalize --cse (round trip through the text form)"
build/bin/rp-opt "$out/model.mlir" --rp-verify-graph --canonicalize --cse -o "$out/model.opt.mlir"
echo "   verified; $(grep -cE '= rp\.[a-z_]+ ' "$out/model.opt.mlir") ops after another canonicalization"

echo
echo "== the first transformer block (layer h.0), as the passes see it"
awk '/rp.layer "h.0"/,/rp.yield/' "$out/model.opt.mlir" | cut -c1-140 | sed 's/^/ /'

echo
echo "== rp-compile $model -o model.rpplan --forward-only"
build/bin/rp-compile "$model" -o "$out/model.rpplan" --forward-only 2>&1 | sed 's/^/   /'
build/bin/rp-run "$out/model.rpplan" --describe=grid | sed 's/^/   /'

echo
echo "== rp-run model.rpplan --input tokens=examples/tiny_gpt/tokens.npy --dump-outputs logits.npy"
build/bin/rp-run "$out/model.rpplan" --input tokens=examples/tiny_gpt/tokens.npy \
  --dump-outputs "$out/logits.npy" --steps 10 2>&1 | sed 's/^/   /'

echo
echo "== the logits next to onnxruntime's on the same tokens"
.venv/bin/python - "$model" examples/tiny_gpt/tokens.npy "$out/logits.npy" <<'PY'
import sys
import numpy as np
import onnxruntime as ort
model, tokens_path, rp_path = sys.argv[1:4]
tokens = np.load(tokens_path)
ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
    None, {"tokens": tokens})[0]
rp = np.load(rp_path)
err = np.max(np.abs(rp - ref)) / np.max(np.abs(ref))
print(f"   checksum (sum of logits): rp {rp.astype(np.float64).sum():+.6f}, "
      f"onnxruntime {ref.astype(np.float64).sum():+.6f}")
print(f"   max|rp - ort| / max|ort| = {err:.2e}")
print(f"   sequence 0, tokens      : {' '.join(f'{t:2d}' for t in tokens[0])}")
print(f"   next token, rp          : {' '.join(f'{t:2d}' for t in rp[0].argmax(-1))}")
print(f"   next token, onnxruntime : {' '.join(f'{t:2d}' for t in ref[0].argmax(-1))}")
PY

echo
echo "== rp-compile $model -o train.rpplan   (loss, autodiff, recompute: a training plan)"
build/bin/rp-compile "$model" -o "$out/train.rpplan" 2>&1 | sed 's/^/   /'
.venv/bin/python - examples/tiny_gpt/tokens.npy "$out/labels.npy" <<'PY'
import sys
import numpy as np
tokens = np.load(sys.argv[1])
labels = np.full_like(tokens, -100)   # next-token labels; the last is ignored
labels[:, :-1] = tokens[:, 1:]
np.save(sys.argv[2], labels)
PY

echo
echo "== rp-run train.rpplan --steps 50 --lr 3e-3   (AdamW, next-token labels)"
build/bin/rp-run "$out/train.rpplan" --input tokens=examples/tiny_gpt/tokens.npy \
  --labels "$out/labels.npy" --steps 50 --lr 3e-3 2>/dev/null >"$out/losses.txt"
awk 'NR == 1 || NR % 10 == 0 { printf "   %s\n", $0 }' "$out/losses.txt"

echo
echo "== rp-compile $model -o train4.rpplan --devices 4   (RoundPipe's round-robin over 4 devices)"
build/bin/rp-compile "$model" -o "$out/train4.rpplan" --devices 4 2>&1 | fold -s -w 100 | sed 's/^/   /'
echo "   the plan, one line per device queue (F forward, T fused tail, B backward, UP weights,"
echo "   IN/OUT activations, DIN/DOUT activation gradients, GRAD weight gradients):"
build/bin/rp-run "$out/train4.rpplan" --describe=grid | cut -c1-118 | sed -n '1,8p' | sed 's/^/   /'
echo "   ..."

echo
echo "== the same 5-microbatch step on 1 device and on 4 host devices, --sync, 30 steps"
.venv/bin/python - examples/tiny_gpt/tokens.npy "$out" <<'PY'
import sys
import numpy as np
tokens = np.tile(np.load(sys.argv[1]), (5, 1))   # the global batch: 5 microbatches
labels = np.full_like(tokens, -100)
labels[:, :-1] = tokens[:, 1:]
np.save(sys.argv[2] + "/tokens5.npy", tokens)
np.save(sys.argv[2] + "/labels5.npy", labels)
PY
build/bin/rp-compile "$model" -o "$out/train1.rpplan" --microbatches 5 2>/dev/null
build/bin/rp-run "$out/train1.rpplan" --input tokens="$out/tokens5.npy" \
  --labels "$out/labels5.npy" --steps 30 --lr 3e-3 --sync 2>/dev/null >"$out/one.txt"
build/bin/rp-run "$out/train4.rpplan" --input tokens="$out/tokens5.npy" \
  --labels "$out/labels5.npy" --steps 30 --lr 3e-3 --sync --trace "$out/trace.json" \
  2>"$out/four.err" >"$out/four.txt"
paste "$out/one.txt" "$out/four.txt" | awk 'NR == 1 || NR % 10 == 0 {
  printf "   1 device: %-26s 4 devices: %s\n", $1 " " $2 " " $3 " " $4, $3 " " $4 }'
if cmp -s "$out/one.txt" "$out/four.txt"; then
  echo "   every loss identical to the bit on 1 and 4 devices (DESIGN.md's equivalence contract)"
else
  echo "   LOSSES DIFFER between 1 and 4 devices" >&2
  exit 1
fi
echo "   where the time went on the 4 host devices:"
grep -E "device [0-9]+:|trained" "$out/four.err" | sed 's/^/   /'
echo "   trace: $(stat -c %s "$out/trace.json") bytes of Chrome trace events (open in ui.perfetto.dev)"
keep="$root/demo-out"
mkdir -p "$keep"
cp "$out/trace.json" "$keep/trace.json"
build/bin/rp-run "$out/train4.rpplan" --describe=json > "$keep/plan.json"
PYTHONPATH="$root/python" .venv/bin/python -m rp.viz "$keep/trace.json" \
  -o "$keep/timeline.svg" --step 29 --plan "$keep/plan.json" 2>&1 | sed 's/^/   /'
echo "   kept: demo-out/trace.json (Chrome trace) and demo-out/timeline.svg (the last step,"
echo "   one row per device queue, coloured by forward / tail / backward / copies / optimizer;"
echo "   thin bars under it: the compiler's predicted timeline of the same step)"

echo
echo "== predicted: the same model on 8 x RTX 4090 (rp-compile --hw rtx4090, rp-run --backend sim)"
build/bin/rp-compile "$model" -o "$out/train8.rpplan" --devices 8 --hw rtx4090 2>&1 |
  fold -s -w 100 | sed 's/^/   /'
build/bin/rp-run "$out/train8.rpplan" --backend sim --steps 3 \
  --trace "$keep/predicted-8x4090.json" 2>/dev/null |
  grep -E "^(tokens_per_s|step_ms|bubble_pct|fill_pct|switch_pct|drain_pct|intra_pct|exposed_comm_pct) " |
  sed 's/^/   /'
PYTHONPATH="$root/python" .venv/bin/python -m rp.viz "$keep/predicted-8x4090.json" \
  -o "$keep/timeline-8x4090.svg" --step 2 2>&1 | sed 's/^/   /'
echo "   a model this small is all kernel launches and bubbles on 8 GPUs; at Qwen3-1.7B's"
echo "   shape (python -m rp.shapes, no weights) the same two commands predict:"
PYTHONPATH="$root/python" .venv/bin/python -m rp.shapes qwen3-1.7b --batch 8 --seq 2048 \
  --dtype f16 -o "$out/qwen3-1.7b.mlir"
build/bin/rp-compile "$out/qwen3-1.7b.mlir" -o "$out/qwen.rpplan" --devices 8 \
  --microbatches 16 --hw rtx4090:as-built --dtype f16 >/dev/null 2>&1
# The host is not on the card's datasheet: the sim gives its prediction as
# a range over what the profile cannot know (its "unknown" ranges: host
# DRAM, GPUs per uplink, the optimizer's rate, the CUDA launch and
# hand-off), the same ends bench/paper.py prints its claims over, and says
# what it assumes and leaves out.
build/bin/rp-run "$out/qwen.rpplan" --backend sim --accumulate 4 \
  >"$out/range.txt" 2>"$out/range.err"
# The range, what it assumes, RoundPipe's figure, the kernel-only ideal
# and the claim ("ahead" only where the whole range is), as bench/paper.py
# prints them (bench/claims.py's range_lines; test/python/demo-range.test).
.venv/bin/python bench/claims.py "$out/range.txt" "$out/range.err" 65417 \
  qwen3-1.7b 512 "rp as built today (rtx4090:as-built: its CUDA-core attention)"
echo "   kept: demo-out/timeline-8x4090.svg (the predicted step of the bundled model on 8 x 4090)"
