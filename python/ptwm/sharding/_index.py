"""PtwmIndex: model.ptwm.index.json, read and written by the C library (ptwm_index_*)."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import check, check_path
from .._lib import ErrStruct, lib

__all__ = ["PtwmIndex", "record_files"]


class _Handle:
    """Owns one ptwm_index*; frees it on exit."""

    def __init__(self):
        self.ptr = ctypes.c_void_p(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.ptwm_index_free(self.ptr)
        self.ptr = ctypes.c_void_p(None)


@dataclass
class PtwmIndex:
    """The index of a sharded ``.ptwm`` checkpoint.

    ``total_size`` is the raw bytes of all tensors, ``compressed_total_size``
    the coded bytes, ``weight_map`` maps each tensor name to its shard file.
    """

    total_size: int
    compressed_total_size: int
    weight_map: dict[str, str] = field(default_factory=dict)

    def write(self, path: str | Path) -> None:
        err = ErrStruct()
        with _Handle() as h:
            check(lib.ptwm_index_create(int(self.total_size), int(self.compressed_total_size),
                                        ctypes.byref(h.ptr), ctypes.byref(err)), err)
            for tensor, shard in self.weight_map.items():
                check(lib.ptwm_index_add(h.ptr, str(tensor).encode(), str(shard).encode(),
                                         ctypes.byref(err)), err)
            check_path(lib.ptwm_index_write(h.ptr, os.fsencode(path), ctypes.byref(err)), err,
                       path, writing=True)

    @classmethod
    def read(cls, path: str | Path) -> PtwmIndex:
        err = ErrStruct()
        with _Handle() as h:
            check_path(lib.ptwm_index_read(os.fsencode(path), ctypes.byref(h.ptr),
                                           ctypes.byref(err)), err, path)
            weight_map: dict[str, str] = {}
            tensor = ctypes.c_char_p(None)
            shard = ctypes.c_char_p(None)
            for i in range(lib.ptwm_index_count(h.ptr)):
                check(lib.ptwm_index_entry(h.ptr, i, ctypes.byref(tensor), ctypes.byref(shard), None))
                weight_map[tensor.value.decode()] = shard.value.decode()
            return cls(int(lib.ptwm_index_total_size(h.ptr)),
                       int(lib.ptwm_index_compressed_total_size(h.ptr)), weight_map)


def record_files(model_dir: str | Path) -> None:
    """Write ``model.ptwm.files.json`` in a directory put together by hand
    (shards, a :class:`PtwmIndex`, config files): the size and XXH3-128 of
    the index and of every other file besides the shards, as they are now,
    which ``ptwm verify``, decompression and the loaders check. Directories
    written by the library's conversions carry theirs already."""
    err = ErrStruct()
    check_path(lib.ptwm_ptdir_record_files(os.fsencode(model_dir), ctypes.byref(err)), err,
               model_dir, writing=True)
