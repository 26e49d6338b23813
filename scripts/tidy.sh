#!/usr/bin/env bash
# clang-tidy with the root .clang-tidy on the C++ sources changed since BASE
# (default: where this branch left main; on main itself, the last commit),
# through build/compile_commands.json, so it takes seconds per file rather
# than the whole tree. Headers are checked where a changed source includes
# them. Not part of scripts/test.sh: run it before a commit.
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
if [ ${#files[@]} -eq 0 ]; then
  echo "tidy: no changed C++ sources since $base"
  exit 0
fi
echo "tidy: ${#files[@]} file(s) changed since $base"
status=0
for f in "${files[@]}"; do
  "$tidy" -p build --quiet \
    --header-filter="^$root/(include|lib|tools|runtime/include|runtime/lib|runtime/tools)/" \
    "$f" 2>/dev/null | grep -E '(warning|error):' && status=1
done
[ $status -eq 0 ] && echo "tidy: clean"
exit $status
