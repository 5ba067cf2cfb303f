"""Drop-in for safetensors: the same dict gives the same bytes in any insertion
order, files list their tensors in safetensors' order (widest dtype first,
then by name), .safetensors files read as safetensors reads them (tensors by
data offset, keys() sorted, __metadata__ as metadata()), and metadata round
trips with safetensors' None for none."""

import itertools
import json
import struct
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import SafetensorError

from _support import TempDirTest, safetensors_order

import numpy as np
import torch
import ptwm.numpy as pn
import ptwm.torch as pt


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    """A safetensors file: u64 header length, JSON header (padded), data."""
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def mixed_tensors():
    g = torch.Generator().manual_seed(11)
    return {"m.bias": torch.randn(7, generator=g).half(),
            "b.idx": torch.arange(5, dtype=torch.int64),
            "z.mask": torch.tensor([True, False, True]),
            "a.weight": torch.randn(4, 3, generator=g),
            "c.emb": torch.randn(6, generator=g).to(torch.bfloat16),
            "y.weight": torch.randn(2, 2, generator=g)}


class InsertionOrderTest(TempDirTest):
    def test_same_bytes_in_every_insertion_order(self):
        sd = mixed_tensors()
        names = list(sd)
        want = pt.save(sd)
        want_meta = pt.save(sd, metadata={"b": "2", "a": "1", "format": "pt"})
        for k, perm in enumerate(itertools.permutations(names)):
            if k % 37:    # 720 orders; every 37th is enough to vary each position
                continue
            d = {n: sd[n] for n in perm}
            self.assertEqual(pt.save(d), want, perm)
            self.assertEqual(pt.save(d, metadata={"format": "pt", "a": "1", "b": "2"}),
                             want_meta, perm)
        pt.save_file({n: sd[n] for n in reversed(names)}, self.path("r.ptwm"))
        with open(self.path("r.ptwm"), "rb") as f:
            self.assertEqual(f.read(), want)
        arrays = {"w": np.ones((2, 2), np.float32), "i": np.zeros(3, np.int32),
                  "h": np.ones(4, np.float16)}
        self.assertEqual(pn.save(arrays), pn.save(dict(reversed(list(arrays.items())))))

    def test_files_list_tensors_in_safetensors_order(self):
        sd = mixed_tensors()
        order = safetensors_order(sd)
        self.assertEqual(order, ["b.idx", "a.weight", "y.weight", "c.emb", "m.bias", "z.mask"])
        pt.save_file(sd, self.path("m.ptwm"))
        self.assertEqual(list(pt.load_file(self.path("m.ptwm"))), order)
        self.assertEqual(list(pt.load(pt.save(sd))), order)
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            self.assertEqual(f.offset_keys(), order)
            self.assertEqual(f.keys(), sorted(sd))
        arrays = {k: v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy()
                  for k, v in sd.items()}
        self.assertEqual(list(pn.load(pn.save(arrays))), safetensors_order(arrays))
        pt.save_file(sd, self.path("sharded"), max_shard_size=64)
        self.assertEqual(list(pt.load_file(self.path("sharded"))), order)


class SafetensorsFilesTest(TempDirTest):
    def test_tensors_in_data_order_keys_sorted(self):
        # The header lists them b, a, c; their data comes c, b, a.
        header = {"b": {"dtype": "I16", "shape": [2], "data_offsets": [4, 8]},
                  "a": {"dtype": "U8", "shape": [2, 2], "data_offsets": [8, 12]},
                  "c": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
                  "__metadata__": {"format": "pt", "note": "x"}}
        data = struct.pack("<f", 2.5) + struct.pack("<2h", -3, 7) + bytes([1, 2, 3, 4])
        path = self.path("h.safetensors")
        with open(path, "wb") as f:
            f.write(safetensors_bytes(header, data))
        for framework in ("pt", "np"):
            with ptwm.safe_open(path, framework=framework) as f:
                self.assertEqual(f.offset_keys(), ["c", "b", "a"])
                self.assertEqual(f.keys(), ["a", "b", "c"])
                self.assertEqual(f.metadata(), {"format": "pt", "note": "x"})
                self.assertEqual(f.get_slice("a")[1].tolist(), [3, 4])
                self.assertEqual(f.get_slice("b").get_dtype(), "I16")
                self.assertEqual(f.get_slice("c").get_shape(), [])
        got = pt.load_file(path)
        self.assertEqual(list(got), ["c", "b", "a"])
        self.assertEqual(got["c"].item(), 2.5)
        self.assertEqual(got["b"].tolist(), [-3, 7])
        self.assertEqual(list(pn.load(safetensors_bytes(header, data))), ["c", "b", "a"])

    def test_metadata_values_must_be_strings(self):
        header = {"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                  "__metadata__": {"n": 1}}
        with open(self.path("bad.safetensors"), "wb") as f:
            f.write(safetensors_bytes(header, b"\x00"))
        with self.assertRaises(SafetensorError) as cm:
            ptwm.safe_open(self.path("bad.safetensors"), framework="np")
        self.assertIn("__metadata__", str(cm.exception))


class MetadataTest(TempDirTest):
    def test_metadata_round_trip_and_none(self):
        meta = {"format": "pt", "ünïcode": "välue", "empty": "", "json": '{"a": [1]}'}
        pt.save_file({"w": torch.ones(1)}, self.path("m.ptwm"), metadata=meta)
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            self.assertEqual(f.metadata(), meta)
        with ptwm.safe_open(self.path("m.ptwm"), framework="np") as f:
            self.assertEqual(f.metadata(), meta)
        pn.save_file({"w": np.ones(1)}, self.path("n.ptwm"))
        with ptwm.safe_open(self.path("n.ptwm"), framework="pt") as f:
            self.assertIsNone(f.metadata())     # as safetensors: None, not {}


if __name__ == "__main__":
    unittest.main()
