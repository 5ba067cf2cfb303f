"""get_slice indexing: which bytes of a row-major tensor an index selects.

An index is read as NumPy and torch read it: ints, slices (any step), one
Ellipsis, None (a new axis of size 1) and [] (nothing of the first dimension).
Each dimension's selection is widened to the box from its first to its last
element; the box is a sequence of contiguous byte runs of the stored tensor,
and reading them touches only the chunks that hold them (runs close together
are decoded as one range, into a scratch buffer then copied out, so a chunk
is not decoded once per row). Steps are then taken inside the decoded box.

Two dialects, as safetensors has them. "pt" is torch's: a slice is clipped to
its dimension, an int outside it is an IndexError, and what torch reads as
advanced indexing (a non-empty list, a tensor, a bool) is left to torch on
the whole tensor (plan() returns None). "np" is safetensors' own slicer for
the forms it takes, with its messages: a slice bound past its dimension and an
int outside it are errors, a non-empty list is refused; steps, negative slice
bounds, '...' and None follow NumPy.
"""

from __future__ import annotations

import ctypes
import itertools
import numbers
from typing import List, NamedTuple, Optional, Tuple

from ._errors import (ERR_INVALID_ARG, PtwmIndexError, PtwmTypeError, PtwmValueError)

__all__ = ["Plan", "plan", "runs", "read_runs"]

# Runs closer than this are decoded as one range: about one chunk (the
# writer's default chunk size), so a gap this small rarely spans a whole chunk.
_GAP = 1 << 20


class Plan(NamedTuple):
    """How to read an index: the box (start, stop, dropped) per stored dimension,
    the slices to take inside the decoded box (None: the box is the result) and
    the result's shape."""
    box: List[Tuple[int, int, bool]]
    steps: Optional[tuple]
    shape: Tuple[int, ...]


def _is_int(i) -> bool:
    return isinstance(i, numbers.Integral) and not isinstance(i, bool)


def _index_error(message: str) -> PtwmIndexError:
    return PtwmIndexError(ERR_INVALID_ARG, message)


def _items(index, dialect: str):
    """The index as a tuple of ints, slices, Ellipsis and None; None for torch's
    advanced indexing."""
    if isinstance(index, list):
        if not index:
            return (slice(0, 0),)
        if dialect == "np":
            raise _index_error("Non empty lists are not implemented")
        return None
    items = index if isinstance(index, tuple) else (index,)
    for i in items:
        if i is None or i is Ellipsis or isinstance(i, slice) or _is_int(i):
            continue
        if dialect == "np":
            raise PtwmTypeError(ERR_INVALID_ARG, f"cannot index a stored tensor with "
                                f"{type(i).__name__} {i!r}: get_slice takes ints, slices, '...', "
                                f"None and [] (an empty selection)")
        if isinstance(i, (list, tuple, bool)) or hasattr(i, "shape"):
            return None
        raise _index_error(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                           f"byte Variables are valid indices (got {type(i).__name__})")
    return items


def _display(given, shape, real: int) -> str:
    """An index as safetensors prints it: [2:, 4] (negative ints resolved)."""
    out = []
    d = 0
    for i in given:
        if i is None or i is Ellipsis:
            out.append("None" if i is None else "...")
            d += len(shape) - real if i is Ellipsis else 0
            continue
        if isinstance(i, slice):
            text = ("" if i.start is None else str(i.start)) + ":" + \
                   ("" if i.stop is None else str(i.stop))
            out.append(text if i.step in (None, 1) else f"{text}:{i.step}")
        else:
            k = int(i)
            out.append(str(k + shape[d] if k < 0 else k))
        d += 1
    return "[" + ", ".join(out) + "]"


def _check_np(given, dims, shape, real: int) -> None:
    """safetensors' errors, in its order: a negative int below -size first
    (dimensions in order), then anything past a dimension (last dimension first)."""
    for (i, d) in dims:
        if _is_int(i) and int(i) < 0 and int(i) + shape[d] < 0:
            raise _index_error(f"Invalid index {int(i)} for dimension {d} of size {shape[d]}")
    for (i, d) in reversed(dims):
        size = shape[d]
        if _is_int(i):
            k = int(i) % size if int(i) < 0 and size else int(i)
            asked = k if k >= size else None
        else:
            start = 0 if i.start is None else int(i.start)
            stop = size if i.stop is None else int(i.stop)
            asked = None
            if 0 <= start and start >= size and not start == size == 0:
                asked = start
            elif 0 <= stop and stop > size:
                asked = stop - 1
        if asked is not None:
            raise _index_error(f"Error during slicing {_display(given, shape, real)} with shape "
                               f"{list(shape)}: index {asked} out of bounds for tensor "
                               f"dimension #{d} of size {size}")


def plan(index, shape: Tuple[int, ...], dialect: str) -> Optional[Plan]:
    """The Plan of `index` on a stored tensor of `shape`, or None where torch's
    advanced indexing applies (dialect "pt" only)."""
    items = _items(index, dialect)
    if items is None:
        return None
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise _index_error("an index can only have a single ellipsis ('...')")
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if real > len(shape):
        raise _index_error(f"too many indices for tensor of dimension {len(shape)}"
                           if dialect == "pt" else
                           f"too many indices for array: array is {len(shape)}-dimensional, "
                           f"but {real} were indexed")
    given = items
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (len(shape) - real) + items[at + 1:]
    else:
        items = tuple(items) + (slice(None),) * (len(shape) - real)
    if dialect == "np":
        dims, d = [], 0
        for i in items:
            if i is not None:
                dims.append((i, d))
                d += 1
        _check_np(given, dims, shape, real)
    return _box(items, shape, dialect)


def _box(items, shape, dialect: str) -> Plan:
    """The Plan of an index with one item per dimension (None items aside)."""
    box, steps, out_shape = [], [], []
    d = 0
    for i in items:
        if i is None:
            out_shape.append(1)
            continue
        size = shape[d]
        d += 1
        if not isinstance(i, slice):
            k = int(i)
            if not -size <= k < size:
                raise _index_error(f"index {k} is out of bounds for dimension {d - 1} "
                                   f"with size {size}")
            k %= size
            box.append((k, k + 1, True))
            continue
        if dialect == "pt" and i.step is not None and int(i.step) <= 0:
            raise PtwmValueError(ERR_INVALID_ARG, "step must be greater than zero")
        try:
            r = range(*i.indices(size))
        except (ValueError, TypeError) as e:
            raise PtwmValueError(ERR_INVALID_ARG, f"slice {i!r} on dimension {d - 1}: {e}") \
                from None
        out_shape.append(len(r))
        if not r:
            box.append((0, 0, False))
            steps.append(slice(None))
            continue
        lo, hi = min(r[0], r[-1]), max(r[0], r[-1]) + 1
        box.append((lo, hi, False))
        steps.append(slice(None) if r.step == 1 else slice(r[0] - lo, None, r.step))
    stepped = any(s != slice(None) for s in steps) and all(b > a for a, b, _ in box)
    return Plan(box, tuple(steps) if stepped else None, tuple(out_shape))


def runs(box: List[Tuple[int, int, bool]], shape: Tuple[int, ...],
         itemsize: int) -> List[Tuple[int, int]]:
    """[(byte offset, byte length)] of the box, in row-major order."""
    if any(b == a for a, b, _ in box):
        return []
    strides = [itemsize] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    # The last dimension that is not taken whole: every later one is contiguous.
    k = max((d for d, (a, b, _) in enumerate(box) if (a, b) != (0, shape[d])), default=-1)
    if k < 0:
        total = itemsize
        for s in shape:
            total *= s
        return [(0, total)]
    run = (box[k][1] - box[k][0]) * strides[k]
    out: List[Tuple[int, int]] = []
    for idx in itertools.product(*[range(a, b) for a, b, _ in box[:k]]):
        off = sum(i * strides[d] for d, i in enumerate(idx)) + box[k][0] * strides[k]
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + run)
        else:
            out.append((off, run))
    return out


def read_runs(read, runs: List[Tuple[int, int]], dst: int) -> None:
    """Fill dst with the runs in order; read(offset, address, length) decodes a range."""
    pos = 0
    i = 0
    while i < len(runs):
        j = i + 1   # runs i..j-1 are decoded as one range
        while j < len(runs) and runs[j][0] - (runs[j - 1][0] + runs[j - 1][1]) < _GAP:
            j += 1
        if j == i + 1:
            read(runs[i][0], dst + pos, runs[i][1])
            pos += runs[i][1]
        else:
            start = runs[i][0]
            span = runs[j - 1][0] + runs[j - 1][1] - start
            scratch = ctypes.create_string_buffer(span)
            base = ctypes.addressof(scratch)
            read(start, base, span)
            for off, n in runs[i:j]:
                ctypes.memmove(dst + pos, base + off - start, n)
                pos += n
        i = j
