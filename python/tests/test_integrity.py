"""Integrity on every Python reader, on real weights from the repository's sample.

A checkpoint whose two chunks of equal coded size are exchanged (every plane CRC
still valid) is refused by each reader; what the CLI's compress writes is
restored by the library byte for byte.
"""

import os
import struct
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import PtwmError
from ptwm.sharding import read_sharded_ptwm

from _support import REPO, TempDirTest, run_cli

SAMPLE = os.path.join(REPO, "samples", "posenet.bf16.safetensors")


def file_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class SwappedChunksTest(TempDirTest):
    def swapped_checkpoint(self):
        """A checkpoint of two real tensors of equal size, one chunk each, coded
        as they are (so their payloads have equal length), with the payloads
        exchanged. Returns the directory and {name: original bytes}."""
        infos, _ = ptwm.safetensors_info(SAMPLE)
        data = ptwm.read_safetensors(SAMPLE)
        by_size = {}
        pair = None
        for name, info in infos.items():
            if 1024 <= info.nbytes <= 65536:
                other = by_size.setdefault(info.nbytes, name)
                if other != name and data[other] != data[name]:
                    pair = (other, name)
                    break
        self.assertIsNotNone(pair, "no two tensors of equal size in the sample")
        src = self.path("pair.safetensors")
        ptwm.write_safetensors(src, [(n, data[n], infos[n].dtype, infos[n].shape) for n in pair])
        d = self.path("ckpt")
        ptwm.compress_checkpoint(src, d, method="identity")
        model = os.path.join(d, "model.ptwm")
        img = bytearray(file_bytes(model))
        table = struct.unpack_from("<Q", img, len(img) - 48)[0]
        half = (table - 16) // 2
        self.assertEqual(16 + 2 * half, table, "two payloads of equal length")
        first, second = bytes(img[16:16 + half]), bytes(img[16 + half:table])
        self.assertNotEqual(first, second)
        img[16:16 + half], img[16 + half:table] = second, first
        with open(model, "wb") as f:
            f.write(img)
        return d, {n: data[n] for n in pair}

    def assert_refused(self, fn):
        with self.assertRaises(PtwmError) as cm:
            fn()
        self.assertIn(cm.exception.name, ("PTWM_ERR_CRC", "PTWM_ERR_HASH"), str(cm.exception))

    def test_every_reader_refuses_swapped_chunks(self):
        d, original = self.swapped_checkpoint()
        model = os.path.join(d, "model.ptwm")
        with ptwm.open(model) as f:
            for name, raw in original.items():
                self.assert_refused(lambda: f.read(name))
                self.assert_refused(lambda: f.read_range(name, 0, len(raw)))
            self.assert_refused(f.read_all)
            self.assert_refused(f.verify)
            self.assert_refused(lambda: f.to_safetensors(self.path("a.safetensors")))
        with ptwm.open_bytes(file_bytes(model)) as f:
            self.assert_refused(f.read_all)
        self.assert_refused(lambda: ptwm.decompress_to_safetensors(model, self.path("b.safetensors")))
        self.assert_refused(lambda: ptwm.decompress_checkpoint(d, self.path("out")))
        self.assert_refused(lambda: read_sharded_ptwm(d))
        for name in ("a.safetensors", "b.safetensors", "out"):
            self.assertFalse(os.path.exists(self.path(name)), name)


class UncheckedTest(TempDirTest):
    def test_unchecked_count(self):
        golden = os.path.join(REPO, "tests", "golden")
        for name, want in (("emotion.bf16.microscale.v3.nocheck.ptwm", 21),
                           ("emotion.bf16.microscale.v3.ptwm", 0),
                           ("emotion.bf16.microscale.v4.ptwm", 0)):
            with ptwm.open(os.path.join(golden, name)) as f:
                self.assertEqual(f.unchecked_count, want, name)
                f.verify()


class CliOutputTest(TempDirTest):
    def test_library_restores_what_the_cli_wrote(self):
        d = self.path("out")
        run_cli("compress", SAMPLE, "-o", d, "-q")
        want = file_bytes(SAMPLE)
        back = self.path("back.safetensors")
        ptwm.decompress_to_safetensors(os.path.join(d, "model.ptwm"), back)
        self.assertEqual(file_bytes(back), want)
        with ptwm.open(os.path.join(d, "model.ptwm")) as f:
            f.to_safetensors(self.path("again.safetensors"))
        self.assertEqual(file_bytes(self.path("again.safetensors")), want)


if __name__ == "__main__":
    unittest.main()
