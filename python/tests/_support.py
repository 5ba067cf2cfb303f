"""Shared helpers for the ptwm Python tests (standard library unittest only).

Where things are found:
  corpus   PTWM_CORPUS (ctest sets it to build-corpus/, which scripts/corpus.sh builds)
  CLI      PTWM_BIN, else `ptwm` beside the loaded libptwm, else build/ptwm
  sources  PTWM_SOURCE_DIR, else the repository around python/tests
  package  the installed ptwm, else the one in python/ beside these tests
A missing corpus or CLI fails the tests that need them (they are not skipped).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import sys
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
try:
    import ptwm   # the installed package, when there is one
except ImportError:   # a checkout: the package beside these tests
    sys.path.insert(0, os.path.dirname(TESTS))
    import ptwm

REPO = os.environ.get("PTWM_SOURCE_DIR") or os.path.dirname(os.path.dirname(TESTS))


def corpus_dir() -> str:
    d = os.environ.get("PTWM_CORPUS")
    if not d:
        raise AssertionError("PTWM_CORPUS is not set (ctest sets it; scripts/corpus.sh builds "
                             "the corpus into build-corpus/)")
    d = os.path.abspath(d)
    if not os.path.isdir(d):
        raise AssertionError(f"corpus not found at '{d}' (scripts/corpus.sh builds it)")
    return d


def corpus_file(name: str) -> str:
    path = os.path.join(corpus_dir(), name)
    if not os.path.isfile(path):
        raise AssertionError(f"corpus file '{path}' is missing (scripts/corpus.sh builds it)")
    return path


def cli_path() -> str:
    cands = []
    if os.environ.get("PTWM_BIN"):
        cands.append(os.environ["PTWM_BIN"])
    cands.append(os.path.join(os.path.dirname(os.path.realpath(ptwm.library_path)), "ptwm"))
    cands.append(os.path.join(REPO, "build", "ptwm"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise AssertionError("ptwm CLI not found; tried " + ", ".join(cands) + " (set PTWM_BIN)")


def run_cli(*args, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True,
                          timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"ptwm {' '.join(map(str, args))} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def parse_safetensors(path: str) -> dict:
    """An independent reading of a safetensors file (json + struct), to check the
    C reader's results against: name -> (dtype, shape, bytes), in file order."""
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    entries = sorted((t["data_offsets"], name, t) for name, t in header.items()
                     if name != "__metadata__")
    return {name: (t["dtype"], tuple(t["shape"]), data[base + b:base + e])
            for (b, e), name, t in entries}


# safetensors' Dtype enum in its order (safetensors/src/tensor.rs at 24b0b28). It
# writes a dict's tensors widest dtype first (the enum's last), then by name,
# whatever the dict's order; ptwm.torch and ptwm.numpy write them so too.
ST_DTYPE_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3",
                  "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32",
                  "U32", "F32", "C64", "F64", "I64", "U64"]


def safetensors_order(tensors: dict) -> list:
    """The names of a dict of tensors or arrays in the order safetensors writes them."""
    def rank(name):
        return ST_DTYPE_ORDER.index(ptwm.dtype_name(ptwm.dtype_code(tensors[name].dtype)))
    return sorted(tensors, key=lambda name: (-rank(name), name))


def corpus_tensors(name: str, limit: int = 0) -> list:
    """(name, bytes, dtype, shape) tuples of a corpus file in file order."""
    parsed = parse_safetensors(corpus_file(name))
    out = [(n, raw, dt, shape) for n, (dt, shape, raw) in parsed.items()]
    return out[:limit] if limit else out


def synthetic_tensors(seed: int = 1) -> list:
    """A few small tensors of several dtypes with weight-like values."""
    rng = random.Random(seed)
    f32 = struct.pack("<2048f", *[rng.gauss(0.0, 0.05) for _ in range(2048)])
    bf16 = b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))
    f16 = struct.pack("<512e", *[rng.gauss(0.0, 0.5) for _ in range(512)])
    u8 = bytes(rng.randrange(256) for _ in range(1000))
    return [("layer.0.weight", f32, "F32", (32, 64)),
            ("layer.0.bf16", bf16, "BF16", (2048,)),
            ("layer.1.half", f16, "F16", (16, 32)),
            ("quant.u8", u8, "U8", (10, 100)),
            ("scalar", struct.pack("<f", 1.5), "F32", ()),
            ("empty", b"", "F32", (0, 3))]


class TempDirTest(unittest.TestCase):
    """A test case with a fresh temporary directory in self.tmp."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ptwm-pytest-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def path(self, *parts) -> str:
        return os.path.join(self.tmp, *parts)
