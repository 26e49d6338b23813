#!/usr/bin/env bash
# clang-format (.clang-format, clang-format-14) on every C++ and CUDA source
# git tracks, test inputs and CMake templates (.h.in, whose @VARS@ it
# would break) aside: reports each file whose formatting differs.
# scripts/test.sh runs it and counts each file as one test; with --fix it
# formats the files in place instead. The last line is
# "format: N clean, M to format".
# Usage: scripts/format.sh [--fix]
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
fmt=$(command -v clang-format-14 || command -v clang-format) || {
  echo "format: clang-format not found (apt-get install clang-format-14)" >&2
  exit 1
}
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' |
  grep -v '/Inputs/')
clean=0 dirty=0
for f in "${files[@]}"; do
  if [ "${1:-}" = --fix ]; then
    "$fmt" -i "$f"
  fi
  if "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then
    clean=$((clean + 1))
  else
    dirty=$((dirty + 1))
    echo "format: $f differs from .clang-format (scripts/format.sh --fix)"
  fi
done
echo "format: $clean clean, $dirty to format"
[ "$dirty" = 0 ]
