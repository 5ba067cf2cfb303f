#!/usr/bin/env python3
"""Copy safetensors files with every 4-D tensor moved from TensorFlow's
[kh, kw, in, out] layout to PyTorch's and ONNX's [out, in, kh, kw]; other
tensors, the metadata and the header's key order are kept. The corpus holds
TF-layout convolutions; this gives the same weights as PyTorch stores them.

usage: bench/pytorch_layout.py SRC_DIR DST_DIR   (every *.safetensors in SRC_DIR)
       bench/pytorch_layout.py SRC.safetensors DST.safetensors
Pure Python (no numpy): one strided slice per (out, in) pair."""
import json
import os
import struct
import sys

WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "U8": 1, "I8": 1, "I16": 2, "I32": 4,
         "I64": 8, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
CODE = {1: "B", 2: "H", 4: "I", 8: "Q"}


def to_pytorch(data, shape, width):
    kh, kw, cin, cout = shape
    src = memoryview(data).cast(CODE[width])
    out = []
    # Element (a, b, i, o) sits at ((a*kw + b)*cin + i)*cout + o: for fixed
    # (o, i) the kh*kw elements are one stride of cin*cout apart.
    step = cin * cout
    for o in range(cout):
        for i in range(cin):
            out.append(src[o + i * cout::step].tobytes())
    return b"".join(out), [cout, cin, kh, kw]


def convert(src, dst):
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])  # dicts keep the file's key order
    body = raw[8 + n:]
    items = [(k, v) for k, v in hdr.items() if k != "__metadata__"]
    items.sort(key=lambda kv: kv[1]["data_offsets"][0])
    new, blobs, off = {}, [], 0
    if "__metadata__" in hdr:
        new["__metadata__"] = hdr["__metadata__"]
    for name, t in items:
        b, e = t["data_offsets"]
        data, shape = body[b:e], t["shape"]
        if len(shape) == 4 and e > b:
            data, shape = to_pytorch(data, shape, WIDTH[t["dtype"]])
        new[name] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hj = json.dumps(new, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(struct.pack("<Q", len(hj)))
        fh.write(hj)
        for blob in blobs:
            fh.write(blob)
    os.replace(tmp, dst)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
        for f in sorted(os.listdir(src)):
            if f.endswith(".safetensors"):
                convert(os.path.join(src, f), os.path.join(dst, f))
    else:
        convert(src, dst)


if __name__ == "__main__":
    main()
