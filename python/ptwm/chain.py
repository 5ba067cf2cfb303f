"""ptwm.Chain: a codec chain as data.

A chain's wire encoding is defined and checked by libptwm; this class holds the
bytes, and builds, validates and prints them only through the C library
(ptwm_chain_parse, ptwm_chain_validate, ptwm_chain_describe, ptwm_chain_standard).
"""

from __future__ import annotations

import ctypes
from typing import Iterable, Union

from ._dtype import dtype_code
from ._errors import ERR_INVALID_ARG, PtwmValueError, check
from ._lib import CHAIN_MAX_BYTES, ErrStruct, lib
from ._memory import pinned

__all__ = ["Chain", "method_code", "method_name", "METHODS"]

# Wire ids of ptwm_method.
METHODS = {"huffman": 1, "zstd": 2, "microscale": 3, "rans": 4, "identity": 5}

_TEXT_CAP = 8192   # describe output; chains are at most CHAIN_MAX_BYTES on the wire


def method_code(method: Union[int, str]) -> int:
    """A method id from an int (1..5) or a name ("microscale", case-insensitive)."""
    if isinstance(method, bool):
        raise PtwmValueError(ERR_INVALID_ARG, f"method must be an int or a name, not {method!r}")
    if isinstance(method, int):
        if not 0 <= method < 1 << 31 or lib.ptwm_method_name(method) is None:
            raise PtwmValueError(ERR_INVALID_ARG, f"unknown method {method}: expected 1 HUFFMAN, "
                                 f"2 ZSTD, 3 MICROSCALE, 4 RANS or 5 IDENTITY")
        return method
    if isinstance(method, str):
        out = ctypes.c_int(0)
        rc = lib.ptwm_method_from_name(method.encode(), ctypes.byref(out), None)
        if rc:
            raise PtwmValueError(rc, f"unknown method {method!r}: expected one of "
                                 f"{', '.join(METHODS)} or its id")
        return out.value
    raise PtwmValueError(ERR_INVALID_ARG, f"method must be an int or a name, not "
                         f"{type(method).__name__}")


def method_name(method: Union[int, str]) -> str:
    return lib.ptwm_method_name(method_code(method)).decode()


def _u8(addr: int):
    return ctypes.cast(ctypes.c_void_p(addr), ctypes.POINTER(ctypes.c_uint8))


class Chain:
    """An immutable codec chain.

    Chain("split(e8m7) > microscale(32) > entropy(*:auto/o-1)") parses text,
    Chain(b"...") takes wire bytes (validated), Chain(["stage", "stage"]) joins
    stages. str(chain) prints it, chain.to_bytes() gives the wire blob that
    ptwm.sharding.compress_ptwm_blob takes in chains_per_tensor."""

    __slots__ = ("_blob",)

    def __init__(self, spec: Union[str, bytes, bytearray, memoryview, "Chain", Iterable[str]]):
        if isinstance(spec, Chain):
            blob = spec._blob
        elif isinstance(spec, str):
            blob = Chain.parse(spec)._blob
        elif isinstance(spec, (bytes, bytearray, memoryview)):
            blob = Chain.from_bytes(spec)._blob
        else:
            blob = Chain.from_stages(spec)._blob
        object.__setattr__(self, "_blob", blob)

    @classmethod
    def _wrap(cls, blob: bytes) -> "Chain":
        self = cls.__new__(cls)
        object.__setattr__(self, "_blob", blob)
        return self

    def __setattr__(self, name, value):
        raise AttributeError("Chain is immutable")

    # -- construction -------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> "Chain":
        """Parse the printed form (the inverse of str(chain))."""
        if not isinstance(text, str):
            raise TypeError(f"chain text must be str, not {type(text).__name__}")
        buf = (ctypes.c_uint8 * CHAIN_MAX_BYTES)()
        n = ctypes.c_size_t(0)
        err = ErrStruct()
        check(lib.ptwm_chain_parse(text.encode(), buf, CHAIN_MAX_BYTES, ctypes.byref(n),
                                   ctypes.byref(err)), err)
        return cls._wrap(bytes(buf[:n.value]))

    from_text = parse

    @classmethod
    def from_stages(cls, stages: Iterable[str]) -> "Chain":
        """Build from stage texts in order, e.g.
        ["split(e8m7)", "microscale(32)", "entropy(*:auto/o-1)"]."""
        parts = list(stages)
        if not parts or not all(isinstance(p, str) and p.strip() for p in parts):
            raise PtwmValueError(ERR_INVALID_ARG, f"a chain needs one or more non-empty stage "
                                 f"strings, got {parts!r}")
        return cls.parse(" > ".join(p.strip() for p in parts))

    @classmethod
    def from_bytes(cls, data, dtype=None) -> "Chain":
        """Take a wire blob; the C library checks it (against `dtype` when given)."""
        blob = bytes(data)
        chain = cls._wrap(blob)
        chain.describe()          # malformed blobs fail to describe
        if dtype is not None:
            chain.validate(dtype)
        return chain

    @classmethod
    def standard(cls, dtype, method: Union[int, str] = 3) -> "Chain":
        """The standard production chain for a dtype and method (docs/FORMAT.md)."""
        buf = (ctypes.c_uint8 * CHAIN_MAX_BYTES)()
        n = ctypes.c_size_t(0)
        err = ErrStruct()
        check(lib.ptwm_chain_standard(dtype_code(dtype), method_code(method), buf,
                                      CHAIN_MAX_BYTES, ctypes.byref(n), ctypes.byref(err)), err)
        return cls._wrap(bytes(buf[:n.value]))

    # -- use ----------------------------------------------------------------

    def to_bytes(self) -> bytes:
        return self._blob

    def __bytes__(self) -> bytes:
        return self._blob

    def validate(self, dtype) -> None:
        """Raise PtwmError unless this chain can code tensors of `dtype`."""
        err = ErrStruct()
        with pinned(self._blob) as (addr, n):
            check(lib.ptwm_chain_validate(_u8(addr), n, dtype_code(dtype), ctypes.byref(err)),
                  err)

    def describe(self) -> str:
        err = ErrStruct()
        out = ctypes.create_string_buffer(_TEXT_CAP)
        with pinned(self._blob) as (addr, n):
            check(lib.ptwm_chain_describe(_u8(addr), n, out, _TEXT_CAP, ctypes.byref(err)), err)
        return out.value.decode()

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        try:
            return f"Chain({self.describe()!r})"
        except Exception:
            return f"Chain.from_bytes({self._blob!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, Chain):
            return self._blob == other._blob
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._blob)

    def __len__(self) -> int:
        return len(self._blob)
