#!/usr/bin/env bash
# clang-tidy with the root .clang-tidy on the C++ sources changed since BASE
# (default: where this branch left main; on main itself, the last commit),
# through build/compile_commands.json, so it takes seconds per file rather
# than the whole tree (the whole tree is some 300 sources, most including
# MLIR: far more than CI's time on 2 cores). Headers are checked where a
# changed source includes them. scripts/test.sh runs it and counts each
# checked file as one test; run it before a commit too.
# The last line is "tidy: N clean, M with findings".
# Usage: scripts/tidy.sh [BASE]
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tidy=$(command -v clang-tidy-14 || command -v clang-tidy) || {
  echo "tidy: clang-tidy not found (apt-get install clang-tidy-14)" >&2
  exit 1
}
[ -f build/compile_commands.json ] || {
  echo "tidy: build/compile_commands.json is missing; run scripts/build.sh" >&2
  exit 1
}
base=${1:-$(git merge-base HEAD main 2>/dev/null)}
if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
  base=HEAD~1
fi
mapfile -t files < <(git diff --name-only --diff-filter=AMR "$base" -- \
  '*.cpp' | while read -r f; do
    grep -q "\"file\": \"[^\"]*/$f\"" build/compile_commands.json && echo "$f"
  done)
echo "tidy: ${#files[@]} file(s) changed since $base"
clean=0
dirty=0
for f in "${files[@]}"; do
  # Findings are errors (WarningsAsErrors), so tidy's status says nothing
  # the output does not: a file is clean when no line names a finding.
  out=$("$tidy" -p build --quiet \
    --header-filter="^$root/(include|lib|tools|runtime/include|runtime/lib|runtime/tools)/" \
    "$f" 2>/dev/null)
  if echo "$out" | grep -E '(warning|error):'; then
    dirty=$((dirty + 1))
  else
    clean=$((clean + 1))
  fi
done
echo "tidy: $clean clean, $dirty with findings"
[ $dirty -eq 0 ]
