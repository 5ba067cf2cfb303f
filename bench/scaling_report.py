#!/usr/bin/env python3
"""The scaling tables of docs/SCALING.md from bench/bench_scaling.sh's CSV.

usage: bench/scaling_report.py SCALING.csv MACHINE.txt  (markdown on stdout)
MB/s is 10^6 raw tensor-file bytes a second of wall time; CPU is user +
system seconds; "x" is the speed over one thread's (CPU: the CPU seconds over
one thread's): for whole processes the median of each round's ratio, as are
the ratios to the floors, where the CSV has them (paired_*)."""
import csv
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    rows = list(csv.DictReader(open(sys.argv[1])))
    machine = open(sys.argv[2]).read().strip().splitlines()
    files = list(dict.fromkeys(r["file"] for r in rows))
    threads = sorted({int(r["threads"]) for r in rows if r["tool"] == "ptwm"})
    get = {(r["file"], r["where"], r["op"], r["tool"], int(r["threads"])): r for r in rows}

    def mbs(r):
        return int(r["raw_bytes"]) / float(r["wall_s"]) / 1e6

    def cell(f, where, op, tool, t, base_t=None):
        r = get.get((f, where, op, tool, t))
        if not r:
            return "-"
        s = "%.0f (%.3f)" % (mbs(r), float(r["cpu_s"]))
        b = get.get((f, where, op, tool, base_t)) if base_t else None
        if b:
            x = r.get("paired_x") or float(b["wall_s"]) / float(r["wall_s"])
            s += " %.2fx" % float(x)
            if float(b["cpu_s"]) > 0:
                s += ", CPU %.2fx" % (float(r["cpu_s"]) / float(b["cpu_s"]))
        return s

    def over(r, base, paired):
        """r's time over base's: the paired ratio if the CSV has it."""
        if not r or not base:
            return "-"
        return "%.2f" % float(r.get(paired) or float(r["wall_s"]) / float(base["wall_s"]))

    def info(f):
        r = next(r for r in rows if r["file"] == f)
        return "%s | %s | %.1f" % (f, r["dtype"], int(r["raw_bytes"]) / 1e6)

    out = []
    tcols = " | ".join("%d thread%s" % (t, "" if t == 1 else "s") for t in threads)
    for op in ("compress", "decompress"):
        out.append("**In memory, %s**: MB/s (CPU s)%s" % (op, ", speed and CPU over one thread"))
        out.append("")
        out.append("| file | dtype | MB | %s |" % tcols)
        out.append("|---|---|---:|" + "---:|" * len(threads))
        for f in files:
            cells = [cell(f, "memory", op, "ptwm", t, None if t == 1 else 1) for t in threads]
            out.append("| %s | %s |" % (info(f), " | ".join(cells)))
        out.append("")
    out.append("**Whole processes, compress**: `ptwm compress` and `zstd -3 -T<n>`, MB/s of input "
               "(CPU s), each into a new output; the floor: ptwm's coded bytes written by `cp` and "
               "fsynced, and ptwm's time over it")
    out.append("")
    out.append("| file | dtype | MB | %s | %s | cp coded + fsync | ptwm %dT / floor |" % (
        " | ".join("ptwm %dT" % t for t in threads), " | ".join("zstd -3 -T%d" % t for t in threads),
        threads[-1]))
    out.append("|---|---|---:|" + "---:|" * (2 * len(threads) + 2))
    for f in files:
        cells = [cell(f, "process", "compress", "ptwm", t, None if t == 1 else 1) for t in threads]
        cells += [cell(f, "process", "compress", "zstd -3", t) for t in threads]
        cells.append(cell(f, "process", "compress", "cp coded + fsync", 1))
        pn = get.get((f, "process", "compress", "ptwm", threads[-1]))
        fl = get.get((f, "process", "compress", "cp coded + fsync", 1))
        cells.append(over(pn, fl, "paired_floor"))
        out.append("| %s | %s |" % (info(f), " | ".join(cells)))
    out.append("")
    out.append("**Whole processes, restore**: `ptwm decompress` (fsyncs its output) beside `zstd -d` "
               "and `cp`, each followed by `sync FILE`; MB/s (CPU s), and ptwm's time over theirs")
    out.append("")
    out.append("| file | dtype | MB | %s | zstd -d + fsync | cp + fsync | ptwm 1T / zstd -d | ptwm %dT / cp |" % (
        " | ".join("ptwm %dT" % t for t in threads), threads[-1]))
    out.append("|---|---|---:|" + "---:|" * (len(threads) + 4))
    for f in files:
        cells = [cell(f, "process", "decompress", "ptwm", t, None if t == 1 else 1) for t in threads]
        cells += [cell(f, "process", "decompress", "zstd -d + fsync", 1),
                  cell(f, "process", "decompress", "cp + fsync", 1)]
        p1 = get.get((f, "process", "decompress", "ptwm", 1))
        pn = get.get((f, "process", "decompress", "ptwm", threads[-1]))
        z = get.get((f, "process", "decompress", "zstd -d + fsync", 1))
        c = get.get((f, "process", "decompress", "cp + fsync", 1))
        cells.append(over(p1, z, "paired_zstd"))
        cells.append(over(pn, c, "paired_floor"))
        out.append("| %s | %s |" % (info(f), " | ".join(cells)))
    out.append("")
    out.append("; ".join(machine) + ".")
    print("\n".join(out))


if __name__ == "__main__":
    main()
