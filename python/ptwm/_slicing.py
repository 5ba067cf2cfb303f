"""get_slice indexing: which bytes of a row-major tensor an index selects.

An index (ints, unit-step slices, one Ellipsis) selects, in row-major order, a
sequence of contiguous byte runs of the stored tensor. Reading them touches only
the chunks that hold them: runs close together are decoded as one range (into
a scratch buffer, then copied out) so a chunk is not decoded once per row;
a lone run is decoded straight into the result.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import List, Tuple

from ._errors import ERR_INVALID_ARG, PtwmValueError

__all__ = ["select", "read_runs"]

# Runs closer than this are decoded as one range: about one chunk (the
# writer's default chunk size), so a gap this small rarely spans a whole chunk.
_GAP = 1 << 20


def _dims(index, shape: Tuple[int, ...]) -> List[Tuple[int, int, bool]]:
    """(start, stop, dropped) per dimension, from ints, slices and an Ellipsis."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        fill = len(shape) - (len(index) - 1)
        index = index[:at] + (slice(None),) * max(fill, 0) + index[at + 1:]
    if len(index) > len(shape):
        raise IndexError(f"too many indices for a tensor of {len(shape)} dimensions: "
                         f"{len(index)} were given")
    out = []
    for d, dim in enumerate(shape):
        i = index[d] if d < len(index) else slice(None)
        if isinstance(i, slice):
            start, stop, step = i.indices(dim)
            if step != 1:
                raise PtwmValueError(ERR_INVALID_ARG, f"slice step {step} on dimension {d}: "
                                     f"only unit steps can be read without decoding "
                                     f"the whole tensor (slice the result instead)")
            out.append((start, max(start, stop), False))
        elif not isinstance(i, bool) and hasattr(i, "__index__"):
            k = i.__index__()
            if not -dim <= k < dim:
                raise IndexError(f"index {k} is out of bounds for dimension {d} "
                                 f"with size {dim}")
            k %= dim
            out.append((k, k + 1, True))
        else:
            raise PtwmValueError(ERR_INVALID_ARG, f"cannot index a stored tensor with "
                                 f"{type(i).__name__} {i!r}: use ints, slices and '...'")
    return out


def select(index, shape: Tuple[int, ...], itemsize: int):
    """(result shape, [(byte offset, byte length)] runs in row-major order)."""
    dims = _dims(index, shape)
    out_shape = tuple(b - a for a, b, drop in dims if not drop)
    if any(b == a for a, b, _ in dims):
        return out_shape, []
    strides = [itemsize] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    # The last dimension that is not taken whole: every later one is contiguous.
    k = max((d for d, (a, b, _) in enumerate(dims) if (a, b) != (0, shape[d])), default=-1)
    if k < 0:
        total = itemsize
        for s in shape:
            total *= s
        return out_shape, [(0, total)]
    run = (dims[k][1] - dims[k][0]) * strides[k]
    runs: List[Tuple[int, int]] = []
    for idx in itertools.product(*[range(a, b) for a, b, _ in dims[:k]]):
        off = sum(i * strides[d] for d, i in enumerate(idx)) + dims[k][0] * strides[k]
        if runs and runs[-1][0] + runs[-1][1] == off:
            runs[-1] = (runs[-1][0], runs[-1][1] + run)
        else:
            runs.append((off, run))
    return out_shape, runs


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
