"""base= in the loaders and savers (docs/DELTA.md): a fine-tune made by real
training (scripts/finetune_pairs.py, the emotion network, a few AdamW steps in
BF16 and F32) saved against its base with ptwm.torch and ptwm.numpy, loaded
back bit for bit with a safetensors and a .ptwm base, smaller than without the
base, and the errors of a missing, different or damaged base."""

from __future__ import annotations

import os
import sys
import tempfile
import unittest

import torch

import ptwm
import ptwm.numpy as pnp
import ptwm.torch as pt
from ptwm import PtwmError
from _support import REPO, safetensors_order

sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_pairs  # noqa: E402
from test_finetune_pairs import emotion_models_dir  # noqa: E402

ERR_BASE_MISSING, ERR_BASE_MISMATCH, ERR_BASE_HASH, ERR_BASE_CRC = 26, 27, 28, 29


def setUpModule():
    global TMP, PAIRS
    TMP = tempfile.TemporaryDirectory()
    models = emotion_models_dir(TMP.name)
    PAIRS = os.path.join(TMP.name, "pairs")
    # A short real fine-tune: 20 AdamW steps at 1e-5, BF16 and F32.
    finetune_pairs.main(["--models", models, "--out", PAIRS, "--nets", "emotion",
                         "--lrs", "1e-5", "--dtypes", "f32,bf16", "--steps", "20",
                         "--every", "10"])


def tearDownModule():
    TMP.cleanup()


def pair(dtype):
    return (os.path.join(PAIRS, f"emotion.{dtype}.base.safetensors"),
            os.path.join(PAIRS, f"emotion.{dtype}.lr1e-05.step0020.safetensors"))


def raw(x) -> bytes:
    """A tensor's or array's bytes (BF16 and all)."""
    if isinstance(x, torch.Tensor):
        return x.reshape(-1).view(torch.uint8).numpy().tobytes()
    return x.tobytes()


def same(a, b):
    """a in the order ptwm (as safetensors) writes b's names, each with b's dtype,
    shape and bytes."""
    assert list(a) == safetensors_order(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and tuple(a[k].shape) == tuple(b[k].shape), k
        assert raw(a[k]) == raw(b[k]), k


class TorchBase(unittest.TestCase):
    def test_round_trip_and_size(self):
        for dtype in ("bf16", "f32"):
            base, tuned = pair(dtype)
            tensors = pt.load_file(tuned)
            out = os.path.join(TMP.name, f"tuned.{dtype}.ptwm")
            plain = os.path.join(TMP.name, f"plain.{dtype}.ptwm")
            pt.save_file(tensors, out, base=base)
            pt.save_file(tensors, plain)
            self.assertLess(os.path.getsize(out), os.path.getsize(plain))
            if dtype == "bf16":   # a 1e-5 BF16 fine-tune: most weights did not move
                self.assertLess(2 * os.path.getsize(out), os.path.getsize(plain))
            same(pt.load_file(out, base=base), tensors)
            # a .ptwm base, and bytes
            base_ptwm = os.path.join(TMP.name, f"base.{dtype}.ptwm")
            pt.save_file(pt.load_file(base), base_ptwm)
            same(pt.load_file(out, base=base_ptwm), tensors)
            data = pt.save(tensors, base=base)
            same(pt.load(data, base=base), tensors)
            with ptwm.safe_open(out, framework="pt", base=base) as f:
                k = f.keys()[0]
                self.assertEqual(raw(f.get_tensor(k)), raw(tensors[k]))

    def test_errors(self):
        base, tuned = pair("bf16")
        tensors = pt.load_file(tuned)
        out = os.path.join(TMP.name, "err.ptwm")
        pt.save_file(tensors, out, base=base)
        with self.assertRaises(PtwmError) as cm:
            pt.load_file(out)
        self.assertEqual(cm.exception.code, ERR_BASE_MISSING)
        self.assertIn("and no base was given", str(cm.exception))
        # a different base: another run's weights under the same names
        other = pair("bf16")[1].replace("step0020", "step0010")
        other_ptwm = os.path.join(TMP.name, "other.ptwm")
        pt.save_file(pt.load_file(other), other_ptwm)
        with self.assertRaises(PtwmError) as cm:
            pt.load_file(out, base=other_ptwm)
        self.assertEqual(cm.exception.code, ERR_BASE_HASH)
        self.assertIn("(a different base)", str(cm.exception))
        with self.assertRaises(PtwmError) as cm:
            pt.load_file(out, base=other)
        self.assertEqual(cm.exception.code, ERR_BASE_CRC)
        # a base lacking a tensor
        lacking = dict(pt.load_file(base))
        gone = next(iter(lacking))
        del lacking[gone]
        lack_path = os.path.join(TMP.name, "lack.ptwm")
        pt.save_file(lacking, lack_path)
        with self.assertRaises(PtwmError) as cm:
            pt.load_file(out, base=lack_path)
        self.assertEqual(cm.exception.code, ERR_BASE_MISMATCH)
        self.assertIn(f"'{gone}'", str(cm.exception))
        # a damaged safetensors base: one byte of the last tensor flipped
        with open(base, "rb") as f:
            data = bytearray(f.read())
        data[-3] ^= 0x40
        damaged = os.path.join(TMP.name, "damaged.safetensors")
        with open(damaged, "wb") as f:
            f.write(bytes(data))
        with self.assertRaises(PtwmError) as cm:
            pt.load_file(out, base=damaged)
        self.assertEqual(cm.exception.code, ERR_BASE_CRC)
        self.assertIn("this chunk was coded against CRC32", str(cm.exception))


class NumpyBase(unittest.TestCase):
    def test_round_trip(self):
        base, tuned = pair("f32")
        arrays = pnp.load_file(tuned)
        out = os.path.join(TMP.name, "np.ptwm")
        pnp.save_file(arrays, out, base=base)
        same(pnp.load_file(out, base=base), arrays)
        data = pnp.save(arrays, base=base)
        same(pnp.load(data, base=base), arrays)
        with self.assertRaises(PtwmError) as cm:
            pnp.load(data)
        self.assertEqual(cm.exception.code, ERR_BASE_MISSING)
        # the training checkpoint (weights and AdamW moments) against the one before
        ck = pnp.load_file(tuned.replace(".safetensors", ".ckpt.safetensors"))
        prev = tuned.replace("step0020", "step0010").replace(".safetensors", ".ckpt.safetensors")
        ck_out = os.path.join(TMP.name, "ck.ptwm")
        pnp.save_file(ck, ck_out, base=prev)
        same(pnp.load_file(ck_out, base=prev), ck)
        self.assertTrue(any(k.startswith("adam.v/") for k in ck))

    def test_checkpoint_directory(self):
        """compress_checkpoint/decompress_checkpoint with base=: byte-exact files."""
        base, tuned = pair("bf16")
        out = os.path.join(TMP.name, "ckdir")
        back = os.path.join(TMP.name, "ckback")
        ptwm.compress_checkpoint(tuned, out, base=base)
        with self.assertRaises(PtwmError) as cm:
            ptwm.decompress_checkpoint(out, back)
        self.assertEqual(cm.exception.code, ERR_BASE_MISSING)
        ptwm.decompress_checkpoint(out, back, base=base, force=True)
        with open(tuned, "rb") as a, open(os.path.join(back, os.path.basename(tuned)), "rb") as b:
            self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    unittest.main()
