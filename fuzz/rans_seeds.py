#!/usr/bin/env python3
"""Seeds for fuzz_rans: order-0 rANS planes written from the byte format at
the top of src/codec/rans.c by this independent encoder, so the fuzzer starts
from valid streams of each order-0 mode. The encoder writes two streams only
for planes of 64K symbols and four from 256K, longer than the harness decodes
(at most 65,535), so without a seed the fuzzer meets modes 4 and 5 only by
chance. Each seed is the
harness's input: byte 0 (bits 6-7: the best instruction set), the plane's
length (u16), then the plane.

usage: fuzz/rans_seeds.py DIR"""
import os
import struct
import sys

L = 1 << 16
STATES = 32


def table(freq):
    """Symbol set (runs: gap from the end of the last run, length - 1), then
    each present symbol's frequency f as f - 1 in one or two bytes."""
    present = [s for s in range(256) if freq[s]]
    runs, s = [], 0
    while s < 256:
        while s < 256 and not freq[s]:
            s += 1
        if s == 256:
            break
        start = s
        while s < 256 and freq[s]:
            s += 1
        runs.append((start, s))
    out, end = bytearray([len(runs)]), 0
    for a, b in runs:
        out += bytes([a - end, b - a - 1])
        end = b
    for s in present:
        v = freq[s] - 1
        out += bytes([v]) if v < 128 else bytes([0x80 | v >> 8, v & 0xFF])
    return bytes(out)


def stream(syms, freq, prec):
    """One order-0 stream: 32 final states, then the words in decoding order."""
    cum, c = [0] * 256, 0
    for s in range(256):
        cum[s], c = c, c + freq[s]
    x, words = [L] * STATES, []
    for i in range(len(syms) - 1, -1, -1):
        k, s = i % STATES, syms[i]
        f = freq[s]
        if x[k] >= f << (32 - prec):
            words.append(x[k] & 0xFFFF)
            x[k] >>= 16
        x[k] = (x[k] // f << prec) + x[k] % f + cum[s]
    words.reverse()
    return struct.pack("<%dI" % STATES, *x) + struct.pack("<%dH" % len(words), *words)


def plane(syms, prec, k):
    """Mode 2 (k = 1), 4 (two streams) or 5 (four): the table, the length of
    each stream but the last, then the streams; each stream but the last
    codes floor(n / 32k) * 32 symbols, the last the rest."""
    counts = [0] * 256
    for s in syms:
        counts[s] += 1
    m, n = 1 << prec, len(syms)
    freq = [max(1, c * m // n) if c else 0 for c in counts]
    top = max(range(256), key=lambda s: freq[s])
    freq[top] += m - sum(freq)
    head = bytes([{1: 2, 2: 4, 4: 5}[k], prec]) + table(freq)
    if k == 1:
        return head + stream(syms, freq, prec)
    h = n // (k * STATES) * STATES
    parts = [stream(syms[i * h:(i + 1) * h if i + 1 < k else n], freq, prec) for i in range(k)]
    return head + b"".join(struct.pack("<I", len(p)) for p in parts[:-1]) + b"".join(parts)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seed, syms = 12345, []
    for i in range(3000):
        seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        r = seed >> 40
        syms.append(110 + (r & 7 if r & 0x300 else (r >> 3) % 20))
    for name, k in (("four-streams.bin", 4), ("two-streams.bin", 2), ("one-stream.bin", 1)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([0xC0]) + struct.pack("<H", len(syms)) + plane(syms, 12, k))


if __name__ == "__main__":
    main()
