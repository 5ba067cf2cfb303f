"""ptwm: store, compress and load neural-network weights.

Python bindings to the C library libptwm (through ctypes). Everything about
the file formats is done by the library; this package turns Python values
into its calls and its errors into exceptions.
"""

from ._errors import (PtwmError, PtwmFileExistsError, PtwmFileNotFoundError, PtwmMemoryError,
                      PtwmValueError)
from ._lib import library_path
from ._dtype import dtype_bits, dtype_code, dtype_name
from .chain import METHODS, Chain, method_code, method_name
from .convert import (compress_checkpoint, compress_safetensors, decompress_checkpoint,
                      decompress_to_safetensors, read_safetensors, safetensors_info,
                      write_safetensors)
from .reader import PtwmFile, TensorInfo, open, open_bytes
from . import sharding

__version__ = "0.1.0"

__all__ = ["PtwmError", "PtwmValueError", "PtwmFileNotFoundError", "PtwmFileExistsError",
           "PtwmMemoryError", "Chain", "METHODS", "method_code", "method_name", "dtype_code",
           "dtype_name", "dtype_bits", "open", "open_bytes", "PtwmFile", "TensorInfo",
           "compress_safetensors", "decompress_to_safetensors", "read_safetensors",
           "safetensors_info", "write_safetensors", "compress_checkpoint",
           "decompress_checkpoint", "sharding", "library_path",
           "library_version", "__version__"]


def library_version() -> str:
    """The version string of the loaded libptwm."""
    from ._lib import lib
    return lib.ptwm_version().decode()
