#!/usr/bin/env python3
"""Partitioned compression on Dask (docs/SCALE.md): wall time of compressing a
multi-shard checkpoint of real weights in one process and on a LocalCluster
of 1 and 2 worker processes (one part per task, ptwm threads 1 in each), runs
alternating, medians; then, on paper, what N machines give: the bytes of the
largest part (the plan balances bytes) over one worker's measured speed, plus
assembly (which reads every shard once to check its hash).

The checkpoint: bench/make_bench_file.py's file of SIZE_MB of corpus BF16
tensors, cut into SHARD_MB Hugging Face shards. Every result is checked
against the one-process directory, byte for byte.

usage: bench/bench_parts.py [SIZE_MB=512] [SHARD_MB=32] [RUNS=3]
needs: the built library (PTWM_LIBRARY or build/libptwm.so), the corpus
(PTWM_CORPUS or build-corpus/, scripts/corpus.sh), python3-distributed."""

from __future__ import annotations

import filecmp
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
os.environ.setdefault("PTWM_LIBRARY", os.path.join(REPO, "build", "libptwm.so"))

import ptwm  # noqa: E402
from ptwm import distributed  # noqa: E402


def same_tree(a: str, b: str) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only:
        return False
    _, bad, errs = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not bad and not errs and all(same_tree(os.path.join(a, d), os.path.join(b, d))
                                        for d in cmp.common_dirs)


def make_checkpoint(work: str, size_mb: int, shard_mb: int) -> str:
    corpus = os.environ.get("PTWM_CORPUS", os.path.join(REPO, "build-corpus"))
    flat = os.path.join(work, "flat.safetensors")
    subprocess.run([sys.executable, os.path.join(HERE, "make_bench_file.py"), corpus, flat,
                    str(size_mb)], check=True)
    packed, hf = os.path.join(work, "packed"), os.path.join(work, "hf")
    ptwm.compress_checkpoint(flat, packed, max_shard_size=shard_mb << 20)
    ptwm.decompress_checkpoint(packed, hf, max_shard_size=shard_mb << 20)
    shutil.rmtree(packed)
    os.unlink(flat)
    return hf


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    size_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    shard_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    from distributed import Client, LocalCluster
    work = tempfile.mkdtemp(prefix="ptwm-bench-parts-")
    try:
        src = make_checkpoint(work, size_mb, shard_mb)
        raw = sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src))
        nshards = sum(f.endswith(".safetensors") for f in os.listdir(src))
        ref = os.path.join(work, "ref")
        ptwm.compress_checkpoint(src, ref, threads=1)
        clusters = {w: LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                    dashboard_address=":0", silence_logs=logging.CRITICAL)
                    for w in (1, 2)}
        clients = {w: Client(c) for w, c in clusters.items()}
        times: dict = {"one process": [], "dask 1 worker": [], "dask 2 workers": []}
        for r in range(runs):
            order = list(times) if r % 2 == 0 else list(reversed(times))
            for name in order:
                out = os.path.join(work, f"out-{r}-{name.replace(' ', '-')}")
                if name == "one process":
                    t = timed(lambda: ptwm.compress_checkpoint(src, out, threads=1))
                else:
                    w = 1 if "1 worker" in name else 2
                    t = timed(lambda: distributed.compress_checkpoint(src, out, clients[w],
                                                                      parts=4, threads=1))
                if not same_tree(ref, out):
                    print(f"FAILED: {name} run {r} differs from the one-process output")
                    return 1
                shutil.rmtree(out)
                times[name].append(t)
        t_assemble = []
        for r in range(runs):
            out = os.path.join(work, f"asm-{r}")
            for k in range(1, 5):
                ptwm.compress_checkpoint(src, out, threads=1, part=(k, 4))
            t_assemble.append(timed(lambda: ptwm.assemble_checkpoint(out)))
            shutil.rmtree(out)
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
        one = statistics.median(times["one process"])
        print(f"checkpoint: {raw / 1e6:.0f} MB in {nshards} shards of real BF16 weights; "
              f"{runs} runs, medians; every output checked byte for byte")
        print(f"{'run':18} {'wall s':>8} {'MB/s':>8} {'vs one':>7}")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"{name:18} {m:8.2f} {raw / m / 1e6:8.1f} {one / m:7.2f}x")
        asm = statistics.median(t_assemble)
        print(f"{'assembly alone':18} {asm:8.2f} {raw / asm / 1e6:8.1f}   (checks every "
              f"shard's hash)")
        speed = raw / one  # bytes per second of one worker with one thread
        print("\non paper, N machines of one worker each (the plan balances bytes; "
              "largest part / one worker's speed + assembly):")
        shard_raw = raw / max(nshards, 1)
        for n in (1, 2, 4, 8, 16, 64, 160):
            per_part = max(raw / n, shard_raw)
            print(f"  N={n:4d}: {per_part / 1e6:9.0f} MB per part, "
                  f"{per_part / speed + asm:8.2f} s")
        return 0
    finally:
        shutil.rmtree(work, True)


if __name__ == "__main__":
    sys.exit(main())
