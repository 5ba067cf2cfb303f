"""Turning Python tensor tuples into the ptwm_tensor_desc / ptwm_chain_list arrays.

The tensors' bytes are not copied: each buffer is pinned for as long as the
arrays are in use (the body of the with block).
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Optional, Sequence

from ._dtype import dtype_code
from ._errors import ERR_INVALID_ARG, PtwmValueError
from ._lib import ChainList, TensorDesc
from ._memory import pinned
from .chain import Chain

__all__ = ["described", "chain_blob"]


def chain_blob(chain) -> bytes:
    """Wire bytes of a chain given as bytes-like or as a ptwm.Chain."""
    if isinstance(chain, Chain):
        return chain.to_bytes()
    if isinstance(chain, (bytes, bytearray, memoryview)):
        return bytes(chain)
    raise TypeError(f"a chain must be bytes (Chain.to_bytes()) or a ptwm.Chain, "
                    f"not {type(chain).__name__}")


def _unpack(i: int, item) -> tuple:
    try:
        name, raw, dtype, shape = item
    except (TypeError, ValueError):
        raise PtwmValueError(ERR_INVALID_ARG, f"tensors[{i}] must be (name, raw_bytes, dtype, "
                             f"shape), got {type(item).__name__}") from None
    if not isinstance(name, str):
        raise PtwmValueError(ERR_INVALID_ARG, f"tensors[{i}]: name must be str, not "
                             f"{type(name).__name__}")
    try:
        dims = [int(d) for d in shape]
    except TypeError:
        raise PtwmValueError(ERR_INVALID_ARG, f"tensor '{name}': shape must be a sequence of "
                             f"ints, got {shape!r}") from None
    if any(d < 0 or d >= 1 << 64 for d in dims):
        raise PtwmValueError(ERR_INVALID_ARG, f"tensor '{name}': shape {dims} has a dimension "
                             f"outside 0..2^64-1")
    return name, raw, dtype_code(dtype), dims


def _chain_list(name: str, chains) -> tuple:
    """(ChainList, keepalive) for one tensor's candidate chains."""
    if chains is None:
        return ChainList(None, None, 0), None
    blobs = [chain_blob(c) for c in chains]
    n = len(blobs)
    ptrs = (ctypes.POINTER(ctypes.c_uint8) * max(n, 1))()
    lens = (ctypes.c_size_t * max(n, 1))()
    bufs = []
    for j, blob in enumerate(blobs):
        b = (ctypes.c_uint8 * max(len(blob), 1)).from_buffer_copy(blob or b"\0")
        bufs.append(b)
        ptrs[j] = ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8))
        lens[j] = len(blob)
    cl = ChainList(ctypes.cast(ptrs, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8))),
                   ctypes.cast(lens, ctypes.POINTER(ctypes.c_size_t)), n)
    return cl, (ptrs, lens, bufs)


@contextlib.contextmanager
def described(tensors: Sequence[tuple], chains_per_tensor: Optional[Sequence[Any]] = None):
    """Yield (desc array, n, chain-list array or None) for a C writer call."""
    items = [_unpack(i, t) for i, t in enumerate(tensors)]
    n = len(items)
    if chains_per_tensor is not None:
        chains_per_tensor = list(chains_per_tensor)
        if len(chains_per_tensor) != n:
            raise PtwmValueError(ERR_INVALID_ARG, f"chains_per_tensor has "
                                 f"{len(chains_per_tensor)} entries for {n} tensors; give one "
                                 f"list of chains per tensor")
    descs = (TensorDesc * max(n, 1))()
    keep = []
    lists = None
    if chains_per_tensor is not None:
        lists = (ChainList * max(n, 1))()
    with contextlib.ExitStack() as stack:
        for i, (name, raw, code, dims) in enumerate(items):
            addr, nbytes = stack.enter_context(pinned(raw))
            shape = (ctypes.c_uint64 * max(len(dims), 1))(*dims)
            ename = name.encode("utf-8")
            keep.append((shape, ename))
            descs[i] = TensorDesc(ename, code, len(dims),
                                  ctypes.cast(shape, ctypes.POINTER(ctypes.c_uint64)),
                                  addr or None, nbytes)
            if lists is not None:
                cl, k = _chain_list(name, chains_per_tensor[i])
                lists[i] = cl
                keep.append(k)
        yield descs, n, lists
