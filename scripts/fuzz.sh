#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14 with ASan and UBSan, into
# build-fuzz/) and runs each for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS per target, default 60] [TARGET...]
# Targets: npy safetensors state plan (the runtime's readers, runtime/fuzz),
# onnx (the importer, fuzz/; it needs the main build in build/, whose
# libraries it links; fuzz/ONNXMutator.cpp mutates models structurally) and
# options (fuzz/options_fuzz.py: the command lines of rp-compile, rp-run and
# rp-import from build/bin, one line per tool, the seconds shared). Each starts from its seed corpus
# (runtime/fuzz/corpus/<target> or fuzz/corpus/onnx, small real files)
# copied to
# build-fuzz/corpus/<target>, which keeps what the run finds; the repository's
# corpus never grows. Findings (crash-*, timeout-*, oom-* files) go to
# build-fuzz/findings/<target>/. One line per target:
#   fuzz <target>: <cases> cases, <crash> crash, <hang> hang, <exit2> exit 2, <wrong> silent wrong
# exit 2 counts inputs a reader answered with an internal error, silent
# wrong inputs whose result contradicted itself (runtime/fuzz/FuzzCheck.h).
# Exits 1 when any target has a finding or does not build.
# RP_FUZZ_JOBS targets run at a time (default: nproc; each fuzzer is one
# process at a time, -fork=1, so one core each): the seconds per target are
# the same, the wall time that many times shorter. The lines come out in
# the targets' order all the same.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(npy safetensors state plan onnx options)

build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S runtime -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 -DRP_RUNTIME_FUZZ=ON \
    -DRP_ENABLE_CUDA=OFF >"$build.configure.log" 2>&1 || {
    tail -30 "$build.configure.log"
    echo "fuzz: configure failed (log: $build.configure.log)" >&2
    exit 1
  }
fi
names=()
for t in "${targets[@]}"; do
  [ "$t" = onnx ] || [ "$t" = options ] || names+=("rp-fuzz-$t")
done
if [ ${#names[@]} -gt 0 ] &&
   ! ninja -C "$build" "${names[@]}" >"$build.build.log" 2>&1; then
  grep -E 'error|FAILED' "$build.build.log" | head -20
  echo "fuzz: build failed (log: $build.build.log)" >&2
  exit 1
fi
if [[ " ${targets[*]} " == *" onnx "* ]]; then
  if ! { bash scripts/build.sh rp-import &&
         .venv/bin/python fuzz/build_onnx_fuzzer.py build "$build/onnx"; } \
       >"$build.onnx.log" 2>&1; then
    grep -E 'error|FAILED' "$build.onnx.log" | head -20
    echo "fuzz: the onnx target failed to build (log: $build.onnx.log)" >&2
    exit 1
  fi
fi

# One target: its run, then its line (and a line per finding); exits 1 on a
# finding or when it ran no case.
fuzzOne() { # target
  local t=$1
  if [ "$t" = options ]; then
    if [ ! -x build/bin/rp-run ] || [ ! -d build/test/models ]; then
      echo "fuzz: the options target needs the main build (build/bin, build/test/models)" >&2
      return 1
    fi
    rm -rf "$build/options"
    .venv/bin/python fuzz/options_fuzz.py build/bin build/test/models \
      "$build/options" --seconds "$seconds"
    return
  fi
  corpus="$build/corpus/$t" findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  seeds=runtime/fuzz/corpus/$t binary=$build/fuzz/rp-fuzz-$t
  if [ "$t" = onnx ]; then
    seeds=fuzz/corpus/onnx binary=$build/onnx/rp-fuzz-onnx
  fi
  cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
  log="$build/fuzz-$t.log"
  # -timeout: an input taking 10 s is a hang; -rss_limit_mb: the readers
  # must refuse what would take more memory; -fork: keep going after a
  # finding, so that the counts cover the whole run.
  # The plan and onnx targets go through files: in a folder of this run's.
  export RP_FUZZ_TMP="$root/$build/tmp/$t"
  rm -rf "$RP_FUZZ_TMP" && mkdir -p "$RP_FUZZ_TMP"
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    "$binary" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -fork=1 -ignore_crashes=1 -ignore_timeouts=1 \
    -ignore_ooms=1 -artifact_prefix="$findings/" "$corpus" >"$log" 2>&1
  cases=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
  # Each saved input replayed alone says what kind of finding it is.
  crash=0 hang=0 exit2=0 wrong=0
  for input in "$findings"/*; do
    [ -f "$input" ] || continue
    case $(basename "$input") in
    timeout-* | oom-* | slow-unit-*) hang=$((hang + 1)) ;;
    *)
      # A finding the current build no longer reproduces (fixed since an
      # earlier run) is set aside, not counted.
      if out=$("$binary" -runs=1 "$input" 2>&1); then
        mkdir -p "$findings/fixed" && mv "$input" "$findings/fixed/"
      elif echo "$out" | grep -qE 'rp fuzz finding: an internal error|LLVM ERROR'; then
        exit2=$((exit2 + 1))
      elif echo "$out" | grep -q 'rp fuzz finding:'; then
        wrong=$((wrong + 1))
      else
        crash=$((crash + 1))
      fi
      # Name the finding in the log: CI keeps only the output, not the files.
      if [ -f "$input" ]; then
        echo "   finding $(basename "$input"): $(echo "$out" |
          grep -m1 -E 'rp fuzz finding|runtime error|ERROR: |LLVM ERROR' |
          cut -c1-300)"
      fi
      ;;
    esac
  done
  rm -rf "$RP_FUZZ_TMP"
  echo "fuzz $t: ${cases:-0} cases, $crash crash, $hang hang, $exit2 exit 2, $wrong silent wrong"
  [ -n "$cases" ] && [ $((crash + hang + exit2 + wrong)) -eq 0 ]
}

# The targets RP_FUZZ_JOBS at a time, each into its own file (output and
# exit status), printed in order once all have ended.
jobs=${RP_FUZZ_JOBS:-$(nproc)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  rm -f "$build/fuzz-$t.out" "$build/fuzz-$t.status"
  { fuzzOne "$t"; echo $? >"$build/fuzz-$t.status"; } >"$build/fuzz-$t.out" 2>&1 &
  running=$((running + 1))
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$build/fuzz-$t.out"
  [ "$(cat "$build/fuzz-$t.status" 2>/dev/null)" = 0 ] || status=1
done
exit $status
