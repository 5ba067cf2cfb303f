#!/bin/sh
# Whole-checkpoint benchmark: `ptwm compress` and `ptwm decompress` as whole
# processes on Hugging Face checkpoint directories built by repeating real
# corpus tensors across shards, beside `zstd -3 -T0` on the same files in the
# same run. Reports wall time, throughput and peak resident memory (from
# /usr/bin/time -v) and checks every restored file byte for byte.
#
# usage: [SHARD_MB=100] [TENSOR_MB=8] bench/bench_checkpoint.sh [PTWM_BIN] [SIZE_MB...]
#   default: build/ptwm, sizes 250 and 1100 (memory must stay flat between them)
# needs: /usr/bin/time (Debian package "time"), zstd, python3, cmp
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/ptwm}
[ $# -gt 0 ] && shift
sizes=${*:-250 1100}
corpus=${PTWM_CORPUS:-$here/build-corpus}
[ -n "${PTWM_CORPUS:-}" ] || "$here/scripts/corpus.sh" "$corpus" || exit 2
shard_mb=${SHARD_MB:-100}
tensor_mb=${TENSOR_MB:-8}

for tool in /usr/bin/time zstd python3 cmp; do
    command -v "$tool" >/dev/null 2>&1 || { echo "missing: $tool (apt-get install -y time zstd python3)" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "no ptwm binary at $bin (build first)" >&2; exit 2; }
[ -d "$corpus" ] || { echo "no corpus at $corpus (set PTWM_CORPUS)" >&2; exit 2; }

work=$(mktemp -d /tmp/ptwm-bench-ckpt.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

# A checkpoint of about SIZE_MB: the tensors of four corpus files (BF16, F16,
# F32, U8) repeated under new names, packed into SHARD_MB shards with an index,
# plus a config.json. Prints "shards raw_bytes tensors".
make_checkpoint() {
    python3 - "$corpus" "$1" "$2" "$shard_mb" "$tensor_mb" "$here/bench" <<'EOF'
import json, os, struct, sys
corpus, out, size_mb, shard_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tensor_mb = int(sys.argv[5])
sys.path.insert(0, sys.argv[6])
from make_bench_file import read_tensors
files = ["faceres-deep.bf16.safetensors", "movenet-thunder.f16.safetensors",
         "posenet.f32.safetensors", "handtrack.u8.safetensors"]
tensors = []  # (name, dtype, shape, bytes)
for f in files:
    tensors += [(f.split(".")[0] + "." + name, dt, shape, data)
                for name, dt, shape, data in read_tensors(os.path.join(corpus, f))]
# Real checkpoints hold tensors of megabytes; the corpus networks are small, so
# consecutive tensors of one dtype are joined into 1-D tensors of at least
# TENSOR_MB (the bytes stay real weights). TENSOR_MB=0 keeps the corpus tensors.
if tensor_mb > 0:
    width = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1}
    merged, pending = [], {}
    for name, dt, shape, data in tensors:
        buf = pending.setdefault(dt, [])
        buf.append(data)
        if sum(map(len, buf)) >= tensor_mb << 20:
            blob = b"".join(buf)
            merged.append(("%s.block%d" % (dt.lower(), len(merged)), dt, [len(blob) // width[dt]], blob))
            pending[dt] = []
    for dt, buf in pending.items():
        if buf:
            blob = b"".join(buf)
            merged.append(("%s.block%d" % (dt.lower(), len(merged)), dt, [len(blob) // width[dt]], blob))
    tensors = merged
target, limit = size_mb << 20, shard_mb << 20
os.makedirs(out)
shards, cur, cur_size, total, rep = [], [], 0, 0, 0
while total < target:
    for name, dt, shape, data in tensors:
        if total >= target:
            break
        if cur and cur_size + len(data) > limit:
            shards.append(cur); cur, cur_size = [], 0
        cur.append(("layers.%d.%s" % (rep, name), dt, shape, data))
        cur_size += len(data); total += len(data)
    rep += 1
if cur: shards.append(cur)
weight_map = {}
for i, shard in enumerate(shards):
    fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
    h, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, data in shard:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data); weight_map[name] = fname
    hj = json.dumps(h, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(out, fname), "wb") as fh:
        fh.write(struct.pack("<Q", len(hj))); fh.write(hj)
        for t in shard: fh.write(t[3])
with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh, indent=2, sort_keys=True)
    fh.write("\n")
with open(os.path.join(out, "config.json"), "w") as fh:
    fh.write('{"architectures": ["Bench"], "shards": %d}\n' % len(shards))
print(len(shards), total, len(weight_map))
EOF
}

# Run a command under /usr/bin/time -v; prints "wall_seconds peak_rss_kib cpu_seconds".
timed() {
    /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>"$work/err.txt" || {
        cat "$work/err.txt" >&2; echo "FAILED: $*" >&2; exit 1; }
    awk '/Elapsed \(wall clock\)/ { n = split($NF, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i] }
         /Maximum resident set size/ { r = $NF }
         /User time \(seconds\)|System time \(seconds\)/ { c += $NF }
         END { printf "%.2f %d %.2f\n", s, r, c }' "$work/time.txt"
}

du_bytes() { du -sb "$1" | cut -f1; }

row() {  # tool op wall rss_kib cpu raw_bytes out_bytes
    awk -v tool="$1" -v op="$2" -v wall="$3" -v rss="$4" -v cpu="$5" -v raw="$6" -v out="$7" 'BEGIN {
        printf "| %7.1f | %-12s | %-10s | %7.2f | %7.2f | %8.1f | %8.1f | %7.2f%% |\n", raw / 1e6,
               tool, op, wall, cpu, raw / 1e6 / (wall > 0 ? wall : 1e-9), rss / 1024, 100 * out / raw }'
}

echo "ptwm checkpoint benchmark: $(nproc) cores, shards of ${shard_mb} MiB, tensors of >= ${tensor_mb} MiB (TENSOR_MB), $("$bin" --version)"
echo
echo "| MB raw  | tool         | op         | wall s  | cpu s   | MB/s     | peak MiB | output  |"
echo "|---------|--------------|------------|---------|---------|----------|----------|---------|"
for mb in $sizes; do
    src="$work/hf-$mb"
    info=$(make_checkpoint "$src" "$mb")
    raw=$(cat "$src"/model-*.safetensors | wc -c)
    set -- $(timed "$bin" compress "$src" -o "$work/pt" -q)
    row "ptwm" "compress" "$1" "$2" "$3" "$raw" "$(du_bytes "$work/pt")"
    # Read once: large shards are written past the page cache, zstd's are not.
    cat "$work/pt"/* >/dev/null
    set -- $(timed "$bin" decompress "$work/pt" -o "$work/back" -q)
    row "ptwm" "decompress" "$1" "$2" "$3" "$raw" "$(du_bytes "$work/back")"
    for f in "$src"/*; do cmp "$f" "$work/back/$(basename "$f")" || { echo "MISMATCH $f" >&2; exit 1; }; done
    [ "$(ls "$src" | wc -l)" -eq "$(ls "$work/back" | wc -l)" ] || { echo "file count differs" >&2; exit 1; }
    rm -rf "$work/pt" "$work/back"
    mkdir "$work/z" "$work/zback"
    set -- $(timed zstd -3 -T0 -q "$src"/model-*.safetensors --output-dir-flat "$work/z")
    row "zstd -3 -T0" "compress" "$1" "$2" "$3" "$raw" "$(du_bytes "$work/z")"
    set -- $(timed zstd -d -q "$work/z"/*.zst --output-dir-flat "$work/zback")
    row "zstd -d" "decompress" "$1" "$2" "$3" "$raw" "$(du_bytes "$work/zback")"
    rm -rf "$work/z" "$work/zback" "$src"
    echo "|         | $(echo $info | cut -d' ' -f1) shards, $(echo $info | cut -d' ' -f3) tensors; every file restored byte for byte | | | | | | |"
done
echo
echo "output = bytes of the whole output directory / bytes of the source shard files;"
echo "cpu = user + system seconds; peak = maximum resident set size (/usr/bin/time -v)."
echo "The machine may be shared: compare ptwm with zstd rows of the same size."
