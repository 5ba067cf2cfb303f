"""Dtype spellings: safetensors names, NumPy/PyTorch names and objects."""

import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import PtwmError

SAFETENSORS = ["BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "BF16",
               "F32", "F64", "C64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
               "F8_E5M2FNUZ", "F4", "F6_E2M3", "F6_E3M2"]


class FakeTorchDtype:
    """Looks like a torch.dtype to the package (module and str), without torch."""
    __module__ = "torch"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class DtypeTest(unittest.TestCase):
    def test_safetensors_names_are_wire_values(self):
        for code, name in enumerate(SAFETENSORS):
            with self.subTest(name=name):
                self.assertEqual(ptwm.dtype_code(name), code)
                self.assertEqual(ptwm.dtype_name(code), name)
                self.assertEqual(ptwm.dtype_code(code), code)

    def test_numpy_and_torch_names(self):
        pairs = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
                 "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64",
                 "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64",
                 "complex64": "C64", "float8_e5m2": "F8_E5M2", "float8_e4m3fn": "F8_E4M3"}
        for alias, name in pairs.items():
            with self.subTest(alias=alias):
                self.assertEqual(ptwm.dtype_code(alias), ptwm.dtype_code(name))
                self.assertEqual(ptwm.dtype_code(FakeTorchDtype(alias)), ptwm.dtype_code(name))

    def test_bits(self):
        self.assertEqual(ptwm.dtype_bits("BF16"), 16)
        self.assertEqual(ptwm.dtype_bits("float32"), 32)
        self.assertEqual(ptwm.dtype_bits("U8"), 8)

    def test_unknown_dtype_is_value_error(self):
        for bad in ["F33", "bf16x", "", 99, -1, 1 << 40, 3.5, object()]:
            with self.subTest(bad=repr(bad)):
                with self.assertRaises(ValueError) as cm:
                    ptwm.dtype_code(bad)
                self.assertIsInstance(cm.exception, PtwmError)

    def test_numpy_dtypes(self):
        import numpy as np
        self.assertEqual(ptwm.dtype_code(np.float32), ptwm.dtype_code("F32"))
        self.assertEqual(ptwm.dtype_code(np.dtype("<f2")), ptwm.dtype_code("F16"))
        self.assertEqual(ptwm.dtype_code(np.dtype("uint8")), ptwm.dtype_code("U8"))
        with self.assertRaises(ValueError):
            ptwm.dtype_code(np.dtype(">f4"))

    def test_torch_dtypes(self):
        import torch
        self.assertEqual(ptwm.dtype_code(torch.bfloat16), ptwm.dtype_code("BF16"))
        self.assertEqual(ptwm.dtype_code(torch.float32), ptwm.dtype_code("F32"))


if __name__ == "__main__":
    unittest.main()
