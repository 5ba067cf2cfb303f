"""Compress or decompress a checkpoint on a Dask cluster: one task per part,
then assembly.

Each task runs `ptwm.compress_checkpoint(src, dst, part=(K, N), ...)` (or
`decompress_checkpoint`) in a
worker process; every worker computes the same plan from the same source and
writes only its part's shards and manifest into dst (a directory all workers
can reach). When every task is done, `ptwm.assemble_checkpoint(dst)` checks
the parts and writes the index: the result is the directory one process
would have written, byte for byte. A part is safe to run again, so a task
lost with its worker is simply retried by Dask. docs/SCALE.md has the details
and what each worker costs in memory.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Optional

from .convert import (assemble_checkpoint, compress_checkpoint as _compress,
                      decompress_checkpoint as _decompress)

__all__ = ["compress_checkpoint", "decompress_checkpoint"]


def _run_part(decompress: bool, src: str, dst: str, part: int, parts: int,
              options: dict) -> int:
    """The task: one part, in a worker process. Returns the part number."""
    _test_hook(part)
    (_decompress if decompress else _compress)(src, dst, part=(part, parts), **options)
    return part


def _test_hook(part: int) -> None:
    # PTWM_TEST_KILL_PART="K:MARKER": the first attempt of part K (no MARKER
    # file yet) kills its worker process while it runs, as a crashed machine
    # would; the tests use it to check that Dask's retry finishes the job.
    hook = os.environ.get("PTWM_TEST_KILL_PART")
    if not hook:
        return
    k, marker = hook.split(":", 1)
    if int(k) != part or os.path.exists(marker):
        return
    open(marker, "w").close()
    import signal
    import threading
    threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGKILL)).start()


def _run(decompress: bool, src: str, dst: str, client: Any, parts: Optional[int],
         progress: bool, retries: int, options: dict) -> None:
    if "part" in options or "force" in options:
        raise ValueError("part and force are chosen by the driver, not passed to it")
    if parts is None:
        workers = client.scheduler_info().get("workers", {})
        parts = max(1, sum(w.get("nthreads", 1) for w in workers.values()))
    parts = int(parts)
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    src, dst = os.path.abspath(src), os.path.abspath(dst)
    run = uuid.uuid4().hex[:8]
    what = "decompress" if decompress else "compress"
    futures = [client.submit(_run_part, decompress, src, dst, k, parts, options, pure=False,
                             retries=retries, key=f"ptwm-{what}-part-{k}-of-{parts}-{run}")
               for k in range(1, parts + 1)]
    if progress:
        from distributed import progress as dask_progress
        dask_progress(futures)
    client.gather(futures)
    assemble_checkpoint(dst)


def compress_checkpoint(src: str, dst: str, client: Any, parts: Optional[int] = None,
                        progress: bool = False, retries: int = 2, **options: Any) -> None:
    """Compress `src` (a .safetensors file or Hugging Face directory) into the
    .ptwm directory `dst` on the dask.distributed `client`.

    parts: the number of tasks (default: the cluster's worker threads, at
    least 1); each writes about 1/parts of the bytes. progress: show Dask's
    progress bar. retries: further attempts of a failed part. Other keyword
    arguments (max_shard_size, method, threads, chunk_size) go to
    ptwm.compress_checkpoint in every task and must be the same for all.
    Raises the first part's error if a part fails every attempt, or
    PtwmError from the assembly naming a missing or wrong part."""
    _run(False, src, dst, client, parts, progress, retries, options)


def decompress_checkpoint(src: str, dst: str, client: Any, parts: Optional[int] = None,
                          progress: bool = False, retries: int = 2, **options: Any) -> None:
    """Restore the .ptwm file or directory `src` into `dst` (the original
    safetensors files, index and other files, byte for byte; or fresh shards
    with max_shard_size) on the dask.distributed `client`, as
    compress_checkpoint does: one task per part, then the assembly."""
    _run(True, src, dst, client, parts, progress, retries, options)
