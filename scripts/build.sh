#!/usr/bin/env bash
# Configure and build one tree. Usage: scripts/build.sh [DIR] [extra cmake args...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
shift || true
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$here" -B "$here/$dir" -DPTWM_WERROR=ON "$@" >/dev/null
cmake --build "$here/$dir" -j"$jobs" >/dev/null
# The tests' corpus from local copies (no network; scripts/corpus.sh fetches the rest).
"$here/scripts/corpus.sh" --local
