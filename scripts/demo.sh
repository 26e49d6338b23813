#!/usr/bin/env bash
# Sets everything up, builds rp, and runs the main job on the bundled default
# model (examples/tiny_gpt): today, the compiler pipeline that exists —
# verify the graph, canonicalize, and show what is left. Each issue extends
# this until it trains the model and predicts its speed on 8 GPUs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh rp-opt

model=examples/tiny_gpt/model.mlir
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo
echo "== rp demo: $model (2-layer GPT, d=32, vocabulary 64, microbatch 2x16)"
params=$(grep -c 'rp.param' "$model")
bytes=$(stat -c %s examples/tiny_gpt/weights.bin)
echo "   $params parameters in weights.bin ($bytes bytes, referenced, never copied into the IR)"

echo
echo "== rp-opt --rp-verify-graph --canonicalize --cse"
build/bin/rp-opt "$model" --rp-verify-graph --canonicalize --cse \
  --print-op-stats -o "$out/model.opt.mlir" 2>"$out/stats.txt"
before=$(grep -cE '= rp\.[a-z_]+ ' "$model")
after=$(grep -cE '= rp\.[a-z_]+ ' "$out/model.opt.mlir")
echo "   graph verified; $before ops before, $after after canonicalization"
sed -n '/rp\./p' "$out/stats.txt" | sed 's/^ */   /'

echo
echo "== layers (the units pipeline stages are cut from)"
grep -oE 'rp.layer "[^"]+"' "$out/model.opt.mlir" | sed 's/rp.layer /   /'

echo
echo "== one transformer block after canonicalization"
awk '/rp.layer "h.0"/,/rp.yield/' "$out/model.opt.mlir" | cut -c1-150
