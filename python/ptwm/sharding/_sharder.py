"""Shard planning and shard file names (ptwm_plan_shards, ptwm_shard_filename)."""

from __future__ import annotations

import ctypes
from typing import Sequence

from .._errors import ERR_INVALID_ARG, PtwmValueError, check
from .._lib import ErrStruct, lib

__all__ = ["shard_filename", "plan_shards", "parse_size"]

_NAME_CAP = 4096


def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PtwmValueError(ERR_INVALID_ARG, f"{what} must be an int, not {value!r}")
    if value < 0 or value >= 1 << 64:
        raise PtwmValueError(ERR_INVALID_ARG, f"{what} must be in 0..2^64-1, got {value}")
    return value


def shard_filename(idx_one_based: int, total: int, suffix: str) -> str:
    """Return ``model-NNNNN-of-MMMMM.<suffix>``."""
    idx = _count(idx_one_based, "idx_one_based")
    tot = _count(total, "total")
    if not isinstance(suffix, str):
        raise PtwmValueError(ERR_INVALID_ARG, f"suffix must be str, not {type(suffix).__name__}")
    buf = ctypes.create_string_buffer(_NAME_CAP)
    rc = lib.ptwm_shard_filename(idx, tot, suffix.encode(), buf, _NAME_CAP, None)
    if rc:
        raise PtwmValueError(rc, f"shard_filename({idx_one_based}, {total}, {suffix!r}): "
                             f"need 1 <= idx_one_based <= total")
    return buf.value.decode()


def plan_shards(sized_tensors: Sequence[tuple[str, int]],
                max_shard_size: int) -> list[list[tuple[str, int]]]:
    """Greedy pack tensors in input order, respecting ``max_shard_size``.

    A single tensor larger than ``max_shard_size`` gets its own shard.
    """
    items = []
    for i, item in enumerate(sized_tensors):
        try:
            name, size = item
        except (TypeError, ValueError):
            raise PtwmValueError(ERR_INVALID_ARG, f"sized_tensors[{i}] must be (name, size), "
                                 f"got {item!r}") from None
        items.append((name, _count(size, f"size of tensor {name!r}")))
    limit = _count(max_shard_size, "max_shard_size")
    n = len(items)
    sizes = (ctypes.c_uint64 * max(n, 1))(*[s for _, s in items])
    shard_of = (ctypes.c_size_t * max(n, 1))()
    nshards = ctypes.c_size_t(0)
    err = ErrStruct()
    check(lib.ptwm_plan_shards(sizes, n, limit, shard_of, ctypes.byref(nshards),
                               ctypes.byref(err)), err)
    out: list[list[tuple[str, int]]] = [[] for _ in range(nshards.value)]
    for i, item in enumerate(items):
        out[shard_of[i]].append(item)
    return out


def parse_size(text: str) -> int:
    """Bytes in "5GB", "5GiB", "500MB", "1kB" or "123" (ptwm_parse_size)."""
    out = ctypes.c_uint64(0)
    err = ErrStruct()
    check(lib.ptwm_parse_size(str(text).encode(), ctypes.byref(out), ctypes.byref(err)), err)
    return out.value
