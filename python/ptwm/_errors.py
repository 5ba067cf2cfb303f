"""Exceptions carrying libptwm's error code and message.

Every failure the C library reports becomes a PtwmError (or a subclass that is
also the matching built-in exception, so ``except FileNotFoundError`` and
``except ValueError`` work as callers expect). PtwmError is a SafetensorError,
the class safetensors raises, so code written for safetensors catches ptwm's
errors unchanged.
"""

from __future__ import annotations

import errno as _errno
import os

__all__ = ["SafetensorError", "PtwmError", "PtwmValueError", "PtwmTypeError", "PtwmIndexError", "PtwmFileNotFoundError", "PtwmFileExistsError",
           "PtwmMemoryError", "PtwmOSError", "PtwmKeyError", "check_path",
           "check", "raise_for"]

# Wire values of ptwm_error (include/ptwm.h); never renumbered.
ERR_IO = 1
ERR_NOMEM = 2
ERR_INVALID_ARG = 3
ERR_DTYPE = 8
ERR_SHAPE = 9
ERR_DUPLICATE = 12
ERR_NOT_FOUND = 13
ERR_LIMIT = 14
ERR_EXISTS = 24
ERR_UNSUPPORTED = 25
ERR_BASE_MISSING = 26    # coded against a base, and none was given
ERR_BASE_MISMATCH = 27   # the base lacks the tensor, or its dtype or shape differ
ERR_BASE_HASH = 28       # the base tensor is another one (its payload hash)
ERR_BASE_CRC = 29        # a base chunk's bytes are not those it was coded against


class SafetensorError(Exception):
    """safetensors' error class (``from ptwm import SafetensorError``): every
    error ptwm raises for a file, a tensor name or an argument is one."""


class PtwmError(SafetensorError):
    """An error reported by libptwm.

    ``code`` is the ptwm_error number, ``name`` its constant name
    ("PTWM_ERR_CRC"), ``message`` the library's message (also ``str(e)``)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)
        self.message = message

    @property
    def name(self) -> str:
        from ._lib import lib
        try:
            return lib.ptwm_error_name(self.code).decode()
        except Exception:   # a library without ptwm_error_name: still name the number
            return f"PTWM_ERR_{self.code}"


class PtwmValueError(PtwmError, ValueError):
    """A ptwm error about an unusable argument or a duplicated name."""


class PtwmTypeError(PtwmValueError, TypeError):
    """An argument of the wrong type (a key or metadata value that is not a str,
    data that is not bytes): TypeError as in safetensors, ValueError as before."""


class PtwmIndexError(PtwmError, IndexError):
    """A get_slice index outside the tensor."""


class PtwmFileNotFoundError(PtwmError, FileNotFoundError):
    """A ptwm error about a file or directory that does not exist."""

    def __init__(self, code: int, message: str):
        super().__init__(code, message)
        self.errno = _errno.ENOENT


class PtwmOSError(PtwmError, OSError):
    """A ptwm error about reading or writing a file (the system's reason in the message)."""


class PtwmFileExistsError(PtwmError, FileExistsError):
    """A ptwm error about an output that exists already."""

    def __init__(self, code: int, message: str):
        super().__init__(code, message)
        self.errno = _errno.EEXIST


class PtwmKeyError(PtwmError, KeyError):
    """A ptwm error about a tensor name the file does not hold."""

    def __str__(self) -> str:   # KeyError would print the message quoted
        return self.message


class PtwmMemoryError(PtwmError, MemoryError):
    """libptwm could not allocate memory."""


# The default translation; calls that know better pass their own `kinds`.
_DEFAULT_KINDS = {
    ERR_INVALID_ARG: PtwmValueError,
    ERR_DUPLICATE: PtwmValueError,
    ERR_NOMEM: PtwmMemoryError,
}

# Writers: a tensor whose shape, dtype or size is wrong is the caller's bad value.
WRITE_KINDS = dict(_DEFAULT_KINDS)
WRITE_KINDS.update({ERR_DTYPE: PtwmValueError, ERR_SHAPE: PtwmValueError,
                    ERR_LIMIT: PtwmValueError})

_FILE_KINDS = {ERR_NOT_FOUND: PtwmFileNotFoundError, ERR_EXISTS: PtwmFileExistsError,
               ERR_IO: PtwmOSError}
FILE_KINDS = {**_DEFAULT_KINDS, **_FILE_KINDS}
WRITE_FILE_KINDS = {**WRITE_KINDS, **_FILE_KINDS}


def _message(code: int, err) -> str:
    msg = b""
    if err is not None:
        msg = bytes(err.message).split(b"\0", 1)[0]
    if not msg:
        from ._lib import lib
        try:
            msg = lib.ptwm_error_string(code) or b""
        except Exception:
            msg = b""
        if not msg:
            msg = b"libptwm error %d" % code
    return msg.decode("utf-8", "replace")


def raise_for(code: int, err=None, kinds=None):
    """Raise the exception for a non-zero ptwm_error `code` (message from `err`)."""
    cls = (kinds if kinds is not None else _DEFAULT_KINDS).get(code, PtwmError)
    raise cls(code, _message(code, err))


def check(code: int, err=None, kinds=None) -> None:
    """Return if `code` is PTWM_OK, else raise as raise_for does."""
    if code:
        raise_for(code, err, kinds)


def check_path(code: int, err, path, kinds=None, writing: bool = False) -> None:
    """check() for a call about `path`: an I/O error on a path that does not
    exist (for writing: whose directory does not exist) is FileNotFoundError."""
    if not code:
        return
    if code == ERR_IO:
        p = os.fsdecode(path)
        probe = os.path.dirname(os.path.abspath(p)) if writing else p
        if not os.path.exists(probe):
            raise PtwmFileNotFoundError(code, _message(code, err))
    raise_for(code, err, kinds if kinds is not None else FILE_KINDS)
