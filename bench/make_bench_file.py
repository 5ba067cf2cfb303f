#!/usr/bin/env python3
"""One safetensors file of about SIZE_MB of real weights: the tensors of the
corpus files whose names contain PATTERN (default: the BF16 ones), shapes
kept, repeated under new names until the size is reached. MIN_BYTES keeps
only tensors of at least that many bytes (a file shaped like a language
model's, whose tensors are mostly MiBs, where the corpus's small vision
models hold thousands of biases and small kernels). Repeat r rotates
each tensor by r rows (of its last dimension), so no chunk repeats an earlier
one: ptwm stores equal payloads once, which would make a benchmark measure
nothing. Written as it goes: memory stays at the corpus files.

usage: bench/make_bench_file.py CORPUS_DIR OUT SIZE_MB [PATTERN [MIN_BYTES]]"""
import json
import os
import struct
import sys

WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "U8": 1, "I8": 1, "I16": 2, "I32": 4,
         "I64": 8, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1}


def read_tensors(path):
    """[(name, dtype, shape, bytes)] of a safetensors file, in data order."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__", None)
    out = []
    for name, t in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = t["data_offsets"]
        out.append((name, t["dtype"], t["shape"], raw[8 + n + b:8 + n + e]))
    return out


def rotated(dtype, shape, data, rep):
    row = WIDTH[dtype] * (shape[-1] if shape else 1)
    rows = len(data) // row if row else 0
    if rows <= 1:
        return data
    cut = (rep % rows) * row
    return data[cut:] + data[:cut]


def build(corpus, out, size, pattern=".bf16.", min_bytes=0):
    tensors = []
    for f in sorted(os.listdir(corpus)):
        if f.endswith(".safetensors") and pattern in f:
            tensors += [(f.split(".")[0] + "." + name, dt, shape, data)
                        for name, dt, shape, data in read_tensors(os.path.join(corpus, f))
                        if len(data) >= min_bytes]
    if not tensors:
        sys.exit("no corpus file matches %r in %s (tensors of %d bytes or more)"
                 % (pattern, corpus, min_bytes))
    h, plan, off, rep = {"__metadata__": {"format": "pt"}}, [], 0, 0
    while off < size:
        for k, (name, dt, shape, data) in enumerate(tensors):
            if off >= size:
                break
            h["r%d.%s" % (rep, name)] = {"dtype": dt, "shape": shape,
                                         "data_offsets": [off, off + len(data)]}
            plan.append((k, rep))
            off += len(data)
        rep += 1
    hj = json.dumps(h, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(out, "wb") as fh:
        fh.write(struct.pack("<Q", len(hj)))
        fh.write(hj)
        for k, r in plan:
            _, dt, shape, data = tensors[k]
            fh.write(rotated(dt, shape, data, r))


def main():
    if len(sys.argv) not in (4, 5, 6):
        sys.exit(__doc__)
    build(sys.argv[1], sys.argv[2], int(float(sys.argv[3]) * (1 << 20)),
          sys.argv[4] if len(sys.argv) >= 5 else ".bf16.",
          int(sys.argv[5]) if len(sys.argv) == 6 else 0)


if __name__ == "__main__":
    main()
