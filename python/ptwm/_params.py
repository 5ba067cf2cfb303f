"""ptwm_cparams from Python keyword arguments."""

from __future__ import annotations

import ctypes
from typing import Optional

from ._errors import ERR_INVALID_ARG, PtwmValueError
from ._lib import CParams
from .chain import method_code

__all__ = ["cparams"]


def cparams(method=3, emit_payload_hash: bool = True, emit_plane_crc: bool = True,
            chunk_size: Optional[int] = None, threads: int = 0, zstd_level: int = 0) -> CParams:
    """The C options struct; chunk_size None (or 0) means the library default."""
    if chunk_size is None:
        chunk_size = 0
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 0:
        raise PtwmValueError(ERR_INVALID_ARG, f"chunk size must be None or a positive int, "
                             f"got {chunk_size!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise PtwmValueError(ERR_INVALID_ARG, f"threads must be an int >= 0 (0 = all cores), "
                             f"got {threads!r}")
    return CParams(size=ctypes.sizeof(CParams), method=method_code(method),
                   no_payload_hash=int(not emit_payload_hash),
                   no_plane_crc=int(not emit_plane_crc), chunk_size=chunk_size, threads=threads,
                   zstd_level=int(zstd_level))
