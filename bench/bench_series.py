#!/usr/bin/python3
"""Checkpoint series of a real fine-tune: bytes and the time a save blocks training.

Usage: bench_series.py [--corpus DIR] [--net emotion|mlp] [--dtype f32|bf16]
                       [--lrs 1e-5,1e-4] [--saves 10] [--every 50] [--keyframe 10]
                       [--bg-threads 0] [--priorities idle] [--snapshots now]
                       [--torch-threads 1]
                       [--out FILE.md]

emotion: the emotion network of the corpus (its real F32 weights, in the module of
python/tests/test_torch_checkpoint.py) fine-tuned with torch.optim.AdamW
(weight decay 0.01) on seeded synthetic batches (grey 32x32 images, random labels).
mlp: eight 1024x1024 linear layers (8.4 M parameters, 101 MB of state with AdamW's
moments) trained from a seeded initialisation on a seeded regression: the size where
the time of a save is more than fixed costs.
--dtype bf16: the weights in BF16 with F32 moments (Bf16AdamW: AdamW's update in
F32 from the weight's value, rounded to BF16; no F32 master copy is kept).

Every --every steps the state is saved --saves times, four ways, in one run:
  torch.save        {"model": state_dict, "optimizer": state_dict} to a file
  ptwm whole        ptwm.torch.save_checkpoint without a base
  ptwm series       ptwm.torch.CheckpointSeries (each against the one before, a whole
                    one every --keyframe), blocking
  series, background  the same with blocking=False: the time until the call returns
                    is what training waits; the save runs on while the next steps do.
                    --bg-threads 0,1: one background series per thread count given
                    (the library's threads= of the save, 0 = all cores), taking the
                    checkpoints in turn, so each count is timed in the same run;
                    --priorities idle,normal: the same for each priority= of the save
                    (idle: the save runs on cores training leaves idle);
                    --snapshots now,before_step: for each snapshot= (before_step: the
                    save's thread copies the state; the next optimizer step waits for it)
Reported: bytes of each (sum over the saves), the seconds each call blocks (median),
and the median seconds of a training step with no save running and while a
background save runs (per --bg-threads count and priority). Each resumed checkpoint
of the series is checked to decode to the state it saved (bit for bit). Torch runs
--torch-threads threads (default 1: torch.set_num_threads(1)). The last checkpoint's
values are also measured against the one before by bench/moment_entropy.py
(conditional entropies).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))
import ptwm.torch as pt  # noqa: E402
import moment_entropy  # noqa: E402


class Bf16AdamW(torch.optim.AdamW):
    """AdamW (torch's single-tensor arithmetic) on BF16 weights with F32 moments:
    the update is computed in F32 from the weight's value and rounded to BF16."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr = group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = torch.tensor(0.0)
                    st["exp_avg"] = torch.zeros(p.shape, dtype=torch.float32)
                    st["exp_avg_sq"] = torch.zeros(p.shape, dtype=torch.float32)
                st["step"] += 1
                t = st["step"].item()
                g, w = p.grad.float(), p.float()
                w.mul_(1 - lr * group["weight_decay"])
                st["exp_avg"].lerp_(g, 1 - b1)
                st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (st["exp_avg_sq"].sqrt() / math.sqrt(1 - b2 ** t)).add_(group["eps"])
                w.addcdiv_(st["exp_avg"], denom, value=-lr / (1 - b1 ** t))
                p.copy_(w)


def make_opt(model, lr, dtype):
    kind = Bf16AdamW if dtype == "bf16" else torch.optim.AdamW
    return kind(model.parameters(), lr=lr, weight_decay=0.01)


def make_net(kind, corpus, dtype="f32"):
    model, batch, loss = _make_net(kind, corpus)
    if dtype == "f32":
        return model, batch, loss
    model = model.to(torch.bfloat16)

    def batch16(step):
        x, y = batch(step)
        return x.to(torch.bfloat16), y

    return model, batch16, loss


def _make_net(kind, corpus):
    if kind == "emotion":
        from test_torch_checkpoint import EmotionNet
        model = EmotionNet(pt.load_file(os.path.join(corpus, "emotion.f32.safetensors")))

        def batch(step):
            g = torch.Generator().manual_seed(1000 + step)
            x = torch.randn(2, 1, 32, 32, generator=g)
            return x, torch.randint(0, 7, (2,), generator=g)

        def loss(model, x, y):
            return F.cross_entropy(model(x), y)
    else:
        torch.manual_seed(0)
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers[:-1])

        def batch(step):
            g = torch.Generator().manual_seed(1000 + step)
            x = torch.randn(16, 1024, generator=g)
            return x, torch.tanh(x.roll(1, dims=1))

        def loss(model, x, y):
            return F.mse_loss(model(x).float(), y)   # no BF16 mse_loss on the CPU
    return model, batch, loss


def state_bits(model, opt):
    out = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for i, per in opt.state_dict()["state"].items():
        for k, v in per.items():
            if isinstance(v, torch.Tensor):
                out[f"{i}/{k}"] = v.detach().clone()
    return out


def same(a, b):
    return a.keys() == b.keys() and all(
        a[k].reshape(-1).view(torch.uint8).equal(b[k].reshape(-1).view(torch.uint8)) for k in a)


def group_of(name):
    """model weights, or the optimizer state key (exp_avg, exp_avg_sq, step)."""
    return "weights" if "/" not in name or name.startswith("model/") else name.rsplit("/", 1)[1]


def h0_planes(u, width):
    """Order-0 entropy of each byte plane of the unsigned ints u, in bits a value."""
    import numpy as np
    total = 0.0
    for k in range(width // 8):
        counts = np.bincount(((u >> (8 * k)) & 0xFF).astype(np.int64), minlength=256)
        p = counts[counts > 0] / len(u)
        total += float(-(p * np.log2(p)).sum())
    return total


def study(prev, cur, last_file, ptwm_bin):
    """Per group, bits a value: the series' coding of the last checkpoint (from
    `ptwm inspect --json`) beside order-0 entropies of byte planes: the values
    alone, their XOR with the previous checkpoint's and the zigzagged ordered
    difference (docs/DELTA.md)."""
    import json
    import subprocess
    import numpy as np
    coded = {}
    info = json.loads(subprocess.run([ptwm_bin, "inspect", "--json", last_file], check=True,
                                     capture_output=True, text=True).stdout)
    for t in info["tensors"]:
        g = group_of(t["name"][len("model/"):] if t["name"].startswith("model/") else t["name"])
        coded[g] = coded.get(g, 0) + t["coded_bytes"]
    out = {}
    for g in sorted(set(group_of(k) for k in cur)):
        names = [k for k in cur if group_of(k) == g and cur[k].dtype == torch.float32]
        if not names:
            continue
        c = np.concatenate([cur[k].reshape(-1).view(torch.int32).numpy() for k in names])
        b = np.concatenate([prev[k].reshape(-1).view(torch.int32).numpy() for k in names])
        c, b = c.view(np.uint32), b.view(np.uint32)

        def ordered(u):
            return np.where(u >> 31 == 1, ~u, u | np.uint32(1 << 31))
        d = (ordered(c) - ordered(b)).view(np.int32).astype(np.int64)
        zz = ((d << 1) ^ (d >> 63)).astype(np.uint64) & 0xFFFFFFFF
        n = len(c)
        out[g] = {"values": n, "coded": 8 * coded.get(g, 0) / n, "plain_h0": h0_planes(c, 32),
                  "xor_h0": h0_planes(c ^ b, 32), "sub_h0": h0_planes(zz, 32)}
    return out


def bit_patterns(state):
    """{name: numpy bit patterns} of the float tensors of a state_bits dict."""
    kinds = {4: (torch.int32, "uint32"), 2: (torch.int16, "uint16")}
    return {k: v.reshape(-1).view(kinds[v.element_size()][0]).numpy().view(
        kinds[v.element_size()][1]) for k, v in state.items()
        if v.is_floating_point() and v.element_size() in kinds}


def run(kind, corpus, lr, saves, every, keyframe, work, dtype="f32", bg=((0, "idle", "now"),),
        torch_threads=1):
    torch.set_num_threads(torch_threads)
    model, batch, loss = make_net(kind, corpus, dtype)
    opt = make_opt(model, lr, dtype)
    series = pt.CheckpointSeries(os.path.join(work, "series"), keyframe_every=keyframe)
    bgs = [pt.CheckpointSeries(os.path.join(work, f"bg{t}"), keyframe_every=keyframe,
                               threads=t) for t, _, _ in bg]
    r = {k: [] for k in ("torch_b", "whole_b", "series_b", "torch_s", "whole_s", "series_s",
                         "step_idle")}
    for t, prio, snap in bg:
        r[f"bg_s{t}{prio}{snap}"], r[f"step_busy{t}{prio}{snap}"] = [], []
    saved, handle, step, last = [], None, 0, None
    for n in range(saves):
        for _ in range(every):
            x, y = batch(step)
            busy = handle is not None and not handle.done()   # a save runs as it starts
            t0 = time.perf_counter()
            opt.zero_grad()
            loss(model, x, y).backward()
            opt.step()
            r[f"step_busy{last}" if busy else "step_idle"].append(time.perf_counter() - t0)
            step += 1
        if handle is not None:
            handle.wait()
        p = os.path.join(work, f"t{n}.pt")
        t0 = time.perf_counter()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, p)
        r["torch_s"].append(time.perf_counter() - t0)
        r["torch_b"].append(os.path.getsize(p))
        p = os.path.join(work, f"w{n}.ptwm")
        t0 = time.perf_counter()
        pt.save_checkpoint(p, model, opt, step)
        r["whole_s"].append(time.perf_counter() - t0)
        r["whole_b"].append(os.path.getsize(p))
        t0 = time.perf_counter()
        series.save(model, opt, step)
        r["series_s"].append(time.perf_counter() - t0)
        r["series_b"].append(os.path.getsize(series.path(step)))
        t, prio, snap = bg[n % len(bgs)]
        last = f"{t}{prio}{snap}"
        t0 = time.perf_counter()
        handle = bgs[n % len(bgs)].save(model, opt, step, blocking=False, priority=prio,
                                        snapshot=snap)
        r[f"bg_s{last}"].append(time.perf_counter() - t0)
        saved.append((step, state_bits(model, opt), bgs[n % len(bgs)]))
    handle.wait()
    ptwm_bin = os.environ.get("PTWM_BIN", os.path.join(HERE, "..", "build", "ptwm"))
    last = series.path(saved[-1][0])
    r["study"] = study(saved[-2][1], saved[-1][1], last, ptwm_bin)
    beta1, beta2 = opt.param_groups[0]["betas"]
    r["entropy"] = moment_entropy.table(bit_patterns(saved[-2][1]), bit_patterns(saved[-1][1]),
                                        moment_entropy.coded_bytes(last, ptwm_bin), every,
                                        beta1, beta2)
    for s, want, bg in saved:   # every checkpoint of the series decodes to its state
        for ser in (series, bg):
            m2, _, _ = make_net(kind, corpus, dtype)
            o2 = make_opt(m2, lr, dtype)
            ser.load(m2, o2, s)
            assert same(state_bits(m2, o2), want), f"step {s} differs"
    return r


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.environ.get("PTWM_CORPUS",
                                                       os.path.join(HERE, "..", "build-corpus")))
    ap.add_argument("--net", default="emotion")
    ap.add_argument("--dtype", default="f32", choices=("f32", "bf16"))
    ap.add_argument("--lrs", default="1e-5,1e-4")
    ap.add_argument("--saves", type=int, default=10)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--keyframe", type=int, default=10)
    ap.add_argument("--bg-threads", default="0")
    ap.add_argument("--priorities", default="idle")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--snapshots", default="now")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    bg = tuple((int(t), p, s) for s in a.snapshots.split(",") for p in a.priorities.split(",")
               for t in a.bg_threads.split(","))
    med = statistics.median
    studies = []
    lines = [f"net {a.net}, weights {a.dtype}, {a.saves} checkpoints {a.every} AdamW steps "
             f"apart, keyframe every {a.keyframe}, torch threads {a.torch_threads}", "",
             "| lr | torch.save bytes | ptwm whole | ptwm series | series / torch.save | "
             "series / whole | torch.save s | ptwm whole s | series s | step s idle |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    bg_lines = ["", "Background saves (the library's threads of the save; 0 = all cores): "
                "seconds the call blocks (median), over torch.save's, and the median "
                "step while the save runs.", "",
                "| lr | save threads | priority | snapshot | saves | background blocks s | "
                "background / torch.save | step s idle | step s during a save | "
                "steps timed during a save |",
                "|---|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for lr in [float(x) for x in a.lrs.split(",")]:
        with tempfile.TemporaryDirectory(prefix="ptwm-series-") as work:
            r = run(a.net, a.corpus, lr, a.saves, a.every, a.keyframe, work, a.dtype,
                    bg, a.torch_threads)
        tb, wb, sb = sum(r["torch_b"]), sum(r["whole_b"]), sum(r["series_b"])
        lines.append(f"| {lr:g} | {tb:,} | {wb:,} | {sb:,} | {sb / tb:.3f} | {sb / wb:.3f} | "
                     f"{med(r['torch_s']):.4f} | {med(r['whole_s']):.4f} | "
                     f"{med(r['series_s']):.4f} | {med(r['step_idle']):.4f} |")
        print(lines[-1], flush=True)
        for t, prio, snap in bg:
            busy, key = r[f"step_busy{t}{prio}{snap}"], f"bg_s{t}{prio}{snap}"
            bg_lines.append(f"| {lr:g} | {t} | {prio} | {snap} | {len(r[key])} | "
                            f"{med(r[key]):.4f} | "
                            f"{med(r[key]) / med(r['torch_s']):.3f} | "
                            f"{med(r['step_idle']):.4f} | "
                            f"{f'{med(busy):.4f}' if busy else '-'} | {len(busy)} |")
            print(bg_lines[-1], flush=True)
        studies.append((lr, r["study"], r["entropy"]))
    lines += bg_lines
    lines += ["", "Bits a value in the last checkpoint of the series (against the one before): "
              "its coding, and order-0 entropies of byte planes of the values alone, of their "
              "XOR with the previous values and of the ordered difference.", "",
              "| lr | group | values | coded | values H0 | XOR H0 | difference H0 |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for lr, st, _ in studies:
        for g, v in st.items():
            lines.append(f"| {lr:g} | {g} | {v['values']:,} | {v['coded']:.2f} | "
                         f"{v['plain_h0']:.2f} | {v['xor_h0']:.2f} | {v['sub_h0']:.2f} |")
    lines += ["", "The same values under context models given the previous checkpoint "
              "(bench/moment_entropy.py): bits a value, plug-in and adaptive.", ""]
    for i, (lr, _, ent) in enumerate(studies):
        table = moment_entropy.markdown(ent, lead=(("lr", f"{lr:g}"),))
        lines += table if i == 0 else table[2:]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
