#!/usr/bin/env bash
# The benchmark suite, end to end: ptwm beside libzstd, c-blosc, xz and gzip on
# real weights. Regenerates every figure, the plot and the README section.
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
# bench/out/README_SECTION.md, bench/out/bench-size-speed.png; a full run also
# copies them to docs/bench-results.csv, docs/bench-size-speed.png and
# bench/README_SECTION.md. Exit status 1 if any round trip failed.
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
    cmake --build "$build" -j2 --target ptwm bench_suite >/dev/null
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
stage "plot and summary"
elapsed=$(( $(date +%s) - start ))
echo "elapsed: ${elapsed} s" >>"$out/machine.txt"
python3 - "$csv" "$out" "$quick" "repeat-${big_mb}MB.safetensors" <<'EOF'
import csv, sys
path, out, quick, bigfile = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
rows = list(csv.DictReader(open(path)))
machine = dict(l.rstrip("\n").split(": ", 1) for l in open(out + "/machine.txt") if ": " in l)
for r in rows:
    for k in ("size_pct", "comp_mbs", "decomp_mbs", "comp_s", "decomp_s"):
        r[k] = float(r[k])
    for k in ("raw_bytes", "coded_bytes", "peak_rss_kb", "threads"):
        r[k] = int(r[k])

def name(r):
    n = r["method"] + (" -" + r["level"] if r["method"].startswith("zstd") or r["method"] in ("xz", "gzip")
                       else (" " + r["level"] if r["level"] else ""))
    if r["method"].startswith("ptwm"):
        n += f", {r['threads']} thread" + ("s" if r["threads"] > 1 else "")
    return n

# Whole-file references per dtype: sizes summed over the corpus files of it.
whole = {}
for r in rows:
    if r["section"] == "whole" and r["note"].startswith("compress"):
        w = whole.setdefault((r["dtype"], r["method"], r["level"]), [0, 0, 0.0, 0.0])
        w[0] += r["raw_bytes"]; w[1] += r["coded_bytes"]; w[2] += r["comp_s"]
for r in rows:
    if r["section"] == "whole" and r["note"].startswith("decompress"):
        whole[(r["dtype"], r["method"], r["level"])][3] += r["decomp_s"]
# ...also as rows of the CSV (file "all"), for the plot.
with open(path, "a", newline="") as fp:
    wr = csv.writer(fp, lineterminator="\n")
    for (d, m, l), (raw, cod, cs, ds) in sorted(whole.items()):
        wr.writerow(["whole", "all", d, m, l, 1, raw, cod, f"{100 * cod / raw:.3f}",
                     f"{raw / cs / 1e6 if cs else 0:.2f}", f"{raw / ds / 1e6 if ds else 0:.2f}",
                     f"{cs:.3f}", f"{ds:.3f}", 0, 1, "sum over files; whole process"])

zipnn = {"BF16": 67.7, "F32": 83.9, "F16": 79.0, "U8": 100.0}  # U8: stored raw
lines = []
def emit(s=""):
    lines.append(s)

dtypes = [d for d in ("BF16", "F16", "F32", "U8") if any(r["section"] == "mem" and r["file"] == "all"
          and r["dtype"] == d for r in rows)]
dtypes += sorted({r["dtype"] for r in rows if r["section"] == "mem" and r["file"] == "all"
                  and r["dtype"] not in dtypes and r["dtype"] != "ALL"})
tables = []
for d in dtypes:
    mem = [r for r in rows if r["section"] == "mem" and r["file"] == "all" and r["dtype"] == d]
    floor = [r for r in rows if r["section"] == "floor" and r["file"] == "all" and r["dtype"] == d]
    ours = [r for r in mem if r["method"] == "ptwm-microscale"]
    if not ours:
        continue
    o1 = next(r for r in ours if r["threads"] == 1)
    o2 = next((r for r in ours if r["threads"] == 2), None)
    peers = [r for r in mem if not r["method"].startswith("ptwm")]
    # Similar speed: decompress within a factor of 2 of ptwm's (1 thread).
    similar = [r for r in peers if o1["decomp_mbs"] / 2 <= r["decomp_mbs"] <= o1["decomp_mbs"] * 2]
    best_sim = min(similar, key=lambda r: r["coded_bytes"]) if similar else \
        min(peers, key=lambda r: abs(r["decomp_mbs"] - o1["decomp_mbs"]))
    best_all = min(peers, key=lambda r: r["coded_bytes"])
    ref = [(k, v) for k, v in whole.items() if k[0] == d]
    best_whole = min(ref, key=lambda kv: kv[1][1] / kv[1][0]) if ref else None
    raw = o1["raw_bytes"]
    zr = next((r for r in mem if r["method"] == "zstd" and r["level"] == "3"), None)
    # Speeds against libzstd -3 in the same run: steadier than MB/s on a shared machine.
    vs = lambda r: (f"{r['comp_mbs'] / zr['comp_mbs']:.2f}x compress, {r['decomp_mbs'] / zr['decomp_mbs']:.2f}x "
                    "decompress speed of libzstd -3" if zr and zr["comp_mbs"] and zr["decomp_mbs"] else "")
    t = [("ptwm default (microscale), 1 thread", o1["size_pct"], o1["comp_mbs"], o1["decomp_mbs"], vs(o1))]
    if o2:
        t.append(("ptwm default (microscale), 2 threads", o2["size_pct"], o2["comp_mbs"], o2["decomp_mbs"],
                  vs(o2)))
    t.append((f"best peer at similar decompress speed: {name(best_sim)}", best_sim["size_pct"],
              best_sim["comp_mbs"], best_sim["decomp_mbs"], ""))
    t.append((f"best peer overall (in memory): {name(best_all)}", best_all["size_pct"],
              best_all["comp_mbs"], best_all["decomp_mbs"], ""))
    if best_whole:
        (_, m, l), (wr, wc, cs, ds) = best_whole
        t.append((f"best whole-file reference: {m} -{l}", 100 * wc / wr, wr / cs / 1e6 if cs else 0,
                  wr / ds / 1e6 if ds else 0, "whole file, CLI process"))
    if zr:
        t.append(("libzstd -3 (reference)", zr["size_pct"], zr["comp_mbs"], zr["decomp_mbs"], ""))
    if floor:
        t.append(("entropy floor, order 0 per field", floor[0]["size_pct"], None, None,
                  "computed from the files; not a bound for per-chunk or context coding"))
    if d in zipnn:
        t.append(("ZipNN (published figure)", zipnn[d], None, None,
                  ("stored raw; " if d == "U8" else "") + "from elsewhere, not measured here"))
    tables.append((d, raw, len({r['file'] for r in rows if r['section'] == 'mem' and r['dtype'] == d
                                and r['file'] != 'all'}), t))

def fmt(v, f):
    return "" if v is None else f.format(v)

# Printed summary
emit("Summary (in memory unless marked; MB/s = 10^6 raw bytes per second; median of runs)")
for d, raw, nf, t in tables:
    emit(f"\n{d}: {nf} file(s), {raw / 1e6:.1f} MB raw")
    emit(f"  {'method':<62} {'size':>8} {'comp MB/s':>10} {'dec MB/s':>10}  note")
    for m, s, c, de, note in t:
        emit(f"  {m:<62} {fmt(s, '{:7.2f}%'):>8} {fmt(c, '{:10.1f}'):>10} {fmt(de, '{:10.1f}'):>10}  {note}")
cli = [r for r in rows if r["section"] == "cli"]
if cli:
    emit("\nWhole process (CLI), summed over the corpus files: wall seconds, largest peak RSS")
    agg = {}
    for r in cli:
        k = (r["method"], r["level"], r["threads"])
        a = agg.setdefault(k, {"raw": 0, "cod": 0, "cs": 0.0, "ds": 0.0, "cr": 0, "dr": 0})
        if r["note"].startswith("compress"):
            a["raw"] += r["raw_bytes"]; a["cod"] += r["coded_bytes"]; a["cs"] += r["comp_s"]
            a["cr"] = max(a["cr"], r["peak_rss_kb"])
        else:
            a["ds"] += r["decomp_s"]; a["dr"] = max(a["dr"], r["peak_rss_kb"])
    emit(f"  {'command':<28} {'size':>8} {'comp s':>8} {'dec s':>8} {'comp RSS':>10} {'dec RSS':>10}")
    for (m, l, th), a in agg.items():
        label = f"{m} -{l}" if l else f"{m} --threads {th}"
        emit(f"  {label:<28} {100 * a['cod'] / a['raw']:7.2f}% {a['cs']:8.2f} {a['ds']:8.2f} "
             f"{a['cr'] / 1024:8.1f}MB {a['dr'] / 1024:8.1f}MB")
sc = [r for r in rows if r["section"] == "scale_cli"]
if sc:
    emit("\nScaling, whole process on repeated mixed tensors: throughput and peak RSS")
    emit(f"  {'file':<28} {'command':<24} {'phase':<11} {'MB/s':>8} {'wall s':>8} {'peak RSS':>10}")
    for r in sc:
        ph = r["note"].split(";")[0]
        label = f"{r['method']} -{r['level']}" if r["level"] else f"{r['method']} t{r['threads']}"
        s = r["comp_s"] if ph == "compress" else r["decomp_s"]
        v = r["comp_mbs"] if ph == "compress" else r["decomp_mbs"]
        emit(f"  {r['file']:<28} {label:<24} {ph:<11} {v:8.1f} {s:8.2f} {r['peak_rss_kb'] / 1024:8.1f}MB")
sm = [r for r in rows if r["section"] == "scale_mem"]
if sm:
    emit("\nScaling in memory (BF16 tensors repeated): MB/s against size")
    emit(f"  {'size':<20} {'method':<24} {'comp MB/s':>10} {'dec MB/s':>10}")
    for r in sm:
        label = f"{r['method']} -{r['level']}" if r["level"] else f"{r['method']} t{r['threads']}"
        emit(f"  {r['file']:<20} {label:<24} {r['comp_mbs']:10.1f} {r['decomp_mbs']:10.1f}")
# The plot's dtypes and floors.
with open(out + "/floors.gp", "w") as fp:
    fp.write(f"dtypes = '{' '.join(t[0] for t in tables)}'\n")
    for r in rows:
        if r["section"] == "floor" and r["file"] == "all" and r["method"] == "entropy-order0":
            fp.write(f"floor_{r['dtype']} = {r['size_pct']:.3f}\n")
    for (d, m, l), (raw, cod, cs, ds) in sorted(whole.items()):
        fp.write(f"{m}_{d} = {100 * cod / raw:.3f}\n")
summary = "\n".join(lines) + "\n"
open(out + "/summary.txt", "w").write(summary)
print(summary)

# README section
md = []
md.append("## Performance\n")
md.append("Lossless size and speed on the real weights of the corpus (`tests/corpus/README.md`: 11 safetensors files of "
          "trained networks), each dtype's files together, measured in memory on one machine in one run. "
          "Size is the coded bytes as a percentage of the raw tensor bytes; MB/s is 10^6 raw bytes a "
          "second; figures are medians of several runs, taken alternately so that load on the machine "
          "falls on every method alike. Every ptwm figure comes from a round trip checked byte for "
          "byte. \"Similar speed\" means decompressing within a factor of 2 of ptwm's speed.\n")
for d, raw, nf, t in tables:
    md.append(f"**{d}** ({nf} file{'s' if nf > 1 else ''}, {raw / 1e6:.1f} MB)\n")
    md.append("| method | size | compress MB/s | decompress MB/s | note |")
    md.append("|---|---:|---:|---:|---|")
    for m, s, c, de, note in t:
        md.append(f"| {m} | {fmt(s, '{:.1f}%')} | {fmt(c, '{:.0f}')} | {fmt(de, '{:.0f}')} | {note} |")
    md.append("")
md.append("ZipNN figures are from elsewhere (published for these files), not measured by this suite.\n")
md.append("![size against decompress speed](docs/bench-size-speed.png)\n")
md.append("Every figure of the run (each file, each method and level, 1 and 2 threads, c-blosc, xz, "
          "gzip, whole-process `ptwm compress`/`decompress` against `zstd -3`/`-19` with peak memory, "
          f"scaling to {machine.get('scaling', '?')}) is in [docs/bench-results.csv](docs/bench-results.csv); "
          "[bench/README.md](bench/README.md) explains each.\n")
# Scaling: throughput against size and threads (in memory), peak memory
# against size (whole processes).
sm = [r for r in rows if r["section"] == "scale_mem"]
if sm:
    md.append("Against size and threads, in memory (faceres-deep's BF16 tensors repeated; compress / "
              "decompress MB/s):\n")
    md.append("| size | ptwm, 1 thread | ptwm, 2 threads | libzstd -3 |")
    md.append("|---|---:|---:|---:|")
    for f in dict.fromkeys(r["file"] for r in sm):
        cell = {}
        for r in sm:
            if r["file"] == f:
                k = "z" if r["method"] == "zstd" else r["threads"]
                cell[k] = f"{r['comp_mbs']:.0f} / {r['decomp_mbs']:.0f}"
        md.append(f"| {f.replace('repeat-', '').replace('MB', ' MiB')} | {cell.get(1, '')} | "
                  f"{cell.get(2, '')} | {cell.get('z', '')} |")
    md.append("")
    md.append("Two-thread figures vary from run to run on a shared machine: when the second core is "
              "slowed by other work for seconds at a time, a two-thread median can fall below the "
              "one-thread one (on the 2-core machine below, repeated runs of one size ranged over "
              "a factor of 3 on two threads and within 5% on one). The sizes from 64 MiB are also "
              "hit by how that machine, a virtual one, backs its memory: each compress writes a "
              "fresh image, and memory the host had not backed took about 2.5 s a GB to touch "
              "(12 GB: 30 s of system time), against 0.4 s a GB for fresh pages it had backed. "
              "Right after 12 GB had been touched once, 256 MiB of faceres-deep.f32's tensors "
              "compressed at 4346 MB/s on two threads against 2427 on one; the host takes freed "
              "memory back, and later runs of this table's 256 MiB case ranged from 717 to 3275 "
              "MB/s on one or two threads.\n")
sc = [r for r in rows if r["section"] == "scale_cli"]
if sc:
    md.append("Peak resident memory against file size, whole processes (`/usr/bin/time -v`; mixed "
              "BF16/F16/F32/U8 corpus tensors repeated):\n")
    md.append("| file | `ptwm compress` (2 threads) | `ptwm decompress` (2 threads) | `zstd -3` | `zstd -d` |")
    md.append("|---|---:|---:|---:|---:|")
    for f in dict.fromkeys(r["file"] for r in sc):
        cell = {}
        for r in sc:
            if r["file"] != f:
                continue
            ph = r["note"].split(";")[0]
            if r["method"].startswith("ptwm"):
                # the largest thread count measured at this size
                k = ("p", ph)
                if k in cell and cell[k][0] > r["threads"]:
                    continue
                cell[k] = (r["threads"], r["peak_rss_kb"])
            else:
                cell[("z", ph)] = (1, r["peak_rss_kb"])
        g = lambda k: f"{cell[k][1] / 1024:.0f} MB" if k in cell else ""
        md.append(f"| {f.replace('repeat-', '').replace('MB.safetensors', ' MiB')} | {g(('p', 'compress'))} | "
                  f"{g(('p', 'decompress'))} | {g(('z', 'compress'))} | {g(('z', 'decompress'))} |")
    md.append("")
big = [r for r in rows if r["section"] == "scale_cli" and r["file"] == bigfile]
if big:
    gib = big[0]["raw_bytes"] / 2**30
    md.append(f"Whole processes on a {f'{gib:.1f} GiB' if gib >= 1 else f'{gib * 1024:.0f} MiB'} safetensors file (corpus tensors "
              "of all four dtypes repeated), wall time and peak resident memory (`/usr/bin/time -v`):\n")
    md.append("| command | size | compress | decompress |")
    md.append("|---|---:|---:|---:|")
    pairs = {}
    for r in big:
        lab = (f"`zstd -{r['level']}`" if r["method"].startswith("zstd")
               else f"`ptwm compress/decompress --threads {r['threads']}`")
        ph = r["note"].split(";")[0]
        pairs.setdefault(lab, {})[ph] = r
    for lab, p in pairs.items():
        c, d_ = p.get("compress"), p.get("decompress")
        cell = lambda r, ph: (f"{r[ph + '_s']:.1f} s, {r[('comp' if ph == 'comp' else 'decomp') + '_mbs']:.0f} MB/s, "
                              f"{r['peak_rss_kb'] / 1024:.0f} MB peak" if r else "")
        md.append(f"| {lab} | {c['size_pct']:.1f}% | {cell(c, 'comp')} | {cell(d_, 'decomp')} |")
    md.append("")
md.append(f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
          f"{machine.get('memory', '?')} RAM, {machine.get('os', '?')}, {machine.get('compiler', '?')}, "
          f"{machine.get('libs', '')}; shared with other work while measuring (load average "
          f"{machine.get('load at start', '?').split(' (')[0]} at the start), so the speeds are medians and "
          f"best compared within the run. Run of {machine.get('date', '?')}, ptwm {machine.get('ptwm', '?')}; "
          f"the whole suite took {machine.get('elapsed', '?')}.\n")
md.append("Reproduce (one command; installs the peers from Debian packages, builds, runs everything):\n")
md.append("```sh\nscripts/deps.sh --bench && bench/run_suite.sh\n```\n")
open(out + "/README_SECTION.md", "w").write("\n".join(md))
EOF

gnuplot -e "csv='$csv'; png='$out/bench-size-speed.png'" "$here/bench/plot.gp"

if [[ $quick != 1 ]]; then
    cp "$csv" "$here/docs/bench-results.csv"
    cp "$out/bench-size-speed.png" "$here/docs/bench-size-speed.png"
    cp "$out/README_SECTION.md" "$here/bench/README_SECTION.md"
    echo "copied to docs/bench-results.csv, docs/bench-size-speed.png, bench/README_SECTION.md"
fi
echo "elapsed: $(( $(date +%s) - start )) s"
if [[ $failed != 0 ]]; then
    echo "run_suite: SOME ROUND TRIPS OR COMMANDS FAILED (see above)" >&2
    exit 1
fi
