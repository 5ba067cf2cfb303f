#!/bin/sh
# Many-tensor benchmark: peak resident memory and wall time of `ptwm inspect`,
# `compress`, `verify` and `decompress` as whole processes on safetensors files
# of N small tensors (bench/gen_many_tensors.py), to show that memory and time
# grow linearly with the tensor count. Checks the restored file byte for byte.
#
# usage: bench/bench_many_tensors.sh [PTWM_BIN] [N...]
#   default: build/ptwm, N = 250000 500000 1000000
# needs: /usr/bin/time (Debian package "time"), python3, cmp
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/ptwm}
[ $# -gt 0 ] && shift
counts=${*:-250000 500000 1000000}

for tool in /usr/bin/time python3 cmp; do
    command -v "$tool" >/dev/null 2>&1 || { echo "missing: $tool (apt-get install -y time python3)" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "no ptwm binary at $bin (build first)" >&2; exit 2; }

work=$(mktemp -d "${BENCH_TMP:-/tmp}/ptwm-bench-many.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# run LABEL N CMD...: one line "N command peak_MB wall_s cpu_s bytes_per_tensor"
# (cpu_s, user plus system time, is the figure to compare for linearity on a
# shared machine: wall time also counts waiting for a core).
run() {
    label=$1 n=$2
    shift 2
    if ! /usr/bin/time -v -o "$work/time" "$@" >"$work/out" 2>"$work/err"; then
        echo "FAILED: $label at N=$n:" >&2
        tail -5 "$work/err" >&2
        exit 1
    fi
    awk -v label="$label" -v n="$n" '
        /Maximum resident set size/ { kb = $NF }
        /User time/ { cpu += $NF }
        /System time/ { cpu += $NF }
        /Elapsed \(wall clock\)/ { split($NF, t, ":"); s = 0; for (i = 1; i in t; i++) s = s * 60 + t[i] }
        END { printf "%9d  %-10s %9.1f %9.2f %9.2f %9.0f\n", n, label, kb / 1024, s, cpu, kb * 1024 / n }' "$work/time"
}

printf "%9s  %-10s %9s %9s %9s %9s\n" tensors command peak_MB wall_s cpu_s B/tensor
for n in $counts; do
    src="$work/m.safetensors"
    python3 "$here/bench/gen_many_tensors.py" "$n" "$src" >/dev/null
    run inspect "$n" "$bin" inspect "$src"
    run compress "$n" "$bin" compress "$src" -o "$work/c" -q
    cat "$work/c"/* >/dev/null   # read once: a large .ptwm is written past the page cache
    run verify "$n" "$bin" verify "$work/c"
    run decompress "$n" "$bin" decompress "$work/c" -o "$work/d" -q
    cmp "$src" "$work/d/m.safetensors" || { echo "FAILED: restored file differs at N=$n" >&2; exit 1; }
    rm -rf "$work/c" "$work/d" "$src"
done
