#!/usr/bin/env bash
# Sets everything up, builds, and runs every test: the lit suite (compiler and
# python), the GoogleTest suites (compiler and runtime), clang-tidy on the
# changed C++ sources, clang-format on every C++ source, the runtime tests
# again under ThreadSanitizer and under ASan + UBSan (with the readers' lit
# tests against that rp-run), the compiler's tests under ASan + UBSan, and
# each reader's fuzz target for 40 s and the tools' options for 40 s; then
# that /dev/null is still the null device. The last line is the total count.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# ccache sees paths relative to the checkout, so a clone in another folder
# (CI's) reuses what this machine compiled before.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
cd "$root"
jobs=$(nproc)
start=$(date +%s)
# Each stage's heading, after the seconds the one before it took (before
# the build's, the setup's), so a CI log shows where its time goes.
stage_start=$start
stage() { # heading
  local now
  now=$(date +%s)
  echo "   ($((now - stage_start)) s)"
  stage_start=$now
  echo "== $1"
}

bash scripts/setup.sh --no-torch2 || exit 1
# The torch-2 venv (2.3 GB of wheels, fetched and unpacked: I/O more than
# CPU) is made while the build runs; only lit's torch2 tests use it.
torch2_log=$(mktemp)
bash scripts/torch2-venv.sh >"$torch2_log" 2>&1 &
torch2_pid=$!
stage "build"
bash scripts/build.sh || { wait "$torch2_pid"; echo "0 passed, 1 failed"; exit 1; }
wait "$torch2_pid"
torch2_rc=$?
cat "$torch2_log"
rm -f "$torch2_log"
[ "$torch2_rc" = 0 ] || { echo "setup: the torch-2 venv failed"; exit 1; }

passed=0
failed=0
tally() { # name passed failed
  echo "   $1: $2 passed, $3 failed"
  passed=$((passed + $2))
  failed=$((failed + $3))
}

stage "lit (compiler, python)"
lit_json=$(mktemp)
/usr/lib/llvm-22/bin/lit -sv -j "$jobs" --output "$lit_json" build/test
read -r lp lf < <(.venv/bin/python - "$lit_json" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1])).get("tests", [])
ok = sum(t["code"] in ("PASS", "XFAIL") for t in tests)
bad = sum(t["code"] not in ("PASS", "XFAIL", "UNSUPPORTED") for t in tests)
# The slowest tests, where CI's time goes (stderr: stdout is the count).
for t in sorted(tests, key=lambda t: -t.get("elapsed", 0))[:12]:
    print(f"   {t.get('elapsed', 0):7.1f} s  {t['name']}", file=sys.stderr)
print(ok, bad)
PY
) || { lp=0; lf=1; }
rm -f "$lit_json"
tally lit "$lp" "$lf"
devnull_after_lit=0
[ -c /dev/null ] && devnull_after_lit=1

# ctest's summary line: "100% tests passed, 0 tests failed out of 12".
run_ctest() { # name dir [ctest args...]
  local name=$1 dir=$2 out
  shift 2
  out=$(ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" 2>&1)
  echo "$out" | grep -vE '^ +Start |^ *[0-9]+/[0-9]+ Test +#.* Passed' || true
  local line total bad
  line=$(echo "$out" | grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' | tail -1)
  if [ -z "$line" ]; then
    tally "$name" 0 1
    return
  fi
  bad=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
  tally "$name" $((total - bad)) "$bad"
}

stage "gtest (compiler, runtime)"
run_ctest gtest build -E '^lit$'

# clang-tidy (.clang-tidy) on the runtime's sources (no MLIR header, a few
# seconds each) and on the C++ sources changed since main (on main, since
# the last commit that touched C++): each checked file is one test
# (scripts/tidy.sh). The whole compiler tree does not fit CI's time on 2
# cores; a compiler file is checked when it changes.
stage "clang-tidy (runtime and changed sources)"
tidy_out=$(bash scripts/tidy.sh 2>&1)
echo "$tidy_out" | sed 's/^/   /'
read -r tp tf < <(echo "$tidy_out" |
  sed -nE 's/^tidy: ([0-9]+) clean, ([0-9]+) with findings$/\1 \2/p') ||
  { tp=0; tf=1; }
tally tidy "$tp" "$tf"

# clang-format (.clang-format) on every tracked C++ and CUDA source: each
# file is one test (scripts/format.sh; --fix formats them).
stage "clang-format"
fmt_out=$(bash scripts/format.sh 2>&1)
echo "$fmt_out" | sed 's/^/   /' | tail -20
read -r fp ff < <(echo "$fmt_out" |
  sed -nE 's/^format: ([0-9]+) clean, ([0-9]+) to format$/\1 \2/p') ||
  { fp=0; ff=1; }
tally format "$fp" "$ff"

# The cuda device is built and linked whenever nvcc is there; its half of
# the device-conformance suite runs where a GPU opens and is skipped, with
# the backend's reason, everywhere else (docs/cuda.md).
stage "cuda device"
build/bin/rp-run --list-devices | grep '^cuda:' | sed 's/^/   /'
conformance=$(build/runtime/test/rp-runtime-tests \
  --gtest_filter='*DeviceConformance*/cuda:*DeviceKernelConformance*/cuda' 2>&1)
echo "   conformance suite on cuda: $(echo "$conformance" |
  grep -cE '^\[       OK \]') run, $(echo "$conformance" |
  grep -cE '^\[  SKIPPED \] .*/cuda \(') skipped$(echo "$conformance" |
  grep -m1 "not run:" | sed "s/.*not run: / (/; s/\$/)/")"

# A sanitizer tree's lit run (its --output JSON): "passed failed", a run
# that ran no test counting as one failure.
litRunCounts() { # json
  .venv/bin/python - "$1" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1])).get("tests", [])
ok = sum(t["code"] == "PASS" for t in tests)
bad = sum(t["code"] not in ("PASS", "UNSUPPORTED") for t in tests)
print(ok, bad if tests else 1)
PY
}

# The targets its tests run (rp-runtime-tests pulls in the contract's
# tests and the drivers), as the ASan tree below: the benchmarks are not
# run under either.
stage "runtime under ThreadSanitizer"
if cmake -G Ninja -S runtime -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     -DRP_RUNTIME_TSAN=ON -DRP_ENABLE_CUDA=OFF >build-tsan.configure.log 2>&1 &&
   ninja -C build-tsan rp-runtime-tests rp-run >build-tsan.build.log 2>&1; then
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/runtime/test/tsan.supp" run_ctest tsan build-tsan
  # The multi-process lit tests (ranks over loopback, docs/multi-box.md)
  # with this build's rp-run: a race in any rank fails its test.
  tsan_json=$(mktemp)
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/runtime/test/tsan.supp" \
    /usr/lib/llvm-22/bin/lit -s -j "$jobs" --filter 'Runtime/multibox' \
    --param rp_run="$root/build-tsan/bin/rp-run" --output "$tsan_json" build/test
  read -r tp tf < <(litRunCounts "$tsan_json") || { tp=0; tf=1; }
  rm -f "$tsan_json"
  tally "tsan multi-process" "$tp" "$tf"
else
  cat build-tsan.configure.log build-tsan.build.log 2>/dev/null | tail -30
  tally tsan 0 1
fi

# ASan + UBSan over the runtime and the compiler: one tree, build-asan/,
# configured from the top level with RP_ASAN (the whole build instrumented,
# LLVM and MLIR excepted, since they are prebuilt; the runtime with the
# same flags as a runtime-only tree, RP_RUNTIME_ASAN), so that the contract
# library both halves link is compiled once, not once per tree. Each half
# builds only its own test targets, in its own stage, so that either
# fails alone. clang-14 compiles it (as the fuzz tree; scripts/setup.sh
# installs it): the same sanitizers and fatal UBSan (clang's checks array
# indexing through pointer arithmetic too), compiled in less CPU than gcc
# needs, which is most of these two stages on a cold cache. A build-asan/
# of an earlier layout (configured from runtime/, or with gcc) is made again.
asan_configured=0
asanConfigure() {
  if [ -f build-asan/CMakeCache.txt ] &&
     { grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$root/runtime" \
         build-asan/CMakeCache.txt ||
       ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++-14$' \
         build-asan/CMakeCache.txt; }; then
    rm -rf build-asan
  fi
  cmake -G Ninja -S . -B build-asan -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" -DRP_ASAN=ON \
    -DRP_ENABLE_CUDA=OFF >build-asan.configure.log 2>&1 && asan_configured=1
}

# The runtime's half: the test target and rp-run, whose readers'
# regression lit tests run again against it (asan_lit_tests), optimized at
# -O1, ccache-warm after the first run.
asan_lit_tests='Runtime/(npy-errors|safetensors-errors|checkpoint-errors|checkpoint|checkpoint-faults|lora|run-errors|option-ranges|data|plan-weights-pair)\.test|Target/bad-plans\.test'
stage "runtime under AddressSanitizer + UndefinedBehaviorSanitizer"
asanConfigure
if [ "$asan_configured" = 1 ] &&
   ninja -C build-asan rp-runtime-tests rp-run >build-asan.build.log 2>&1; then
  # The runtime's folder of the tree: its tests and the contract's, as a
  # runtime-only tree registers them.
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    run_ctest asan build-asan/runtime
  # The readers' regression tests (malformed .npy, .safetensors, state.json,
  # token files and plans, bad options) with this build's rp-run. A
  # sanitizer report exits 86, never the 1 these tests expect of a refusal.
  asan_lit_json=$(mktemp)
  ASAN_OPTIONS="detect_leaks=1:exitcode=86" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86" \
    /usr/lib/llvm-22/bin/lit -s -j "$jobs" --output "$asan_lit_json" \
    --filter "$asan_lit_tests" --param rp_run="$root/build-asan/bin/rp-run" \
    build/test
  read -r ap af < <(litRunCounts "$asan_lit_json") || { ap=0; af=1; }
  rm -f "$asan_lit_json"
  tally "asan readers (lit)" "$ap" "$af"
else
  cat build-asan.configure.log build-asan.build.log 2>/dev/null | tail -30
  tally asan 0 1
fi

# The compiler's half: its unit tests. Only that target is built (69 steps
# beyond the runtime's half, ccache-warm after the first run); the
# importer runs under ASan + UBSan in its fuzz target below.
stage "compiler under AddressSanitizer + UndefinedBehaviorSanitizer"
# The binary runs as 4 x $jobs gtest shards (GTEST_TOTAL_SHARDS: each test
# in exactly one shard, by its index), $jobs at a time, each its own
# process: one process left the other cores idle, and $jobs shards left
# one core idle for a third of the run, the few long partition searches
# falling mostly in one shard (88 s of tests against 44). A shard that
# died (no summary line: a sanitizer report ends it) counts as one
# failure.
run_gtest() { # name binary: counts the binary's passed and failed tests
  local dir out ok=0 bad=0 i sok sbad running=0 shards=$((4 * jobs)) pids=()
  dir=$(mktemp -d)
  for ((i = 0; i < shards; i++)); do
    if [ "$running" -ge "$jobs" ]; then
      wait -n
      running=$((running - 1))
    fi
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$2" >"$dir/$i" 2>&1 &
    pids+=($!)
    running=$((running + 1))
  done
  wait "${pids[@]}"
  for ((i = 0; i < shards; i++)); do
    out=$(cat "$dir/$i")
    sok=$(echo "$out" | sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?.*/\1/p')
    sbad=$(echo "$out" | sed -nE 's/^\[  FAILED  \] ([0-9]+) tests?, listed below.*/\1/p')
    [ -n "$sok" ] || { echo "$out" | tail -30; sok=0; sbad=${sbad:-1}; }
    [ "${sbad:-0}" = 0 ] || echo "$out" | grep -E '^\[  FAILED  \]|ERROR: |runtime error'
    ok=$((ok + sok))
    bad=$((bad + ${sbad:-0}))
  done
  rm -rf "$dir"
  tally "$1" "$ok" "$bad"
}
asan_start=$(date +%s)
[ "$asan_configured" = 1 ] || asanConfigure
if [ "$asan_configured" = 1 ] &&
   ninja -C build-asan rp-unittests >build-asan.compiler.build.log 2>&1; then
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    run_gtest asan-compiler build-asan/unittests/rp-unittests
else
  cat build-asan.configure.log build-asan.compiler.build.log 2>/dev/null | tail -30
  tally asan-compiler 0 1
fi
echo "   compiler under ASan: $(( $(date +%s) - asan_start )) s"

# Each reader's libFuzzer target for 40 s, and the tools' command lines for
# 40 s in all (scripts/fuzz.sh, $jobs targets at a time); a target (a tool)
# with no finding counts as one passed test.
stage "fuzz (40 s per target)"
fuzz_out=$(bash scripts/fuzz.sh 40 2>&1)
echo "$fuzz_out" | sed 's/^/   /'
fuzz_ok=$(echo "$fuzz_out" | grep -cE '^fuzz [a-z-]+: [1-9][0-9]* cases, 0 crash, 0 hang, 0 exit 2, 0 silent wrong(, 0 unclear message)?$')
tally fuzz "$fuzz_ok" $((8 - fuzz_ok))

# /dev/null must still be the null device: after one session's runs it was
# a regular file (as root, a rename onto it does that), which every later
# `>/dev/null` then filled. Checked after lit (whose tests run every tool
# against it) and here, after everything.
stage "/dev/null"
if [ -c /dev/null ] && [ "$devnull_after_lit" = 1 ]; then
  tally "/dev/null still a character device" 1 0
else
  echo "   /dev/null is no longer a character device (after lit: $devnull_after_lit): $(ls -l /dev/null)"
  tally "/dev/null still a character device" 0 1
fi

stage "done in $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
