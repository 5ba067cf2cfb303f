"""ptwm.torch.save_checkpoint / load_checkpoint: a real network (the weights of
tests/corpus/emotion.f32.safetensors in a torch module written for their
shapes) trained N steps; saved at step k and resumed (in a fresh process for
AdamW), every parameter equals an uninterrupted run's bit for bit.

Run as a script (`resume CKPT OUT OPTIMIZER K N`) it is that fresh process."""

import os
import subprocess
import sys
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import REPO, TempDirTest

# torch is required (scripts/deps.sh installs it).
import torch
import torch.nn.functional as F
import ptwm.torch as pt

REAL = os.path.join(REPO, "tests", "corpus", "emotion.f32.safetensors")
P = "StatefulPartitionedCall/model_1/"
# parameter -> (tensor in the file, how its TF layout becomes torch's)
LAYERS = {"conv1.w": (P + "conv2d_1/Conv2D_weights", "conv"),
          "conv1.b": (P + "conv2d_1/Conv2D_bn_offset", None),
          "conv2.w": (P + "conv2d_2/Conv2D_weights", "conv"),
          "conv2.b": (P + "conv2d_2/Conv2D_bn_offset", None),
          "res1.w": (P + "conv2d_3/Conv2D_weights", "conv"),
          "res1.b": (P + "conv2d_3/Conv2D_bn_offset", None),
          "sep1.dw": ("unknown_9", "depthwise"),
          "sep1.pw": (P + "separable_conv2d_1/separable_conv2d_weights", "conv"),
          "sep1.b": (P + "separable_conv2d_1/separable_conv2d_bn_offset", None),
          "sep2.dw": ("unknown_15", "depthwise"),
          "sep2.pw": (P + "separable_conv2d_2/separable_conv2d_weights", "conv"),
          "sep2.b": (P + "separable_conv2d_2/separable_conv2d_bn_offset", None),
          "res2.w": (P + "conv2d_4/Conv2D_weights", "conv"),
          "res2.b": (P + "conv2d_4/Conv2D_bn_offset", None),
          "sep3.dw": ("unknown_26", "depthwise"),
          "sep3.pw": (P + "separable_conv2d_3/separable_conv2d_weights", "conv"),
          "sep3.b": (P + "separable_conv2d_3/separable_conv2d_bn_offset", None),
          "sep4.dw": ("unknown_32", "depthwise"),
          "sep4.pw": (P + "separable_conv2d_4/separable_conv2d_weights", "conv"),
          "sep4.b": (P + "separable_conv2d_4/separable_conv2d_bn_offset", None),
          "head.w": ("unknown_43", "conv")}


if torch is not None:
    class EmotionNet(torch.nn.Module):
        """The emotion classifier's layers (HWIO kernels turned OIHW): grey images in,
        7 classes out."""

        def __init__(self, weights):
            super().__init__()
            self.p = torch.nn.ParameterDict()
            for name, (src, layout) in LAYERS.items():
                w = weights[src]
                if layout == "conv":
                    w = w.permute(3, 2, 0, 1)
                elif layout == "depthwise":
                    w = w.permute(2, 3, 0, 1)
                self.p[name.replace(".", "_")] = torch.nn.Parameter(w.contiguous())

        def _sep(self, x, k):
            p = self.p
            x = F.conv2d(x, p[k + "_dw"], padding=1, groups=x.shape[1])
            return F.conv2d(x, p[k + "_pw"], p[k + "_b"])

        def forward(self, x):
            p = self.p
            x = F.relu(F.conv2d(x, p["conv1_w"], p["conv1_b"], stride=2, padding=1))
            x = F.relu(F.conv2d(x, p["conv2_w"], p["conv2_b"], padding=1))
            a = self._sep(F.relu(self._sep(x, "sep1")), "sep2")
            x = F.max_pool2d(F.relu(a + F.conv2d(x, p["res1_w"], p["res1_b"])), 2)
            b = self._sep(F.relu(self._sep(x, "sep3")), "sep4")
            x = F.relu(b + F.conv2d(x, p["res2_w"], p["res2_b"]))
            return F.conv2d(x, p["head_w"], padding=1).mean(dim=(2, 3))

    class Bf16AdamW(torch.optim.AdamW):
        """AdamW on BF16 weights with F32 moments (no F32 master copy): the update
        is computed in F32 from the weight's value and rounded to BF16."""

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    st = self.state[p]
                    if not st:
                        st.update(step=torch.tensor(0.0), exp_avg=torch.zeros(p.shape),
                                  exp_avg_sq=torch.zeros(p.shape))
                    st["step"] += 1
                    t = st["step"].item()
                    g, w = p.grad.float(), p.float().mul_(1 - group["lr"] * 0.05)
                    st["exp_avg"].lerp_(g, 1 - b1)
                    st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                    denom = (st["exp_avg_sq"].sqrt() / (1 - b2 ** t) ** 0.5).add_(group["eps"])
                    p.copy_(w.addcdiv_(st["exp_avg"], denom, value=-group["lr"] / (1 - b1 ** t)))

    OPTIMIZERS = {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.01),
                  "momentum": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9,
                                                         nesterov=True),
                  "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3, betas=(0.8, 0.99)),
                  "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.05),
                  "bf16-adamw": lambda ps: Bf16AdamW(ps, lr=1e-3)}


def make(kind, dtype=None):
    """The network and its optimizer; "bf16-" kinds train BF16 weights."""
    torch.set_num_threads(1)   # one thread: the same sums in every process
    model = EmotionNet(pt.load_file(REAL))
    dtype = dtype or (torch.bfloat16 if kind.startswith("bf16-") else torch.float32)
    model = model.to(dtype)
    return model, OPTIMIZERS[kind](model.parameters())


def train(model, opt, start, stop):
    for step in range(start, stop):
        g = torch.Generator().manual_seed(1000 + step)   # the batch depends on the step only
        x = torch.randn(2, 1, 32, 32, generator=g).to(next(model.parameters()).dtype)
        y = torch.randint(0, 7, (2,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


def bits(model):
    return {k: v.detach().reshape(-1).view(torch.uint8).numpy().tobytes()
            for k, v in model.state_dict().items()}


class ResumeTest(TempDirTest):
    K, N = 2, 4

    def uninterrupted(self, kind):
        model, opt = make(kind)
        train(model, opt, 0, self.N)
        return model, opt

    def test_resume_is_bit_exact_for_each_optimizer(self):
        for kind in OPTIMIZERS:
            with self.subTest(optimizer=kind):
                want, _ = self.uninterrupted(kind)
                model, opt = make(kind)
                train(model, opt, 0, self.K)
                path = self.path(f"{kind}.ptwm")
                pt.save_checkpoint(path, model, opt, step=self.K, extra={"run": kind})
                model2, opt2 = make(kind)
                for group in opt2.param_groups:
                    group["lr"] = 123.0          # the file's hyper-parameters win
                info = pt.load_checkpoint(path, model2, opt2)
                self.assertEqual(info, {"step": self.K, "extra": {"run": kind}})
                self.assertEqual(opt2.param_groups[0]["lr"], opt.param_groups[0]["lr"])
                train(model2, opt2, self.K, self.N)
                self.assertEqual(bits(model2), bits(want))
                self.assertNotEqual(bits(model2), bits(make(kind)[0]))   # it did train

    def test_moments_keep_their_stored_dtype(self):
        """F32 moments beside BF16 weights come back F32 and bit for bit (torch's
        load_state_dict would round them to BF16)."""
        model, opt = make("bf16-adamw")
        train(model, opt, 0, self.K)
        pt.save_checkpoint(self.path("c.ptwm"), model, opt)
        model2, opt2 = make("bf16-adamw")
        pt.load_checkpoint(self.path("c.ptwm"), model2, opt2)
        for p, p2 in zip(model.parameters(), model2.parameters()):
            for key in ("exp_avg", "exp_avg_sq"):
                got, want = opt2.state[p2][key], opt.state[p][key]
                self.assertEqual(got.dtype, torch.float32, key)
                self.assertTrue(torch.equal(got, want), key)

    def test_state_follows_a_parameter_whose_dtype_changed(self):
        """Saved from F32 weights, loaded into BF16 ones: the moments are cast as
        torch casts them, so the optimizer's arithmetic meets one dtype."""
        model, opt = make("adamw")
        train(model, opt, 0, self.K)
        pt.save_checkpoint(self.path("c.ptwm"), model, opt)
        model2, opt2 = make("adamw", torch.bfloat16)
        pt.load_checkpoint(self.path("c.ptwm"), model2, opt2)
        for p, p2 in zip(model.parameters(), model2.parameters()):
            got, want = opt2.state[p2]["exp_avg"], opt.state[p]["exp_avg"]
            self.assertEqual(got.dtype, torch.bfloat16)
            self.assertTrue(torch.equal(got, want.to(torch.bfloat16)))
        train(model2, opt2, self.K, self.K + 1)   # the optimizer runs on them

    def test_adamw_resume_in_a_fresh_process_is_bit_exact(self):
        for kind in ("adamw", "bf16-adamw"):
            with self.subTest(optimizer=kind):
                self._fresh_process(kind)

    def _fresh_process(self, kind):
        want, _ = self.uninterrupted(kind)
        model, opt = make(kind)
        train(model, opt, 0, self.K)
        ckpt = self.path(f"ckpt-{kind}")
        pt.save_checkpoint(ckpt, model, opt, step=self.K, max_shard_size="300kB")
        self.assertIn("model.ptwm.index.json", os.listdir(ckpt))
        with ptwm.safe_open(ckpt, "pt") as f:
            names = f.keys()
        self.assertIn("optimizer/0/exp_avg", names)
        self.assertIn("optimizer/0/exp_avg_sq", names)
        self.assertIn("optimizer/0/step", names)
        out = self.path(f"resumed-{kind}.ptwm")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "resume", ckpt, out,
                               kind, str(self.K), str(self.N)], capture_output=True,
                              text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        resumed = pt.load_file(out)
        for k, v in want.state_dict().items():
            self.assertEqual(resumed[k].reshape(-1).view(torch.uint8).numpy().tobytes(),
                             v.detach().reshape(-1).view(torch.uint8).numpy().tobytes(), k)

    def test_tied_weights_are_stored_once_and_stay_tied(self):
        """An embedding tied to its output layer: one tensor in the file, for
        every way of saving, and the loaded model's two names share it again."""
        def tied_model():
            torch.manual_seed(0)
            emb, out = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50, bias=False)
            out.weight = emb.weight
            return torch.nn.Sequential(emb, out)

        def step(model, opt):
            opt.zero_grad()
            model(torch.arange(8)).logsumexp(-1).sum().backward()
            opt.step()
        model = tied_model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        step(model, opt)
        for how in ("blocking", "now", "before_step"):
            with self.subTest(how=how):
                path = self.path(f"{how}.ptwm")
                if how == "blocking":
                    pt.save_checkpoint(path, model, opt)
                else:
                    pt.save_checkpoint(path, model, opt, blocking=False, snapshot=how).wait()
                with ptwm.safe_open(path, "pt") as f:
                    names = [k for k in f.keys() if k.startswith("model/")]
                self.assertEqual(len(names), 1, names)
                model2 = tied_model()
                opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
                pt.load_checkpoint(path, model2, opt2)
                self.assertIs(model2[0].weight, model2[1].weight)
                self.assertTrue(torch.equal(model2[0].weight, model[0].weight))
                step(model2, opt2)
        step(model, opt)
        self.assertTrue(torch.equal(model2[0].weight, model[0].weight))   # resumed alike

    def test_wrong_optimizer_or_file(self):
        model, opt = make("adam")
        train(model, opt, 0, 1)
        pt.save_checkpoint(self.path("c.ptwm"), model, opt)
        m2, sgd = make("sgd")
        with self.assertRaises(ValueError) as cm:
            pt.load_checkpoint(self.path("c.ptwm"), m2, sgd)
        self.assertIn("holds the state of a Adam optimizer, not SGD", str(cm.exception))
        pt.save_file({"w": torch.ones(1)}, self.path("plain.ptwm"))
        with self.assertRaises(ValueError):
            pt.load_checkpoint(self.path("plain.ptwm"), m2, sgd)
        with self.assertRaises(ValueError):
            pt.save_checkpoint(self.path("x.ptwm"), model, opt, extra={"f": object()})


def _resume(ckpt, out, kind, k, n):
    model, opt = make(kind)
    info = pt.load_checkpoint(ckpt, model, opt)
    assert info["step"] == int(k), info
    train(model, opt, int(k), int(n))
    pt.save_file({name: v.detach() for name, v in model.state_dict().items()}, out)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "resume":
        _resume(*sys.argv[2:])
    else:
        unittest.main()
