#!/bin/sh
# A directory of many small shards: `ptwm compress` of it as a whole process,
# two builds in alternating runs so machine noise falls on both alike. Per
# thread count: each build's median wall time and CPU use ((user + sys) /
# wall, above 1 while a second core works), and the median of the paired
# new/old wall-time ratios. The directory is a BF16 file of real weights
# (bench/make_bench_file.py) cut into shards by `ptwm decompress
# --max-shard-size`. Every output is checked to be the same bytes as the
# first build's.
#
# usage: [RUNS=15] [SIZE_MB=100] [SHARD=2MB] [THREADS="1 2"] [BENCH_TMP=/tmp]
#        bench/bench_shards.sh OLD_PTWM [NEW_PTWM]
#   NEW_PTWM default: build/ptwm of this tree. PTWM_CORPUS as for the tests.
# needs: /usr/bin/time (Debian package "time"), python3, diff
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
old=$1
new=${2:-$here/build/ptwm}
runs=${RUNS:-15}
size_mb=${SIZE_MB:-100}
shard=${SHARD:-2MB}
threads=${THREADS:-1 2}
corpus=${PTWM_CORPUS:-$here/build-corpus}
[ -n "${PTWM_CORPUS:-}" ] || "$here/scripts/corpus.sh" "$corpus" >/dev/null || exit 2
for b in "$old" "$new"; do [ -x "$b" ] || { echo "no ptwm binary at $b" >&2; exit 2; }; done
[ -x /usr/bin/time ] || { echo "missing: /usr/bin/time (apt-get install -y time)" >&2; exit 2; }

work=$(mktemp -d "${BENCH_TMP:-/tmp}/ptwm-bench-shards.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

python3 "$here/bench/make_bench_file.py" "$corpus" "$work/model.safetensors" "$size_mb" >/dev/null
"$new" compress "$work/model.safetensors" -o "$work/model.ptwm" -q
"$new" decompress "$work/model.ptwm" -o "$work/shards" --max-shard-size "$shard" -q
rm -rf "$work/model.safetensors" "$work/model.ptwm"
echo "$(ls "$work/shards" | grep -c '\.safetensors$') shards of at most $shard, $(du -sm "$work/shards" | cut -f1) MB;" \
     "$runs alternating runs; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

i=0
while [ "$i" -lt "$runs" ]; do
    for t in $threads; do
        for b in old new; do
            eval bin=\$$b
            rm -rf "$work/out-$b"
            /usr/bin/time -f "$b $t %e %U %S" -a -o "$work/times" \
                "$bin" compress "$work/shards" -o "$work/out-$b" --threads "$t" -q
        done
        diff -r "$work/out-old" "$work/out-new" >/dev/null || { echo "outputs differ" >&2; exit 1; }
    done
    i=$((i + 1))
done

python3 - "$work/times" <<'EOF'
import collections, statistics as st, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, t, wall, user, sys_ = line.split()
    runs[(b, t)].append((float(wall), float(user) + float(sys_)))
print("| threads | old wall s | new wall s | new/old (paired) | old CPU use | new CPU use |")
print("|---------|------------|------------|------------------|-------------|-------------|")
for t in sorted({t for _, t in runs}, key=int):
    o, n = runs[("old", t)], runs[("new", t)]
    ratio = st.median(y[0] / x[0] for x, y in zip(o, n))
    use = lambda r: st.median(c / w for w, c in r if w > 0)
    print("| %7s | %10.3f | %10.3f | %16.2f | %11.2f | %11.2f |" % (
        t, st.median(w for w, _ in o), st.median(w for w, _ in n), ratio, use(o), use(n)))
EOF
