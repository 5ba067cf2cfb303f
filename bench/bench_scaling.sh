#!/usr/bin/env bash
# How ptwm scales with threads (docs/SCALING.md): per file and dtype, MB/s and
# CPU seconds on 1..N threads, in memory (bench_threads) and as whole processes
# (ptwm compress / decompress), beside zstd -3 -T1..-TN and, for restores,
# zstd -d and cp each followed by an fsync of their output (the durability
# ptwm decompress gives). Runs take turns (every command once, then again),
# figures are medians.
#
# usage: bench/bench_scaling.sh [PATH...]
#   PATH: safetensors files or directories of shards (default: the corpus files
#   of 2.5 MB or more; three files of BIG_MB MiB made from the corpus's BF16 and
#   F32 tensors, the BF16 one also in PyTorch's layout; and the BF16 one as a
#   directory of 3 shards, as Hugging Face shards a checkpoint).
# Environment: PTWM_BUILD_DIR (default build), PTWM_CORPUS (build-corpus),
#   RUNS (in memory, 7), PROC_RUNS (whole processes, 5), THREADS (1..N; the
#   machine's cores, at least 2), BIG_MB (128), BENCH_TMP (/tmp).
# Writes bench/out/scaling.csv and bench/out/SCALING_TABLE.md; FULL=1 also
# puts the table into docs/SCALING.md (between its markers).
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")/.." && pwd)
build=${PTWM_BUILD_DIR:-$here/build}
corpus=${PTWM_CORPUS:-$here/build-corpus}
runs=${RUNS:-7}
proc_runs=${PROC_RUNS:-5}
cores=$(nproc)
threads=${THREADS:-$(( cores > 2 ? cores : 2 ))}
big_mb=${BIG_MB:-128}
out=$here/bench/out
mkdir -p "$out"
csv=$out/scaling.csv
for tool in zstd sync python3 cmp; do
    command -v "$tool" >/dev/null || { echo "bench_scaling: missing $tool" >&2; exit 2; }
done
[[ -x $build/ptwm && -x $build/bench_threads ]] || {
    echo "bench_scaling: build ptwm and bench_threads in $build first" >&2; exit 2; }
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/ptwm-scaling.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

files=("$@")
if (( ${#files[@]} == 0 )); then
    for f in "$corpus"/*.safetensors; do
        (( $(stat -c %s "$f") >= 2500000 )) && files+=("$f")
    done
    python3 "$here/bench/make_bench_file.py" "$corpus" "$tmp/bf16-${big_mb}m.safetensors" "$big_mb" bf16 >/dev/null
    python3 "$here/bench/make_bench_file.py" "$corpus" "$tmp/f32-${big_mb}m.safetensors" "$big_mb" f32 >/dev/null
    # The same BF16 weights as PyTorch stores convolutions ([out, in, kh, kw]).
    python3 "$here/bench/pytorch_layout.py" "$tmp/bf16-${big_mb}m.safetensors" \
        "$tmp/bf16-pt-${big_mb}m.safetensors" >/dev/null
    # The BF16 file cut into 3 shards with an index (model-0000k-of-00003).
    "$build/ptwm" compress "$tmp/bf16-${big_mb}m.safetensors" -o "$tmp/shards.ptwm" -q
    "$build/ptwm" decompress "$tmp/shards.ptwm" -o "$tmp/bf16-${big_mb}m-shards" -q \
        --max-shard-size $(( big_mb * 1024 * 1024 * 3 / 8 ))
    rm -rf "$tmp/shards.ptwm"
    files+=("$tmp/bf16-${big_mb}m.safetensors" "$tmp/bf16-pt-${big_mb}m.safetensors"
            "$tmp/f32-${big_mb}m.safetensors" "$tmp/bf16-${big_mb}m-shards")
fi

echo "file,dtype,where,op,tool,threads,raw_bytes,coded_bytes,wall_s,cpu_s,runs,paired_x,paired_floor,paired_zstd" >"$csv"
{
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $cores cores"
    echo "ptwm: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ), load at start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "runs: $runs in memory, $proc_runs whole processes (medians)"
} >"$out/scaling_machine.txt"
# Each core's own speed at the start: on a shared virtual machine one core
# can run well below another (a neighbour on its host core), which moves
# every ratio of two threads to one below.
if command -v taskset >/dev/null; then
    speeds=""
    for ((c = 0; c < cores; c++)); do
        s=$(taskset -c "$c" "$build/bench_threads" --runs 5 --threads 1 "${files[0]}" 2>/dev/null |
            grep -o '1T c *[0-9]*' | grep -o '[0-9]*$' || true)
        speeds+="${speeds:+, }cpu$c ${s:-?}"
    done
    echo "one-thread compress of $(basename "${files[0]}") on each core at the start, MB/s: $speeds" \
        >>"$out/scaling_machine.txt"
fi

echo "== in memory (bench_threads, $runs runs, 1..$threads threads)"
"$build/bench_threads" --runs "$runs" --threads "$threads" --csv "$tmp/mem.csv" "${files[@]}"
awk -F, '{ printf "%s,%s,memory,%s,ptwm,%s,%s,%s,%s,%s,%s,,,\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' \
    "$tmp/mem.csv" >>"$csv"

# One timed command: "WALL CPU" (seconds; CPU is user + system time of it and
# its children, from wait4's rusage of that one process: microseconds, where
# time(1) gives 10 ms; getrusage(RUSAGE_CHILDREN) also counted 0.1 s that
# the interpreter's own start had spent in other children).
timed() {
    python3 -c '
import os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[1], "w"))
_, status, u = os.wait4(p.pid, 0)
t1 = time.perf_counter()
print("%.4f %.4f" % (t1 - t0, u.ru_utime + u.ru_stime))
sys.exit(os.waitstatus_to_exitcode(status))' "$tmp/err.txt" "$@" || {
        echo "bench_scaling: FAILED: $*" >&2; cat "$tmp/err.txt" >&2; exit 1; }
}

# The bytes of a file, or of every file in a directory.
bytes_of() {
    find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

# Rows of one file or directory of shards: every command once a round,
# PROC_RUNS rounds; then the medians, one CSV row per command. A directory is
# compressed and restored whole by ptwm, shard by shard by zstd (-r into one
# output directory), copied by cp -r; each output file is fsynced.
whole_process() {
    local f=$1 name dtype raw i t k
    local -a keys=() cmds=() outs=()
    # (per form: what ptwm restores from, zstd's input and output arguments,
    # what cp copies, the files to fsync under an output, and where the
    # restored file or directory lands)
    local ref zin zref cpr coded files_of mk back
    name=$(basename "$f")
    if [[ -d $f ]]; then
        name="$name/ ($(ls "$f" | grep -c '\.safetensors$') shards)"
        ref=$tmp/ref zin="-r $f --output-dir-flat" zref="-r $tmp/refz --output-dir-flat"
        cpr="cp -r" coded=$tmp/ref files_of="/*" mk=1 back=""
    else
        ref=$tmp/ref/model.ptwm zin="$f -o" zref="$tmp/refz -o"
        cpr=cp coded=$tmp/ref/model.ptwm files_of="" mk="" back=/$name
    fi
    dtype=$(awk -F, -v f="$name" '$1 == f { print $2; exit }' "$tmp/mem.csv")
    raw=$(bytes_of "$f")
    for ((t = 1; t <= threads; t++)); do
        keys+=("compress,ptwm,$t" "decompress,ptwm,$t" "compress,zstd -3,$t")
        cmds+=("$build/ptwm compress $f -o $tmp/p$t -q -f --threads $t"
               "$build/ptwm decompress $ref -o $tmp/d$t -q -f --threads $t"
               "sh -c '${mk:+mkdir $tmp/z$t && }zstd -3 -T$t -q -f $zin $tmp/z$t'")
        outs+=("$tmp/p$t" "$tmp/d$t" "$tmp/z$t")
    done
    # The floor of a compress: its coded bytes written and fsynced (cp + sync).
    keys+=("decompress,zstd -d + fsync,1" "decompress,cp + fsync,1" "compress,cp coded + fsync,1")
    cmds+=("sh -c '${mk:+mkdir $tmp/zd && }zstd -d -q -f $zref $tmp/zd && sync $tmp/zd$files_of'"
           "sh -c '$cpr $f $tmp/cp && sync $tmp/cp$files_of'"
           "sh -c '$cpr $coded $tmp/cpo && sync $tmp/cpo$files_of'")
    outs+=("$tmp/zd" "$tmp/cp" "$tmp/cpo")
    rm -rf "$tmp/ref" "$tmp/refz"
    "$build/ptwm" compress "$f" -o "$tmp/ref" -q -f --threads 1
    [[ -z $mk ]] || mkdir "$tmp/refz"
    eval "zstd -3 -T1 -q -f $zin $tmp/refz"
    : >"$tmp/proc.txt"
    for ((i = 0; i < proc_runs; i++)); do
        for ((k = 0; k < ${#cmds[@]}; k++)); do
            # Each command writes a new output: the previous one is removed
            # (and the removal written back) untimed, for ptwm and zstd alike.
            rm -rf "${outs[k]}"
            sync
            echo "$k $(eval timed "${cmds[k]}")" >>"$tmp/proc.txt"
        done
    done
    for ((t = 1; t <= threads; t++)); do
        diff -r "$tmp/ref" "$tmp/p$t" >/dev/null ||
            { echo "bench_scaling: $t threads wrote other bytes than one ($name)" >&2; exit 1; }
        diff -r "$f" "$tmp/d$t$back" >/dev/null ||
            { echo "bench_scaling: ROUND TRIP FAILED ($name, $t)" >&2; exit 1; }
    done
    diff -r "$f" "$tmp/zd" >/dev/null || { echo "bench_scaling: zstd round trip failed ($name)" >&2; exit 1; }
    local ref_ptwm ref_zst
    ref_ptwm=$(bytes_of "$tmp/ref")
    ref_zst=$(bytes_of "$tmp/refz")
    # Medians per command, and for ptwm's the paired ratios: the median over
    # rounds of one thread's wall time over this command's in the same round
    # (paired_x), of its time over the floor's, `cp` + fsync of its coded
    # bytes or of the restored file (paired_floor), and over `zstd -d` +
    # fsync (paired_zstd): a shared machine's drift between rounds then falls
    # on both sides of each ratio.
    printf '%s\n' "${keys[@]}" | python3 -c '
import statistics, sys
proc, pre, raw, ptwm_coded, zst_coded, n = sys.argv[1:]
keys = [l.strip() for l in sys.stdin if l.strip()]
runs = {}
for line in open(proc):
    k, w, c = line.split()
    runs.setdefault(int(k), []).append((float(w), float(c)))
def paired(a, b):
    return statistics.median(x[0] / y[0] for x, y in zip(runs[a], runs[b]))
for k, key in enumerate(keys):
    op, tool, t = key.split(",")
    coded = ptwm_coded if ("ptwm" in tool or "coded" in tool) else zst_coded if "zstd" in tool else "0"
    x = floor = zd = ""
    if tool == "ptwm":
        if t != "1":
            x = "%.4f" % paired(keys.index("%s,ptwm,1" % op), k)
        floor = "%.4f" % paired(k, keys.index("compress,cp coded + fsync,1" if op == "compress"
                                               else "decompress,cp + fsync,1"))
        if op == "decompress":
            zd = "%.4f" % paired(k, keys.index("decompress,zstd -d + fsync,1"))
    rows = runs[k]
    print("%s,%s,%s,%s,%s,%s,%.4f,%.4f,%s,%s,%s,%s" % (pre, op, tool, t, raw, coded,
          statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows), n, x,
          floor, zd))' \
        "$tmp/proc.txt" "$name,$dtype,process" "$raw" "$ref_ptwm" "$ref_zst" "$proc_runs" >>"$csv"
    rm -rf "$tmp"/p* "$tmp"/d* "$tmp"/z* "$tmp/cp" "$tmp/cpo" "$tmp/ref" "$tmp/refz"
}

echo "== whole processes ($proc_runs rounds, 1..$threads threads)"
for f in "${files[@]}"; do
    echo "   $(basename "$f")"
    whole_process "$f"
done
python3 "$here/bench/scaling_report.py" "$csv" "$out/scaling_machine.txt" >"$out/SCALING_TABLE.md"
cat "$out/SCALING_TABLE.md"
if [[ ${FULL:-0} == 1 ]]; then
    python3 "$here/bench/put_section.py" "$here/docs/SCALING.md" "bench_scaling.sh" "$out/SCALING_TABLE.md"
fi
