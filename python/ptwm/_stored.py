"""Stored weights for the framework modules (ptwm.torch, ptwm.numpy, safe_open).

Reading: one handle over a .ptwm file, a sharded .ptwm directory, a
safetensors file or a Hugging Face directory (ptwm_source), or over .ptwm or
safetensors bytes in memory; each tensor is decoded into memory the caller
allocated (the tensor's own storage), never through an intermediate bytes.
Writing: tensors given by address are coded by ptwm_writer_* into a .ptwm
file, .ptwm bytes, or a sharded directory with its index.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import threading
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ._errors import (ERR_EXISTS, ERR_INVALID_ARG, ERR_NOT_FOUND, WRITE_FILE_KINDS, WRITE_KINDS,
                      PtwmFileExistsError, PtwmKeyError, PtwmValueError, check, check_path)
from ._lib import KV, ErrStruct, TensorDesc, TensorInfo as _CInfo, lib
from ._memory import pinned, take_malloced
from ._params import cparams

__all__ = ["Stored", "open_path", "open_data", "Item", "write_file", "write_bytes",
           "check_metadata"]

_PTWM_MAGIC = b"\x89PTWM\r\n\x1a"
_SOURCE_AUTO = 0
_INDEX_NAME = "model.ptwm.index.json"
_SINGLE_NAME = "model.ptwm"


class Entry(NamedTuple):
    """One stored tensor: its position in the handle, dtype (wire value), shape, bytes."""
    index: int
    dtype: int
    shape: Tuple[int, ...]
    nbytes: int


class _Api(NamedTuple):
    """One family of C calls with the same shapes (ptwm_source_*, ptwm_reader_*, ptwm_st_*)."""
    close: object
    count: object
    tensor: object
    read: object
    meta_count: object
    meta: object
    many: object   # whole tensors in one call (chunks share the threads), or None


_SOURCE = _Api(lib.ptwm_source_close, lib.ptwm_source_count, lib.ptwm_source_tensor,
               lib.ptwm_source_read, lib.ptwm_source_metadata_count, lib.ptwm_source_metadata,
               lib.ptwm_source_read_many)
_READER = _Api(lib.ptwm_reader_close, lib.ptwm_reader_count, lib.ptwm_reader_tensor,
               lib.ptwm_reader_decode_range, lib.ptwm_reader_metadata_count,
               lib.ptwm_reader_metadata, lib.ptwm_reader_decode_many)
_ST = _Api(lib.ptwm_st_close, lib.ptwm_st_count, lib.ptwm_st_tensor, lib.ptwm_st_read,
           lib.ptwm_st_metadata_count, lib.ptwm_st_metadata, None)


class Stored:
    """An open set of stored tensors; reads are serialised (a handle is shared by threads)."""

    def __init__(self, api: _Api, handle: ctypes.c_void_p, label: str, keep=None):
        self._api = api
        self._handle = handle
        self._keep = keep   # the bytes an in-memory handle reads from
        self._lock = threading.Lock()
        self.label = label
        self.entries: Dict[str, Entry] = {}
        ci = _CInfo()
        for i in range(api.count(handle)):
            check(api.tensor(handle, i, ctypes.byref(ci)))
            name = ci.name.decode("utf-8")
            self.entries[name] = Entry(i, int(ci.dtype),
                                       tuple(int(ci.shape[d]) for d in range(ci.ndim)),
                                       int(ci.nbytes))
        self.names = list(self.entries)   # file order (index order for directories)
        self._meta = {}
        for i in range(api.meta_count(handle)):
            kv = api.meta(handle, i)
            self._meta[kv.key.decode("utf-8")] = kv.value.decode("utf-8")

    def metadata(self) -> Optional[Dict[str, str]]:
        """The stored metadata, or None when there is none (as safetensors returns)."""
        return dict(self._meta) if self._meta else None

    def entry(self, name: str) -> Entry:
        try:
            return self.entries[name]
        except (KeyError, TypeError):
            raise PtwmKeyError(ERR_NOT_FOUND, f"tensor {name!r} not in '{self.label}'") from None

    def read_into(self, entry: Entry, offset: int, addr: int, length: int) -> None:
        """Decode bytes [offset, offset + length) of a tensor to address addr.

        Reading a whole tensor from byte 0 checks its payload hash; a part of it
        checks the CRCs of the chunks it touches."""
        if length == 0:
            return
        err = ErrStruct()
        with self._lock:
            if not self._handle:
                raise ValueError(f"'{self.label}' is closed")
            check(self._api.read(self._handle, entry.index, offset, addr, length,
                                 ctypes.byref(err)), err)

    def read_many(self, entries: Sequence[Entry], addrs: Sequence[int]) -> None:
        """Decode whole tensors, entries[i] to addrs[i], in one call where the
        handle has one (every payload hash checked)."""
        if self._api.many is None:
            for e, a in zip(entries, addrs):
                self.read_into(e, 0, a, e.nbytes)
            return
        n = len(entries)
        idx = (ctypes.c_size_t * max(n, 1))(*[e.index for e in entries])
        dsts = (ctypes.c_void_p * max(n, 1))(*[a or None for a in addrs])
        sizes = (ctypes.c_size_t * max(n, 1))(*[e.nbytes for e in entries])
        err = ErrStruct()
        with self._lock:
            if not self._handle:
                raise ValueError(f"'{self.label}' is closed")
            check(self._api.many(self._handle, idx, dsts, sizes, n, ctypes.byref(err)), err)

    def close(self) -> None:
        with self._lock:
            if self._handle:
                self._api.close(self._handle)
                self._handle = ctypes.c_void_p(None)
            self._keep = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def open_path(filename, threads: int = 0) -> Stored:
    """Open a .ptwm file or directory, a safetensors file or a Hugging Face directory."""
    _check_threads(threads)
    path = os.fsencode(filename)
    handle = ctypes.c_void_p(None)
    err = ErrStruct()
    rc = lib.ptwm_source_open(path, _SOURCE_AUTO, ctypes.byref(handle), ctypes.byref(err))
    if rc:
        check_path(rc, err, path)
    lib.ptwm_source_set_threads(handle, threads)
    try:
        return Stored(_SOURCE, handle, os.fsdecode(filename))
    except BaseException:
        lib.ptwm_source_close(handle)
        raise


def open_data(data, threads: int = 0) -> Stored:
    """Open .ptwm or safetensors bytes (kept referenced while the handle is open)."""
    _check_threads(threads)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise PtwmValueError(ERR_INVALID_ARG, f"data must be bytes (what save() returned), "
                             f"not {type(data).__name__}")
    data = bytes(data) if not isinstance(data, bytes) else data
    handle = ctypes.c_void_p(None)
    err = ErrStruct()
    is_ptwm = data[:len(_PTWM_MAGIC)] == _PTWM_MAGIC
    with pinned(data) as (addr, n):   # bytes never move: the address outlives the block
        if is_ptwm:
            rc = lib.ptwm_reader_open_memory(addr, n, b"<bytes>", ctypes.byref(handle),
                                             ctypes.byref(err))
        else:
            rc = lib.ptwm_st_open_memory(addr, n, b"<bytes>", ctypes.byref(handle),
                                         ctypes.byref(err))
    check(rc, err)
    api = _READER if is_ptwm else _ST
    if is_ptwm:
        lib.ptwm_reader_set_threads(handle, threads)
    try:
        return Stored(api, handle, "<bytes>", keep=data)
    except BaseException:
        api.close(handle)
        raise


def _check_threads(threads) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise PtwmValueError(ERR_INVALID_ARG, f"threads must be an int >= 0 (0 = all cores), "
                             f"got {threads!r}")


# -- writing ------------------------------------------------------------------

class Item(NamedTuple):
    """One tensor to write: its bytes at addr (kept alive by the caller)."""
    name: str
    dtype: int
    shape: Tuple[int, ...]
    addr: int
    nbytes: int


def check_metadata(metadata) -> List[Tuple[str, str]]:
    """metadata as (key, value) pairs; ValueError unless it maps str to str."""
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise PtwmValueError(ERR_INVALID_ARG, f"metadata must be a dict of str to str or None, "
                             f"not {type(metadata).__name__}")
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise PtwmValueError(ERR_INVALID_ARG, f"metadata must map str to str; entry "
                                 f"{k!r}: {v!r} is {type(k).__name__} to {type(v).__name__}")
    return list(metadata.items())


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
        for it in items:
            shape = (ctypes.c_uint64 * max(len(it.shape), 1))(*it.shape)
            desc = TensorDesc(it.name.encode("utf-8"), it.dtype, len(it.shape),
                              ctypes.cast(shape, ctypes.POINTER(ctypes.c_uint64)),
                              it.addr or None, it.nbytes)
            check(lib.ptwm_writer_add(w, ctypes.byref(desc), None, ctypes.byref(err)), err,
                  kinds)
    except BaseException:
        lib.ptwm_writer_free(w)
        raise
    return w


def write_bytes(items: Sequence[Item], metadata=None, method=3, threads: int = 0,
                chunk_size: Optional[int] = None) -> bytes:
    """The .ptwm image of items, in memory."""
    params = cparams(method, threads=threads, chunk_size=chunk_size)
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
    return name in (_INDEX_NAME, _SINGLE_NAME) or (name.startswith("model-") and
                                                   name.endswith(".ptwm"))


def _write_sharded(path: str, items: Sequence[Item], meta, params, max_shard_size: int) -> None:
    """A directory of shards (model-0000k-of-0000n.ptwm + index, or one model.ptwm),
    built beside `path` and renamed into place. An existing directory is
    replaced only when it holds nothing but a .ptwm checkpoint's files."""
    from .sharding import PtwmIndex, plan_shards, shard_filename
    if os.path.exists(path):
        if not os.path.isdir(path) or any(not _is_ptwm_dir_file(f) for f in os.listdir(path)):
            raise PtwmFileExistsError(ERR_EXISTS, f"'{path}' exists and is not a sharded .ptwm "
                                      f"directory; not replacing it")
    plan = plan_shards([(it.name, it.nbytes) for it in items], max_shard_size) if items else [[]]
    by_name = {it.name: it for it in items}
    parent = os.path.dirname(os.path.abspath(path))
    stage = tempfile.mkdtemp(prefix=os.path.basename(os.path.abspath(path)) + ".tmp-",
                             dir=parent)
    try:
        weight_map = {}
        sizes = 0
        for k, shard in enumerate(plan, 1):
            fname = _SINGLE_NAME if len(plan) == 1 else shard_filename(k, len(plan), "ptwm")
            _write_one(os.path.join(stage, fname), [by_name[n] for n, _ in shard], meta, params)
            sizes += os.path.getsize(os.path.join(stage, fname))
            weight_map.update({n: fname for n, _ in shard})
        if len(plan) > 1:
            PtwmIndex(sum(it.nbytes for it in items), sizes,
                      weight_map).write(os.path.join(stage, _INDEX_NAME))
        old = None
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=os.path.basename(os.path.abspath(path)) + ".old-",
                                   dir=parent)
            os.replace(path, os.path.join(old, "d"))
        os.replace(stage, path)
        stage = None
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if stage:
            shutil.rmtree(stage, ignore_errors=True)


def write_file(filename, items: Sequence[Item], metadata=None, method=3, threads: int = 0,
               chunk_size: Optional[int] = None, max_shard_size=None) -> None:
    """One .ptwm file, or with max_shard_size ("5GB" or bytes) a sharded directory."""
    params = cparams(method, threads=threads, chunk_size=chunk_size)
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
