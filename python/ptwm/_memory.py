"""Moving bytes between Python objects and libptwm without extra copies.

pinned(obj) yields the address of any C-contiguous buffer (bytes, bytearray,
memoryview, mmap, array, NumPy arrays) for the duration of a call, holding a
buffer export so the object cannot be resized or freed meanwhile. new_bytes(n)
makes a bytes object the library decodes straight into. Both fall back to one
copy on Pythons without the CPython C API.
"""

from __future__ import annotations

import contextlib
import ctypes
from ctypes import POINTER, c_char_p, c_int, c_ssize_t, c_void_p, py_object

__all__ = ["pinned", "new_bytes", "take_malloced"]


class _PyBuffer(ctypes.Structure):
    # Py_buffer from Include/pybuffer.h (stable since Python 3.3).
    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", c_ssize_t),
                ("itemsize", c_ssize_t), ("readonly", c_int), ("ndim", c_int),
                ("format", c_char_p), ("shape", POINTER(c_ssize_t)),
                ("strides", POINTER(c_ssize_t)), ("suboffsets", POINTER(c_ssize_t)),
                ("internal", c_void_p)]


_PyBUF_SIMPLE = 0   # contiguous bytes, no shape: exactly what the C side wants

try:
    _api = ctypes.pythonapi
    _get_buffer = _api.PyObject_GetBuffer
    _get_buffer.argtypes = [py_object, POINTER(_PyBuffer), c_int]
    _get_buffer.restype = c_int
    _release_buffer = _api.PyBuffer_Release
    _release_buffer.argtypes = [POINTER(_PyBuffer)]
    _release_buffer.restype = None
    _bytes_new = _api.PyBytes_FromStringAndSize
    _bytes_new.argtypes = [c_void_p, c_ssize_t]
    _bytes_new.restype = py_object
    _bytes_data = _api.PyBytes_AsString
    _bytes_data.argtypes = [py_object]
    _bytes_data.restype = c_void_p
except (AttributeError, OSError):   # not CPython
    _api = None


def _as_buffer(obj):
    """A flat byte view of obj, or TypeError naming what was passed."""
    try:
        mv = memoryview(obj)
    except TypeError:
        hint = ""
        if (type(obj).__module__ or "").startswith("torch"):
            hint = (" (for a torch.Tensor t pass "
                    "t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())")
        raise TypeError(f"tensor data must be bytes, bytearray, memoryview or another "
                        f"buffer, not {type(obj).__name__}{hint}") from None
    return mv


@contextlib.contextmanager
def pinned(obj):
    """Yield (address, nbytes) of obj's bytes; valid inside the with block."""
    if isinstance(obj, bytes):
        # Immutable: its storage never moves while we hold a reference.
        keep = c_char_p(obj)
        yield ctypes.cast(keep, c_void_p).value or 0, len(obj)
        return
    mv = _as_buffer(obj)
    if _api is not None:
        view = _PyBuffer()
        try:
            # PyDLL raises the exporter's BufferError itself (a strided view).
            ok = _get_buffer(mv, ctypes.byref(view), _PyBUF_SIMPLE) == 0
        except BufferError:
            ok = False
        if ok:
            try:
                yield view.buf or 0, view.len
            finally:
                _release_buffer(ctypes.byref(view))
            return
    # Not contiguous (a strided view), or not CPython: one copy in C order.
    data = mv.tobytes()
    keep = c_char_p(data)
    yield ctypes.cast(keep, c_void_p).value or 0, len(data)


def new_bytes(n: int):
    """Return (bytes object of length n, address of its storage) to fill in place.

    The object must be filled before anyone else sees it (bytes are immutable
    once shared); callers decode into it and only then return it."""
    if _api is not None:
        b = _bytes_new(None, n)
        return b, _bytes_data(b)
    return None, None


def filled_bytes(n: int, fill) -> bytes:
    """Allocate n bytes, call fill(address, n), return them as bytes.

    fill raises on failure, in which case the half-filled object is dropped."""
    b, addr = new_bytes(n)
    if b is not None:
        fill(addr or 0, n)
        return b
    buf = bytearray(n)
    c = (ctypes.c_char * n).from_buffer(buf) if n else None
    fill(ctypes.addressof(c) if c is not None else 0, n)
    return bytes(buf)


def take_malloced(ptr: int, n: int) -> bytes:
    """Copy n bytes of a buffer the library returned into a bytes object and
    release it with ptwm_free (the library's allocator, not this process's C
    runtime, which may differ)."""
    from ._lib import lib
    try:
        return ctypes.string_at(ptr, n) if n else b""
    finally:
        if ptr:
            lib.ptwm_free(ptr)
