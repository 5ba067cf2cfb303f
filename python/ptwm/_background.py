"""Saves that run in the background (save_checkpoint(..., blocking=False)):
one thread per save, at most one in flight, errors kept for wait()."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

from ._errors import ERR_INVALID_ARG, PtwmValueError

__all__ = ["SaveHandle", "run_save", "PRIORITIES"]

PRIORITIES = ("idle", "normal")

_lock = threading.Lock()
_in_flight: Optional["SaveHandle"] = None


class SaveHandle:
    """A checkpoint being written by a background thread. The thread is not a
    daemon: the interpreter waits for it at exit, so a save is never cut
    short by the end of the training script."""

    def __init__(self, path: str, job: Callable[[], None], priority: str = "idle"):
        self.path = path
        self._error: Optional[BaseException] = None
        self._reported = False
        self._thread = threading.Thread(target=self._run, args=(job, priority),
                                        name="ptwm-save")
        self._thread.start()

    def _run(self, job, priority) -> None:
        try:
            if priority == "idle":
                _give_way()
            time.sleep(0)   # the GIL back to the caller, which waits for this thread's start
            job()
        except BaseException as e:   # kept for wait(): a thread cannot raise to its caller
            self._error = e

    def done(self) -> bool:
        """True once the checkpoint is written (or failed)."""
        return not self._thread.is_alive()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Block until the checkpoint is on disk (fsynced and renamed into
        place); raise the error the save met, if any (the file is then not
        there). TimeoutError if it is still running after `timeout` seconds."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the save of '{self.path}' is still running")
        if self._error is not None:
            self._reported = True
            raise self._error

    def _settle(self) -> None:
        """Wait for it; an error nobody has seen yet is raised here."""
        self._thread.join()
        if self._error is not None and not self._reported:
            self.wait()


def _give_way() -> None:
    """Run the calling thread, and the library threads it starts (they inherit
    its policy), only on cores training leaves idle: with a save at the normal
    priority, steps ran up to 1.8x slower while it ran (bench/RESULTS.md,
    "Checkpoint series"). Linux's SCHED_IDLE; elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except OSError:   # refused (a seccomp filter): the lowest nice value instead
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass


def check_priority(priority) -> None:
    if priority not in PRIORITIES:
        raise PtwmValueError(ERR_INVALID_ARG, f"priority must be one of {PRIORITIES}, got "
                             f"{priority!r}")


def settle() -> None:
    """Wait for the save in flight, if any (raising its error if unseen)."""
    global _in_flight
    with _lock:
        h, _in_flight = _in_flight, None
    if h is not None:
        h._settle()


def run_save(job: Callable[[], None], path: str, blocking: bool,
             priority: str = "idle") -> Optional[SaveHandle]:
    """Run job now (blocking) or in a background thread at `priority`, after
    the save in flight has finished."""
    global _in_flight
    check_priority(priority)
    settle()
    if blocking:
        job()
        return None
    h = SaveHandle(path, job, priority)
    with _lock:
        _in_flight = h
    return h
