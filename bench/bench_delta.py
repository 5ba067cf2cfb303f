#!/usr/bin/python3
"""`ptwm compress --base` on real fine-tune pairs: sizes, per-tensor safety, decode time.

Usage: bench/bench_delta.py [--pairs build-pairs] [--ptwm build/ptwm] [--runs 7]
                            [--threads 1] [--match TEXT] [--out bench/out/delta]

The pairs are those scripts/finetune_pairs.py writes (bench/README.md, "Fine-tune
pairs"): each run's last step against the network's base (fine-tune), and each run's
last training checkpoint (weights, AdamW's exp_avg and exp_avg_sq) against the one
before it. Per pair, with the real CLI:
  no base      `ptwm compress FT` (the .ptwm file's size)
  with base    `ptwm compress FT --base BASE`
  XOR + zstd   the XOR of every tensor's bytes with its base tensor's, one `zstd -19`
               stream (the usual baseline)
  gain         no base / with base
  larger       tensors whose coded bytes (`ptwm inspect --json`) are larger with the
               base than without, and the largest excess in bytes (the per-chunk
               choice keeps it to the entry's few bytes)
  decode       in the process (ptwm.numpy.load_file: open, decode every tensor, check
               every hash), median of --runs alternating runs, of the file without a
               base, of the file with its base (which includes opening and reading the
               safetensors base, from the page cache), and of the base alone (reading
               it: what the target "within 20% plus reading the base" sets apart); and
               `ptwm decompress` to /dev/shm the same way (process start and file
               output included)
Sizes in bytes and bits per weight. Prints a markdown table; writes OUT/bench_delta.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import ptwm.numpy as pnp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import delta_study  # noqa: E402  (pairs_in, load, zstd19)


def run(*args) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ptwm_file(outdir: str) -> str:
    return os.path.join(outdir, "model.ptwm")


def coded_by_tensor(ptwm: str, outdir: str) -> dict:
    out = subprocess.run([ptwm, "inspect", "--json", outdir], check=True, capture_output=True).stdout
    return {t["name"]: t["coded_bytes"] for t in json.loads(out)["tensors"]}


def xor_zstd(base_path: str, ft_path: str) -> int:
    base, ft = delta_study.load(base_path), delta_study.load(ft_path)
    stream = []
    for name, (_, _, raw) in ft.items():
        a = np.frombuffer(raw, dtype=np.uint8)
        b = np.frombuffer(base[name][2], dtype=np.uint8)
        stream.append((a ^ b).tobytes())
    return delta_study.zstd19(b"".join(stream))


def last_pairs(pairs_dir: str, match: str):
    """Each run's last step against the base, and its last checkpoint against the one before."""
    pairs = [p for p in delta_study.pairs_in(pairs_dir) if match in os.path.basename(p[2])]
    last = {}
    for g, base, ft in pairs:
        key = (g["net"], g["dtype"], g["lr"], g["kind"])
        if key not in last or int(g["step"]) > int(last[key][0]["step"]):
            last[key] = (g, base, ft)
    return [last[k] for k in sorted(last)]


def measure(ptwm, g, base, ft, tmp, runs, threads):
    nb, wb = os.path.join(tmp, "nb"), os.path.join(tmp, "wb")
    t = ["--threads", str(threads)]
    enc_nb = run(ptwm, "compress", "-q", "-f", ft, "-o", nb, *t)
    enc_wb = run(ptwm, "compress", "-q", "-f", ft, "-o", wb, "--base", base, *t)
    raw = sum(len(v[2]) for v in delta_study.load(ft).values())
    weights = sum(len(v[2]) * 8 // (32 if v[1] == "F32" else 16)
                  for v in delta_study.load(ft).values())
    s_nb, s_wb = os.path.getsize(ptwm_file(nb)), os.path.getsize(ptwm_file(wb))
    a, b = coded_by_tensor(ptwm, wb), coded_by_tensor(ptwm, nb)
    larger = [n for n in a if a[n] > b[n]]
    excess = max([a[n] - b[n] for n in larger], default=0)
    out = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else tmp)
    d_nb, d_wb, l_nb, l_wb, l_b = [], [], [], [], []
    for _ in range(runs):
        for path, b, acc in ((ptwm_file(nb), None, l_nb), (ptwm_file(wb), base, l_wb),
                             (base, None, l_b)):
            t0 = time.perf_counter()
            pnp.load_file(path, threads=threads, base=b, bf16="uint16")
            acc.append(time.perf_counter() - t0)
    try:
        for _ in range(runs):   # alternating, so load changes hit both
            d_nb.append(run(ptwm, "decompress", "-q", "-f", nb, "-o", os.path.join(out, "x"), *t))
            d_wb.append(run(ptwm, "decompress", "-q", "-f", wb, "-o", os.path.join(out, "x"),
                            "--base", base, *t))
            with open(ft, "rb") as f1, open(os.path.join(out, "x", os.path.basename(ft)), "rb") as f2:
                if f1.read() != f2.read():
                    raise RuntimeError(f"{ft}: the restore with the base differs")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"label": label(g), "raw": raw, "weights": weights, "nb": s_nb, "wb": s_wb,
            "xor": xor_zstd(base, ft), "larger": len(larger), "tensors": len(a),
            "excess": excess, "dec_nb": statistics.median(d_nb), "dec_wb": statistics.median(d_wb),
            "load_nb": statistics.median(l_nb), "load_wb": statistics.median(l_wb),
            "load_b": statistics.median(l_b),
            "enc_nb": enc_nb, "enc_wb": enc_wb}


def label(g) -> str:
    what = ("checkpoint vs " + g["against"]) if g["kind"] == "checkpoint" else "fine-tune vs base"
    return f"{g['net']} {g['dtype']} lr {g['lr']} step {int(g['step'])} {what}"


def table(rows) -> str:
    head = ("| pair | raw | ptwm, no base | ptwm --base | XOR + zstd -19 | gain | tensors larger "
            "with base | load, no base | load with base | reading the base | ratio, base "
            "read apart | decompress, no base | decompress --base | ratio |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")

    def sz(n, r):
        return f"{n:,} ({8 * n / r['weights']:.2f} b/w)"
    lines = []
    for r in rows:
        larger = f"{r['larger']}/{r['tensors']}"
        if r["larger"]:
            larger += f" (max +{r['excess']} B)"
        lines.append(f"| {r['label']} | {r['raw']:,} | {sz(r['nb'], r)} | {sz(r['wb'], r)} "
                     f"| {sz(r['xor'], r)} | {r['nb'] / r['wb']:.2f}x | {larger} "
                     f"| {1000 * r['load_nb']:.1f} ms | {1000 * r['load_wb']:.1f} ms "
                     f"| {1000 * r['load_b']:.1f} ms "
                     f"| {(r['load_wb'] - r['load_b']) / r['load_nb']:.2f} "
                     f"| {1000 * r['dec_nb']:.1f} ms | {1000 * r['dec_wb']:.1f} ms "
                     f"| {r['dec_wb'] / r['dec_nb']:.2f} |\n")
    return head + "".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=os.path.join(REPO, "build-pairs"))
    ap.add_argument("--ptwm", default=os.path.join(REPO, "build", "ptwm"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--match", default="")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "delta"))
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for g, base, ft in last_pairs(a.pairs, a.match):
            rows.append(measure(a.ptwm, g, base, ft, tmp, a.runs, a.threads))
            print(label(g), file=sys.stderr)
    text = table(rows)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bench_delta.md"), "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
