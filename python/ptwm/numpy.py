"""ptwm.numpy: safetensors.numpy's API, storing compressed .ptwm.

    import ptwm.numpy as st          # instead of: import safetensors.numpy as st
    st.save_file({"w": array}, "model.ptwm")
    arrays = st.load_file("model.ptwm")         # or a .safetensors file, or a directory

NumPy has no bfloat16 or float8 dtypes. BF16 and float8 tensors load as the
ml_dtypes types when ml_dtypes is importable; without it a BF16 tensor is an
error naming it, unless bf16="uint16" asks for its raw bits as uint16 (the
same bytes: view them as bfloat16 anywhere that has the type). Keyword extras
as in ptwm.torch: method=, threads=, max_shard_size=.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ._dtype import dtype_code, dtype_name
from ._errors import ERR_DTYPE, ERR_INVALID_ARG, PtwmTypeError, PtwmValueError
from ._safe_open import safe_open
from ._saving import Item, write_bytes, write_file

__all__ = ["save_file", "load_file", "save", "load"]

_NUMPY = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
          "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16",
          "F32": "float32", "F64": "float64", "C64": "complex64"}
# ml_dtypes' names for the dtypes NumPy lacks (one byte or two per element).
_ML_DTYPES = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
              "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
              "F8_E5M2FNUZ": "float8_e5m2fnuz"}
_BF16_CHOICES = (None, "uint16")


def _ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes


class _Adapter:
    """How safe_open makes NumPy arrays (get_slice as safetensors' NumPy path reads it)."""

    dialect = "np"

    def __init__(self, bf16=None):
        if bf16 not in _BF16_CHOICES:
            raise PtwmValueError(ERR_INVALID_ARG, f"bf16 must be None (ml_dtypes.bfloat16) or "
                                 f"\"uint16\" (the raw bits), not {bf16!r}")
        self.bf16 = bf16

    @staticmethod
    def device(device):
        if device not in ("cpu", None):
            raise PtwmValueError(ERR_INVALID_ARG, f"Device {device} is not supported for "
                                 f"framework numpy: NumPy arrays live on the CPU "
                                 f"(device=\"cpu\")")
        return device

    def dtype(self, code: int, name: str):
        st_name = dtype_name(code)
        if st_name in _NUMPY:
            return np.dtype(_NUMPY[st_name])
        if st_name == "BF16" and self.bf16 == "uint16":
            return np.dtype(np.uint16)
        ml = _ml_dtypes()
        if st_name in _ML_DTYPES and ml is not None and hasattr(ml, _ML_DTYPES[st_name]):
            return np.dtype(getattr(ml, _ML_DTYPES[st_name]))
        hint = (" or pass bf16=\"uint16\" for its raw bits as uint16" if st_name == "BF16"
                else "")
        raise PtwmValueError(ERR_DTYPE, f"tensor '{name}' is {st_name}, which NumPy has no "
                             f"dtype for: install ml_dtypes{hint}")

    def empty(self, code: int, shape, name: str):
        a = np.empty(tuple(shape), dtype=self.dtype(code, name))
        return a, a.ctypes.data

    @staticmethod
    def place(a, device):
        return a

    @staticmethod
    def take(a, steps):
        return np.ascontiguousarray(a[steps])


def _items(tensors) -> Tuple[List[Item], list]:
    """Writer items for a dict of arrays, and the arrays holding their bytes."""
    if not isinstance(tensors, dict):
        raise PtwmValueError(ERR_INVALID_ARG, f"Expected a dict of [str, numpy.ndarray] but "
                             f"received {type(tensors)}")
    items, keep = [], []
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise PtwmTypeError(ERR_INVALID_ARG, f"Key {k!r} is invalid, expected str but "
                                f"received {type(k)}")
        if not isinstance(v, np.ndarray):
            raise PtwmValueError(ERR_INVALID_ARG, f"Key `{k}` is invalid, expected "
                                 f"numpy.ndarray but received {type(v)}")
        if v.dtype.byteorder == ">":   # stored little-endian, as safetensors does
            v = v.astype(v.dtype.newbyteorder("<"))
        code = dtype_code(v.dtype)
        a = v if v.flags["C_CONTIGUOUS"] else v.copy(order="C")   # 0-d arrays stay 0-d
        keep.append(a)
        items.append(Item(k, code, tuple(a.shape), a.ctypes.data, a.nbytes))
    return items, keep


def save(tensor_dict: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None, *,
         method="microscale", threads: int = 0, base=None) -> bytes:
    """The arrays as the bytes of a .ptwm file; with base (a weights path), each
    array matching a base tensor's name, dtype and shape is coded against it."""
    items, keep = _items(tensor_dict)
    out = write_bytes(items, metadata, method=method, threads=threads, base=base)
    del keep
    return out


def save_file(tensor_dict: Dict[str, np.ndarray], filename,
              metadata: Optional[Dict[str, str]] = None, *, method="microscale",
              threads: int = 0, max_shard_size=None, base=None) -> None:
    """Write the arrays as a .ptwm file, or with max_shard_size a sharded directory;
    base as for save()."""
    items, keep = _items(tensor_dict)
    write_file(filename, items, metadata, method=method, threads=threads,
               max_shard_size=max_shard_size, base=base)
    del keep


def load_file(filename, *, backend: str = "mmap", threads: int = 0, bf16: Optional[str] = None,
              base=None) -> Dict[str, np.ndarray]:
    """Every tensor of a .ptwm file or directory, a .safetensors file or a Hugging
    Face directory, by name in file order, decoded into its array; base: the
    weights a file saved against a base needs; backend as safetensors takes it."""
    with safe_open(filename, framework="np", backend=backend, threads=threads, bf16=bf16,
                   base=base) as f:
        return f.get_tensors()


def load(data: bytes, *, threads: int = 0, bf16: Optional[str] = None,
         base=None) -> Dict[str, np.ndarray]:
    """Every tensor of .ptwm (or safetensors) bytes, by name in file order."""
    with safe_open._from_bytes(data, "np", threads, bf16, base=base) as f:
        return f.get_tensors()
