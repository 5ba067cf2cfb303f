"""ptwm.Chain: built, parsed, printed and validated by the C library."""

import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import Chain, PtwmError

FLOATS = ["BF16", "F16", "F32"]


class ChainTest(unittest.TestCase):
    def test_standard_text_round_trip(self):
        for dtype in FLOATS + ["U8", "I8", "BOOL", "I32", "F64", "F8_E4M3"]:
            for method in range(1, 6):
                with self.subTest(dtype=dtype, method=method):
                    c = Chain.standard(dtype, method)
                    self.assertGreaterEqual(len(c.to_bytes()), 2)
                    text = str(c)
                    self.assertEqual(Chain.parse(text), c)
                    self.assertEqual(Chain(text).to_bytes(), c.to_bytes())
                    self.assertEqual(Chain.from_bytes(c.to_bytes(), dtype), c)
                    c.validate(dtype)

    def test_standard_default_method_is_microscale(self):
        self.assertEqual(Chain.standard("BF16"), Chain.standard("BF16", 3))
        self.assertEqual(Chain.standard("bfloat16", "microscale"), Chain.standard("BF16", 3))
        self.assertIn("microscale", str(Chain.standard("BF16")))
        self.assertIn("zstd", str(Chain.standard("F32", "zstd")))

    def test_bytes_round_trip(self):
        c = Chain.standard("F32")
        blob = c.to_bytes()
        self.assertIsInstance(blob, bytes)
        self.assertEqual(bytes(c), blob)
        self.assertEqual(Chain(blob), c)
        self.assertEqual(Chain(bytearray(blob)), c)
        self.assertEqual(Chain(memoryview(blob)), c)
        self.assertEqual(hash(Chain(blob)), hash(c))
        self.assertEqual(len(c), len(blob))
        self.assertEqual(eval(repr(c), {"Chain": Chain}), c)

    def test_from_stages(self):
        c = Chain.standard("BF16")
        stages = [s.strip() for s in str(c).split(">")]
        self.assertEqual(Chain.from_stages(stages), c)
        self.assertEqual(Chain(stages), c)
        with self.assertRaises(ValueError):
            Chain.from_stages([])
        with self.assertRaises(ValueError):
            Chain.from_stages(["split(e8m7)", ""])

    def test_hand_written_chains(self):
        for text in ["entropy(*:zstd)", "entropy(*:huffman)", "entropy(*:rans)",
                     "entropy(*:identity)", "split(e8m7) > entropy(*:huffman)"]:
            with self.subTest(text=text):
                c = Chain.parse(text)
                self.assertEqual(str(c), text)
                self.assertEqual(Chain.from_bytes(c.to_bytes()), c)

    def test_bad_text_is_value_error_with_c_message(self):
        for text in ["", "nonsense", "split(e8m7) >"]:
            with self.subTest(text=text):
                with self.assertRaises(ValueError) as cm:
                    Chain.parse(text)
                self.assertIsInstance(cm.exception, PtwmError)
                self.assertEqual(cm.exception.name, "PTWM_ERR_INVALID_ARG")
                self.assertIn("chain text at offset", str(cm.exception))
        with self.assertRaises(TypeError):
            Chain.parse(b"entropy(*:zstd)")

    def test_bad_blobs_are_rejected_by_the_library(self):
        good = Chain.standard("BF16").to_bytes()
        cases = [(b"", "PTWM_ERR_CORRUPT"), (b"\x00", "PTWM_ERR_CORRUPT"),
                 (good[:-1], "PTWM_ERR_CORRUPT"), (good + b"\x00", "PTWM_ERR_CORRUPT"),
                 (b"\xff" * 10, "PTWM_ERR_VERSION")]
        for blob, name in cases:
            with self.subTest(blob=blob.hex()):
                with self.assertRaises(PtwmError) as cm:
                    Chain.from_bytes(blob)
                self.assertEqual(cm.exception.name, name)
                self.assertTrue(str(cm.exception).startswith("chain:"), str(cm.exception))

    def test_validate_against_dtype(self):
        c = Chain.standard("BF16")
        with self.assertRaises(PtwmError) as cm:
            c.validate("U8")
        self.assertEqual(cm.exception.name, "PTWM_ERR_DTYPE")
        self.assertIn("U8", str(cm.exception))
        with self.assertRaises(PtwmError):
            Chain.from_bytes(c.to_bytes(), dtype="U8")

    def test_immutable(self):
        c = Chain.standard("F16")
        with self.assertRaises(AttributeError):
            c._blob = b""

    def test_methods(self):
        self.assertEqual(ptwm.METHODS, {"huffman": 1, "zstd": 2, "microscale": 3, "rans": 4,
                                        "identity": 5})
        for name, code in ptwm.METHODS.items():
            self.assertEqual(ptwm.method_code(name), code)
            self.assertEqual(ptwm.method_code(name.upper()), code)
            self.assertEqual(ptwm.method_name(code), name)
        for bad in [0, 6, -1, 1 << 40, "lzma", True, 1.5]:
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    ptwm.method_code(bad)
                with self.assertRaises(ValueError):
                    Chain.standard("F32", bad)


if __name__ == "__main__":
    unittest.main()
