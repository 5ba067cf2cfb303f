"""ptwm.numpy: safetensors.numpy's API over .ptwm, and files crossing between
torch and NumPy (BF16 as ml_dtypes.bfloat16 when importable, else an error or
the raw uint16 bits when asked)."""

import os
import tracemalloc
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import REPO, TempDirTest, parse_safetensors, safetensors_order

# The package works without NumPy and torch; these tests need both
# (scripts/deps.sh installs them), and fail rather than skip without them.
import numpy as np
import torch
import ptwm.numpy as pn
try:   # optional: BF16 arrays come back as ml_dtypes.bfloat16 when it is there
    import ml_dtypes
except ImportError:
    ml_dtypes = None

REAL = os.path.join(REPO, "tests", "corpus", "emotion.f32.safetensors")
REAL_BF16 = os.path.join(REPO, "tests", "corpus", "emotion.bf16.safetensors")
DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64", "complex64"]


def random_array(dtype, shape, seed):
    """Every bit pattern is possible (NaNs with payloads, -0.0, subnormals)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    n = int(np.prod(shape))
    return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt).reshape(shape)


class NumpyRoundTripTest(TempDirTest):
    def assertSameArrays(self, got, want):
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertEqual(got[k].dtype, want[k].dtype, k)
            self.assertEqual(got[k].shape, want[k].shape, k)
            self.assertEqual(got[k].tobytes(), want[k].tobytes(), k)

    def test_every_dtype_bit_exact(self):
        arrays = {f"a.{d}": random_array(d, (31, 17), i) for i, d in enumerate(DTYPES)}
        arrays["nan_payloads"] = np.array([0x7fc00001, 0xffa12345, 0x7f800001, 0x80000000],
                                          dtype=np.uint32).view(np.float32)
        arrays["scalar"] = np.array(-0.0, dtype=np.float64)
        arrays["empty"] = np.zeros((4, 0), dtype=np.int16)
        pn.save_file(arrays, self.path("m.ptwm"), metadata={"k": "v"})
        self.assertSameArrays(pn.load_file(self.path("m.ptwm")), arrays)
        self.assertSameArrays(pn.load(pn.save(arrays)), arrays)

    def test_non_contiguous_and_big_endian_saved_as_little_endian_values(self):
        base = random_array("float32", (12, 10), 5)
        big = np.arange(6, dtype=">i4").reshape(2, 3)
        out = pn.load(pn.save({"t": base.T, "step": base[::3, 1::2], "big": big}))
        self.assertEqual(out["t"].tobytes(), np.ascontiguousarray(base.T).tobytes())
        self.assertEqual(out["step"].tobytes(), np.ascontiguousarray(base[::3, 1::2]).tobytes())
        self.assertEqual(out["big"].dtype, np.dtype("<i4"))
        self.assertEqual(out["big"].tolist(), big.tolist())

    def test_real_file_through_numpy_and_back(self):
        want = parse_safetensors(REAL)
        arrays = pn.load_file(REAL)
        self.assertTrue(all(arrays[k].tobytes() == want[k][2] for k in want))
        pn.save_file(arrays, self.path("m.ptwm"))
        again = pn.load_file(self.path("m.ptwm"))
        self.assertEqual(sorted(again), sorted(want))
        for k, (_, shape, raw) in want.items():
            self.assertEqual(again[k].shape, shape, k)
            self.assertEqual(again[k].tobytes(), raw, k)

    def test_save_equals_c_api_blob_of_the_same_bytes(self):
        from test_cross import CReference
        arrays = {"w": np.random.default_rng(4).normal(0, 0.02, (64, 48)).astype(np.float32),
                  "i": np.arange(300, dtype=np.int64), "h": random_array("float16", (90,), 6)}
        # The same bytes in the order safetensors (and so ptwm.numpy) writes them.
        src = self.path("same.safetensors")
        ptwm.write_safetensors(src, [(k, arrays[k], arrays[k].dtype, arrays[k].shape)
                                     for k in safetensors_order(arrays)])
        self.assertEqual(pn.save(arrays), CReference.blob(src, self.path("c.ptwm")))

    def test_bad_arguments(self):
        for case in (lambda: pn.save({"w": [1, 2]}), lambda: pn.save({"w": np.array([object()])}),
                     lambda: pn.save({"w": np.ones(2)}, metadata={"a": 1}),
                     lambda: pn.load_file(REAL, bf16="float32"),
                     lambda: ptwm.safe_open(REAL, "np", device="cuda")):
            with self.assertRaises(ValueError):
                case()
        with self.assertRaises(FileNotFoundError):
            pn.load_file(self.path("absent"))

    def test_load_decodes_into_the_array_without_a_bytes_copy(self):
        # NumPy reports its arrays to tracemalloc: one 8 MB array, not two.
        arrays = {"w": random_array("float32", (2048, 1024), 1)}
        pn.save_file(arrays, self.path("m.ptwm"))
        tracemalloc.start()
        try:
            out = pn.load_file(self.path("m.ptwm"))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertEqual(out["w"].tobytes(), arrays["w"].tobytes())
        self.assertLess(peak, arrays["w"].nbytes + (1 << 20))


class Bf16Test(TempDirTest):
    def setUp(self):
        super().setUp()
        self.want = parse_safetensors(REAL_BF16)

    def test_bf16_as_raw_uint16_bits_when_asked(self):
        got = pn.load_file(REAL_BF16, bf16="uint16")
        for k, (dt, shape, raw) in self.want.items():
            if dt == "BF16":
                self.assertEqual(got[k].dtype, np.uint16, k)
            self.assertEqual(got[k].shape, shape, k)
            self.assertEqual(got[k].tobytes(), raw, k)
        with ptwm.safe_open(REAL_BF16, "np", bf16="uint16") as f:
            k = f.keys()[0]
            self.assertEqual(f.get_tensor(k).tobytes(), self.want[k][2])

    def test_bf16_as_ml_dtypes_or_a_clear_error(self):
        """Whichever this machine has: with ml_dtypes, BF16 arrays of it, bit
        for bit; without, an error that says how to get the raw bits."""
        if ml_dtypes is not None:
            self.check_bf16_with_ml_dtypes()
            return
        with self.assertRaises(ValueError) as cm:
            pn.load_file(REAL_BF16)
        msg = str(cm.exception)
        self.assertRegex(msg, r"tensor '.+' is BF16, which NumPy has no dtype for")
        self.assertIn("ml_dtypes", msg)
        self.assertIn('bf16="uint16"', msg)
        self.assertIsInstance(cm.exception, ptwm.PtwmError)
        ptwm.write_safetensors(self.path("f8.safetensors"),
                               [("q", bytes(range(8)), "F8_E5M2", (8,))])
        with self.assertRaises(ValueError) as cm:
            pn.load_file(self.path("f8.safetensors"))
        self.assertIn("tensor 'q' is F8_E5M2, which NumPy has no dtype for", str(cm.exception))

    def check_bf16_with_ml_dtypes(self):
        got = pn.load_file(REAL_BF16)
        for k, (dt, _, raw) in self.want.items():
            if dt == "BF16":
                self.assertEqual(got[k].dtype, np.dtype(ml_dtypes.bfloat16), k)
            self.assertEqual(got[k].tobytes(), raw, k)
        again = pn.load(pn.save(got))
        self.assertTrue(all(again[k].tobytes() == self.want[k][2] for k in self.want))


class CrossFrameworkTest(TempDirTest):
    def test_saved_from_torch_loads_as_numpy_and_the_reverse(self):
        import ptwm.torch as pt
        sd = {"w": torch.randn(8, 9), "h": torch.randn(5).half(), "i": torch.arange(7),
              "b": torch.randn(6).to(torch.bfloat16), "m": torch.tensor([True, False])}
        pt.save_file(sd, self.path("t.ptwm"))
        arrays = pn.load_file(self.path("t.ptwm"), bf16="uint16")
        for k, v in sd.items():
            self.assertEqual(arrays[k].tobytes(),
                             v.reshape(-1).view(torch.uint8).numpy().tobytes(), k)
        # "b" came back as uint16 bits: saved again it would be U16, so leave it out.
        pn.save_file({k: a for k, a in arrays.items() if k != "b"}, self.path("n.ptwm"))
        back = pt.load_file(self.path("n.ptwm"))
        for k in ("w", "h", "i", "m"):
            self.assertEqual(back[k].dtype, sd[k].dtype, k)
            self.assertTrue(torch.equal(back[k], sd[k]), k)


if __name__ == "__main__":
    unittest.main()
