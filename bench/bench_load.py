#!/usr/bin/python3
"""Loading a safetensors file into owned PyTorch tensors: ptwm against the reference way.

Usage: bench_load.py [--runs N] [--threads 0,1,2] FILE.safetensors...

Per file, in turns run after run: `ptwm.torch.load_file(path, threads=T)` for each T, and
what safetensors' loader does (the 8-byte length, the JSON header, one mmap of the file,
each tensor `torch.frombuffer(...).clone()` into its own storage: one copy); cold (the
file's pages dropped from the page cache with posix_fadvise(DONTNEED) before the call) and
warm (the same call again). Every load is compared with the reference, tensor by tensor,
on the first run. Prints medians (seconds) and each ptwm time over the reference's.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import struct
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import ptwm.torch  # noqa: E402

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "U8": torch.uint8,
          "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64,
          "F64": torch.float64, "BOOL": torch.bool}


def reference_load(path):
    """safetensors' way: header, mmap, one copy of each tensor into owned storage."""
    out = {}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for name, e in header.items():
                if name == "__metadata__":
                    continue
                a, b = e["data_offsets"]
                dt = DTYPES[e["dtype"]]
                if b > a:
                    t = torch.frombuffer(m, dtype=dt, count=(b - a) // torch.empty(0, dtype=dt).element_size(),
                                         offset=8 + n + a).clone()
                else:
                    t = torch.empty(0, dtype=dt)
                out[name] = t.reshape(e["shape"])
                del t
    return out


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def same(a, b):
    return list(a) == list(b) and all(torch.equal(a[k].view(torch.uint8) if a[k].dtype == torch.bool
                                                  else a[k], b[k]) for k in a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", default="0,1")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    threads = [int(t) for t in args.threads.split(",")]
    loaders = [("reference", reference_load)] + [
        ("ptwm T%d" % t, (lambda t: lambda p: ptwm.torch.load_file(p, threads=t))(t)) for t in threads]
    print("file | MB | " + " | ".join("%s cold / warm s" % n for n, _ in loaders) +
          " | " + " | ".join("%s / reference cold, warm" % n for n, _ in loaders[1:]))
    for path in args.files:
        times = {(n, c): [] for n, _ in loaders for c in ("cold", "warm")}
        ref = reference_load(path)
        for r in range(args.runs):
            for name, fn in loaders:
                drop_cache(path)
                t0 = time.perf_counter()
                got = fn(path)
                times[(name, "cold")].append(time.perf_counter() - t0)
                del got
                t0 = time.perf_counter()
                got = fn(path)
                times[(name, "warm")].append(time.perf_counter() - t0)
                if r == 0 and not same(got, ref):
                    sys.exit("bench_load: %s: %s loaded other values" % (path, name))
                del got
        med = {k: statistics.median(v) for k, v in times.items()}
        cells = ["%.4f / %.4f" % (med[(n, "cold")], med[(n, "warm")]) for n, _ in loaders]
        cells += ["%.2f, %.2f" % (med[(n, "cold")] / med[("reference", "cold")],
                                  med[(n, "warm")] / med[("reference", "warm")]) for n, _ in loaders[1:]]
        print("%s | %.1f | %s" % (os.path.basename(path), os.path.getsize(path) / 1e6, " | ".join(cells)))


if __name__ == "__main__":
    main()
