"""Safetensors <-> .ptwm through the C library, on real weights from the corpus."""

import os
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import PtwmError
from ptwm.sharding import read_sharded_ptwm

from _support import TempDirTest, corpus_file, parse_safetensors, synthetic_tensors


SMALL = ["emotion.bf16.safetensors", "emotion.f32.safetensors"]


def file_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class SafetensorsTest(TempDirTest):
    def test_read_safetensors_matches_an_independent_parse(self):
        for name in SMALL + ["posenet.bf16.safetensors"]:
            with self.subTest(name=name):
                path = corpus_file(name)
                ref = parse_safetensors(path)
                got = ptwm.read_safetensors(path)
                self.assertEqual(list(got), list(ref), "file order")
                self.assertEqual(got, {n: raw for n, (_, _, raw) in ref.items()})
                infos, _ = ptwm.safetensors_info(path)
                for n, (dtype, shape, raw) in ref.items():
                    self.assertEqual((infos[n].dtype, infos[n].shape, infos[n].nbytes),
                                     (dtype, shape, len(raw)))

    def test_write_safetensors(self):
        tensors = synthetic_tensors()
        out = self.path("w.safetensors")
        ptwm.write_safetensors(out, tensors, metadata={"format": "pt", "note": "x"})
        ref = parse_safetensors(out)
        self.assertEqual({n: (d, s, r) for n, (d, s, r) in ref.items()},
                         {n: (d, tuple(s), r) for n, r, d, s in tensors})
        self.assertEqual(ptwm.safetensors_info(out)[1], {"format": "pt", "note": "x"})
        self.assertEqual(ptwm.read_safetensors(out), {t[0]: t[1] for t in tensors})

    def test_compress_and_restore_byte_for_byte(self):
        for name in SMALL:
            with self.subTest(name=name):
                src = corpus_file(name)
                dst = self.path(name + ".ptwm")
                ptwm.compress_safetensors(src, dst)
                self.assertLess(os.path.getsize(dst), os.path.getsize(src))
                with ptwm.open(dst) as f:
                    self.assertEqual(f.source_name, name)
                    f.verify()
                    self.assertEqual(f.read_all(), ptwm.read_safetensors(src))
                back = self.path(name)
                ptwm.decompress_to_safetensors(dst, back)
                self.assertEqual(file_bytes(back), file_bytes(src))

    def test_progress_reaches_the_total(self):
        for name in SMALL:
            with self.subTest(name=name):
                src = corpus_file(name)
                calls = []
                ptwm.compress_safetensors(src, self.path("p.ptwm"),
                                          progress=lambda d, t: calls.append((d, t)))
                self.assertTrue(calls, "progress was reported")
                self.assertEqual([d for d, _ in calls], sorted(d for d, _ in calls))
                # ptwm.h: done is raw bytes coded so far; compress_safetensors sets the
                # total to the data size. So the last report is (data size, data size).
                data_size = sum(i.nbytes for i in ptwm.safetensors_info(src)[0].values())
                self.assertEqual(calls[-1], (data_size, data_size),
                                 f"last progress report (done, total) of {name}; the file "
                                 f"is {os.path.getsize(src)} bytes, its data {data_size}")

    def test_methods_and_threads(self):
        src = corpus_file("emotion.bf16.safetensors")
        raw = ptwm.read_safetensors(src)
        outs = {}
        for method in ("huffman", "zstd", "microscale", "rans", "identity"):
            for threads in (1, 2):
                with self.subTest(method=method, threads=threads):
                    dst = self.path(f"{method}{threads}.ptwm")
                    ptwm.compress_safetensors(src, dst, method=method, threads=threads)
                    with ptwm.open(dst) as f:
                        self.assertEqual(f.read_all(), raw)
                    outs[(method, threads)] = file_bytes(dst)
            self.assertEqual(outs[(method, 1)], outs[(method, 2)],
                             "output does not depend on the thread count")

    def test_progress_exception_is_raised_after_the_call(self):
        def boom(done, total):
            raise KeyboardInterrupt("stop")
        with self.assertRaises(KeyboardInterrupt):
            ptwm.compress_safetensors(corpus_file("emotion.bf16.safetensors"),
                                      self.path("p.ptwm"), progress=boom)

    def test_errors(self):
        with self.assertRaises(FileNotFoundError):
            ptwm.compress_safetensors(self.path("missing.safetensors"), self.path("o.ptwm"))
        with self.assertRaises(FileNotFoundError):
            ptwm.read_safetensors(self.path("missing.safetensors"))
        junk = self.path("junk.safetensors")
        with open(junk, "wb") as f:
            f.write(b"\xff" * 64)
        with self.assertRaises(PtwmError) as cm:
            ptwm.compress_safetensors(junk, self.path("o.ptwm"))
        self.assertIn("junk.safetensors", str(cm.exception))
        self.assertNotIsInstance(cm.exception, FileNotFoundError)
        with self.assertRaises(PtwmError) as cm:
            ptwm.read_safetensors(junk)
        self.assertEqual(cm.exception.name, "PTWM_ERR_HEADER_SIZE")
        with self.assertRaises(ValueError):
            ptwm.compress_safetensors(corpus_file("emotion.bf16.safetensors"),
                                      self.path("o.ptwm"), method="lzma")


class CheckpointTest(TempDirTest):
    def test_file_to_directory_and_back(self):
        src = corpus_file("emotion.f32.safetensors")
        out = self.path("ckpt")
        ptwm.compress_checkpoint(src, out)
        self.assertTrue(os.path.isfile(os.path.join(out, "model.ptwm")))
        self.assertEqual(read_sharded_ptwm(out), ptwm.read_safetensors(src))
        back = self.path("back")
        ptwm.decompress_checkpoint(out, back)
        self.assertEqual(file_bytes(os.path.join(back, os.path.basename(src))), file_bytes(src))

    def test_resharded(self):
        src = corpus_file("emotion.bf16.safetensors")
        out = self.path("sharded")
        ptwm.compress_checkpoint(src, out, max_shard_size="100kB", threads=2)
        shards = sorted(p for p in os.listdir(out) if p.endswith(".ptwm"))
        self.assertGreater(len(shards), 2)
        self.assertTrue(os.path.isfile(os.path.join(out, "model.ptwm.index.json")))
        idx = ptwm.sharding.PtwmIndex.read(os.path.join(out, "model.ptwm.index.json"))
        self.assertEqual(sorted(set(idx.weight_map.values())), shards)
        raw = ptwm.read_safetensors(src)
        self.assertEqual(read_sharded_ptwm(out), raw)
        self.assertEqual(idx.total_size, sum(len(v) for v in raw.values()))

    def test_existing_output(self):
        src = corpus_file("emotion.bf16.safetensors")
        out = self.path("o")
        ptwm.compress_checkpoint(src, out)
        with self.assertRaises(FileExistsError) as cm:
            ptwm.compress_checkpoint(src, out)
        self.assertIsInstance(cm.exception, PtwmError)
        ptwm.compress_checkpoint(src, out, force=True)


if __name__ == "__main__":
    unittest.main()
