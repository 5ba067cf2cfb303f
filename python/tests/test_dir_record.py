"""Every byte of a .ptwm checkpoint directory, through the Python readers.

A directory made from the repository's sample (three shards, the index keeping
the Hugging Face index, config.json, tokenizer/vocab.txt and the file record
model.ptwm.files.json) is damaged one bit at a time in every file. Each
reader (read_sharded_ptwm, numpy's load_file through safe_open, PtwmIndex.read,
decompress_checkpoint) either raises a PtwmError naming the damaged file or
hands back exactly the original: a file it does not read (config.json) may be
damaged while every tensor loads. Links leading out of a source directory are
refused unless follow_symlinks.
"""

import os
import random
import shutil
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import PtwmError
from ptwm.numpy import load_file
from ptwm.sharding import PtwmIndex, read_sharded_ptwm

from _support import REPO, TempDirTest

SAMPLE = os.path.join(REPO, "samples", "posenet.bf16.safetensors")
INDEX_NAME = "model.ptwm.index.json"
FLIPS_PER_FILE = 6


def file_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def tree(root: str) -> dict:
    """{relative path: bytes} of every file below root."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = file_bytes(p)
    return out


def flip(path: str, bit: int) -> None:
    with open(path, "r+b") as f:
        f.seek(bit // 8)
        b = f.read(1)[0]
        f.seek(bit // 8)
        f.write(bytes([b ^ (1 << (bit % 8))]))


class DirectoryDamageTest(TempDirTest):
    def make_dirs(self):
        """The Hugging Face directory and its .ptwm directory."""
        shards = self.path("shards")
        ptwm.compress_checkpoint(SAMPLE, shards, max_shard_size="1MB")
        hf = self.path("hf")
        ptwm.decompress_checkpoint(shards, hf, max_shard_size="1MB")
        with open(os.path.join(hf, "config.json"), "w") as f:
            f.write('{"model_type": "posenet"}\n')
        os.mkdir(os.path.join(hf, "tokenizer"))
        with open(os.path.join(hf, "tokenizer", "vocab.txt"), "w") as f:
            f.write("<s>\n</s>\nhello\n")
        pt = self.path("pt")
        ptwm.compress_checkpoint(hf, pt)
        self.assertIn(INDEX_NAME, os.listdir(pt))
        self.assertIn("model.ptwm.files.json", os.listdir(pt))
        return hf, pt

    def outcome(self, fn, want, name):
        """'caught' when fn raises a PtwmError naming `name`, 'exact' when it
        returns `want`; anything else fails the test."""
        try:
            got = fn()
        except PtwmError as e:
            self.assertIn(os.path.basename(name), str(e))
            return "caught"
        self.assertEqual(got, want, f"{name}: wrong result without an error")
        return "exact"

    def test_bit_flips_in_every_file(self):
        hf, pt = self.make_dirs()
        tensors = read_sharded_ptwm(pt)
        restored = tree(hf)
        index = PtwmIndex.read(os.path.join(pt, INDEX_NAME))
        rng = random.Random(36)
        counts = {}
        for name in sorted(tree(pt)):
            path = os.path.join(pt, name)
            size = os.path.getsize(path)
            for k in range(FLIPS_PER_FILE):
                byte = 0 if k == 0 else size - 1 if k == 1 else rng.randrange(size)
                bit = byte * 8 + rng.randrange(8)
                flip(path, bit)
                out = self.path("out")

                def decompress():
                    ptwm.decompress_checkpoint(pt, out)
                    return tree(out)
                def load():
                    return {n: a.tobytes() for n, a in load_file(pt, bf16="uint16").items()}
                for reader, fn, want in (
                        ("read_sharded_ptwm", lambda: read_sharded_ptwm(pt), tensors),
                        ("load_file", load, tensors),
                        ("PtwmIndex.read",
                         lambda: PtwmIndex.read(os.path.join(pt, INDEX_NAME)),
                         index),
                        ("decompress_checkpoint", decompress, restored)):
                    got = self.outcome(fn, want, name)
                    counts[(reader, got)] = counts.get((reader, got), 0) + 1
                    shutil.rmtree(out, ignore_errors=True)
                flip(path, bit)
        # Every damaged file stops decompression; loads stop at what they read.
        self.assertEqual(counts.get(("decompress_checkpoint", "exact"), 0), 0, counts)
        for reader in ("read_sharded_ptwm", "load_file"):
            self.assertGreater(counts.get((reader, "caught"), 0), 0, counts)

    def test_damage_named_by_each_reader(self):
        _, pt = self.make_dirs()
        index = os.path.join(pt, INDEX_NAME)
        record = os.path.join(pt, "model.ptwm.files.json")
        for path, named in ((index, "model.ptwm.index.json"),
                            (record, "model.ptwm.files.json")):
            flip(path, 8 * 20 + 1)
            for fn in (lambda: read_sharded_ptwm(pt), lambda: load_file(pt, bf16="uint16"),
                       lambda: PtwmIndex.read(index),
                       lambda: ptwm.decompress_checkpoint(pt, self.path("out"))):
                with self.assertRaises(PtwmError) as cm:
                    fn()
                self.assertEqual(cm.exception.name, "PTWM_ERR_HASH")
                self.assertIn(named, str(cm.exception))
            flip(path, 8 * 20 + 1)
        config = os.path.join(pt, "config.json")
        flip(config, 3)
        self.assertEqual(len(read_sharded_ptwm(pt)), 62)
        with self.assertRaises(PtwmError) as cm:
            ptwm.decompress_checkpoint(pt, self.path("out"))
        self.assertIn("file 'config.json' is damaged", str(cm.exception))
        self.assertFalse(os.path.exists(self.path("out")))


class LinksTest(TempDirTest):
    def test_links_out_of_the_source_are_refused_unless_followed(self):
        hf = self.path("hf")
        ptwm.compress_checkpoint(SAMPLE, self.path("one"))
        ptwm.decompress_checkpoint(self.path("one"), hf, max_shard_size="1GB")
        outside = self.path("outside.json")
        with open(outside, "w") as f:
            f.write("{}\n")
        os.symlink(outside, os.path.join(hf, "config.json"))
        with self.assertRaises(PtwmError) as cm:
            ptwm.compress_checkpoint(hf, self.path("pt"))
        self.assertEqual(cm.exception.name, "PTWM_ERR_UNSUPPORTED")
        self.assertIn("config.json' is a symbolic link to", str(cm.exception))
        ptwm.compress_checkpoint(hf, self.path("pt"), follow_symlinks=True)
        self.assertEqual(file_bytes(self.path("pt", "config.json")), b"{}\n")


if __name__ == "__main__":
    unittest.main()
