#!/usr/bin/env python3
"""Whole-process `ptwm export` beside `ptwm decompress` of the same .ptwm file.

Runs, in alternation and RUNS times each: export --dtype bf16 and --dtype f32
with PTWM (and OLD_PTWM, an earlier build, if given), and decompress, at
--threads 1 and 2; prints the median wall time of each and the ratios.
The layout names every tensor of the file in its order.

usage: bench/bench_export.py FILE.ptwm WORKDIR [RUNS]   (env PTWM, OLD_PTWM)"""
import json
import os
import statistics
import subprocess
import sys
import time


def main():
    src, work = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    new = os.environ.get("PTWM", "build/ptwm")
    old = os.environ.get("OLD_PTWM")
    os.makedirs(work, exist_ok=True)
    layout = os.path.join(work, "layout.json")
    info = subprocess.run([new, "inspect", src, "--json"], check=True, capture_output=True,
                          text=True).stdout
    tensors = json.loads(info)["tensors"]
    with open(layout, "w") as f:
        json.dump([{"name": t["name"], "shape": t["shape"]} for t in tensors], f)
    bins = [("new", new)] + ([("old", old)] if old else [])
    times = {}
    for _ in range(runs):
        for threads in (1, 2):
            jobs = []
            for dt in ("bf16", "f32"):
                for tag, b in bins:
                    jobs.append((f"{tag} export {dt} t{threads}",
                                 [b, "export", src, "--layout", layout, "-o",
                                  os.path.join(work, "out." + dt), "--dtype", dt, "-f",
                                  "--threads", str(threads)]))
            jobs.append((f"new decompress t{threads}",
                         [new, "decompress", src, "-o", os.path.join(work, "dec"), "-f",
                          "--threads", str(threads)]))
            for name, cmd in jobs:
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                times.setdefault(name, []).append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in sorted(med):
        print(f"{k:28s} {med[k]:.3f} s")
    for threads in (1, 2):
        dec = med[f"new decompress t{threads}"]
        for dt in ("bf16", "f32"):
            n = med[f"new export {dt} t{threads}"]
            line = f"t{threads} {dt}: export/decompress {n / dec:.2f}"
            if old:
                line += f", old/new {med[f'old export {dt} t{threads}'] / n:.2f}"
            print(line)


if __name__ == "__main__":
    main()
