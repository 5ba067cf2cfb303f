"""Dtype names: safetensors names, NumPy and PyTorch dtypes, to ptwm wire values.

The safetensors names ("BF16", "F32", ...) are resolved by the C library
(ptwm_dtype_from_name). NumPy and PyTorch dtypes, or their names ("bfloat16",
"float32"), are accepted too; neither package is imported here: a dtype object
is recognised by its module and its name, so nothing is needed that the
caller does not already have.
"""

from __future__ import annotations

import ctypes

from ._errors import ERR_DTYPE, PtwmValueError
from ._lib import lib

__all__ = ["dtype_code", "dtype_name", "dtype_bits"]

# NumPy / PyTorch / ml_dtypes spellings -> safetensors names.
_ALIASES = {
    "bool": "BOOL",
    "uint8": "U8", "int8": "I8",
    "int16": "I16", "uint16": "U16",
    "int32": "I32", "uint32": "U32",
    "int64": "I64", "uint64": "U64",
    "float16": "F16",
    "bfloat16": "BF16",
    "float32": "F32",
    "float64": "F64",
    "complex64": "C64",
    "float8_e5m2": "F8_E5M2",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e8m0fnu": "F8_E8M0",
    "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ",
    "float4_e2m1fn": "F4",
    "float6_e2m3fn": "F6_E2M3",
    "float6_e3m2fn": "F6_E3M2",
}


def _name_of(dtype) -> str:
    """The text to resolve for a dtype given as a str, a NumPy dtype/type or a torch.dtype."""
    if isinstance(dtype, str):
        return dtype
    module = type(dtype).__module__ or ""
    if module.startswith("torch"):
        # str(torch.bfloat16) == "torch.bfloat16"
        return str(dtype).rsplit(".", 1)[-1]
    if module.startswith("numpy") or hasattr(dtype, "itemsize") or isinstance(dtype, type):
        try:
            import numpy   # only reached when the caller already uses NumPy
        except ImportError:
            raise PtwmValueError(ERR_DTYPE, f"dtype {dtype!r} is not a dtype name "
                                 f"and NumPy is not installed") from None
        dt = numpy.dtype(dtype)
        if dt.itemsize > 1 and dt.byteorder == ">":
            raise PtwmValueError(ERR_DTYPE, f"dtype {dt!r} is big-endian; .ptwm stores "
                                 f"little-endian data (use .astype('<{dt.kind}{dt.itemsize}'))")
        return dt.name
    raise PtwmValueError(ERR_DTYPE, f"dtype {dtype!r} ({type(dtype).__name__}) is not "
                         f"a dtype name, a NumPy dtype or a torch.dtype")


def dtype_code(dtype) -> int:
    """The ptwm_dtype wire value for a dtype in any accepted spelling."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if not 0 <= dtype < 1 << 31 or lib.ptwm_dtype_name(dtype) is None:
            raise PtwmValueError(ERR_DTYPE, f"dtype number {dtype} is not a ptwm dtype")
        return dtype
    text = _name_of(dtype)
    name = _ALIASES.get(text.lower() if text.lower() in _ALIASES else text, text)
    out = ctypes.c_int(0)
    rc = lib.ptwm_dtype_from_name(name.encode(), ctypes.byref(out), None)
    if rc:
        raise PtwmValueError(rc, f"unknown dtype {dtype!r}: expected a safetensors name "
                             f"(BF16, F32, ...) or a NumPy/PyTorch dtype name "
                             f"({', '.join(sorted(_ALIASES))})")
    return out.value


def dtype_name(code: int) -> str:
    """The safetensors name ("BF16") of a ptwm_dtype wire value."""
    n = lib.ptwm_dtype_name(code)
    if n is None:
        raise PtwmValueError(ERR_DTYPE, f"dtype number {code} is not a ptwm dtype")
    return n.decode()


def dtype_bits(dtype) -> int:
    """Bits per element of a dtype in any accepted spelling."""
    return int(lib.ptwm_dtype_bits(dtype_code(dtype)))
