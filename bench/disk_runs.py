#!/usr/bin/env python3
"""The runs behind bench/bench_disk.sh: builds the files, runs every command
of one round in turn, RUNS rounds, and prints a Markdown table of medians.

usage: disk_runs.py PTWM CORPUS PT_CORPUS WORK RUNS "SIZES" "THREADS" PATTERN"""
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import make_bench_file  # noqa: E402


def run(cmd, pre=None):
    """One whole process: (wall, user, sys, peak MiB). Times come from wait4
    (to the microsecond, the process and what it waited for); the peak from
    /usr/bin/time, whose freshly started child does not inherit this
    interpreter's resident pages as a forked one would."""
    if pre:
        pre()
    peak = os.path.join(os.environ.get("DISK_RUNS_TMP", "/tmp"), "disk_runs.%d.rss" % os.getpid())
    t = time.monotonic()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", peak] + cmd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if status != 0:
        sys.exit("FAILED (%d): %s\n%s" % (status, " ".join(cmd), err))
    with open(peak) as fh:
        kib = int(fh.read().split()[-1])
    os.unlink(peak)
    return wall, ru.ru_utime, ru.ru_stime, kib / 1024.0


def rm(path):
    def go():
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)
    return go


def same(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 24), fb.read(1 << 24)
            if x != y:
                return False
            if not x:
                return True


def main():
    ptwm, corpus, ptcorpus, work, runs = sys.argv[1:6]
    # OLD_PTWM: another build's binary, its decompress runs alternating with
    # this one's in every round (the table gives both, and x zstd for each),
    # on the file as it compresses it (the format may have changed between).
    old_ptwm = os.environ.get("OLD_PTWM")
    sizes = [int(s) for s in sys.argv[6].split()]
    threads = [int(t) for t in sys.argv[7].split()]
    pattern = sys.argv[8]
    min_bytes = int(os.environ.get("MIN_TENSOR", "0"))
    runs = int(runs)
    version = subprocess.run([ptwm, "--version"], capture_output=True, text=True).stdout.strip()
    print("Disk to disk, whole processes (`bench/bench_disk.sh`): one safetensors file of the corpus's "
          "tensors (files matching `%s`%s, repeated with rows rotated so no chunk repeats), on %d cores, "
          "%s, %s; medians of %d alternating runs. wall/user/sys in seconds, peak = maximum resident "
          "set; x zstd = wall time of one-thread zstd (`zstd -3 -T1`, `zstd -d`) over ptwm's for the "
          "same job (above 1: ptwm faster); x +fsync: the same against `zstd -d` followed by an "
          "fsync of its output. "
          "ptwm fsyncs its output before renaming it into place; `zstd -d` and `cp` do not, so "
          "`zstd -d + fsync` is given too, and `cp` of the restored file is the floor for writing "
          "the bytes at all (into the page cache); `cp + fsync` writes them to the disk, as ptwm "
          "does, but starts the writeback only at the end. Layout pt: the same weights with 4-D "
          "kernels moved to PyTorch's [out, in, kh, kw] (`bench/pytorch_layout.py`). Load "
          "average at the start: %.1f.\n"
          % (pattern, ", tensors of %d bytes or more" % min_bytes if min_bytes else "",
             os.cpu_count(), version, platform.platform(terse=True), runs,
             os.getloadavg()[0]))
    print("| MiB | layout | job | threads | command | wall | user | sys | peak MiB | MB/s | x zstd | x +fsync | size |")
    print("|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mb in sizes:
        for layout, src_dir in (("tf", corpus), ("pt", ptcorpus)):
            src = os.path.join(work, "%s-%d.safetensors" % (layout, mb))
            make_bench_file.build(src_dir, src, mb << 20, pattern, min_bytes)
            raw = os.path.getsize(src)
            cdir, back, zst, zback, cpout = (os.path.join(work, x) for x in
                                             ("c", "back", "f.zst", "zback", "cp.out"))
            jobs = []  # (job, threads, label, cmd, pre, output for size)
            for t in threads:
                jobs.append(("compress", t, "ptwm compress", [ptwm, "compress", src, "-o", cdir, "-q",
                             "--threads", str(t)], rm(cdir), cdir))
                jobs.append(("compress", t, "zstd -3 -T%d" % t, ["zstd", "-3", "-T%d" % t, "-q", "-f",
                             src, "-o", zst], rm(zst), zst))
            # The inputs of the decompress jobs, made once.
            run([ptwm, "compress", src, "-o", cdir + ".in", "-q"], rm(cdir + ".in"))
            run(["zstd", "-3", "-q", "-f", src, "-o", zst + ".in"])
            pin = os.path.join(cdir + ".in", "model.ptwm")
            if old_ptwm:
                run([old_ptwm, "compress", src, "-o", cdir + ".old", "-q"], rm(cdir + ".old"))
            # Read once, so every decompress starts from the page cache: ptwm
            # writes a large .ptwm past it (docs/ARCHITECTURE.md), zstd does not.
            warm = [pin] + ([os.path.join(cdir + ".old", "model.ptwm")] if old_ptwm else [])
            for f in warm:
                with open(f, "rb") as fh:
                    while fh.read(1 << 22):
                        pass
            for t in threads:
                if old_ptwm:  # first: the file checked after the rounds is this build's
                    jobs.append(("decompress", t, "ptwm decompress (OLD_PTWM)", [old_ptwm, "decompress",
                                 os.path.join(cdir + ".old", "model.ptwm"),
                                 "-o", back, "-q", "--threads", str(t)], rm(back), None))
                jobs.append(("decompress", t, "ptwm decompress", [ptwm, "decompress", pin, "-o", back,
                             "-q", "--threads", str(t)], rm(back), None))
            jobs.append(("decompress", 1, "zstd -d", ["zstd", "-d", "-q", "-f", zst + ".in", "-o", zback],
                         rm(zback), None))
            jobs.append(("decompress", 1, "zstd -d + fsync", ["sh", "-c", 'zstd -d -q -f "$1" -o "$2" && sync "$2"',
                         "sh", zst + ".in", zback], rm(zback), None))
            jobs.append(("decompress", 1, "cp (restored file)", ["cp", src, cpout], rm(cpout), None))
            jobs.append(("decompress", 1, "cp + fsync", ["sh", "-c", 'cp "$1" "$2" && sync "$2"', "sh",
                         src, cpout], rm(cpout), None))
            res = [[] for _ in jobs]
            for _ in range(runs):
                for k, j in enumerate(jobs):
                    res[k].append(run(j[3], j[4]))
            restored = os.path.join(back, os.path.basename(src))
            if not same(src, restored):
                sys.exit("MISMATCH: %s restored differently" % src)
            med = [tuple(statistics.median(r[i] for r in rs) for i in range(4)) for rs in res]
            zwall = {}
            for k, j in enumerate(jobs):
                if j[2] in ("zstd -3 -T1", "zstd -d", "zstd -d + fsync"):
                    zwall[j[2]] = med[k][0]
            for k, j in enumerate(jobs):
                job, t, label = j[0], j[1], j[2]
                w, u, s, m = med[k]
                ratio = synced = ""
                if label.startswith("ptwm") and w:
                    z = zwall.get("zstd -3 -T1" if job == "compress" else "zstd -d")
                    ratio = "%.2fx" % (z / w) if z else ""
                    if job == "decompress" and zwall.get("zstd -d + fsync"):
                        synced = "%.2fx" % (zwall["zstd -d + fsync"] / w)
                size = ""
                if j[5] and os.path.exists(j[5]):
                    out = j[5]
                    n = (sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
                         if os.path.isdir(out) else os.path.getsize(out))
                    size = "%.2f%%" % (100.0 * n / raw)
                print("| %d | %s | %s | %d | %s | %.3f | %.3f | %.3f | %.0f | %.0f | %s | %s | %s |"
                      % (mb, layout, job, t, label, w, u, s, m, raw / 1e6 / w if w else 0, ratio,
                         synced, size))
            for p in (cdir, back, zst, zback, cpout, cdir + ".in", zst + ".in", src):
                rm(p)()
            sys.stdout.flush()
    print("\nLoad average at the end: %.1f." % os.getloadavg()[0])


if __name__ == "__main__":
    main()
