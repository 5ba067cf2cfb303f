"""compress_ptwm_blob / write_ptwm_shard: one .ptwm container from tensors in memory.

Both call the C library's one-call writers (ptwm_compress_blob and
ptwm_compress_file) with the same descriptors and options, so a shard written
to disk holds exactly the bytes compress_ptwm_blob returns.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any, Sequence

from .._errors import WRITE_FILE_KINDS, WRITE_KINDS, check, check_path
from .._lib import ErrStruct, lib
from .._memory import take_malloced
from .._params import cparams
from .._tensors import described

__all__ = ["compress_ptwm_blob", "write_ptwm_shard"]


def compress_ptwm_blob(tensors: Sequence[tuple[str, bytes, Any, tuple[int, ...]]],
                       chains_per_tensor: list[list[bytes]] | None = None,
                       method_hint: int = 3, emit_payload_hash: bool = True,
                       emit_plane_crc: bool = True,
                       streaming_chunk: int | None = None) -> bytes:
    """Compress ``tensors`` into a single in-memory ``.ptwm`` container blob.

    ``tensors`` is a sequence of ``(name, raw_bytes, dtype, shape)``.
    ``chains_per_tensor`` — one list of chain wire-byte blobs per tensor;
    each blob is produced by ``Chain.to_bytes()``. When ``None``, chains are
    auto-derived from each tensor's dtype via the STANDARD production table.
    ``method_hint``: 1=HUFFMAN, 2=ZSTD, 3=MICROSCALE, 4=RANS, 5=IDENTITY.
    ``streaming_chunk``: raw bytes per chunk (``None``: the library default).
    """
    params = cparams(method_hint, emit_payload_hash, emit_plane_crc, streaming_chunk)
    err = ErrStruct()
    out = ctypes.c_void_p(None)
    n = ctypes.c_size_t(0)
    with described(tensors, chains_per_tensor) as (descs, count, lists):
        rc = lib.ptwm_compress_blob(descs, count, lists, ctypes.byref(params), ctypes.byref(out),
                                    ctypes.byref(n), ctypes.byref(err))
    if rc:
        if out.value:
            take_malloced(out.value, 0)
        check(rc, err, WRITE_KINDS)
    return take_malloced(out.value or 0, n.value)


def write_ptwm_shard(out_path: str | Path,
                     tensors: Sequence[tuple[str, bytes, Any, tuple[int, ...]]],
                     chains_per_tensor: list[list[bytes]] | None = None,
                     method_hint: int = 3, emit_payload_hash: bool = True,
                     emit_plane_crc: bool = True, streaming_chunk: int | None = None) -> None:
    """Write a single ``.ptwm`` container holding ``tensors``.

    See :func:`compress_ptwm_blob` for the parameter semantics. The file
    appears atomically (written to a temporary file and renamed).
    """
    params = cparams(method_hint, emit_payload_hash, emit_plane_crc, streaming_chunk)
    err = ErrStruct()
    path = os.fsencode(out_path)
    with described(tensors, chains_per_tensor) as (descs, count, lists):
        rc = lib.ptwm_compress_file(path, descs, count, lists, ctypes.byref(params),
                                    ctypes.byref(err))
    check_path(rc, err, out_path, WRITE_FILE_KINDS, writing=True)
