"""Writing tensors given by address (framework modules keep them alive) with
ptwm_writer_*: a .ptwm file, .ptwm bytes, or a sharded directory with its index.

Tensors are written in safetensors' order (widest dtype first, in the order of
safetensors' Dtype enum, then by name) and metadata sorted by key, so the same
dict gives the same bytes whatever its insertion order, and a file lists its
tensors (offset_keys, load_file) as safetensors' file of the same dict does.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ._dtype import dtype_name
from ._errors import (ERR_EXISTS, ERR_INVALID_ARG, WRITE_FILE_KINDS, WRITE_KINDS,
                      PtwmFileExistsError, PtwmTypeError, PtwmValueError, check, check_path)
from ._lib import KV, ErrStruct, TensorDesc, lib
from ._memory import take_malloced
from ._params import cparams

__all__ = ["Item", "write_file", "write_bytes", "check_metadata"]

_INDEX_NAME = "model.ptwm.index.json"
_SINGLE_NAME = "model.ptwm"
_FILES_NAME = "model.ptwm.files.json"


# safetensors' Dtype enum, in its order (safetensors/src/tensor.rs): files hold
# the tensors of the last dtypes first.
_ST_DTYPES = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
              "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
              "C64", "F64", "I64", "U64"]
_ST_RANK = {name: i for i, name in enumerate(_ST_DTYPES)}


class Item(NamedTuple):
    """One tensor to write: its bytes at addr (kept alive by the caller)."""
    name: str
    dtype: int
    shape: Tuple[int, ...]
    addr: int
    nbytes: int


def safetensors_order(items: Sequence[Item]) -> List[Item]:
    """items in the order safetensors writes them: dtype (widest first), then name."""
    return sorted(items, key=lambda it: (-_ST_RANK.get(dtype_name(it.dtype), -1), it.name))


def check_metadata(metadata) -> List[Tuple[str, str]]:
    """metadata as (key, value) pairs sorted by key; a TypeError (and ValueError)
    unless it maps str to str."""
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise PtwmTypeError(ERR_INVALID_ARG, f"metadata must be a dict of str to str or None, "
                            f"not {type(metadata).__name__}")
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise PtwmTypeError(ERR_INVALID_ARG, f"metadata must map str to str; entry "
                                f"{k!r}: {v!r} is {type(k).__name__} to {type(v).__name__}")
    return sorted(metadata.items())


def _write(writer_open, items: Sequence[Item], meta: List[Tuple[str, str]],
           kinds) -> ctypes.c_void_p:
    """Open a writer with writer_open(handle_ref, err) and add metadata and tensors."""
    w = ctypes.c_void_p(None)
    err = ErrStruct()
    writer_open(ctypes.byref(w), err)
    try:
        if meta:
            kvs = (KV * len(meta))(*[KV(k.encode("utf-8"), v.encode("utf-8")) for k, v in meta])
            check(lib.ptwm_writer_set_metadata(w, kvs, len(meta), ctypes.byref(err)), err, kinds)
        descs, _shapes = _descs(items)
        for i in range(len(items)):
            check(lib.ptwm_writer_add(w, ctypes.byref(descs[i]), None, ctypes.byref(err)), err,
                  kinds)
    except BaseException:
        lib.ptwm_writer_free(w)
        raise
    return w


@contextlib.contextmanager
def _base_params(params, base):
    """params with the base (a path to any weights file or directory, opened
    for the block, or an open Stored, which stays the caller's) in it while
    the block writes; tensors matching a base tensor are coded against it
    (docs/DELTA.md)."""
    from ._stored import Stored, open_path
    own = None if base is None or isinstance(base, Stored) else open_path(base, 1)
    stored = own or base
    try:
        params.base = stored._handle.value if stored is not None else None
        yield params
    finally:
        params.base = None
        if own is not None:
            own.close()


def write_bytes(items: Sequence[Item], metadata=None, method=3, threads: int = 0,
                chunk_size: Optional[int] = None, base=None) -> bytes:
    """The .ptwm image of items, in memory (coded against base, if given)."""
    with _base_params(cparams(method, threads=threads, chunk_size=chunk_size), base) as params:
        return _write_bytes(safetensors_order(items), metadata, params)


def _write_bytes(items: Sequence[Item], metadata, params) -> bytes:
    meta = check_metadata(metadata)

    def opener(ref, err):
        check(lib.ptwm_writer_open_memory(ctypes.byref(params), ref, ctypes.byref(err)), err,
              WRITE_KINDS)
    w = _write(opener, items, meta, WRITE_KINDS)
    out = ctypes.c_void_p(None)
    n = ctypes.c_size_t(0)
    err = ErrStruct()
    check(lib.ptwm_writer_finish_memory(w, ctypes.byref(out), ctypes.byref(n), ctypes.byref(err)),
          err, WRITE_KINDS)
    return take_malloced(out.value or 0, n.value)


def _write_one(path: str, items: Sequence[Item], meta, params) -> None:
    p = os.fsencode(path)

    def opener(ref, err):
        check_path(lib.ptwm_writer_open_file(p, ctypes.byref(params), ref, ctypes.byref(err)),
                   err, path, WRITE_FILE_KINDS, writing=True)
    w = _write(opener, items, meta, WRITE_KINDS)
    err = ErrStruct()
    check_path(lib.ptwm_writer_finish(w, ctypes.byref(err)), err, path, WRITE_FILE_KINDS,
               writing=True)


def _is_ptwm_dir_file(name: str) -> bool:
    return name in (_INDEX_NAME, _SINGLE_NAME, _FILES_NAME) or (name.startswith("model-") and
                                                   name.endswith(".ptwm"))


def _descs(items: Sequence[Item]):
    """The items as a TensorDesc array (and the shape arrays it points into)."""
    descs = (TensorDesc * max(len(items), 1))()
    shapes = []
    for i, it in enumerate(items):
        shape = (ctypes.c_uint64 * max(len(it.shape), 1))(*it.shape)
        shapes.append(shape)
        descs[i] = TensorDesc(it.name.encode("utf-8"), it.dtype, len(it.shape),
                              ctypes.cast(shape, ctypes.POINTER(ctypes.c_uint64)),
                              it.addr or None, it.nbytes)
    return descs, shapes


def _write_sharded(path: str, items: Sequence[Item], meta, params, max_shard_size: int) -> None:
    """A directory of shards (model-0000k-of-0000n.ptwm + index, or one model.ptwm),
    written by the library beside `path` and committed whole. An existing
    directory is replaced only when it holds nothing but a .ptwm checkpoint's
    files."""
    if os.path.exists(path):
        if not os.path.isdir(path) or any(not _is_ptwm_dir_file(f) for f in os.listdir(path)):
            raise PtwmFileExistsError(ERR_EXISTS, f"'{path}' exists and is not a sharded .ptwm "
                                      f"directory; not replacing it")
    descs, _shapes = _descs(items)
    kvs = (KV * max(len(meta), 1))(*[KV(k.encode("utf-8"), v.encode("utf-8")) for k, v in meta])
    err = ErrStruct()
    check_path(lib.ptwm_ptdir_write(os.fsencode(path), descs, len(items), kvs, len(meta),
                                    max_shard_size, ctypes.byref(params), 1, ctypes.byref(err)),
               err, path, WRITE_FILE_KINDS, writing=True)


def write_file(filename, items: Sequence[Item], metadata=None, method=3, threads: int = 0,
               chunk_size: Optional[int] = None, max_shard_size=None, base=None) -> None:
    """One .ptwm file, or with max_shard_size ("5GB" or bytes) a sharded directory;
    tensors matching a tensor of base (a weights path) are coded against it."""
    with _base_params(cparams(method, threads=threads, chunk_size=chunk_size), base) as params:
        _write_file(filename, safetensors_order(items), metadata, params, max_shard_size)


def _write_file(filename, items: Sequence[Item], metadata, params, max_shard_size) -> None:
    meta = check_metadata(metadata)
    path = os.fsdecode(os.fspath(filename))
    if max_shard_size is None:
        _write_one(path, items, meta, params)
        return
    size = max_shard_size
    if isinstance(size, str):
        from .sharding import parse_size
        size = parse_size(size)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise PtwmValueError(ERR_INVALID_ARG, f"max_shard_size must be a positive int or a "
                             f"size such as \"5GB\", got {max_shard_size!r}")
    _write_sharded(path, items, meta, params, size)
