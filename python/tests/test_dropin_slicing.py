"""Drop-in for safetensors: get_slice takes what safetensors' get_slice takes.

framework="pt": safetensors indexes the tensor with torch, so every index
torch takes gives torch's result (steps, negative bounds, clipped stops,
'...', None, [], lists, masks) and torch's errors. framework="np": ints and
slices as safetensors' own slicer reads them, with its errors and messages
(a bound past the dimension, an int outside it, a non-empty list); steps,
negative bounds, '...' and None as NumPy reads them. Both on .ptwm and
.safetensors files."""

import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import SafetensorError

from _support import TempDirTest

import numpy as np
import torch
import ptwm.numpy as pn
import ptwm.torch as pt

E = Ellipsis
# Indexes both torch and NumPy read the same way, on a (6, 4, 5) tensor.
COMMON = [(), (slice(None),), 2, -1, (1, 2), (1, 2, 3), (-6,), (slice(1, 4), 0),
          (slice(None), slice(None), slice(2, 5)), (E, 1), (0, E), (1, E, slice(1, 3)),
          (slice(None, None, 2),), (slice(1, None, 3), slice(None), slice(None, None, 4)),
          (E, slice(0, 5, 2)), (slice(-4, -1),), (slice(-2, None), slice(-3, None, 2)),
          (None,), (slice(2, 4), None, 1), (E, None), (None, E, None, 0),
          (slice(3, 3),), (slice(4, 2),), (slice(0, 0), slice(None, None, 2))]
# torch clips slice bounds to the dimension; safetensors' NumPy path refuses them.
TORCH_ONLY = [(slice(0, 100),), (slice(None), slice(2, 50)), (slice(-100, 2),),
              (slice(6, None),), [0, 2], ([0, 5], slice(1, 3)), (torch.tensor([1, 3]),),
              (slice(None), torch.tensor([True, False, True, False])), (True,),
              (torch.tensor(2),)]
# NumPy reads negative steps; torch refuses them.
NUMPY_ONLY = [(slice(None, None, -1),), (slice(None), slice(3, 0, -2)), (E, slice(-1, 0, -3))]


class SliceFormsTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.w = torch.arange(120, dtype=torch.float32).reshape(6, 4, 5) * 0.5 - 7
        sd = {"w": self.w, "empty": torch.zeros(0, 3, dtype=torch.int16)}
        pt.save_file(sd, self.path("m.ptwm"))
        ptwm.write_safetensors(self.path("m.safetensors"),
                               [(k, v.numpy(), v.dtype, tuple(v.shape)) for k, v in sd.items()])
        self.files = [self.path("m.ptwm"), self.path("m.safetensors")]

    def test_torch_forms_equal_torch_indexing(self):
        for path in self.files:
            with ptwm.safe_open(path, framework="pt") as f:
                s = f.get_slice("w")
                for index in COMMON + TORCH_ONLY + [[]]:
                    with self.subTest(path=path[-5:], index=index):
                        want = self.w[index]
                        got = s[index]
                        self.assertEqual(got.shape, want.shape)
                        self.assertEqual(got.dtype, want.dtype)
                        self.assertTrue(torch.equal(got, want))
                        self.assertTrue(got.is_contiguous())
                self.assertEqual(tuple(s[[]].shape), (0, 4, 5))
                self.assertEqual(tuple(f.get_slice("empty")[:].shape), (0, 3))

    def test_numpy_forms_equal_numpy_indexing(self):
        a = self.w.numpy()
        for path in self.files:
            with ptwm.safe_open(path, framework="np") as f:
                s = f.get_slice("w")
                for index in COMMON + NUMPY_ONLY + [[]]:
                    with self.subTest(path=path[-5:], index=index):
                        want = a[index]
                        got = s[index]
                        self.assertEqual(got.shape, want.shape)
                        self.assertEqual(got.dtype, want.dtype)
                        self.assertEqual(got.tobytes(), np.ascontiguousarray(want).tobytes())
                        self.assertTrue(got.flags["C_CONTIGUOUS"])
                self.assertEqual(f.get_slice("empty")[:].shape, (0, 3))
                self.assertEqual(f.get_slice("empty")[0:0, 1:].shape, (0, 2))

    def test_torch_errors_are_torchs(self):
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            s = f.get_slice("w")
            for index, exc in [((6,), IndexError), ((-7,), IndexError), ((0, 4), IndexError),
                               ((0, 0, 0, 0), IndexError), ((E, 1, E), IndexError),
                               (("a",), IndexError), ((0.5,), IndexError),
                               ((slice(None, None, -1),), ValueError),
                               ((slice(None, None, 0),), ValueError),
                               ([7], IndexError)]:
                with self.subTest(index=index), self.assertRaises(exc):
                    s[index]
            with self.assertRaises(SafetensorError) as cm:
                s[1, 9]
            self.assertEqual(str(cm.exception),
                             "index 9 is out of bounds for dimension 1 with size 4")


class NumpySliceErrorsTest(TempDirTest):
    """safetensors' NumPy slicer: its classes, messages and order of checks."""

    def setUp(self):
        super().setUp()
        pn.save_file({"t": np.arange(24, dtype=np.int32).reshape(6, 4)}, self.path("m.ptwm"))

    def error(self, index) -> str:
        with ptwm.safe_open(self.path("m.ptwm"), framework="np") as f:
            with self.assertRaises(SafetensorError) as cm:
                f.get_slice("t")[index]
        self.assertIsInstance(cm.exception, IndexError)
        return str(cm.exception)

    def test_messages(self):
        prefix = "Error during slicing"
        cases = [((slice(1, None), -5), "Invalid index -5 for dimension 1 of size 4"),
                 ((-7,), "Invalid index -7 for dimension 0 of size 6"),
                 ([1, 2], "Non empty lists are not implemented"),
                 ((3, 4), f"{prefix} [3, 4] with shape [6, 4]: index 4 out of bounds for "
                          f"tensor dimension #1 of size 4"),
                 ((slice(None, 9),), f"{prefix} [:9] with shape [6, 4]: index 8 out of bounds "
                                     f"for tensor dimension #0 of size 6"),
                 ((slice(None), slice(1, 5)), f"{prefix} [:, 1:5] with shape [6, 4]: index 4 "
                                              f"out of bounds for tensor dimension #1 of "
                                              f"size 4"),
                 ((slice(6, None),), f"{prefix} [6:] with shape [6, 4]: index 6 out of bounds "
                                     f"for tensor dimension #0 of size 6"),
                 # the last dimension is checked first; negative ints show resolved
                 ((9, 9), f"{prefix} [9, 9] with shape [6, 4]: index 9 out of bounds for "
                          f"tensor dimension #1 of size 4"),
                 ((slice(0, 7), -1), f"{prefix} [0:7, 3] with shape [6, 4]: index 6 out of "
                                     f"bounds for tensor dimension #0 of size 6"),
                 # a negative int below -size is reported before any bound
                 ((9, -5), "Invalid index -5 for dimension 1 of size 4")]
        for index, message in cases:
            with self.subTest(index=index):
                self.assertEqual(self.error(index), message)

    def test_other_refusals(self):
        with ptwm.safe_open(self.path("m.ptwm"), framework="np") as f:
            s = f.get_slice("t")
            for index in (("a",), (0.5,), ([0], 1), (np.array([1, 2]),)):
                with self.subTest(index=index), self.assertRaises(TypeError):
                    s[index]
            with self.assertRaises(IndexError):
                s[0, 0, 0]
            with self.assertRaises(ValueError):
                s[::0]
            self.assertEqual(s[np.int64(2), np.int32(-1)].tolist(), 11)


if __name__ == "__main__":
    unittest.main()
