#!/usr/bin/env bash
# clang-tidy with the root .clang-tidy, through build/compile_commands.json,
# on two sets of C++ sources:
#  - the runtime's own (runtime/lib, runtime/tools: every one the build
#    compiles, the cuda driver's where CUDA is on): a fixed set that needs
#    no MLIR header, so each file takes seconds, and a set that does not
#    shrink to nothing after a docs-only commit;
#  - the sources changed since BASE (default: where this branch left main;
#    on main itself, since the parent of the last commit that touched C++),
#    compiler ones included: the whole compiler tree, most of it including
#    MLIR, is far more than CI's time on 2 cores, so a compiler file is
#    checked when it changes.
# Headers are checked where a checked source includes them (a filter
# anchored at the checkout, so generated headers in build/ are not).
# scripts/test.sh runs it and counts each checked file as one test; run it
# before a commit too. Files run RP_TIDY_JOBS at a time (default: nproc).
# The last line is "tidy: N clean, M with findings".
# Usage: scripts/tidy.sh [BASE]
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# clang-tidy 22: 14 matched inside system headers too (the cuDNN frontend's
# headers made CudnnAttention.cpp 477 CPU s alone; 68 s under 22).
tidy=$(command -v clang-tidy-22) || {
  echo "tidy: clang-tidy-22 not found (scripts/setup.sh installs it:" \
    "apt-get install clang-tidy-22)" >&2
  exit 1
}
db=build/compile_commands.json
[ -f "$db" ] || {
  echo "tidy: $db is missing; run scripts/build.sh" >&2
  exit 1
}

# Every source the build compiles, relative to the checkout.
mapfile -t built < <(sed -nE "s|^ *\"file\": \"$root/([^\"]*)\",?$|\1|p" "$db" |
  sort -u)
inBuild() { printf '%s\n' "${built[@]}" | grep -qxF "$1"; }

mapfile -t fixed < <(printf '%s\n' "${built[@]}" |
  grep -E '^runtime/(lib|tools)/.*\.cpp$')

if [ $# -gt 0 ] && ! git rev-parse -q --verify "$1^{commit}" >/dev/null; then
  echo "tidy: BASE '$1' is not a commit; give one, or nothing for main" >&2
  exit 1
fi
base=$(git rev-parse -q --verify "${1:-$(git merge-base HEAD main 2>/dev/null)}^{commit}")
if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
  last=$(git log -1 --format=%H -- '*.cpp' '*.h' 2>/dev/null)
  base=${last:+$last~1}
fi
changed=()
if [ -n "$base" ] && git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  while read -r f; do
    inBuild "$f" && changed+=("$f")
  done < <(git diff --name-only --diff-filter=AMR "$base" -- '*.cpp')
fi
mapfile -t files < <(printf '%s\n' "${fixed[@]}" "${changed[@]}" |
  grep -v '^$' | sort -u)
echo "tidy: ${#files[@]} file(s): the runtime's ${#fixed[@]} and" \
  "${#changed[@]} changed since ${base:-(none)}"

# One file: its findings (none when clean), then a line "tidy-file: clean"
# or "tidy-file: findings". Findings are errors (WarningsAsErrors), so
# tidy's status says nothing the output does not.
# A clean verdict is kept under $cache by a key over everything it depends
# on (scripts/tidy_key.py: tidy, .clang-tidy, the command, the bytes of
# every included file), so a file that did not change, nor anything it
# includes, is not checked again: CI's clean clone on a machine that ran it
# before skips most of the runtime's files. RP_TIDY_CACHE=off checks all.
checkOne() {
  local key=""
  if [ "$cache" != off ]; then
    key=$(python3 "$root/scripts/tidy_key.py" "$root" "$root/$db" "$tidy" "$1" 2>/dev/null)
    if [ -n "$key" ] && [ -e "$cache/$key" ]; then
      echo "tidy-file: clean (kept)"
      return
    fi
  fi
  # -Wno-deprecated-declarations: libstdc++ 12's std::stable_sort calls
  # get_temporary_buffer, which clang 22 reports as deprecated inside the
  # system header; the build's own compiler still warns on our code.
  out=$("$tidy" -p build --quiet --extra-arg=-Wno-deprecated-declarations \
    --header-filter="^$root/(include|lib|tools|runtime/include|runtime/lib|runtime/tools)/" \
    "$1" 2>/dev/null | grep -E '(warning|error):')
  if [ -n "$out" ]; then
    printf '%s\ntidy-file: findings\n' "$out"
  else
    echo "tidy-file: clean"
    [ -z "$key" ] || { mkdir -p "$cache" && : >"$cache/$key"; }
  fi
}
cache=${RP_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rp-tidy}
export -f checkOne
export tidy root db cache
start=$SECONDS
results=$(printf '%s\0' "${files[@]}" |
  xargs -0 -r -n 1 -P "${RP_TIDY_JOBS:-$(nproc)}" bash -c 'checkOne "$1"' _)
echo "$results" | grep -v '^tidy-file: ' | grep -v '^$'
clean=$(echo "$results" | grep -cE '^tidy-file: clean( \(kept\))?$')
kept=$(echo "$results" | grep -c '^tidy-file: clean (kept)$')
dirty=$(echo "$results" | grep -c '^tidy-file: findings$')
echo "tidy: $((SECONDS - start)) s ($kept clean file(s) unchanged since a clean check: not run again)"
echo "tidy: $clean clean, $dirty with findings"
[ "$dirty" -eq 0 ]
