#!/usr/bin/env bash
# Run every test: install what is missing, build (release and ASan+UBSan), run
# the unit, round-trip and hostile-input tests in both builds, run each fuzz
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

jobs=$(nproc 2>/dev/null || echo 2)
step "build (release)" scripts/build.sh build
step "tests (release)" ctest --test-dir build -j"$jobs" --output-on-failure
step "build (asan+ubsan)" scripts/build.sh build-asan -DPTWM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
step "tests (asan+ubsan)" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

fuzz_seconds=${PTWM_FUZZ_SECONDS:-20}
if [[ "$fuzz_seconds" != 0 ]]; then
  # -Werror is the gcc builds' gate; clang's extra warnings here are shown, not fatal.
  step "build (fuzz)" scripts/build.sh build-fuzz -DPTWM_FUZZ=ON -DCMAKE_C_COMPILER=clang -DPTWM_WERROR=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
  for f in build-fuzz/fuzz_*; do
    [[ -x "$f" ]] || continue
    name=$(basename "$f")
    seeds="tests/fuzz-seeds/${name#fuzz_}"
    mkdir -p "build-fuzz/corpus-$name"
    args=("build-fuzz/corpus-$name")
    [[ -d "$seeds" ]] && args+=("$seeds")
    step "$name (${fuzz_seconds}s)" "$f" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 \
      -print_final_stats=0 "${args[@]}"
  done
fi

# The Python package's tests run inside ctest (python_tests) against the release build.


echo
if [[ $failed -gt 0 ]]; then
  printf 'failed: %s\n' "${failures[@]}"
fi
echo "test.sh: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
