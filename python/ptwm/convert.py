"""Safetensors files: conversion to and from .ptwm, reading and writing (C library)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from ._errors import ERR_INVALID_ARG, WRITE_FILE_KINDS, PtwmValueError, check, check_path
from ._lib import KV, CheckpointOptions, ErrStruct, ProgressFn, TensorInfo as _CInfo, lib
from ._memory import filled_bytes
from ._params import cparams
from ._stored import open_path
from ._tensors import described
from .reader import TensorInfo, info_from_c, open as open_ptwm

__all__ = ["compress_safetensors", "decompress_to_safetensors", "read_safetensors",
           "safetensors_info", "write_safetensors", "compress_checkpoint",
           "decompress_checkpoint"]

_OPEN_PREAD = 1   # ptwm_open_mode: read the header, tensor bytes on demand

PathLike = Union[str, Path]


class _Progress:
    """A C progress callback calling progress(done, total); an exception it raises
    is kept and re-raised once the C call returns (it cannot cross C frames)."""

    def __init__(self, progress: Optional[Callable[[int, int], Any]]):
        self.error: Optional[BaseException] = None
        self.fn = ProgressFn()
        if progress is not None:
            def call(_ctx, done, total):
                if self.error is None:
                    try:
                        progress(int(done), int(total))
                    except BaseException as e:   # noqa: B036 (re-raised after the call)
                        self.error = e
            self.fn = ProgressFn(call)

    def run(self, fn, src: PathLike, dst: PathLike, options) -> None:
        """fn(src, dst, options, err) -> ptwm_error, with errors raised afterwards."""
        err = ErrStruct()
        s = os.fsencode(src)
        rc = fn(s, os.fsencode(dst), ctypes.byref(options), ctypes.byref(err))
        if self.error is not None:
            raise self.error
        if rc:
            check_path(rc, err, s)


def compress_safetensors(src: PathLike, dst: PathLike, method: Union[int, str] = 3,
                         threads: int = 0,
                         progress: Optional[Callable[[int, int], Any]] = None) -> None:
    """Compress a safetensors file into a .ptwm, streaming (the source header is
    recorded so decompression rebuilds the file byte for byte). progress, if
    given, is called with (raw bytes done, total raw bytes)."""
    params = cparams(method, threads=threads)
    cb = _Progress(progress)
    params.progress = cb.fn
    cb.run(lib.ptwm_compress_safetensors, src, dst, params)


def _checkpoint_options(max_shard_size, method, threads, chunk_size, force, cb, part=None,
                        follow_symlinks=False):
    p = cparams(method, threads=threads, chunk_size=chunk_size)
    size = max_shard_size
    if isinstance(size, str):
        from .sharding import parse_size
        size = parse_size(size)
    k, n = (0, 0) if part is None else _part(part)
    return CheckpointOptions(size=ctypes.sizeof(CheckpointOptions), max_shard_size=int(size or 0),
                             method=p.method, threads=p.threads, chunk_size=p.chunk_size,
                             force=int(bool(force)), progress=cb.fn, progress_ctx=None, part=k,
                             parts=n, follow_symlinks=int(bool(follow_symlinks)))


def _part(part) -> Tuple[int, int]:
    try:
        k, n = (int(x) for x in part)
    except (TypeError, ValueError):
        raise PtwmValueError(ERR_INVALID_ARG, f"part must be a pair (K, N), got {part!r}") from None
    if not 1 <= k <= n:
        raise PtwmValueError(ERR_INVALID_ARG, f"part ({k}, {n}): need 1 <= K <= N")
    return k, n


def compress_checkpoint(src: PathLike, outdir: PathLike, max_shard_size: Union[int, str] = 0,
                        method: Union[int, str] = 3, threads: int = 0,
                        chunk_size: Optional[int] = None, force: bool = False,
                        progress: Optional[Callable[[int, int], Any]] = None,
                        part: Optional[Tuple[int, int]] = None, base: Optional[PathLike] = None,
                        follow_symlinks: bool = False) -> None:
    """A .safetensors file or Hugging Face directory -> a sharded .ptwm directory.
    base: weights (any kind) to code tensors against (`ptwm compress --base`).
    follow_symlinks: read links in the source directory wherever they lead (by
    default only those inside it or into a Hugging Face cache's blobs/).

    max_shard_size 0 keeps one output shard per input shard (byte-exact restore);
    else shards are re-planned by raw bytes ("5GB" or an int). part=(K, N)
    writes only part K of N of the shards (docs/SCALE.md); when every part is
    done, assemble_checkpoint(outdir) finishes the directory."""
    cb = _Progress(progress)
    opt = _checkpoint_options(max_shard_size, method, threads, chunk_size, force, cb, part,
                              follow_symlinks)
    _run_with_base(cb, lib.ptwm_compress_checkpoint, src, outdir, opt, base)


def _run_with_base(cb, fn, src, outdir, opt, base) -> None:
    """cb.run(fn, ...) with opt.base open on `base` (a weights path), if given."""
    stored = open_path(base, 1) if base is not None else None
    try:
        opt.base = stored._handle.value if stored else None
        cb.run(fn, src, outdir, opt)
    finally:
        opt.base = None
        if stored:
            stored.close()


def assemble_checkpoint(outdir: PathLike) -> None:
    """Finish a checkpoint compressed in parts: check every part (same plan, no
    shard twice, sizes and hashes as recorded), then write the index last.
    Raises PtwmError naming a missing or wrong part; does nothing on a
    finished directory."""
    err = ErrStruct()
    p = os.fsencode(outdir)
    rc = lib.ptwm_assemble_checkpoint(p, ctypes.byref(err))
    if rc:
        check_path(rc, err, p)


def decompress_checkpoint(src: PathLike, outdir: PathLike, max_shard_size: Union[int, str] = 0,
                          threads: int = 0, force: bool = False,
                          progress: Optional[Callable[[int, int], Any]] = None,
                          part: Optional[Tuple[int, int]] = None,
                          base: Optional[PathLike] = None, follow_symlinks: bool = False) -> None:
    """A .ptwm file or directory -> the original safetensors files, byte for byte.
    part=(K, N) writes only part K of N of the output files; then
    assemble_checkpoint(outdir). base: the weights it was compressed against.
    The directory's index and other files are checked against its file record
    (model.ptwm.files.json): a damaged one is an error naming it."""
    cb = _Progress(progress)
    opt = _checkpoint_options(max_shard_size, 3, threads, None, force, cb, part, follow_symlinks)
    _run_with_base(cb, lib.ptwm_decompress_checkpoint, src, outdir, opt, base)


def decompress_to_safetensors(src: PathLike, dst: PathLike, threads: int = 0) -> None:
    """Rebuild the safetensors file a .ptwm was made from."""
    with open_ptwm(src, threads) as f:
        f.to_safetensors(dst)


class _St:
    """Owns one ptwm_st* opened in pread mode."""

    def __init__(self, path: PathLike):
        self.ptr = ctypes.c_void_p(None)
        err = ErrStruct()
        p = os.fsencode(path)
        rc = lib.ptwm_st_open(p, _OPEN_PREAD, ctypes.byref(self.ptr), ctypes.byref(err))
        if rc:
            check_path(rc, err, p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.ptwm_st_close(self.ptr)

    def infos(self):
        ci = _CInfo()
        for i in range(lib.ptwm_st_count(self.ptr)):
            check(lib.ptwm_st_tensor(self.ptr, i, ctypes.byref(ci), None))
            yield i, info_from_c(ci)


def safetensors_info(path: PathLike) -> Tuple[Dict[str, TensorInfo], Dict[str, str]]:
    """(tensor infos in file order, __metadata__) of a safetensors file, validated by libptwm."""
    with _St(path) as st:
        infos = {info.name: info for _, info in st.infos()}
        meta = {}
        for i in range(lib.ptwm_st_metadata_count(st.ptr)):
            kv = lib.ptwm_st_metadata(st.ptr, i)
            meta[kv.key.decode()] = kv.value.decode()
    return infos, meta


def read_safetensors(path: PathLike) -> Dict[str, bytes]:
    """All tensors of a safetensors file as name -> raw bytes, in file order."""
    out: Dict[str, bytes] = {}
    with _St(path) as st:
        for i, info in st.infos():
            err = ErrStruct()

            def fill(addr, n, i=i, err=err):
                check(lib.ptwm_st_read(st.ptr, i, 0, addr, n, ctypes.byref(err)), err)
            out[info.name] = filled_bytes(info.nbytes, fill)
    return out


def write_safetensors(path: PathLike, tensors: Sequence[Tuple[str, Any, Any, Sequence[int]]],
                      metadata: Optional[Mapping[str, str]] = None) -> None:
    """Write (name, raw_bytes, dtype, shape) tensors as a safetensors file."""
    meta = list((metadata or {}).items())
    kvs = (KV * max(len(meta), 1))(*[KV(str(k).encode(), str(v).encode()) for k, v in meta])
    err = ErrStruct()
    with described(tensors) as (descs, n, _):
        rc = lib.ptwm_st_write(os.fsencode(path), descs, n, kvs if meta else None, len(meta),
                               ctypes.byref(err))
    check_path(rc, err, path, WRITE_FILE_KINDS, writing=True)
