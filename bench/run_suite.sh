#!/usr/bin/env bash
# The benchmark suite, end to end: ptwm beside libzstd, c-blosc, xz and gzip on
# real weights. Regenerates every figure, the plot, bench/RESULTS.md's suite
# section and the README's table.
#
# usage: bench/run_suite.sh [PATH...]
#   PATH: extra safetensors files or checkpoint directories (the files of the
#   corpus are always measured). Environment:
#   QUICK=1        fewer runs and smaller scaling files (a few minutes); results
#                  stay in bench/out and are not copied to docs/
#   RUNS=5         in-memory runs per method (median reported)
#   SLOW_RUNS=3    runs for zstd -19 (slow, and its noise is small)
#   CLI_RUNS=3     whole-process runs per command on corpus files (median)
#   BIG_MB=2048    largest scaling file (MiB of tensor data), via the CLI
#   PTWM_CORPUS    corpus directory (default: build-corpus, built by scripts/corpus.sh)
#   PTWM_BUILD_DIR build tree (default: build-bench; configured and built here)
#   SKIP_BUILD=1   use the binaries already in the build tree
#   BENCH_TMP      scratch directory for the scaling files (default: /tmp)
# Writes bench/out/results.csv (every figure), bench/out/summary.txt,
# bench/out/RESULTS_SECTION.md, bench/out/README_TABLE.md and
# bench/out/bench-size-speed.png; a full run also copies the CSV and the plot
# to docs/bench-results.csv and docs/bench-size-speed.png, puts the section
# into bench/RESULTS.md and the table into README.md (bench/put_section.py).
# Exit status 1 if any round trip failed.
# Needs: cmake, a C compiler, libzstd, libblosc-dev, gnuplot-nox, xz-utils,
# gzip, zstd, time, python3 (scripts/deps.sh --bench installs them).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "$0")/.." && pwd)
corpus=${PTWM_CORPUS:-$here/build-corpus}
build=${PTWM_BUILD_DIR:-$here/build-bench}
out=$here/bench/out
quick=${QUICK:-0}
if [[ $quick == 1 ]]; then
    runs=${RUNS:-2}; slow_runs=${SLOW_RUNS:-1}; cli_runs=${CLI_RUNS:-1}; big_mb=${BIG_MB:-256}
    scale_mb=${SCALE_MB:-1,4,16,64}; cli_mb="1 16 64"
else
    runs=${RUNS:-5}; slow_runs=${SLOW_RUNS:-3}; cli_runs=${CLI_RUNS:-3}; big_mb=${BIG_MB:-2048}
    scale_mb=${SCALE_MB:-1,4,16,64,256}; cli_mb="1 16 128 512"
fi
start=$(date +%s)
stage() { echo "== $* [$(( $(date +%s) - start )) s]"; }

for tool in cmake gnuplot xz gzip zstd /usr/bin/time python3 cmp; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "run_suite: missing $tool; install with: scripts/deps.sh --bench" >&2; exit 2; }
done
pkg-config --exists blosc 2>/dev/null || {
    echo "run_suite: missing libblosc-dev; install with: scripts/deps.sh --bench" >&2; exit 2; }
[[ -n ${PTWM_CORPUS:-} ]] || "$here/scripts/corpus.sh" "$corpus" || exit 2
[[ -d $corpus ]] || { echo "run_suite: no corpus at $corpus (set PTWM_CORPUS)" >&2; exit 2; }

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    stage "build ($build)"
    cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 --target ptwm bench_suite bench_threads >/dev/null
fi
ptwm=$build/ptwm
suite=$build/bench_suite

mkdir -p "$out"
csv=$out/results.csv
rm -f "$csv"
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/ptwm-suite.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
# The largest point holds the file, its .ptwm and the restored copy at once.
avail_mb=$(df -Pm "$tmp" | awk 'NR == 2 { print $4 }')
if (( avail_mb < 3 * big_mb + 512 )); then
    echo "run_suite: $tmp has $avail_mb MB free; the $big_mb MiB point needs $(( 3 * big_mb + 512 )) MB" \
         "(set BENCH_TMP or BIG_MB)" >&2
    exit 2
fi
failed=0

# FILES: a subset of the corpus to measure (a glob), for trying the suite out.
files=(${FILES:-"$corpus"/*.safetensors})
extra=("$@")

# The machine, for the README.
{
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n1) (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p'))"
    echo "cores: $(nproc)"
    echo "memory: $(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GiB"
    echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    echo "compiler: $(cc --version | head -n1)"
    echo "libs: libzstd $(pkg-config --modversion libzstd), c-blosc $(pkg-config --modversion blosc)"
    echo "xz: $(xz --version | head -n1), gzip: $(gzip --version | head -n1)"
    echo "ptwm: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet 2>/dev/null || echo '+changes')"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
    echo "settings: runs $runs, zstd -19 runs $slow_runs, cli runs $cli_runs"
    echo "scaling: $big_mb MiB"
} >"$out/machine.txt"

# ---------------------------------------------------------------------------
stage "in memory: every method on every file and dtype ($runs runs)"
"$suite" --runs "$runs" --slow-runs "$slow_runs" --csv "$csv" "${files[@]}" "${extra[@]}" \
    | tee "$out/suite.txt" || failed=1

# ---------------------------------------------------------------------------
# A whole-process measurement: wall seconds and peak RSS (KiB) of one command.
# Prints "WALL RSS"; fails if the command fails.
timed() {
    # Wall time from bash's microsecond clock (time -v rounds to 10 ms);
    # peak RSS from time -v.
    local tf=$tmp/time.txt t0 t1
    t0=$EPOCHREALTIME
    /usr/bin/time -v -o "$tf" "$@" >/dev/null 2>"$tmp/err.txt" || {
        echo "run_suite: FAILED: $*" >&2; cat "$tmp/err.txt" >&2; return 1; }
    t1=$EPOCHREALTIME
    awk -F': ' -v t0="$t0" -v t1="$t1" '/Maximum resident set size/ { r = $2 }
                END { printf "%.4f %d\n", t1 - t0, r }' "$tf"
}

# Median of the runs of one command: "WALL RSS" (median wall, max RSS).
timed_median() {
    local n=$1; shift
    local i res=()
    local r
    for ((i = 0; i < n; i++)); do r=$(timed "$@") || return 1; res+=("$r"); done
    printf '%s\n' "${res[@]}" | sort -n | awk '{ w[NR] = $1; if ($2 > r) r = $2 }
        END { printf "%.3f %d\n", (NR % 2 ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2), r }'
}

# csv_cli SECTION FILE DTYPE METHOD LEVEL THREADS RAW CODED CWALL CRSS DWALL DRSS RUNS NOTE
# (one row for compress, one for decompress: peak RSS differs)
csv_cli() {
    python3 - "$csv" "$@" <<'EOF'
import sys
csv, sec, f, dt, m, lvl, th, raw, cod, cw, cr, dw, dr, runs, note = sys.argv[1:]
raw, cod, cw, dw = int(raw), int(cod), float(cw), float(dw)
mb = lambda s: raw / s / 1e6 if s > 0 else 0
with open(csv, "a") as fp:
    for phase, w, r in (("compress", cw, cr), ("decompress", dw, dr)):
        if phase == "decompress" and dw <= 0:
            continue
        fp.write(f"{sec},{f},{dt},{m},{lvl},{th},{raw},{cod},{100 * cod / raw:.3f},"
                 f"{mb(cw) if phase == 'compress' else 0:.2f},{mb(dw) if phase == 'decompress' else 0:.2f},"
                 f"{cw if phase == 'compress' else 0:.4f},{dw if phase == 'decompress' else 0:.4f},"
                 f"{r},{runs},{phase}; {note}\n")
EOF
}

# dtype of a file: from the in-memory rows (one dtype group per corpus file).
dtype_of() {
    awk -F, -v f="$(basename "$1")" '$1 == "mem" && $2 == f { print $3; exit }' "$csv"
}

# One peer CLI on one file, whole process: compress, decompress, compare.
peer_cli() { # SECTION FILE NAME LEVEL EXT RUNS COMPRESS-CMD... -- DECOMPRESS-CMD...
    local sec=$1 f=$2 name=$3 lvl=$4 ext=$5 n=$6; shift 6
    local ccmd=() dcmd=()
    while [[ $1 != -- ]]; do ccmd+=("$1"); shift; done; shift; dcmd=("$@")
    local c=$tmp/c.$ext d=$tmp/d.out cres dres
    local io='i=$1 o=$2; shift 2; exec "$@" <"$i" >"$o"'
    cres=$(timed_median "$n" sh -c "$io" sh "$f" "$c" "${ccmd[@]}") || { failed=1; return; }
    dres=$(timed_median "$n" sh -c "$io" sh "$c" "$d" "${dcmd[@]}") || { failed=1; return; }
    if ! cmp -s "$f" "$d"; then echo "run_suite: ROUND TRIP FAILED: $name $lvl on $f" >&2; failed=1; fi
    csv_cli "$sec" "$(basename "$f")" "$(dtype_of "$f")" "$name" "$lvl" 1 "$(stat -c %s "$f")" \
        "$(stat -c %s "$c")" ${cres% *} ${cres#* } ${dres% *} ${dres#* } "$n" \
        "whole process on the file; round trip checked"
    rm -f "$c" "$d"
}

# ptwm CLI on one file: compress to a .ptwm, decompress, compare.
ptwm_cli() { # SECTION FILE THREADS RUNS
    local sec=$1 f=$2 th=$3 n=$4 cres dres
    rm -rf "$tmp/pc" "$tmp/pd"
    cres=$(timed_median "$n" "$ptwm" compress "$f" -o "$tmp/pc" -q -f --threads "$th") || { failed=1; return; }
    # Read once: a large .ptwm is written past the page cache (docs/ARCHITECTURE.md),
    # and the peers' decompress starts from a cached file.
    cat "$tmp/pc/model.ptwm" >/dev/null
    dres=$(timed_median "$n" "$ptwm" decompress "$tmp/pc/model.ptwm" -o "$tmp/pd" -q -f --threads "$th") \
        || { failed=1; return; }
    if ! cmp -s "$f" "$tmp/pd/$(basename "$f")"; then
        echo "run_suite: ROUND TRIP FAILED: ptwm CLI on $f" >&2; failed=1
    fi
    csv_cli "$sec" "$(basename "$f")" "$(dtype_of "$f")" ptwm-microscale "" "$th" "$(stat -c %s "$f")" \
        "$(stat -c %s "$tmp/pc/model.ptwm")" ${cres% *} ${cres#* } ${dres% *} ${dres#* } "$n" \
        "whole process on the file; round trip checked"
    rm -rf "$tmp/pc" "$tmp/pd"
}

# ---------------------------------------------------------------------------
stage "whole files: xz -6, gzip -6, zstd -3, zstd -19 and the ptwm CLI"
for f in "${files[@]}" "${extra[@]}"; do
    [[ -f $f ]] || continue   # checkpoint directories: in memory only
    echo "   $(basename "$f")"
    peer_cli whole "$f" xz 6 xz 1 xz -6 -T1 -c -- xz -d -c
    peer_cli whole "$f" gzip 6 gz 1 gzip -6 -c -- gzip -d -c
    peer_cli cli "$f" zstd-cli 3 zst "$cli_runs" zstd -3 -T1 -q -c -- zstd -d -q -c
    peer_cli cli "$f" zstd-cli 19 zst 1 zstd -19 -T1 -q -c -- zstd -d -q -c
    ptwm_cli cli "$f" 1 "$cli_runs"
    ptwm_cli cli "$f" 2 "$cli_runs"
done

# ---------------------------------------------------------------------------
stage "scaling in memory: BF16 tensors repeated to $scale_mb MiB"
"$suite" --runs "$runs" --csv "$csv" --scale "$scale_mb" "$corpus/faceres-deep.bf16.safetensors" \
    | tee "$out/scale.txt" || failed=1

stage "scaling as whole processes: mixed BF16/F16/F32/U8 files, peak memory"
mix=("$corpus/faceres-deep.bf16.safetensors" "$corpus/movenet-thunder.f16.safetensors"
     "$corpus/faceres-deep.f32.safetensors" "$corpus/handtrack.u8.safetensors")
df -h "$tmp" | tail -n1 | awk '{ print "   scratch space free: " $4 }'
for mb in $cli_mb "$big_mb"; do
    big=$tmp/repeat-${mb}MB.safetensors
    "$suite" --make "$big" "$mb" "${mix[@]}" >/dev/null
    echo "   $(basename "$big"): $(stat -c %s "$big") bytes"
    # Threads 1 and 2 below the largest size; the largest with 2 (the default: all cores).
    if [[ $mb != "$big_mb" ]]; then ptwm_cli scale_cli "$big" 1 1; fi
    ptwm_cli scale_cli "$big" 2 1
    peer_cli scale_cli "$big" zstd-cli 3 zst 1 zstd -3 -T1 -q -c -- zstd -d -q -c
    rm -f "$big"
done
sed -i 's/^scale_cli,repeat-\([0-9]*\)MB.safetensors,,/scale_cli,repeat-\1MB.safetensors,MIXED,/' "$csv"

# ---------------------------------------------------------------------------
stage "threads: 1..N in memory and as whole processes (docs/SCALING.md)"
PTWM_BUILD_DIR=$build PTWM_CORPUS=$corpus BENCH_TMP=$tmp RUNS=$(( runs > 3 ? runs : 3 )) \
    PROC_RUNS=$(( cli_runs > 3 ? cli_runs : 3 )) FULL=$(( quick == 1 ? 0 : 1 )) \
    "$here/bench/bench_scaling.sh" | tee "$out/scaling.txt" || failed=1

# ---------------------------------------------------------------------------
stage "plot and summary"
elapsed=$(( $(date +%s) - start ))
echo "elapsed: ${elapsed} s" >>"$out/machine.txt"
python3 "$here/bench/suite_report.py" "$csv" "$out" "$quick" "repeat-${big_mb}MB.safetensors"

gnuplot -e "csv='$csv'; png='$out/bench-size-speed.png'" "$here/bench/plot.gp"

if [[ $quick != 1 ]]; then
    cp "$csv" "$here/docs/bench-results.csv"
    cp "$out/bench-size-speed.png" "$here/docs/bench-size-speed.png"
    "$here/bench/put_section.py" "$here/bench/RESULTS.md" run_suite.sh "$out/RESULTS_SECTION.md"
    "$here/bench/put_section.py" "$here/README.md" "run_suite.sh summary" "$out/README_TABLE.md"
    echo "copied to docs/bench-results.csv, docs/bench-size-speed.png; bench/RESULTS.md and README.md updated"
fi
echo "elapsed: $(( $(date +%s) - start )) s"
if [[ $failed != 0 ]]; then
    echo "run_suite: SOME ROUND TRIPS OR COMMANDS FAILED (see above)" >&2
    exit 1
fi
