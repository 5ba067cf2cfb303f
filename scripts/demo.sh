#!/usr/bin/env bash
# The main job on the bundled sample: install what is missing, build, then
# compress a real network's weights, decompress them, check the result is
# byte-identical and every CRC and hash holds, and print ratio and speed.
# Usage: scripts/demo.sh [FILE.safetensors]   (default: samples/posenet.bf16.safetensors)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"
"$here/scripts/build.sh" build
ptwm="$here/build/ptwm"
src=${1:-$here/samples/posenet.bf16.safetensors}
if [[ $# -eq 0 ]]; then
  (cd "$here/samples" && sha256sum -c --quiet SHA256SUMS)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== inspect"
listing=$("$ptwm" inspect "$src")
grep '^total' <<< "$listing"
head -n 4 <<< "$listing"
echo "== compress"
"$ptwm" compress "$src" -o "$work/packed"
echo "== decompress"
"$ptwm" decompress "$work/packed" -o "$work/restored"
echo "== verify"
"$ptwm" verify "$work/packed"
name=$(basename "$src")
if cmp -s "$src" "$work/restored/$name"; then
  echo "round trip: byte-identical ($(sha256sum < "$src" | cut -c1-16)...)"
else
  echo "round trip: FILES DIFFER" >&2
  exit 1
fi
raw=$(stat -c %s "$src")
packed=$(du -cb "$work/packed"/*.ptwm | tail -n1 | cut -f1)
awk -v r="$raw" -v p="$packed" 'BEGIN { printf "size: %d -> %d bytes (%.1f%% of original)\n", r, p, 100 * p / r }'
echo "== speed (in memory, single thread, beside zstd -3 on the same tensors)"
"$ptwm" bench "$src" --threads 1
