#!/usr/bin/python3
"""Which delta should a stage code a fine-tune against its base with? Measured on real pairs.

Usage: bench/delta_study.py [--pairs build-pairs] [--ptwm build/ptwm] [--out bench/out/delta]

The pairs are those scripts/finetune_pairs.py writes (fine-tunes of corpus networks by
AdamW, and training checkpoints with their optimizer state). For each pair (base B,
fine-tune T: tensors matched by name, dtype and shape) and each candidate delta D of
the bit patterns, per tensor:

  xor    D = T ^ B: unchanged bits are 0; reversible as B ^ D
  sub    D = zigzag(ord(T) - ord(B)) where ord maps a float's bits to an integer in
         the float's order (negative values: all bits flipped; positive: sign bit
         set), so a step of one ulp is a difference of 1; reversible exactly, modulo 2^w
  fsub   T - B in floating point: not lossless (B + (T - B) rounds; the count of
         values it would not give back is reported) and not considered further

Each lossless delta is measured as
  H0 split   order-0 entropy of the float split's planes (docs/CHAINS.md: exponent
             field, then sign:mantissa bytes), per tensor, summed: a floor for one
             table per plane per tensor (tables not counted)
  H0 bytes   the same over the byte planes (byte k of each element)
  given base exp   H0 with one table per value of the base's exponent field (which
             the decoder has): how much a context on the base would gain
  plain H0   the fine-tune's own split planes (per tensor: does the delta lose?)
  ptwm       the delta written as a safetensors file (as the float dtype for the split
             chain, as U16/U32 for byte planes) and coded by `ptwm compress` with the
             standard chains: what the existing planes and coders make of it
  keep       per tensor the smaller of sub > ptwm (byte planes) and the plain coding, from
             `ptwm inspect` of both files: what a writer choosing per chunk would at most store
beside: ptwm without a base (the fine-tune itself) and XOR + zstd -19 (the XOR's tensor
bytes, one stream). Sizes are bits per weight (all tensors of the file) and % of the raw
tensor bytes; ptwm figures are the .ptwm file sizes (tensor table and metadata included).
Figures are cached per pair in OUT/cache/ (a pair rewritten since is measured again).
Writes OUT/delta.csv (every figure), OUT/delta.md (every pair) and OUT/summary.md (the
table of docs/DELTA.md).
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import tfjs_to_safetensors  # noqa: E402

# Float layouts: (unsigned view, exponent bits, mantissa bits).
FLOATS = {"F32": (np.uint32, 8, 23), "BF16": (np.uint16, 8, 7)}
CHUNK = 1 << 20
CKPT_GROUPS = ("param/", "adam.m/", "adam.v/")   # the writer's default chunk size, bytes


def entropy_bits(plane: np.ndarray) -> float:
    """n * H0 of a uint8 array, bits."""
    if plane.size == 0:
        return 0.0
    c = np.bincount(plane, minlength=256).astype(np.float64)
    c = c[c > 0]
    return float(-(c * np.log2(c / plane.size)).sum())


def cond_entropy_bits(plane: np.ndarray, ctx: np.ndarray) -> float:
    """n * H0(plane | ctx) of uint8 arrays, bits: one table per context value."""
    joint = np.bincount(ctx.astype(np.int64) * 256 + plane, minlength=65536)
    return _nh(joint) - _nh(np.bincount(ctx, minlength=256))


def _nh(counts: np.ndarray) -> float:
    c = counts[counts > 0].astype(np.float64)
    return float(-(c * np.log2(c / c.sum())).sum()) if c.size else 0.0


def split_planes(u: np.ndarray, ebits: int, mbits: int):
    """The float split of docs/CHAINS.md applied to any bit pattern: the exponent
    field, then sign:mantissa (m + 1 bits) in bytes, most significant first."""
    w = u.dtype.itemsize * 8
    exp = ((u >> mbits) & ((1 << ebits) - 1)).astype(np.uint8)
    sm = ((u >> (w - 1)) << mbits) | (u & ((1 << mbits) - 1))
    planes = [exp]
    nbytes = (mbits + 1 + 7) // 8
    for k in range(nbytes - 1, -1, -1):
        planes.append(((sm >> (8 * k)) & 0xFF).astype(np.uint8))
    return planes


def byte_planes(u: np.ndarray):
    b = u.view(np.uint8).reshape(-1, u.dtype.itemsize)
    return [np.ascontiguousarray(b[:, k]) for k in range(u.dtype.itemsize)]


def ordered(u: np.ndarray) -> np.ndarray:
    """Monotone integer order of float bit patterns (-0 just below +0)."""
    w = u.dtype.itemsize * 8
    sign = u >> (w - 1)
    allones = u.dtype.type(~np.array(0, dtype=u.dtype))
    top = u.dtype.type(1 << (w - 1))
    return np.where(sign == 1, u ^ allones, u | top).astype(u.dtype)


def zigzag_diff(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    w = t.dtype.itemsize * 8
    d = (ordered(t) - ordered(b)).astype(t.dtype)            # modulo 2^w
    s = d.view(np.int16 if w == 16 else np.int32)
    return ((s << 1) ^ (s >> (w - 1))).view(t.dtype)


def undo_zigzag_diff(b: np.ndarray, z: np.ndarray) -> np.ndarray:
    """T from B and zigzag_diff(T, B): the decoder's side, checked on every tensor."""
    w = b.dtype.itemsize * 8
    one = b.dtype.type(1)
    d = (z >> one) ^ (b.dtype.type(0) - (z & one))           # unzigzag, modulo 2^w
    o = (ordered(b) + d).astype(b.dtype)
    top = b.dtype.type(1 << (w - 1))
    allones = b.dtype.type(~np.array(0, dtype=b.dtype))
    return np.where(o >= top, o ^ top, o ^ allones).astype(b.dtype)


def float_sub_misses(t: np.ndarray, b: np.ndarray, dtype: str) -> int:
    """How many values B + (T - B), computed in the dtype, does not give back."""
    if dtype == "F32":
        tf, bf = t.view(np.float32), b.view(np.float32)
        with np.errstate(all="ignore"):
            back = (bf + (tf - bf)).view(np.uint32)
        return int((back != t).sum())
    # BF16 arithmetic: F32 results rounded to nearest-even BF16, as bf16 hardware does.
    tf = (t.astype(np.uint32) << 16).view(np.float32)
    bf = (b.astype(np.uint32) << 16).view(np.float32)
    d = rne_bf16((tf - bf))
    back = rne_bf16(bf + (d.astype(np.uint32) << 16).view(np.float32))
    return int((back != t).sum())


def rne_bf16(x: np.ndarray) -> np.ndarray:
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def zstd19(data: bytes) -> int:
    return len(subprocess.run(["zstd", "-19", "-q", "-c"], input=data, capture_output=True,
                              check=True).stdout)


def ptwm_size(ptwm: str, path: str, tmp: str, per_tensor: bool = False):
    """The .ptwm file's size; with PER_TENSOR, also {name: coded bytes} (ptwm inspect)."""
    out = os.path.join(tmp, "out")
    subprocess.run([ptwm, "compress", path, "-o", out, "--force", "--threads", "1", "-q"],
                   check=True, capture_output=True)
    files = glob.glob(os.path.join(out, "*.ptwm"))
    if len(files) != 1:
        raise RuntimeError(f"ptwm compress {path} wrote {files}")
    if not per_tensor:
        return os.path.getsize(files[0])
    info = json.loads(subprocess.run([ptwm, "inspect", files[0], "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    return os.path.getsize(files[0]), {t["name"]: t["coded_bytes"] for t in info["tensors"]}


def write_tensors(path, tensors):
    """[(name, shape, dtype, raw)] as a safetensors file."""
    with open(path, "wb") as f:
        f.write(tfjs_to_safetensors.safetensors_bytes(None, tensors))
    return path


def keep_smaller(base_path, ft_path, ptwm, tmp, prefix=""):
    """What the proposed writer would store: per tensor the smaller of the plain coding and
    the ordered difference in byte planes (today's coders on both; the writer would choose
    per chunk, which can only be smaller), plus the delta file's own overhead; and how many
    tensors the delta would make larger."""
    base, ft = load(base_path), load(ft_path)
    plain, delta = [], []
    for name, (shape, dt, traw) in ft.items():
        if not name.startswith(prefix):
            continue
        ut = FLOATS[dt][0]
        z = zigzag_diff(np.frombuffer(traw, dtype=ut), np.frombuffer(base[name][2], dtype=ut))
        plain.append((name, shape, dt, traw))
        delta.append((name, shape, "U16" if ut is np.uint16 else "U32", z.tobytes()))
    _, p = ptwm_size(ptwm, write_tensors(os.path.join(tmp, "plain.safetensors"), plain), tmp,
                     True)
    size, d = ptwm_size(ptwm, write_tensors(os.path.join(tmp, "delta.safetensors"), delta), tmp,
                        True)
    return {"ptwm_keep": 8 * (size - sum(d.values()) + sum(min(p[k], d[k]) for k in d)),
            "ptwm_delta_larger": sum(d[k] > p[k] for k in d)}


def load(path):
    _, tensors = tfjs_to_safetensors.read_safetensors(path)
    return {n: (shape, dt, raw) for n, shape, dt, raw in tensors}


def study_pair(base_path, ft_path, ptwm, tmp, prefix=""):
    base, ft = load(base_path), load(ft_path)
    ft = {k: v for k, v in ft.items() if k.startswith(prefix)}
    r = {"n": 0, "raw": 0, "tensors": 0, "identical": 0, "nearly": 0, "changed": 0,
         "ulp1": 0, "chunks": 0, "chunks_same": 0, "fsub_miss": 0,
         "h_xor_split": 0.0, "h_xor_bytes": 0.0, "h_sub_split": 0.0, "h_sub_bytes": 0.0,
         "h_sub_bytes_ctx": 0.0, "h_xor_split_ctx": 0.0, "h_plain_split": 0.0,
         "delta_loses": 0}
    xor_files = {"split": [], "bytes": []}
    sub_files = {"split": [], "bytes": []}
    xor_stream = []
    for name, (shape, dt, traw) in ft.items():
        if name not in base or base[name][0] != shape or base[name][1] != dt:
            raise RuntimeError(f"{ft_path}: tensor '{name}' has no match in {base_path}")
        if dt not in FLOATS:
            raise RuntimeError(f"{ft_path}: tensor '{name}' is {dt}")
        ut, eb, mb = FLOATS[dt]
        t = np.frombuffer(traw, dtype=ut)
        b = np.frombuffer(base[name][2], dtype=ut)
        x = t ^ b
        z = zigzag_diff(t, b)
        if not np.array_equal(undo_zigzag_diff(b, z), t) or not np.array_equal(b ^ x, t):
            raise RuntimeError(f"{ft_path}: tensor '{name}': a delta does not invert")
        changed = int((x != 0).sum())
        r["n"] += t.size
        r["raw"] += len(traw)
        r["tensors"] += 1
        r["identical"] += changed == 0
        r["nearly"] += 0 < changed <= t.size // 100
        r["changed"] += changed
        r["ulp1"] += int((z <= 2).sum())          # |ord diff| <= 1 ulp (zigzag 0, 1, 2)
        per = CHUNK // t.itemsize
        for off in range(0, t.size, per):
            r["chunks"] += 1
            r["chunks_same"] += not x[off:off + per].any()
        r["fsub_miss"] += float_sub_misses(t, b, dt)
        r["h_xor_split"] += sum(map(entropy_bits, split_planes(x, eb, mb)))
        r["h_xor_bytes"] += sum(map(entropy_bits, byte_planes(x)))
        r["h_sub_split"] += sum(map(entropy_bits, split_planes(z, eb, mb)))
        r["h_sub_bytes"] += sum(map(entropy_bits, byte_planes(z)))
        bexp = split_planes(b, eb, mb)[0]   # the base's exponent: the decoder knows it
        h_plain = sum(map(entropy_bits, split_planes(t, eb, mb)))
        r["h_plain_split"] += h_plain
        r["delta_loses"] += sum(map(entropy_bits, byte_planes(z))) > h_plain
        r["h_sub_bytes_ctx"] += sum(cond_entropy_bits(p, bexp) for p in byte_planes(z))
        r["h_xor_split_ctx"] += sum(cond_entropy_bits(p, bexp) for p in split_planes(x, eb, mb))
        uint = "U16" if ut is np.uint16 else "U32"
        xor_files["split"].append((name, shape, dt, x.tobytes()))
        xor_files["bytes"].append((name, shape, uint, x.tobytes()))
        sub_files["split"].append((name, shape, dt, z.tobytes()))
        sub_files["bytes"].append((name, shape, uint, z.tobytes()))
        xor_stream.append(x.tobytes())
    r["zstd_xor"] = zstd19(b"".join(xor_stream)) * 8
    path = write_tensors(os.path.join(tmp, "ft.safetensors"),
                         [(k, v[0], v[1], v[2]) for k, v in ft.items()])
    r["ptwm_ft"] = ptwm_size(ptwm, path, tmp) * 8
    for key, files in (("xor", xor_files), ("sub", sub_files)):
        for kind in ("split", "bytes"):
            path = write_tensors(os.path.join(tmp, f"{key}-{kind}.safetensors"), files[kind])
            r[f"ptwm_{key}_{kind}"] = ptwm_size(ptwm, path, tmp) * 8
    return r


def cached(out, base, ft, prefix, compute, what="figures"):
    """A pair's figures, kept in OUT/cache/ under the two files' sizes and mtimes, so a
    rerun measures only new or rewritten pairs."""
    key = [[os.path.basename(p), os.path.getsize(p), os.stat(p).st_mtime_ns] for p in (base, ft)]
    path = os.path.join(out, "cache",
                        f"{os.path.basename(ft)}.{prefix.rstrip('/') or 'w'}.{what}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
        if c["key"] == key:
            return c["figures"]
    r = compute()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"key": key, "figures": r}, f)
    os.replace(path + ".tmp", path)
    return r


PAIR_RE = re.compile(r"^(?P<net>.+)\.(?P<dtype>f32|bf16|bf16m)\.lr(?P<lr>[0-9.e+-]+)"
                     r"\.step(?P<step>\d+)(?P<ckpt>\.ckpt)?\.safetensors$")

SIZE_COLS = [("ptwm_ft", "ptwm, no base"), ("zstd_xor", "XOR + zstd -19"), ("h_xor_split", "XOR H0 split"),
             ("h_xor_bytes", "XOR H0 bytes"), ("h_sub_split", "sub H0 split"),
             ("h_sub_bytes", "sub H0 bytes"), ("h_xor_split_ctx", "XOR H0 split given base exp"),
             ("h_sub_bytes_ctx", "sub H0 bytes given base exp"), ("ptwm_xor_split", "XOR > ptwm split"),
             ("ptwm_xor_bytes", "XOR > ptwm bytes"), ("ptwm_sub_split", "sub > ptwm split"),
             ("ptwm_sub_bytes", "sub > ptwm bytes"), ("ptwm_keep", "sub or plain, per tensor")]


def pairs_in(d, all_checkpoints=False):
    """(label fields, base path, fine-tune path) for every pair of the directory:
    each step against the base (weights), each run's last checkpoint against the one
    before (with ALL, every checkpoint against the one before)."""
    found = []
    for path in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        m = PAIR_RE.match(os.path.basename(path))
        if m:
            found.append((m.groupdict(), path))
    out = []
    for g, path in found:
        step = int(g["step"])
        if g["ckpt"]:
            prev = [p for h, p in found if h["ckpt"] and h["net"] == g["net"] and
                    h["dtype"] == g["dtype"] and h["lr"] == g["lr"] and int(h["step"]) < step]
            later = [h for h, _ in found if h["ckpt"] and h["net"] == g["net"] and
                     h["dtype"] == g["dtype"] and h["lr"] == g["lr"] and int(h["step"]) > step]
            if prev and (all_checkpoints or not later):
                pg = PAIR_RE.match(os.path.basename(prev[-1])).groupdict()
                out.append((dict(g, kind="checkpoint", against=f"step {int(pg['step'])}"),
                            prev[-1], path))
            continue
        base_dtype = "bf16" if g["dtype"] == "bf16m" else g["dtype"]
        base = os.path.join(d, f"{g['net']}.{base_dtype}.base.safetensors")
        if os.path.isfile(base):
            out.append((dict(g, kind="fine-tune", against="base"), base, path))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=os.path.join(REPO, "build-pairs"))
    ap.add_argument("--ptwm", default=os.path.join(REPO, "build", "ptwm"))
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "delta"))
    ap.add_argument("--match", default="", help="only pairs whose file name has this")
    ap.add_argument("--all-checkpoints", action="store_true",
                    help="every checkpoint against the one before, not only each run's last")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    pairs = [p for p in pairs_in(args.pairs, args.all_checkpoints) if args.match in os.path.basename(p[2])]
    if not pairs:
        sys.stderr.write(f"delta_study: no pairs in {args.pairs} (scripts/finetune_pairs.py "
                         f"makes them)\n")
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="ptwm-delta-") as tmp:
        for g, base, ft in pairs:
            # A checkpoint's parameters and each optimizer buffer apart: they move differently.
            for prefix in (CKPT_GROUPS if g["kind"] == "checkpoint" else ("",)):
                r = dict(cached(args.out, base, ft, prefix,
                                lambda: study_pair(base, ft, args.ptwm, tmp, prefix)))
                r.update(cached(args.out, base, ft, prefix,
                                lambda: keep_smaller(base, ft, args.ptwm, tmp, prefix), "keep"))
                r.update(g, file=os.path.basename(ft), base=os.path.basename(base),
                         group=prefix.rstrip("/") or "weights")
                rows.append(r)
                best = min(SIZE_COLS, key=lambda c: r[c[0]])
                print(f"{r['file']} {r['group']}: ptwm {100 * r['ptwm_ft'] / 8 / r['raw']:.1f}%, "
                      f"best {best[1]} {100 * r[best[0]] / 8 / r['raw']:.2f}%", flush=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(os.path.join(args.out, "delta.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, restval="")
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "delta.md"), "w") as f:
        f.write(markdown(rows))
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary(rows))
    print(summary(rows))
    return 0


SUMMARY_COLS = [("ptwm_ft", "ptwm, no base"), ("zstd_xor", "XOR + zstd -19"),
                ("ptwm_xor_split", "XOR > ptwm"), ("ptwm_sub_bytes", "sub > ptwm"),
                ("ptwm_keep", "sub or plain, per tensor"), ("h_sub_bytes", "sub, H0"),
                ("h_sub_bytes_ctx", "sub, H0 given base exp")]


def summary(rows):
    """The last step of each run against its base, and each run's last checkpoint
    against the one before: bits per weight (% of raw), the gain of the proposed coding
    (per tensor the smaller of sub > ptwm and plain) over ptwm without a base, the tensors
    on which the delta codes larger, and how much changed."""
    last = {}
    for r in rows:
        key = (r["net"], r["dtype"], r["lr"], r["kind"], r["group"])
        if key not in last or int(r["step"]) > int(last[key]["step"]):
            last[key] = r
    head = (["pair", "dtype", "lr", "steps"] + [c[1] for c in SUMMARY_COLS] +
            ["gain", "tensors sub > plain", "changed", "within 1 ulp"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * (len(head) - 4)]
    order = {"weights": 0, "param": 1, "adam.m": 2, "adam.v": 3}
    for r in sorted(last.values(), key=lambda r: (r["kind"] != "fine-tune", r["net"],
                                                  order[r["group"]], r["dtype"], r["lr"])):
        pair = (f"{r['net']} vs base" if r["kind"] == "fine-tune" else
                f"{r['net']} ckpt {r['group']} vs {r['against']}")
        cells = [pair, r["dtype"], "%g" % float(r["lr"]), str(int(r["step"]))]
        cells += [f"{r[k] / r['n']:.2f} ({100 * r[k] / 8 / r['raw']:.1f}%)"
                  for k, _ in SUMMARY_COLS]
        cells += [f"{r['ptwm_ft'] / r['ptwm_keep']:.2f}x",
                  f"{r['ptwm_delta_larger']}/{r['tensors']}",
                  f"{100 * r['changed'] / r['n']:.1f}%", f"{100 * r['ulp1'] / r['n']:.1f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(rows):
    """Two tables: sizes (bits per weight, % of raw in the first), and how much changed."""
    head = ["pair", "dtype", "lr", "step"] + [c[1] for c in SIZE_COLS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * len(SIZE_COLS)]
    for r in rows:
        pair = f"{r['net']} {r['kind']} {r['group']} vs {r['against']}"
        cells = [pair, r["dtype"], r["lr"], str(int(r["step"]))]
        for key, _ in SIZE_COLS:
            cells.append(f"{r[key] / r['n']:.2f} ({100 * r[key] / 8 / r['raw']:.1f}%)")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| pair | dtype | lr | step | weights | changed | within 1 ulp | "
              "tensors identical | tensors <=1% changed | 1 MiB chunks identical | "
              "tensors where sub H0 > plain H0 | float sub not reversible |",
              "|" + "---|" * 4 + "---:|" * 8]
    for r in rows:
        pair = f"{r['net']} {r['kind']} {r['group']} vs {r['against']}"
        lines.append("| " + " | ".join([
            pair, r["dtype"], r["lr"], str(int(r["step"])), str(r["n"]),
            f"{100 * r['changed'] / r['n']:.1f}%", f"{100 * r['ulp1'] / r['n']:.1f}%",
            f"{r['identical']}/{r['tensors']}", f"{r['nearly']}/{r['tensors']}",
            f"{r['chunks_same']}/{r['chunks']}", f"{r['delta_loses']}/{r['tensors']}",
            f"{100 * r['fsub_miss'] / r['n']:.2f}%"]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
