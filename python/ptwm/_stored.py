"""Stored weights for the framework modules (ptwm.torch, ptwm.numpy, safe_open).

One handle over a .ptwm file, a sharded .ptwm directory, a safetensors file or
a Hugging Face directory (ptwm_source), or over .ptwm or safetensors bytes in
memory; each tensor is decoded into memory the caller allocated (the tensor's
own storage), never through an intermediate bytes. (_saving.py writes.)
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

from ._errors import (ERR_INVALID_ARG, ERR_NOT_FOUND, PtwmFileNotFoundError, PtwmKeyError,
                      PtwmTypeError, PtwmValueError, check, check_path)
from ._lib import ErrStruct, TensorInfo as _CInfo, lib
from ._memory import pinned

__all__ = ["Stored", "Entry", "open_path", "open_data"]

_PTWM_MAGIC = b"\x89PTWM\r\n\x1a"
_SOURCE_AUTO = 0


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
        self._base: Optional["Stored"] = None   # the base its tensors need (set_base)
        self._lock = threading.Lock()
        self.label = label
        self.entries: Dict[str, Entry] = {}
        # (one pass of few Python operations a tensor: files of thousands of
        # small tensors spent longer here than in reading them)
        ci = _CInfo()
        ref, tensor, entries = ctypes.byref(ci), api.tensor, self.entries
        for i in range(api.count(handle)):
            rc = tensor(handle, i, ref, None)
            if rc:
                check(rc)
            entries[ci.name.decode("utf-8")] = Entry(i, ci.dtype, tuple(ci.shape[:ci.ndim]),
                                                     ci.nbytes)
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

    def set_base(self, base) -> None:
        """Decode tensors coded against a base with `base` (a path to any
        weights file or directory, a Stored, which this handle then owns, or
        None), which stays open with this handle."""
        if isinstance(base, Stored) or base is None:
            new = base
        else:
            new = open_path(base, 1)
        err = ErrStruct()
        with self._lock:
            set_fn = lib.ptwm_reader_set_base if self._api is _READER else lib.ptwm_source_set_base
            if self._api is not _ST:
                rc = set_fn(self._handle, new._handle if new else None, ctypes.byref(err))
                if rc:
                    if new:
                        new.close()
                    check(rc, err)
            old, self._base = self._base, new
        if old:
            old.close()

    def close(self) -> None:
        with self._lock:
            if self._handle:
                self._api.close(self._handle)
                self._handle = ctypes.c_void_p(None)
            self._keep = None
            base, self._base = self._base, None
        if base:   # after the handle that used it
            base.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def open_path(filename, threads: int = 0, base=None) -> Stored:
    """Open a .ptwm file or directory, a safetensors file or a Hugging Face directory;
    base: the weights its tensors were coded against (ptwm compress --base), if any."""
    _check_threads(threads)
    path = os.fsencode(filename)
    handle = ctypes.c_void_p(None)
    err = ErrStruct()
    rc = lib.ptwm_source_open(path, _SOURCE_AUTO, ctypes.byref(handle), ctypes.byref(err))
    if rc and not os.path.exists(path):   # safetensors' words, which callers match
        raise PtwmFileNotFoundError(rc, f"No such file or directory: {os.fsdecode(filename)}")
    if rc:
        check_path(rc, err, path)
    lib.ptwm_source_set_threads(handle, threads)
    try:
        stored = Stored(_SOURCE, handle, os.fsdecode(filename))
    except BaseException:
        lib.ptwm_source_close(handle)
        handle.value = None   # the half-built Stored holds it too: its __del__ must not close again
        raise
    return _with_base(stored, base)


def _with_base(stored: Stored, base) -> Stored:
    if base is not None:
        try:
            stored.set_base(base)
        except BaseException:
            stored.close()
            raise
    return stored


def open_data(data, threads: int = 0, base=None) -> Stored:
    """Open .ptwm or safetensors bytes (kept referenced while the handle is open)."""
    _check_threads(threads)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise PtwmTypeError(ERR_INVALID_ARG, f"data must be bytes (what save() returned), "
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
        stored = Stored(api, handle, "<bytes>", keep=data)
    except BaseException:
        api.close(handle)
        handle.value = None   # the half-built Stored holds it too: its __del__ must not close again
        raise
    return _with_base(stored, base)


def _check_threads(threads) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise PtwmValueError(ERR_INVALID_ARG, f"threads must be an int >= 0 (0 = all cores), "
                             f"got {threads!r}")
