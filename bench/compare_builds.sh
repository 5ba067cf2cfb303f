#!/bin/sh
# Two builds of the library side by side: each build's own bench_suite (the
# same program, which uses only the public header, linked with that build's
# library: a binary built for one header cannot drive a library of another
# whose structs differ) runs in alternating rounds, so machine noise falls on
# both alike. Prints, per dtype and method, coded size and compress/decompress
# speed of each build (medians over the rounds) and the new/old ratios, with
# the codec-rework limits: size within +0.02% and speed within 3% (ratios
# are medians of each round's paired new/old figures).
#
# usage: bench/compare_builds.sh OLD [NEW]
#   OLD, NEW: a git revision of this repository, or a build directory that
#   holds bench_suite (NEW default: build/ of this tree, built if missing).
#   Revisions are checked out and built under a temporary directory.
# environment: ROUNDS (7), RUNS (3 runs a round inside bench_suite),
#   PTWM_CORPUS (default build-corpus, made by scripts/corpus.sh),
#   FILES (a glob of corpus names, default every *.safetensors)
# Exit status 1 when a size limit fails; speed is reported, not enforced
# (a shared machine's noise can exceed 3%).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
rounds=${ROUNDS:-7}
runs=${RUNS:-3}
corpus=${PTWM_CORPUS:-$here/build-corpus}
[ -n "${PTWM_CORPUS:-}" ] || "$here/scripts/corpus.sh" "$corpus" >/dev/null || exit 2

work=$(mktemp -d /tmp/ptwm-compare.XXXXXX)
cleanup() {
    for w in "$work"/src-*; do
        [ -d "$w" ] && git -C "$here" worktree remove --force "$w" >/dev/null 2>&1
    done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# A build directory holding bench_suite for revision or directory $1.
libdir_of() {
    if [ -d "$1" ]; then
        [ -x "$1/bench_suite" ] || { echo "compare_builds: no bench_suite in $1" >&2; exit 2; }
        (cd "$1" && pwd)
        return
    fi
    rev=$(git -C "$here" rev-parse --verify --quiet "$1^{commit}") ||
        { echo "compare_builds: $1 is neither a directory nor a revision" >&2; exit 2; }
    src=$work/src-$rev
    [ -d "$src" ] || git -C "$here" worktree add --detach "$src" "$rev" >/dev/null 2>&1
    "$src/scripts/build.sh" build >"$work/build-$rev.log" 2>&1 ||
        { echo "compare_builds: building $1 failed (log: $work/build-$rev.log)" >&2; exit 2; }
    echo "$src/build"
}

old=$(libdir_of "$1")
if [ $# -ge 2 ]; then
    new=$(libdir_of "$2")
else
    [ -x "$here/build/bench_suite" ] || "$here/scripts/build.sh" build >/dev/null
    new=$here/build
fi

files=$(ls "$corpus"/${FILES:-*}.safetensors 2>/dev/null || ls "$corpus"/${FILES:-*})
[ -n "$files" ] || { echo "compare_builds: no files in $corpus" >&2; exit 2; }

i=1
while [ "$i" -le "$rounds" ]; do
    # Alternate which build goes first.
    if [ $((i % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
        if [ "$which" = old ]; then dir=$old; else dir=$new; fi
        # shellcheck disable=SC2086
        "$dir/bench_suite" --runs "$runs" --no-peers \
            --csv "$work/$which-$i.csv" $files >/dev/null
    done
    i=$((i + 1))
done

python3 - "$work" "$rounds" "$old" "$new" <<'EOF'
import csv, statistics, sys
work, rounds, old, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(which):
    rows = {}
    for i in range(1, rounds + 1):
        with open(f"{work}/{which}-{i}.csv") as f:
            for r in csv.DictReader(f):
                if r["section"] != "mem" or r["file"] != "all":
                    continue
                key = (r["dtype"], r["method"], int(r["threads"]))
                rows.setdefault(key, []).append(r)
    return rows
o, n = load("old"), load("new")
print(f"old: {old}\nnew: {new}\n{rounds} rounds, alternating; speeds are medians (MB/s);"
      " ratio: median over rounds of new/old within the round\n")
print(f"{'dtype':5} {'method':18} {'thr':>3} {'old size%':>9} {'new size%':>9} {'d size':>8}"
      f" {'old comp':>9} {'new comp':>9} {'ratio':>6} {'old dec':>8} {'new dec':>8} {'ratio':>6}")
bad = 0
for key in sorted(o, key=lambda k: (k[0] != "ALL", k)):
    if key not in n:
        continue
    ro, rn = o[key], n[key]
    raw = int(ro[0]["raw_bytes"])
    co, cn = int(ro[0]["coded_bytes"]), int(rn[0]["coded_bytes"])
    dsize = (cn - co) / co * 100 if co else 0.0
    med = lambda rs, c: statistics.median(float(r[c]) for r in rs)
    # Ratios pair each round's two adjacent runs, then take the median: a
    # burst of load elsewhere moves both runs of a round.
    ratio = lambda c: statistics.median(float(b[c]) / float(a[c]) for a, b in zip(ro, rn))
    oc, nc, rc = med(ro, "comp_mbs"), med(rn, "comp_mbs"), ratio("comp_mbs")
    od, nd, rd = med(ro, "decomp_mbs"), med(rn, "decomp_mbs"), ratio("decomp_mbs")
    flag = ""
    if dsize > 0.02:
        flag = "  SIZE FAIL"
        bad += 1
    print(f"{key[0]:5} {key[1]:18} {key[2]:3d} {co / raw * 100:8.2f}% {cn / raw * 100:8.2f}%"
          f" {dsize:+7.3f}% {oc:9.1f} {nc:9.1f} {rc:6.3f} {od:8.1f} {nd:8.1f} {rd:6.3f}{flag}")
print("\nlimits: size within +0.02% (checked), speed ratio >= 0.97 (read the ALL rows; noise on a"
      " shared machine can exceed 3%)")
sys.exit(1 if bad else 0)
EOF
