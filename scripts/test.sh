#!/usr/bin/env bash
# Run every test: install what is missing, build (release, ASan+UBSan, and a
# portable build without SIMD), run the unit, round-trip and hostile-input
# tests in each build, run each fuzz
# harness for a bounded time (the Python package's tests are one of the ctest tests).
#   PTWM_FUZZ_SECONDS  seconds per fuzz harness (default 20; 0 skips fuzzing)
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
"$here/scripts/deps.sh" || exit 1

passed=0
failed=0
failures=()
step() {   # step NAME COMMAND...
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
}

# A fuzz run: seeds from tests/fuzz-seeds/<target> (and the hostile corpus of
# that format), findings kept in build-fuzz/corpus-<name>; the log is shown
# only when the harness fails.
run_fuzzer() {
  local bin=$1 name=$2 target=${2#fuzz_}
  local args=("build-fuzz/corpus-$name")
  mkdir -p "build-fuzz/corpus-$name"
  [[ -d "tests/fuzz-seeds/$target" ]] && args+=("tests/fuzz-seeds/$target")
  [[ -d "tests/hostile/$target" ]] && args+=("tests/hostile/$target")
  if "$bin" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -print_final_stats=1 \
      "${args[@]}" > "build-fuzz/$name.log" 2>&1; then
    grep -E "^(#[0-9]+\s+DONE|stat::number_of_executed_units)" "build-fuzz/$name.log" | head -n 2
  else
    tail -n 60 "build-fuzz/$name.log"
    return 1
  fi
}

jobs=$(nproc 2>/dev/null || echo 2)
# No source over 800 lines, no function over 100 (docs/ARCHITECTURE.md), without exceptions.
step "source limits" python3 scripts/longfuncs.py --check src programs
# The real weights the tests read (build-corpus/, checked against tests/corpus/SHA256SUMS).
step "corpus" scripts/corpus.sh
step "build (release)" scripts/build.sh build
step "tests (release)" ctest --test-dir build -j"$jobs" --output-on-failure
# The same build with every kernel capped at the plain C loops (ptwm.h, PTWM_ISA).
step "tests (release, PTWM_ISA=scalar)" env PTWM_ISA=scalar ctest --test-dir build -j"$jobs" --output-on-failure
step "build (asan+ubsan)" scripts/build.sh build-asan -DPTWM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
step "tests (asan+ubsan)" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

# The portable paths (no SIMD, no AVX-512 or AVX2 clones) that machines
# without these instruction sets run: same tests, built without them.
step "build (portable, no SIMD)" scripts/build.sh build-portable -DCMAKE_C_FLAGS=-DPTWM_NO_SIMD
step "tests (portable)" ctest --test-dir build-portable -j"$jobs" --output-on-failure

fuzz_seconds=${PTWM_FUZZ_SECONDS:-20}
if [[ "$fuzz_seconds" != 0 ]]; then
  # -Werror is the gcc builds' gate; clang's extra warnings here are shown, not fatal.
  step "build (fuzz)" scripts/build.sh build-fuzz -DPTWM_FUZZ=ON -DCMAKE_C_COMPILER=clang -DPTWM_WERROR=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
  for f in build-fuzz/fuzz_*; do
    [[ -x "$f" ]] || continue
    name=$(basename "$f")
    step "$name (${fuzz_seconds}s)" run_fuzzer "$f" "$name"
  done
fi

# The Python package's tests run inside ctest (python_tests) against the release build.


echo
if [[ $failed -gt 0 ]]; then
  printf 'failed: %s\n' "${failures[@]}"
fi
echo "test.sh: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
