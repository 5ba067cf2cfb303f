"""ptwm.safe_open: keys, metadata, get_tensor and get_slice as safetensors has
them; a slice decodes only the chunks holding it (shown with a damaged chunk
elsewhere in the tensor, which the slice never touches)."""

import os
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import REPO, TempDirTest, parse_safetensors

# numpy and torch are required (scripts/deps.sh installs them).
import numpy as np
import torch
import ptwm.torch as pt

REAL = os.path.join(REPO, "tests", "corpus", "emotion.f32.safetensors")

INDEXES = [(slice(3, 7),), (2,), (-1,), (slice(None), slice(5, 9)), (Ellipsis, 1),
           (1, Ellipsis, slice(2, 4)), (slice(-3, None), 0, slice(None)), (slice(4, 4),),
           (slice(0, 100),), (slice(None),), (Ellipsis,), (slice(2, 5), slice(1, 3), 7),
           (slice(None, None, 2),), (slice(1, None, 3), slice(None), slice(None, None, 5))]


class SafeOpenTest(TempDirTest):
    def setUp(self):
        super().setUp()
        g = torch.Generator().manual_seed(9)
        self.sd = {"z.cube": torch.randn(6, 5, 8, generator=g),
                   "a.bf16": torch.randn(40, 33, generator=g).to(torch.bfloat16),
                   "m.ints": torch.arange(24, dtype=torch.int16).reshape(4, 6)}
        self.file = self.path("m.ptwm")
        pt.save_file(self.sd, self.file, metadata={"format": "pt"})

    def test_keys_metadata_tensor(self):
        with ptwm.safe_open(self.file, framework="pt", device="cpu") as f:
            self.assertEqual(f.keys(), ["a.bf16", "m.ints", "z.cube"])   # sorted
            self.assertEqual(f.offset_keys(), list(self.sd))                # file order
            self.assertEqual(list(pt.load_file(self.file)), list(self.sd))
            self.assertEqual(f.metadata(), {"format": "pt"})
            self.assertTrue(torch.equal(f.get_tensor("m.ints"), self.sd["m.ints"]))
        pt.save_file({"w": torch.ones(1)}, self.path("plain.ptwm"))
        with ptwm.safe_open(self.path("plain.ptwm"), "pt") as f:
            self.assertIsNone(f.metadata())      # as safetensors: None, not {}
        with self.assertRaises(ValueError):
            f.get_tensor("w")                    # closed

    def test_slices_equal_indexing_the_whole_tensor(self):
        with ptwm.safe_open(self.file, "pt") as f:
            for name in ("z.cube", "a.bf16"):
                s = f.get_slice(name)
                self.assertEqual(s.get_shape(), list(self.sd[name].shape))
                self.assertEqual(s.get_dtype(), "F32" if name == "z.cube" else "BF16")
                for index in INDEXES:
                    if len([i for i in index if i is not Ellipsis]) > len(self.sd[name].shape):
                        continue
                    with self.subTest(name=name, index=index):
                        want = self.sd[name][index]
                        got = s[index]
                        self.assertEqual(got.shape, want.shape)
                        self.assertTrue(torch.equal(got, want.contiguous()))

    def test_bad_slices(self):
        with ptwm.safe_open(self.file, "pt") as f:
            s = f.get_slice("m.ints")
            # torch's classes for what torch refuses (safetensors indexes with torch)
            for index, exc in [((4,), IndexError), ((-5,), IndexError), ((0, 0, 0), IndexError),
                               ((Ellipsis, Ellipsis), IndexError), ((slice(None, None, -1),),
                                                                    ValueError),
                               ((slice(None, None, 0),), ValueError),
                               (("a",), IndexError), ((1.5,), IndexError)]:
                with self.subTest(index=index), self.assertRaises(exc):
                    s[index]
            with self.assertRaises(KeyError):
                f.get_slice("absent")

    def test_slice_decodes_only_the_chunks_holding_it(self):
        # 4 MiB of incompressible I32 rows: 4 chunks of 1 MiB. Damage the coded
        # bytes of a late chunk; the first rows still read, the whole tensor not.
        g = torch.Generator().manual_seed(3)
        raw = torch.randint(0, 256, (1024 * 1024 * 4,), dtype=torch.uint8, generator=g)
        w = raw.view(torch.int32).reshape(1024, 1024)
        path = self.path("big.ptwm")
        pt.save_file({"w": w}, path)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) * 7 // 8)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x10]))
        with ptwm.safe_open(path, "pt") as f:
            self.assertTrue(torch.equal(f.get_slice("w")[:100], w[:100]))
            self.assertTrue(torch.equal(f.get_slice("w")[300:301, 7], w[300:301, 7]))
            with self.assertRaises(ptwm.PtwmError) as cm:
                f.get_slice("w")[-10:]
            self.assertIn("tensor 'w' chunk 3 of 4", str(cm.exception))
            with self.assertRaises(ptwm.PtwmError):
                f.get_tensor("w")

    def test_numpy_framework_and_real_file(self):
        want = parse_safetensors(REAL)
        with ptwm.safe_open(REAL, "np") as f:
            self.assertEqual(f.keys(), sorted(want))
            name = max(want, key=lambda k: len(want[k][2]))
            full = np.frombuffer(want[name][2], dtype=np.float32).reshape(want[name][1])
            self.assertEqual(f.get_tensor(name).tobytes(), want[name][2])
            self.assertEqual(f.get_slice(name)[:, :, 1:3].tobytes(), full[:, :, 1:3].tobytes())
            # NumPy slices as safetensors' NumPy path: past the dimension is an error.
            self.assertEqual(full.shape[0], 1)
            with self.assertRaises(ptwm.SafetensorError) as cm:
                f.get_slice(name)[1:3]
            self.assertEqual(str(cm.exception), f"Error during slicing [1:3] with shape "
                             f"{list(full.shape)}: index 1 out of bounds for tensor "
                             f"dimension #0 of size 1")
        with ptwm.safe_open(self.file, "numpy") as f:
            self.assertEqual(f.get_slice("m.ints")[1:3, 2:4].tolist(),
                             self.sd["m.ints"][1:3, 2:4].tolist())


if __name__ == "__main__":
    unittest.main()
