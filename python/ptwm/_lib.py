"""ctypes bindings to libptwm (include/ptwm.h).

Every format decision lives in the C library; this module only describes its
public structs and function signatures so the rest of the package can call it.

The library is found, in order, at:
  1. the path in the environment variable PTWM_LIBRARY;
  2. a copy bundled inside the installed package (ptwm/libptwm.so);
  3. the repository's build/ directory when running from a checkout.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_size_t, c_uint8,
                    c_uint32, c_uint64, c_void_p)

__all__ = ["lib", "library_path", "find_library", "ErrStruct", "TensorInfo", "TensorDesc",
           "CParams", "CheckpointOptions", "ProgressFn", "ChainList", "KV", "CHAIN_MAX_BYTES",
           "ERR_MESSAGE_MAX", "MISSING"]

ERR_MESSAGE_MAX = 512
CHAIN_MAX_BYTES = 256
MAX_NDIM = 16

if sys.platform == "darwin":
    _LIB_NAMES = ("libptwm.dylib",)
elif sys.platform == "win32":
    _LIB_NAMES = ("ptwm.dll", "libptwm.dll")
else:
    _LIB_NAMES = ("libptwm.so", "libptwm.so.0")


class ErrStruct(Structure):
    _fields_ = [("code", c_int), ("message", c_char * ERR_MESSAGE_MAX)]


class TensorInfo(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_uint32),
                ("shape", POINTER(c_uint64)), ("nbytes", c_uint64),
                ("coded_bytes", c_uint64), ("data", c_void_p)]


class TensorDesc(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_uint32),
                ("shape", POINTER(c_uint64)), ("data", c_void_p), ("nbytes", c_uint64)]


class KV(Structure):
    _fields_ = [("key", c_char_p), ("value", c_char_p)]


# void (*)(void *ctx, uint64_t done, uint64_t total)
ProgressFn = ctypes.CFUNCTYPE(None, c_void_p, c_uint64, c_uint64)


# The options structs carry their size first (ptwm.h): whoever fills one sets
# it to ctypes.sizeof of this copy (_params.cparams, convert._checkpoint_options).
class CParams(Structure):
    _fields_ = [("size", c_size_t), ("method", c_int), ("no_payload_hash", c_int), ("no_plane_crc", c_int),
                ("chunk_size", c_uint64), ("threads", c_int), ("zstd_level", c_int),
                ("progress", ProgressFn), ("progress_ctx", c_void_p),
                ("progress_total", c_uint64), ("ctx", c_void_p), ("base", c_void_p),
                ("format_version", c_uint64)]


class CheckpointOptions(Structure):
    _fields_ = [("size", c_size_t), ("max_shard_size", c_uint64), ("method", c_int), ("threads", c_int),
                ("chunk_size", c_uint64), ("force", c_int), ("follow_symlinks", c_int),
                ("progress", ProgressFn), ("progress_ctx", c_void_p), ("part", ctypes.c_uint32),
                ("parts", ctypes.c_uint32), ("base", c_void_p), ("src_base", c_void_p),
                ("format_version", c_uint64)]


class ChainList(Structure):
    _fields_ = [("chains", POINTER(POINTER(c_uint8))), ("lens", POINTER(c_size_t)),
                ("count", c_size_t)]


_E = c_int          # ptwm_error
_ERR = POINTER(ErrStruct)
_P = c_void_p       # opaque handle
_PP = POINTER(c_void_p)
_U64 = c_uint64
_PU64 = POINTER(c_uint64)
_SZ = c_size_t
_PSZ = POINTER(c_size_t)
_S = c_char_p
_PU8 = POINTER(c_uint8)

# name: (restype, argtypes), as declared in include/ptwm.h.
_SIGNATURES = {
    "ptwm_version": (c_char_p, []),
    "ptwm_error_name": (c_char_p, [c_int]),
    "ptwm_error_string": (c_char_p, [c_int]),
    "ptwm_dtype_name": (c_char_p, [c_int]),
    "ptwm_dtype_from_name": (_E, [_S, POINTER(c_int), _ERR]),
    "ptwm_dtype_bits": (ctypes.c_uint, [c_int]),
    "ptwm_set_isa_limit": (c_int, [c_int]),
    "ptwm_isa_level": (c_int, []),
    "ptwm_isa_name": (c_char_p, [c_int]),
    "ptwm_isa_from_name": (_E, [_S, POINTER(c_int), _ERR]),
    "ptwm_tensor_nbytes": (_E, [c_int, _PU64, c_uint32, _PU64, _ERR]),
    # safetensors
    "ptwm_st_open": (_E, [_S, c_int, _PP, _ERR]),
    "ptwm_st_close": (None, [_P]),
    "ptwm_st_count": (_SZ, [_P]),
    "ptwm_st_tensor": (_E, [_P, _SZ, POINTER(TensorInfo), _ERR]),
    "ptwm_st_find": (_E, [_P, _S, _PSZ, _ERR]),
    "ptwm_st_read": (_E, [_P, _SZ, _U64, _P, _SZ, _ERR]),
    "ptwm_st_metadata_count": (_SZ, [_P]),
    "ptwm_st_metadata": (KV, [_P, _SZ]),
    "ptwm_st_write": (_E, [_S, POINTER(TensorDesc), _SZ, POINTER(KV), _SZ, _ERR]),
    "ptwm_st_open_memory": (_E, [_P, _SZ, _S, _PP, _ERR]),
    # sharded safetensors helpers
    "ptwm_parse_size": (_E, [_S, _PU64, _ERR]),
    "ptwm_plan_shards": (_E, [_PU64, _SZ, _U64, _PSZ, _PSZ, _ERR]),
    "ptwm_shard_filename": (_E, [_SZ, _SZ, _S, POINTER(c_char), _SZ, _ERR]),
    # methods and chains
    "ptwm_method_name": (c_char_p, [c_int]),
    "ptwm_method_from_name": (_E, [_S, POINTER(c_int), _ERR]),
    "ptwm_chain_standard": (_E, [c_int, c_int, _PU8, _SZ, _PSZ, _ERR]),
    "ptwm_chain_validate": (_E, [_PU8, _SZ, c_int, _ERR]),
    "ptwm_chain_describe": (_E, [_PU8, _SZ, POINTER(c_char), _SZ, _ERR]),
    "ptwm_chain_parse": (_E, [_S, _PU8, _SZ, _PSZ, _ERR]),
    # container writer
    "ptwm_compress_blob": (_E, [POINTER(TensorDesc), _SZ, POINTER(ChainList), POINTER(CParams),
                                _PP, _PSZ, _ERR]),
    "ptwm_compress_file": (_E, [_S, POINTER(TensorDesc), _SZ, POINTER(ChainList),
                                POINTER(CParams), _ERR]),
    "ptwm_compress_safetensors": (_E, [_S, _S, POINTER(CParams), _ERR]),
    "ptwm_writer_open_file": (_E, [_S, POINTER(CParams), _PP, _ERR]),
    "ptwm_ptdir_write": (_E, [_S, POINTER(TensorDesc), _SZ, POINTER(KV), _SZ, _U64,
                              POINTER(CParams), c_int, _ERR]),
    "ptwm_writer_open_memory": (_E, [POINTER(CParams), _PP, _ERR]),
    "ptwm_writer_set_metadata": (_E, [_P, POINTER(KV), _SZ, _ERR]),
    "ptwm_writer_add": (_E, [_P, POINTER(TensorDesc), POINTER(ChainList), _ERR]),
    "ptwm_writer_finish": (_E, [_P, _ERR]),
    "ptwm_writer_finish_memory": (_E, [_P, _PP, _PSZ, _ERR]),
    "ptwm_writer_free": (None, [_P]),
    # container reader
    "ptwm_reader_open": (_E, [_S, _PP, _ERR]),
    "ptwm_reader_open_memory": (_E, [_P, _SZ, _S, _PP, _ERR]),
    "ptwm_reader_close": (None, [_P]),
    "ptwm_reader_set_threads": (None, [_P, c_int]),
    "ptwm_reader_count": (_SZ, [_P]),
    "ptwm_reader_tensor": (_E, [_P, _SZ, POINTER(TensorInfo), _ERR]),
    "ptwm_reader_find": (_E, [_P, _S, _PSZ, _ERR]),
    "ptwm_reader_chain_text": (_E, [_P, _SZ, POINTER(c_char), _SZ, _ERR]),
    "ptwm_reader_decode": (_E, [_P, _SZ, _P, _SZ, _ERR]),
    "ptwm_reader_decode_range": (_E, [_P, _SZ, _U64, _P, _SZ, _ERR]),
    "ptwm_reader_decode_many": (_E, [_P, _PSZ, _PP, _PSZ, _SZ, _ERR]),
    "ptwm_reader_verify": (_E, [_P, _ERR]),
    "ptwm_reader_unchecked_count": (_SZ, [_P]),
    "ptwm_reader_source_name": (c_char_p, [_P]),
    "ptwm_reader_metadata_count": (_SZ, [_P]),
    "ptwm_reader_metadata": (KV, [_P, _SZ]),
    "ptwm_reader_write_safetensors": (_E, [_P, _S, _ERR]),
    "ptwm_reader_file_size": (_U64, [_P]),
    "ptwm_reader_set_base": (_E, [_P, _P, _ERR]),
    "ptwm_reader_tensor_base": (c_int, [_P, _SZ, _PU8, _PU64]),
    # sharded .ptwm
    "ptwm_index_create": (_E, [_U64, _U64, _PP, _ERR]),
    "ptwm_index_read": (_E, [_S, _PP, _ERR]),
    "ptwm_index_write": (_E, [_P, _S, _ERR]),
    "ptwm_index_free": (None, [_P]),
    "ptwm_index_total_size": (_U64, [_P]),
    "ptwm_index_compressed_total_size": (_U64, [_P]),
    "ptwm_index_add": (_E, [_P, _S, _S, _ERR]),
    "ptwm_index_count": (_SZ, [_P]),
    "ptwm_index_entry": (_E, [_P, _SZ, POINTER(c_char_p), POINTER(c_char_p), _ERR]),
    "ptwm_ptdir_open": (_E, [_S, _PP, _ERR]),
    "ptwm_ptdir_close": (None, [_P]),
    "ptwm_ptdir_set_threads": (None, [_P, c_int]),
    "ptwm_ptdir_count": (_SZ, [_P]),
    "ptwm_ptdir_tensor": (_E, [_P, _SZ, POINTER(TensorInfo), _ERR]),
    "ptwm_ptdir_find": (_E, [_P, _S, _PSZ, _ERR]),
    "ptwm_ptdir_decode_range": (_E, [_P, _SZ, _U64, _P, _SZ, _ERR]),
    "ptwm_ptdir_shard_count": (_SZ, [_P]),
    "ptwm_ptdir_shard": (_P, [_P, _SZ]),
    "ptwm_ptdir_shard_name": (c_char_p, [_P, _SZ]),
    "ptwm_ptdir_total_size": (_U64, [_P]),
    "ptwm_ptdir_compressed_total_size": (_U64, [_P]),
    "ptwm_ptdir_record_files": (_E, [_S, _ERR]),
    # sources: any kind of weights behind one handle
    "ptwm_source_open": (_E, [_S, c_int, _PP, _ERR]),
    "ptwm_source_close": (None, [_P]),
    "ptwm_source_get_kind": (c_int, [_P]),
    "ptwm_source_kind_name": (c_char_p, [c_int]),
    "ptwm_source_set_threads": (None, [_P, c_int]),
    "ptwm_source_count": (_SZ, [_P]),
    "ptwm_source_tensor": (_E, [_P, _SZ, POINTER(TensorInfo), _ERR]),
    "ptwm_source_read": (_E, [_P, _SZ, _U64, _P, _SZ, _ERR]),
    "ptwm_source_read_many": (_E, [_P, _PSZ, _PP, _PSZ, _SZ, _ERR]),
    "ptwm_source_metadata_count": (_SZ, [_P]),
    "ptwm_source_metadata": (KV, [_P, _SZ]),
    "ptwm_source_set_base": (_E, [_P, _P, _ERR]),
    # whole checkpoints
    "ptwm_compress_checkpoint": (_E, [_S, _S, POINTER(CheckpointOptions), _ERR]),
    "ptwm_decompress_checkpoint": (_E, [_S, _S, POINTER(CheckpointOptions), _ERR]),
    "ptwm_assemble_checkpoint": (_E, [_S, _ERR]),
    "ptwm_free": (None, [c_void_p]),
    "ptwm_struct_size": (c_size_t, [c_int]),
}


class _Missing:
    """Stands in for a function this build of libptwm does not define.

    Calling it raises an error naming the function, so a partial library still
    loads and everything it does define keeps working."""

    def __init__(self, name: str, path: str):
        self.name = name
        self.path = path

    def __call__(self, *args):
        from ._errors import PtwmError, ERR_UNSUPPORTED
        raise PtwmError(ERR_UNSUPPORTED,
                        f"libptwm at '{self.path}' does not define {self.name}()")


MISSING = _Missing


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _candidates() -> list:
    """Library paths to try, in priority order (see the module docstring)."""
    env = os.environ.get("PTWM_LIBRARY")
    if env:
        return [env]   # an explicit choice is never silently overridden
    out = [os.path.join(_package_dir(), n) for n in _LIB_NAMES]
    # python/ptwm/_lib.py -> repository root is two levels above the package.
    root = os.path.dirname(os.path.dirname(_package_dir()))
    if os.path.isfile(os.path.join(root, "include", "ptwm.h")):
        out += [os.path.join(root, "build", n) for n in _LIB_NAMES]
    return out


def find_library() -> str:
    """Path of the libptwm shared library this package would load."""
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path):
            return path
    raise OSError("libptwm not found; tried " + ", ".join(repr(p) for p in tried) +
                  " (set PTWM_LIBRARY to the path of libptwm.so, or install the package "
                  "with pip so it bundles one)")


def _load():
    path = find_library()
    handle = ctypes.CDLL(path)
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            setattr(handle, name, _Missing(name, path))
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    _check_struct_sizes(handle, path)
    return handle, path


# The structs copied above, by their ptwm_struct_id.
_STRUCT_IDS = ((ErrStruct, 0), (TensorInfo, 1), (TensorDesc, 2), (KV, 3), (CParams, 4),
               (ChainList, 5), (CheckpointOptions, 6))


def _check_struct_sizes(handle, path: str) -> None:
    """A library whose structs differ from these copies would read garbage
    from them: refuse it when loading, naming the struct."""
    for cls, sid in _STRUCT_IDS:
        got = handle.ptwm_struct_size(sid)
        if got != ctypes.sizeof(cls):
            raise OSError(f"libptwm at '{path}' has a {cls.__name__} of {got} bytes where this "
                          f"package expects {ctypes.sizeof(cls)}: the package and the library "
                          f"come from different versions")


lib, library_path = _load()
