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
# A batch of files per clang-format process, RP_FORMAT_JOBS batches at a
# time (default: nproc): a process per file, one after another, spent
# most of the stage starting processes on one core. A batch that fails is
# checked again file by file, which names the files. One line a file:
# "ok FILE" or "bad FILE".
checkBatch() {
  if [ "$fix" = --fix ]; then
    "$fmt" -i "$@"
  fi
  if "$fmt" --dry-run --Werror "$@" >/dev/null 2>&1; then
    printf 'ok %s\n' "$@"
    return
  fi
  for f in "$@"; do
    if "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "ok $f"
    else
      echo "bad $f"
    fi
  done
}
export -f checkBatch
fix=${1:-}
export fmt fix
results=$(printf '%s\0' "${files[@]}" |
  xargs -0 -r -n 32 -P "${RP_FORMAT_JOBS:-$(nproc)}" \
    bash -c 'checkBatch "$@"' _)
clean=$(echo "$results" | grep -c '^ok ')
dirty=$(echo "$results" | grep -c '^bad ')
echo "$results" | sed -n 's|^bad \(.*\)$|format: \1 differs from .clang-format (scripts/format.sh --fix)|p' |
  sort
echo "format: $clean clean, $dirty to format"
[ "$dirty" = 0 ]
