#!/bin/sh
# Disk to disk: `ptwm compress` and `ptwm decompress` as whole processes on one
# safetensors file of real weights, beside `zstd -3` and `zstd -d` and `cp` of
# the restored file, in alternating runs on the same files (medians). Per file
# size and thread count: wall, user and system time and peak resident memory
# of each process. Every size is measured twice: on the corpus's tensors as
# stored (TensorFlow's [kh, kw, in, out] convolutions) and on a PyTorch-layout
# copy ([out, in, kh, kw], bench/pytorch_layout.py). Restored files are checked
# byte for byte.
#
# usage: [RUNS=5] [SIZES="16 128"] [THREADS="1 2"] [PATTERN=.bf16.] [MIN_TENSOR=bytes]
#        [RESULTS=1] [OLD_PTWM=bin] bench/bench_disk.sh [PTWM_BIN]
#   SIZES    MiB of tensor bytes per file (FULL=1: 16 128 512 2048)
#   PATTERN  which corpus files give the tensors (default: the BF16 ones)
#   MIN_TENSOR only the tensors of at least this many bytes (262144: a file
#            shaped like a language model's, where the corpus's own shape is
#            thousands of small tensors)
#   RESULTS=1 put the table into bench/RESULTS.md's "Disk to disk" section
#            (with MIN_TENSOR, between the "bench_disk.sh min_tensor" markers)
#   BENCH_TMP scratch directory (default /tmp); PTWM_CORPUS as for the tests
#   OLD_PTWM  another build's ptwm: its decompress runs too, alternating with
#            this one's in every round (before/after figures from one run), on
#            the file as that build compresses it (its format may be older)
# ptwm's output is fsynced before it is renamed into place (a crash leaves the
# old file or the whole new one); zstd's and cp's are not, so the table also
# gives `zstd -d` and `cp` followed by an fsync of their output ("+ fsync" rows).
# needs: zstd, python3, cp, sync (coreutils)
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/ptwm}
corpus=${PTWM_CORPUS:-$here/build-corpus}
[ -n "${PTWM_CORPUS:-}" ] || "$here/scripts/corpus.sh" "$corpus" || exit 2
if [ "${FULL:-0}" = 1 ]; then sizes=${SIZES:-16 128 512 2048}; else sizes=${SIZES:-16 128}; fi
for tool in zstd python3 cp sync; do
    command -v "$tool" >/dev/null 2>&1 || { echo "missing: $tool" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "no ptwm binary at $bin (build first)" >&2; exit 2; }
work=$(mktemp -d "${BENCH_TMP:-/tmp}/ptwm-bench-disk.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

python3 "$here/bench/pytorch_layout.py" "$corpus" "$work/pt-corpus"
DISK_RUNS_TMP=$work python3 "$here/bench/disk_runs.py" "$bin" "$corpus" "$work/pt-corpus" "$work" \
    "${RUNS:-5}" "$sizes" "${THREADS:-1 2}" "${PATTERN:-.bf16.}" > "$work/table.md"
cat "$work/table.md"
if [ "${RESULTS:-0}" = 1 ]; then
    tag="bench_disk.sh"
    [ -n "${MIN_TENSOR:-}" ] && tag="bench_disk.sh min_tensor"
    "$here/bench/put_section.py" "$here/bench/RESULTS.md" "$tag" "$work/table.md"
    echo "bench/RESULTS.md updated"
fi
