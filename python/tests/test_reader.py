"""ptwm.open: single .ptwm files through the C reader, including damaged ones."""

import os
import threading
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import PtwmError
from ptwm.sharding import compress_ptwm_blob, write_ptwm_shard

from _support import TempDirTest, synthetic_tensors



class ReaderTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.tensors = synthetic_tensors()
        self.file = self.path("w.ptwm")
        write_ptwm_shard(self.file, self.tensors, streaming_chunk=4096)

    def test_listing_and_info(self):
        with ptwm.open(self.file) as f:
            self.assertEqual(f.names(), [t[0] for t in self.tensors])
            self.assertEqual(list(f), f.names())
            self.assertEqual(len(f), len(self.tensors))
            self.assertIn("quant.u8", f)
            self.assertNotIn("nope", f)
            for name, raw, dtype, shape in self.tensors:
                info = f.info(name)
                self.assertEqual(info, ptwm.TensorInfo(name, dtype, tuple(shape), len(raw),
                                                       info.coded_bytes))
            self.assertLess(f.info("layer.0.weight").coded_bytes, 8192)
            self.assertEqual(f.file_size, os.path.getsize(self.file))
            self.assertIsNone(f.source_name)
            self.assertEqual(f.metadata(), {})
            self.assertIn("microscale", f.chain_text("layer.0.bf16"))

    def test_read(self):
        with ptwm.open(self.file, threads=1) as f:
            for name, raw, _, _ in self.tensors:
                got = f.read(name)
                self.assertIsInstance(got, bytes)
                self.assertEqual(got, raw)
            self.assertEqual(f.read_all(), {t[0]: t[1] for t in self.tensors})
            w = self.tensors[0][1]
            for off, n in [(0, 1), (4090, 12), (8191, 1), (0, 8192), (100, 0)]:
                self.assertEqual(f.read_range("layer.0.weight", off, n), w[off:off + n])
            f.verify()
            with self.assertRaises(KeyError):
                f.read("nope")
            with self.assertRaises(PtwmError):
                f.read_range("layer.0.weight", 8190, 4)
            with self.assertRaises(ValueError):
                f.read_range("layer.0.weight", -1, 4)
            with self.assertRaises(ValueError):
                f.read_range("layer.0.weight", 0, -4)

    def test_open_bytes_matches_file(self):
        blob = compress_ptwm_blob(self.tensors, streaming_chunk=4096)
        with ptwm.open_bytes(blob, label="mem") as m, ptwm.open(self.file) as f:
            self.assertEqual(m.read_all(), f.read_all())
            self.assertEqual(m.names(), f.names())

    def test_closed_file(self):
        f = ptwm.open(self.file)
        f.close()
        f.close()
        with self.assertRaises(ValueError):
            f.read("quant.u8")
        self.assertIn("closed", repr(f))

    def test_threads_share_one_file(self):
        errors = []
        with ptwm.open(self.file) as f:
            def work():
                try:
                    for _ in range(5):
                        for name, raw, _, _ in self.tensors:
                            if f.read(name) != raw:
                                errors.append(name)
                except Exception as e:   # reported below
                    errors.append(e)
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])

    def test_missing_file(self):
        with self.assertRaises(FileNotFoundError) as cm:
            ptwm.open(self.path("missing.ptwm"))
        self.assertIsInstance(cm.exception, PtwmError)
        self.assertIn("missing.ptwm", str(cm.exception))

    def test_not_a_ptwm_file(self):
        other = self.path("x.ptwm")
        with open(other, "wb") as f:
            f.write(b"this is not a ptwm file at all, just text" * 4)
        with self.assertRaises(PtwmError) as cm:
            ptwm.open(other)
        self.assertEqual(cm.exception.name, "PTWM_ERR_BAD_MAGIC")
        self.assertIn("x.ptwm", str(cm.exception))

    def test_truncated_file(self):
        with open(self.file, "rb") as f:
            data = f.read()
        for keep in (0, 7, len(data) // 2, len(data) - 1):
            with self.subTest(keep=keep):
                cut = self.path(f"cut{keep}.ptwm")
                with open(cut, "wb") as f:
                    f.write(data[:keep])
                with self.assertRaises(PtwmError) as cm:
                    with ptwm.open(cut) as r:
                        r.verify()
                self.assertNotIsInstance(cm.exception, (ValueError, FileNotFoundError))
                self.assertIn(f"cut{keep}.ptwm", str(cm.exception))

    def test_damage_found_by_verify_and_read(self):
        """Flip bytes across the file: each is reported with the C library's message
        (or, in the few bytes no check covers, decodes to the same data)."""
        with open(self.file, "rb") as f:
            data = f.read()
        found = 0
        for pos in range(0, len(data), max(1, len(data) // 40)):
            bad = bytearray(data)
            bad[pos] ^= 0x01
            try:
                with ptwm.open_bytes(bytes(bad), label="damaged.ptwm") as r:
                    r.verify()
                    same = r.read_all() == {t[0]: t[1] for t in self.tensors}
            except PtwmError as e:
                found += 1
                self.assertTrue(e.name.startswith("PTWM_ERR_"))
                self.assertIn("damaged.ptwm", str(e))
                self.assertNotIsInstance(e, FileNotFoundError)
                continue
            self.assertTrue(same, f"flipping byte {pos} changed the data undetected")
        self.assertGreater(found, 30)

    def test_crc_error_names_the_tensor(self):
        blob = bytearray(compress_ptwm_blob(self.tensors[:1], method_hint=5))
        blob[len(blob) // 2] ^= 0xFF
        with ptwm.open_bytes(bytes(blob)) as r:
            with self.assertRaises(PtwmError) as cm:
                r.read("layer.0.weight")
        self.assertEqual(cm.exception.name, "PTWM_ERR_CRC")
        self.assertIn("layer.0.weight", str(cm.exception))
        self.assertEqual(cm.exception.message, str(cm.exception))
        self.assertEqual(cm.exception.code, 19)


if __name__ == "__main__":
    unittest.main()
