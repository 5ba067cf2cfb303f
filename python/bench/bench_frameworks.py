"""Loading speed and memory of ptwm.torch beside the alternatives, on real weights.

    PTWM_LIBRARY=build/libptwm.so PYTHONPATH=python /usr/bin/python3 \
        python/bench/bench_frameworks.py CORPUS_DIR [TARGET_MB]

Builds a state dict of about TARGET_MB (default 176) from the F32 corpus files
(the real tensors, repeated under new names with their lowest 8 mantissa bits
redrawn so no copy is stored once), writes it as .ptwm, as
safetensors and with torch.save, then times in fresh processes (best of 3):
ptwm.torch.load_file; the bytes path (each tensor decoded to a bytes object,
then copied into a tensor, as code written against the bytes API does); the C
library's decode of every tensor into one preallocated buffer (ctypes, no
tensors); ptwm.torch.load_file of the safetensors file; torch.load. Peak memory
is the process's peak RSS (VmHWM, reset before loading) above what it held
before loading. Then a training
checkpoint (the same weights as parameters, AdamW state after one step):
sizes and times of save_checkpoint beside torch.save and safetensors.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

LOADERS = {
    "ptwm.torch.load_file": """
import ptwm.torch as pt
sd = pt.load_file(PTWM)
""",
    "bytes path (read() + copy)": """
import torch, ptwm
from ptwm.torch import _torch_dtype
sd = {}
with ptwm.open(PTWM) as f:
    for n in f.names():
        i = f.info(n)
        raw = f.read(n)
        t = torch.empty(i.shape, dtype=_torch_dtype(ptwm.dtype_code(i.dtype), n))
        t.reshape(-1).view(torch.uint8).copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        sd[n] = t
        del raw
""",
    "C decode into one buffer": """
import ctypes, ptwm
from ptwm._lib import lib, ErrStruct
with ptwm.open(PTWM) as f:
    names = f.names()
    sizes = [f.info(n).nbytes for n in names]
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    addr0 = libc.malloc(sum(sizes) or 1)   # untouched, like a new tensor's memory
    n = len(names)
    idx = (ctypes.c_size_t * n)(*range(n))
    offs, o = [], 0
    for s in sizes:
        offs.append(addr0 + o); o += s
    dsts = (ctypes.c_void_p * n)(*offs)
    szs = (ctypes.c_size_t * n)(*sizes)
    lib.ptwm_reader_decode_many.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    err = ErrStruct()
    t0 = time.perf_counter()
    assert lib.ptwm_reader_decode_many(f._handle, idx, dsts, szs, n, ctypes.byref(err)) == 0
""",
    "ptwm.torch.load_file(.safetensors)": """
import ptwm.torch as pt
sd = pt.load_file(ST)
""",
    "torch.load": """
import torch
sd = torch.load(PT)
""",
}

CHILD = """
import sys, time, json
import torch, ptwm, ptwm.torch
PTWM, ST, PT = sys.argv[1:4]

def _kb(field):
    with open("/proc/self/status") as f:
        return [int(l.split()[1]) for l in f if l.startswith(field)][0]

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")   # reset the peak (VmHWM) to what the process holds now
_base = _kb("VmRSS:")
t0 = time.perf_counter()
{body}
dt = time.perf_counter() - t0
print(json.dumps([dt, (_kb("VmHWM:") - _base) * 1024]))
"""


def build_state(corpus, target_mb):
    import torch
    import ptwm.torch as pt
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".f32.safetensors"))
    sd, total, rep = {}, 0, 0
    g = torch.Generator().manual_seed(0)
    while total < target_mb * 1e6:
        for f in files:
            for k, v in pt.load_file(os.path.join(corpus, f)).items():
                if rep:   # new low mantissa bits: no repeat the writer could store once
                    noise = torch.randint(0, 256, v.shape, generator=g, dtype=torch.int32)
                    v = (v.view(torch.int32) ^ noise).view(torch.float32)
                sd[f"r{rep}/{f}/{k}"] = v
                total += v.nelement() * v.element_size()
        rep += 1
    return sd, total


def run(label, body, paths):
    best = None
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", CHILD.format(body=body), *paths],
                             capture_output=True, text=True, check=True)
        dt, peak = json.loads(out.stdout.strip().splitlines()[-1])
        best = (dt, peak) if best is None or dt < best[0] else best
    return best


def main():
    corpus = sys.argv[1]
    target = float(sys.argv[2]) if len(sys.argv) > 2 else 176
    tmp = tempfile.mkdtemp(prefix="ptwm-pybench-")
    try:
        measure(corpus, target, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(corpus, target, tmp):
    import torch
    import ptwm
    import ptwm.torch as pt
    sd, total = build_state(corpus, target)
    paths = [os.path.join(tmp, n) for n in ("m.ptwm", "m.safetensors", "m.pt")]
    t0 = time.perf_counter()
    pt.save_file(sd, paths[0])
    t_save = time.perf_counter() - t0
    ptwm.write_safetensors(paths[1], [(k, v.reshape(-1).view(torch.uint8).numpy(), v.dtype,
                                       tuple(v.shape)) for k, v in sd.items()])
    torch.save(sd, paths[2])
    print(f"state: {len(sd)} real F32 tensors, {total / 1e6:.1f} MB; threads: all cores")
    for p in paths:
        print(f"  {os.path.basename(p):16s} {os.path.getsize(p) / 1e6:8.1f} MB")
    print(f"  ptwm.torch.save_file: {t_save:.2f} s")
    print(f"{'loader':38s} {'time s':>8s} {'peak above start MB':>20s}")
    for label, body in LOADERS.items():
        dt, peak = run(label, body, paths)
        print(f"{label:38s} {dt:8.3f} {peak / 1e6:20.1f}")
    checkpoint(sd, tmp)


def checkpoint(sd, tmp):
    import torch
    import ptwm
    import ptwm.torch as pt
    model = torch.nn.Module()
    model.p = torch.nn.ParameterList([torch.nn.Parameter(v.clone()) for v in sd.values()])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g) * 1e-3
    opt.step()
    files = {"ptwm save_checkpoint": os.path.join(tmp, "c.ptwm"),
             "torch.save": os.path.join(tmp, "c.pt"),
             "safetensors (same tensors)": os.path.join(tmp, "c.safetensors")}
    times = {}
    t0 = time.perf_counter()
    pt.save_checkpoint(files["ptwm save_checkpoint"], model, opt, step=1)
    times["ptwm save_checkpoint"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, files["torch.save"])
    times["torch.save"] = time.perf_counter() - t0
    flat = {f"model/{k}": v for k, v in model.state_dict().items()}
    for i, st in opt.state_dict()["state"].items():
        flat.update({f"optimizer/{i}/{k}": v for k, v in st.items()})
    t0 = time.perf_counter()
    ptwm.write_safetensors(files["safetensors (same tensors)"],
                           [(k, v.detach().reshape(-1).view(torch.uint8).numpy(), v.dtype,
                             tuple(v.shape)) for k, v in flat.items()])
    times["safetensors (same tensors)"] = time.perf_counter() - t0
    m2 = torch.nn.Module()
    m2.p = torch.nn.ParameterList([torch.nn.Parameter(torch.empty_like(v)) for v in sd.values()])
    o2 = torch.optim.AdamW(m2.parameters(), lr=1e-4)
    t0 = time.perf_counter()
    pt.load_checkpoint(files["ptwm save_checkpoint"], m2, o2)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch.load(files["torch.save"])
    t_tload = time.perf_counter() - t0
    print("AdamW checkpoint (weights + exp_avg + exp_avg_sq + step):")
    for label, path in files.items():
        print(f"  {label:28s} {os.path.getsize(path) / 1e6:8.1f} MB  save {times[label]:.2f} s")
    print(f"  load_checkpoint {t_load:.2f} s, torch.load {t_tload:.2f} s")


if __name__ == "__main__":
    main()
