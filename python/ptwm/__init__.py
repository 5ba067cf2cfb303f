"""ptwm: store, compress and load neural-network weights.

Python bindings to the C library libptwm (through ctypes). Everything about
the file formats is done by the library; this package turns Python values
into its calls and its errors into exceptions.
"""

from ._errors import (PtwmError, PtwmFileExistsError, PtwmFileNotFoundError, PtwmIndexError,
                      PtwmKeyError, PtwmMemoryError, PtwmTypeError, PtwmValueError,
                      SafetensorError)
from ._lib import library_path
from ._dtype import dtype_bits, dtype_code, dtype_name
from .chain import METHODS, Chain, method_code, method_name
from .convert import (assemble_checkpoint, compress_checkpoint, compress_safetensors,
                      decompress_checkpoint, decompress_to_safetensors, read_safetensors,
                      safetensors_info, write_safetensors)
from .reader import PtwmFile, TensorInfo, open, open_bytes
from ._safe_open import safe_open
from . import sharding

__version__ = "0.1.0"

__all__ = ["SafetensorError", "PtwmError", "PtwmValueError", "PtwmTypeError", "PtwmIndexError",
           "PtwmFileNotFoundError", "PtwmFileExistsError", "PtwmKeyError", "PtwmMemoryError",
           "Chain", "METHODS", "method_code", "method_name",
           "dtype_code", "dtype_name", "dtype_bits", "open", "open_bytes", "PtwmFile", "TensorInfo",
           "compress_safetensors", "decompress_to_safetensors", "read_safetensors",
           "safetensors_info", "write_safetensors", "compress_checkpoint",
           "decompress_checkpoint", "assemble_checkpoint", "sharding", "safe_open",
           "library_path",
           "library_version", "isa_level", "set_isa_limit", "__version__"]


def library_version() -> str:
    """The version string of the loaded libptwm."""
    from ._lib import lib
    return lib.ptwm_version().decode()


def isa_level() -> str:
    """The instruction set the library's kernels run at ("scalar", "ssse3",
    "avx2", "avx512" or "avx512vbmi"): the cap, or the CPU's best if lower."""
    from ._lib import lib
    return lib.ptwm_isa_name(lib.ptwm_isa_level()).decode()


def set_isa_limit(name: str) -> str:
    """Cap the kernels at the level `name` for the whole process (as the
    environment variable PTWM_ISA does) and return the level now in effect.
    Every level writes and reads the same bytes; only speed changes.
    Raises PtwmValueError for an unknown name."""
    import ctypes
    from ._lib import lib
    from ._errors import check
    level = ctypes.c_int()
    from ._lib import ErrStruct
    err = ErrStruct()
    check(lib.ptwm_isa_from_name(str(name).encode(), ctypes.byref(level), ctypes.byref(err)), err)
    return lib.ptwm_isa_name(lib.ptwm_set_isa_limit(level.value)).decode()
