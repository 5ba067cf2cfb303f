"""read_sharded_ptwm: every tensor of a sharded .ptwm directory (ptwm_ptdir_*)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from .._errors import (ERR_DUPLICATE, ERR_NOT_FOUND, FILE_KINDS, PtwmFileNotFoundError,
                       PtwmValueError, check)
from .._lib import ErrStruct, TensorInfo as _CInfo, lib
from .._memory import filled_bytes

__all__ = ["read_sharded_ptwm", "INDEX_NAME", "SINGLE_NAME"]

INDEX_NAME = "model.ptwm.index.json"
SINGLE_NAME = "model.ptwm"


def _shard_name(d, i: int) -> str:
    name = lib.ptwm_ptdir_shard_name(d, i)
    return name.decode() if name else f"shard {i + 1}"


def _check_disjoint(d) -> None:
    """ValueError if one tensor name is stored in two shards (whatever the index says)."""
    seen: dict[str, int] = {}
    ci = _CInfo()
    for s in range(lib.ptwm_ptdir_shard_count(d)):
        r = lib.ptwm_ptdir_shard(d, s)
        for i in range(lib.ptwm_reader_count(r)):
            check(lib.ptwm_reader_tensor(r, i, ctypes.byref(ci), None))
            name = ci.name.decode("utf-8")
            if name in seen:
                raise PtwmValueError(ERR_DUPLICATE, f"tensor '{name}' is stored in both "
                                     f"'{_shard_name(d, seen[name])}' and "
                                     f"'{_shard_name(d, s)}'")
            seen[name] = s


def read_sharded_ptwm(model_dir: str | Path) -> dict[str, bytes]:
    """Open every shard listed in ``model.ptwm.index.json``, return the union.

    If no index file is present, falls back to a single ``model.ptwm``
    in the directory.

    Raises FileNotFoundError if neither ``model.ptwm.index.json`` nor
    ``model.ptwm`` exists (or a listed shard is missing), ValueError if the
    same tensor name appears in more than one shard, and ptwm.PtwmError with
    the library's message for any other damage.
    """
    root = os.fspath(model_dir)
    if not (os.path.isfile(os.path.join(root, INDEX_NAME)) or
            os.path.isfile(os.path.join(root, SINGLE_NAME))):
        raise PtwmFileNotFoundError(ERR_NOT_FOUND, f"'{root}': neither {INDEX_NAME} nor "
                                    f"{SINGLE_NAME} exists")
    d = ctypes.c_void_p(None)
    err = ErrStruct()
    check(lib.ptwm_ptdir_open(os.fsencode(root), ctypes.byref(d), ctypes.byref(err)), err,
          FILE_KINDS)
    try:
        _check_disjoint(d)
        out: dict[str, bytes] = {}
        ci = _CInfo()
        for i in range(lib.ptwm_ptdir_count(d)):
            check(lib.ptwm_ptdir_tensor(d, i, ctypes.byref(ci), None))
            name = ci.name.decode("utf-8")

            def fill(addr, n, i=i):
                check(lib.ptwm_ptdir_decode_range(d, i, 0, addr, n, ctypes.byref(err)), err)
            out[name] = filled_bytes(int(ci.nbytes), fill)
        return out
    finally:
        lib.ptwm_ptdir_close(d)
