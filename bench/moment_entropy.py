#!/usr/bin/python3
"""Conditional entropy of a checkpoint's values given the previous checkpoint's.

Usage: moment_entropy.py PREV.ptwm CUR.ptwm      (two checkpoints of one run, as
       save_checkpoint or CheckpointSeries wrote them; bases are followed)
or from bench_series.py, which calls table() on its last two checkpoints.

Per group (weights, exp_avg, exp_avg_sq), bits a value under context models
that code each value given what a decoder already has: the previous
checkpoint's values and, for exp_avg, the same checkpoint's exp_avg_sq. Each
model is a complete code (chain rule over small symbols):

  fields      sign | previous sign; exponent | previous exponent and whether
              the sign changed; top 2 mantissa bits | (exponent change clamped
              to +-2, previous top 2 bits); the other mantissa bits 1 bit each.
  diff(P)     D = ordered difference of the value against a prediction P
              (docs/DELTA.md): class (bit length of |D|, sign of D) | P's
              exponent; the 2 bits below the leading 1 | bit length; the
              rest of |D|'s bits 1 bit each. P = the previous value, or for
              exp_avg_sq beta2^k times it, for exp_avg beta1^k times it (k
              steps between the checkpoints: the decay Adam applies; F32
              arithmetic, so a decoder can form it bit for bit).
  cross       exp_avg only: the fields model with the exponent | (previous
              exponent, exponent of this checkpoint's exp_avg_sq).

Each symbol's cost is given two ways. "plug-in": the empirical conditional
entropy from the joint histogram, which is biased low when contexts x symbols
is not small beside the sample count; "adaptive": the code length of a
Krichevsky-Trofimov count model per context (what an adaptive context coder
would reach, learning cost included; exact from the counts), an achievable
upper figure. The bits counted as 1 each are checked: "raw bits' entropy" is
the sum of the order-0 entropies of those bit positions (a figure near their
count says they carry no structure a context could use).
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

_LG_HALF = math.lgamma(0.5)


def _counts(ctx, sym, nsym):
    """Joint histogram: rows the contexts seen, columns the symbols."""
    _, row = np.unique(ctx, return_inverse=True)
    flat = np.bincount(row.astype(np.int64) * nsym + sym.astype(np.int64))
    flat = np.concatenate([flat, np.zeros((-len(flat)) % nsym, dtype=flat.dtype)])
    return flat.reshape(-1, nsym)


def cost(ctx, sym, nsym):
    """(plug-in, adaptive) total bits of coding sym given ctx; alphabet nsym."""
    n = _counts(ctx, sym, nsym)
    tot = n.sum(axis=1)
    nz = n[n > 0].astype(np.float64)
    plug = float((nz * np.log2(nz)).sum())
    plug = float((tot * np.log2(np.maximum(tot, 1))).sum()) - plug
    lg = np.frompyfunc(math.lgamma, 1, 1)
    kt = float(np.sum(lg(tot + nsym / 2.0).astype(np.float64))) - len(tot) * math.lgamma(nsym / 2)
    kt -= float(np.sum(lg(nz + 0.5).astype(np.float64))) - len(nz) * _LG_HALF
    return plug, kt / math.log(2)


def bit_entropy(bit, count):
    """Sum over positions j < count.max() of the order-0 entropy of bit(j) (0/1 per
    value) among the values whose count exceeds j: one position at a time, so
    memory stays at one array of the values."""
    total = 0.0
    for j in range(int(count.max(initial=0))):
        on = count > j
        b = bit(j)[on]
        p = float(b.mean())
        if 0 < p < 1:
            total += len(b) * -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    return total


class Model:
    """Accumulates symbol costs of one model (bits over all values)."""

    def __init__(self):
        self.plug = self.adapt = self.raw = self.raw_h = 0.0
        self.parts = []   # (name, adaptive bits)

    def add(self, name, ctx, sym, nsym):
        p, a = cost(ctx, sym, nsym)
        self.plug += p
        self.adapt += a
        self.parts.append((name, a))

    def add_raw(self, count, entropy):
        self.raw += count
        self.raw_h += entropy
        self.parts.append(("raw", count))


def split(u, width):
    mb = width - 9
    return (u >> (width - 1)) & 1, (u >> mb) & 0xFF, u & ((1 << mb) - 1)


def ordered(u, width):
    top = np.uint64(1) << np.uint64(width - 1)
    full = (np.uint64(1) << np.uint64(width)) - np.uint64(1)
    u = u.astype(np.uint64)
    return np.where(u & top, full - u, u | top)


def fields(cur, prev, width, exp_ctx=None):
    """The fields model; exp_ctx: an extra context of the exponent (per value)."""
    m = Model()
    s, e, man = split(cur, width)
    ps, pe, pman = split(prev, width)
    mb = width - 9
    m.add("sign", ps, s, 2)
    ectx = pe.astype(np.int64) * 2 + (s ^ ps)
    if exp_ctx is not None:
        ectx = ectx * 256 + exp_ctx
    m.add("exp", ectx, e, 256)
    de = np.clip(e.astype(np.int64) - pe.astype(np.int64), -2, 2) + 2
    m.add("top2", de * 4 + (pman >> (mb - 2)), man >> (mb - 2), 4)
    low = mb - 2
    m.add_raw(len(cur) * low, bit_entropy(lambda j: (man >> np.uint64(j)) & np.uint64(1),
                                          np.full(len(cur), low)))
    return m


def diff(cur, pred, width, sign_ctx=None):
    """The difference model against the prediction pred (bit patterns)."""
    m = Model()
    d = (ordered(cur, width) - ordered(pred, width)) & np.uint64((1 << width) - 1)
    neg = (d >> np.uint64(width - 1)).astype(np.int64)
    mag = np.where(neg == 1, (np.uint64(1) << np.uint64(width)) - d, d)
    k = np.zeros(len(mag), dtype=np.int64)   # bit length of |D|
    for b in range(width + 1):
        k += (mag >> np.uint64(b)) > 0
    ctx = split(pred, width)[1].astype(np.int64)
    if sign_ctx is not None:
        ctx = ctx * 2 + sign_ctx
    m.add("class", ctx, 2 * k + neg, 2 * width + 4)
    has = k >= 3
    top = (mag[has] >> (k[has] - 3).astype(np.uint64)) & np.uint64(3)
    m.add("top2", k[has], top, 4)
    one = (k == 2)
    m.add("top1", np.zeros(int(one.sum()), dtype=np.int64), mag[one] & np.uint64(1), 2)
    nraw = np.maximum(k - 3, 0)   # bits below the top two, taken from the highest down

    def bit(j):
        return (mag >> np.maximum(k - 4 - j, 0).astype(np.uint64)) & np.uint64(1)
    m.add_raw(int(nraw.sum()), bit_entropy(bit, nraw))
    return m


def scaled(prev, factor):
    """factor * prev in F32 (bit patterns in and out)."""
    return (prev.view(np.float32) * np.float32(factor)).view(np.uint32)


def bits_of(arrays, width):
    u = np.concatenate([a.reshape(-1) for a in arrays])
    return u.view(np.uint16 if width == 16 else np.uint32).astype(np.uint64)


def group_rows(cur, prev, width, k, decay=None, sq=None):
    """[(model name, Model)] for one group. decay: (name, beta) of a moment, whose
    previous value times beta^k is also tried as the prediction; sq: this
    checkpoint's exp_avg_sq bit patterns, a context for exp_avg's exponent."""
    rows = [("fields given previous", fields(cur, prev, width)),
            ("diff against previous", diff(cur, prev, width))]
    if decay is not None and width == 32:
        p = scaled(prev.astype(np.uint32), decay[1] ** k).astype(np.uint64)
        rows.append((f"diff against {decay[0]}^{k} x previous", diff(cur, p, width)))
    if sq is not None:
        rows.append(("fields given previous and exp_avg_sq's exponent",
                     fields(cur, prev, width, split(sq, 32)[1].astype(np.int64))))
    return rows


def group_of(name):
    """weights, exp_avg, exp_avg_sq, or None (other optimizer state: step)."""
    head, _, last = name.rpartition("/")
    if head.isdigit():
        return last if last in ("exp_avg", "exp_avg_sq") else None
    return "weights"


def table(prev, cur, coded, k, beta1, beta2):
    """Rows (group, values, coded bits, model name, plug-in, adaptive, the raw
    bits' order-0 entropy, the adaptive parts), bits a value. prev/cur: {name: numpy array of bit
    patterns, uint32 for F32, uint16 for BF16}; names: the optimizer's
    "<i>/exp_avg", "<i>/exp_avg_sq", anything else a weight; coded: {group:
    bytes in the file}."""
    groups = {}
    for name in cur:
        if group_of(name) is not None:
            groups.setdefault(group_of(name), []).append(name)
    out, sq = [], None
    for g in ("exp_avg_sq", "weights", "exp_avg"):
        names = sorted(groups.get(g, ()), key=_param_order)
        if not names:
            continue
        width = 8 * cur[names[0]].dtype.itemsize
        names = [n for n in names if 8 * cur[n].dtype.itemsize == width]
        c = bits_of([cur[n] for n in names], width)
        p = bits_of([prev[n] for n in names], width)
        decay = {"exp_avg": ("beta1", beta1), "exp_avg_sq": ("beta2", beta2)}.get(g)
        rows = group_rows(c, p, width, k, decay,
                          sq if g == "exp_avg" and sq is not None and len(sq) == len(c) else None)
        if g == "exp_avg_sq" and width == 32:
            sq = c
        for model, m in rows:
            n = len(c)
            parts = " + ".join(f"{name} {bits / n:.2f}" for name, bits in m.parts
                               if name != "top1")
            out.append((g, n, 8 * coded.get(g, 0) / n, model, (m.plug + m.raw) / n,
                        (m.adapt + m.raw) / n, m.raw_h / n, parts))
    return out


def _param_order(name):
    head = name.rsplit("/", 1)[0]
    return (0, int(head), name) if head.isdigit() else (1, 0, name)


def markdown(rows, lead=()):
    """rows as a markdown table; lead: (header, value) columns put first."""
    head = [h for h, _ in lead] + ["group", "values", "coded", "model", "plug-in",
                                   "adaptive", "adaptive parts", "raw bits' entropy"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "---|" * len(lead) + "---|---:|---:|---|---:|---:|---|---:|"]
    for g, n, coded, model, plug, adapt, raw_h, parts in rows:
        cells = [str(v) for _, v in lead] + [g, f"{n:,}", f"{coded:.2f}", model, f"{plug:.2f}",
                                             f"{adapt:.2f}", parts, f"{raw_h:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def load_bits(path):
    """{name: bit patterns} of a checkpoint's floats (its bases followed), with
    "model/" and "optimizer/" taken off the names; its metadata."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "python"))
    import torch
    from ptwm._safe_open import safe_open
    from ptwm._torch_checkpoint import base_of, open_chain
    base = base_of(path)
    out = {}
    with safe_open(path, "pt", base=open_chain(base) if base else None) as f:
        meta = f.metadata() or {}
        for name in f.keys():
            t = f.get_tensor(name)
            bits = {4: (torch.int32, np.uint32), 2: (torch.int16, np.uint16)}.get(
                t.element_size())
            if t.is_floating_point() and bits and name.split("/", 1)[0] in ("model",
                                                                             "optimizer"):
                out[name.split("/", 1)[1]] = t.reshape(-1).view(bits[0]).numpy().view(bits[1])
    return out, meta


def coded_bytes(path, ptwm_bin):
    """{group: coded bytes} from `ptwm inspect --json`."""
    import subprocess
    info = json.loads(subprocess.run([ptwm_bin, "inspect", "--json", path], check=True,
                                     capture_output=True, text=True).stdout)
    out = {}
    for t in info["tensors"]:
        g = group_of(t["name"].split("/", 1)[1])
        if g is not None:
            out[g] = out.get(g, 0) + t["coded_bytes"]
    return out


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    prev, pmeta = load_bits(argv[0])
    cur, cmeta = load_bits(argv[1])
    k = json.loads(cmeta["ptwm.step"]) - json.loads(pmeta["ptwm.step"])
    betas = json.loads(cmeta["ptwm.param_groups"])[0].get("betas", {"__tuple__": [0.9, 0.999]})
    b1, b2 = betas["__tuple__"] if isinstance(betas, dict) else betas
    here = os.path.dirname(os.path.abspath(__file__))
    ptwm_bin = os.environ.get("PTWM_BIN", os.path.join(here, "..", "build", "ptwm"))
    rows = table(prev, cur, coded_bytes(argv[1], ptwm_bin), k, b1, b2)
    print("\n".join(markdown(rows)))


if __name__ == "__main__":
    main(sys.argv[1:])
