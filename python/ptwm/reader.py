"""Reading single .ptwm files through the C reader (ptwm_reader_*)."""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from ._dtype import dtype_name
from ._errors import ERR_INVALID_ARG, PtwmValueError, check, check_path
from ._lib import ErrStruct, TensorInfo as _CInfo, lib
from ._memory import filled_bytes, pinned

__all__ = ["open", "open_bytes", "PtwmFile", "TensorInfo"]

_TEXT_CAP = 8192


@dataclass(frozen=True)
class TensorInfo:
    """A tensor as a reader describes it (dtype as its safetensors name)."""
    name: str
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    coded_bytes: int


def info_from_c(ci: _CInfo) -> TensorInfo:
    """Copy a ptwm_tensor_info out of library memory."""
    return TensorInfo(ci.name.decode("utf-8"), dtype_name(ci.dtype),
                      tuple(int(ci.shape[d]) for d in range(ci.ndim)), int(ci.nbytes),
                      int(ci.coded_bytes))


class PtwmFile:
    """An open .ptwm file. Use ptwm.open(path); close it (or use `with`).

    A PtwmFile may be shared between threads: calls are serialised."""

    def __init__(self, path: Union[str, Path], threads: int = 0):
        self._handle = ctypes.c_void_p(None)
        self._buffer = None
        self._lock = threading.Lock()
        self._label = os.fsdecode(path)
        err = ErrStruct()
        p = os.fsencode(path)
        rc = lib.ptwm_reader_open(p, ctypes.byref(self._handle), ctypes.byref(err))
        if rc:
            check_path(rc, err, p)
        self._after_open(threads)

    @classmethod
    def from_bytes(cls, data, label: str = "<memory>", threads: int = 0) -> "PtwmFile":
        """Open a .ptwm image held in memory (kept referenced while open)."""
        self = cls.__new__(cls)
        self._handle = ctypes.c_void_p(None)
        self._lock = threading.Lock()
        self._label = label
        self._buffer = bytes(data) if not isinstance(data, bytes) else data
        err = ErrStruct()
        with pinned(self._buffer) as (addr, n):
            # bytes never move, so the address stays valid after the with block
            check(lib.ptwm_reader_open_memory(addr, n, label.encode(),
                                              ctypes.byref(self._handle), ctypes.byref(err)), err)
        self._after_open(threads)
        return self

    def _after_open(self, threads: int) -> None:
        lib.ptwm_reader_set_threads(self._handle, int(threads))
        self._index: Dict[str, int] = {}
        self._infos: List[TensorInfo] = []
        ci = _CInfo()
        for i in range(lib.ptwm_reader_count(self._handle)):
            check(lib.ptwm_reader_tensor(self._handle, i, ctypes.byref(ci), None))
            info = info_from_c(ci)
            self._index[info.name] = i
            self._infos.append(info)

    # -- lifetime -----------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._handle:
                lib.ptwm_reader_close(self._handle)
                self._handle = ctypes.c_void_p(None)
            self._buffer = None

    def __enter__(self) -> "PtwmFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _h(self):
        if not self._handle:
            raise ValueError(f"{self._label}: the file is closed")
        return self._handle

    # -- listing ------------------------------------------------------------

    def names(self) -> List[str]:
        """Tensor names in file order."""
        return [i.name for i in self._infos]

    def __len__(self) -> int:
        return len(self._infos)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name) -> bool:
        return name in self._index

    def _at(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"{self._label}: no tensor named {name!r}") from None

    def info(self, name: str) -> TensorInfo:
        return self._infos[self._at(name)]

    def chain_text(self, name: str) -> str:
        """The chain(s) the tensor was coded with, as the library prints them."""
        i = self._at(name)
        buf = ctypes.create_string_buffer(_TEXT_CAP)
        err = ErrStruct()
        with self._lock:
            check(lib.ptwm_reader_chain_text(self._h(), i, buf, _TEXT_CAP, ctypes.byref(err)), err)
        return buf.value.decode()

    @property
    def file_size(self) -> int:
        with self._lock:
            return int(lib.ptwm_reader_file_size(self._h()))

    @property
    def unchecked_count(self) -> int:
        """Tensors with nothing to check their bytes against (files before format
        version 4 written without plane CRCs and payload hashes): verify() cannot
        vouch for them. 0 for every file of version 4 or later."""
        with self._lock:
            return int(lib.ptwm_reader_unchecked_count(self._h()))

    @property
    def source_name(self) -> Optional[str]:
        with self._lock:
            s = lib.ptwm_reader_source_name(self._h())
        return s.decode() if s is not None else None

    def metadata(self) -> Dict[str, str]:
        out = {}
        with self._lock:
            h = self._h()
            for i in range(lib.ptwm_reader_metadata_count(h)):
                kv = lib.ptwm_reader_metadata(h, i)
                out[kv.key.decode()] = kv.value.decode()
        return out

    # -- data ---------------------------------------------------------------

    def read(self, name: str) -> bytes:
        """The tensor's raw bytes (CRCs and the payload hash are checked when present)."""
        i = self._at(name)
        err = ErrStruct()

        def fill(addr, n):
            with self._lock:
                check(lib.ptwm_reader_decode(self._h(), i, addr, n, ctypes.byref(err)), err)
        return filled_bytes(self._infos[i].nbytes, fill)

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) of a tensor, decoding only the chunks that hold them.

        Chunk CRCs are checked. The payload hash covers the whole tensor, so it is
        checked only when the reads run through the tensor in order from byte 0
        (this range from 0 to the end, or the last of consecutive ranges); any
        other sub-range is not checked against it."""
        i = self._at(name)
        if offset < 0 or length < 0:
            raise PtwmValueError(ERR_INVALID_ARG, f"{self._label}: tensor '{name}': range "
                                 f"offset {offset} length {length} is negative")
        err = ErrStruct()

        def fill(addr, n):
            with self._lock:
                check(lib.ptwm_reader_decode_range(self._h(), i, int(offset), addr, n,
                                                   ctypes.byref(err)), err)
        return filled_bytes(int(length), fill)

    def read_all(self) -> Dict[str, bytes]:
        return {name: self.read(name) for name in self.names()}

    def verify(self) -> None:
        """Decode everything and check every CRC and hash; raise PtwmError on the first damage.

        Tensors that carry no check at all (see unchecked_count) decode without
        error but are not verified."""
        err = ErrStruct()
        with self._lock:
            check(lib.ptwm_reader_verify(self._h(), ctypes.byref(err)), err)

    def to_safetensors(self, path: Union[str, Path]) -> None:
        """Write the tensors as safetensors (the original file, byte for byte, when recorded)."""
        err = ErrStruct()
        with self._lock:
            check_path(lib.ptwm_reader_write_safetensors(self._h(), os.fsencode(path),
                                                         ctypes.byref(err)), err, path,
                       writing=True)

    def __repr__(self) -> str:
        state = "open" if self._handle else "closed"
        return f"<ptwm.PtwmFile {self._label!r} {len(self._infos)} tensors, {state}>"


def open(path: Union[str, Path], threads: int = 0) -> PtwmFile:   # noqa: A001 (module API)
    """Open a .ptwm file; validates its header and tensor table."""
    return PtwmFile(path, threads)


def open_bytes(data, label: str = "<memory>", threads: int = 0) -> PtwmFile:
    """Open a .ptwm image in memory, e.g. what compress_ptwm_blob returned."""
    return PtwmFile.from_bytes(data, label, threads)
