#!/usr/bin/env python3
"""Write a valid safetensors file of N small tensors (for the many-tensor benchmark).

Names follow a mixture-of-experts checkpoint (layers.L.experts.E.up_proj and
the like), dtypes and shapes vary, data is deterministic pseudo-random bytes.
Names are kept short enough that 1M tensors fit under the 100 MB header cap.

usage: gen_many_tensors.py N OUT.safetensors [--seed S]
"""
import argparse
import json
import random
import struct
import sys

DTYPES = [("BF16", 2), ("F32", 4), ("F16", 2), ("I8", 1), ("U8", 1), ("I32", 4), ("I64", 8)]
PROJS = ["up_proj", "down_proj", "gate_proj"]
EXPERTS = 64


def tensors(n, rng):
    """(name, dtype, shape, nbytes) for n tensors in header order."""
    per_layer = EXPERTS * len(PROJS) + 4
    for i in range(n):
        layer, k = divmod(i, per_layer)
        if k < EXPERTS * len(PROJS):
            e, p = divmod(k, len(PROJS))
            name = f"layers.{layer}.experts.{e}.{PROJS[p]}"
        else:
            name = f"layers.{layer}." + ["ln1.weight", "ln2.weight", "attn.q.bias", "router"][
                k - EXPERTS * len(PROJS)]
        dt, size = DTYPES[rng.randrange(len(DTYPES))]
        ndim = rng.choice((0, 1, 1, 2, 2, 3))
        shape = [rng.randint(1, 4) for _ in range(ndim)]
        if rng.randrange(50) == 0:
            shape = [0] + shape  # a few empty tensors share an offset
        count = 1
        for d in shape:
            count *= d
        yield name, dt, shape, count * size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    parts = ['{"__metadata__":{"format":"pt"}']
    pos = 0
    for name, dt, shape, nbytes in tensors(a.n, rng):
        parts.append(',%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (
            json.dumps(name), dt, json.dumps(shape, separators=(",", ":")), pos, pos + nbytes))
        pos += nbytes
    parts.append("}")
    header = "".join(parts).encode()
    header += b" " * (-len(header) % 8)
    if len(header) > 100_000_000:
        sys.exit(f"header of {len(header)} bytes is over the 100 MB cap; use fewer tensors")
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        f.write(rng.randbytes(pos))
    print(f"{a.out}: {a.n} tensors, header {len(header)} bytes, data {pos} bytes")


if __name__ == "__main__":
    main()
