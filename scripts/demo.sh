#!/usr/bin/env bash
# Sets everything up, builds rp, and runs the main job on the bundled default
# model (examples/tiny_gpt, a GPT exported by torch.onnx). Today that is the
# compiler front end: import the ONNX file into the rp graph, group it into
# layers, fold the shape arithmetic, verify, and show the result. Each issue
# extends this until it trains the model and predicts its speed on 8 GPUs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh rp-import rp-opt

model=examples/tiny_gpt/model.onnx
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

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
