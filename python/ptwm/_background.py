"""Saves that run in the background (save_checkpoint(..., blocking=False)):
at most one in flight, errors kept for wait(). Saves run on a thread kept
for each priority: handing a save to a waiting thread costs the caller a
tenth of what starting a thread did (bench/RESULTS.md, "Checkpoint series").
The threads are daemons, so the interpreter's exit waits for the save in
flight through atexit instead of joining them."""

from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
from typing import Callable, Dict, Optional

from ._errors import ERR_INVALID_ARG, PtwmValueError

__all__ = ["SaveHandle", "run_save", "PRIORITIES"]

PRIORITIES = ("idle", "normal")

_lock = threading.Lock()
_in_flight: Optional["SaveHandle"] = None
_workers: Dict[str, "_Worker"] = {}


class _Worker:
    """A daemon thread running the saves handed to it, one after another, at
    one priority (set once: a thread may not take back a nice value)."""

    def __init__(self, priority: str):
        self.jobs: "queue.SimpleQueue" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._main, args=(priority,), daemon=True,
                                       name=f"ptwm-save-{priority}")
        self.thread.start()

    def _main(self, priority: str) -> None:
        if priority == "idle":
            _give_way()
        while True:
            handle, job = self.jobs.get()
            handle._run(job)


def _worker(priority: str) -> _Worker:
    with _lock:
        w = _workers.get(priority)
        if w is None or not w.thread.is_alive():
            w = _workers[priority] = _Worker(priority)
        return w


class SaveHandle:
    """A checkpoint being written by a background thread. The interpreter
    waits for it at exit, so a save is never cut short by the end of the
    training script."""

    def __init__(self, path: str, job: Callable[[], None], priority: str = "idle"):
        self.path = path
        self._error: Optional[BaseException] = None
        self._reported = False
        self._done = threading.Event()
        _worker(priority).jobs.put((self, job))

    def _run(self, job) -> None:
        try:
            job()
        except BaseException as e:   # kept for wait(): a thread cannot raise to its caller
            self._error = e
        finally:
            self._done.set()

    def done(self) -> bool:
        """True once the checkpoint is written (or failed)."""
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Block until the checkpoint is on disk (fsynced and renamed into
        place); raise the error the save met, if any (the file is then not
        there). TimeoutError if it is still running after `timeout` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the save of '{self.path}' is still running")
        if self._error is not None:
            self._reported = True
            raise self._error

    def _settle(self) -> None:
        """Wait for it; an error nobody has seen yet is raised here."""
        self._done.wait()
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


@atexit.register
def _finish_at_exit() -> None:
    """The interpreter exits only once the save in flight is on disk."""
    h = _in_flight
    if h is not None:
        h._done.wait()


def _forget_in_child() -> None:
    """A forked child has none of the parent's threads: it starts its own."""
    global _lock, _in_flight
    _lock, _in_flight = threading.Lock(), None
    _workers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def settle() -> None:
    """Wait for the save in flight, if any (raising its error if unseen)."""
    global _in_flight
    with _lock:
        h, _in_flight = _in_flight, None
    if h is not None:
        h._settle()


def run_save(job: Callable[[], None], path: str, blocking: bool,
             priority: str = "idle") -> Optional[SaveHandle]:
    """Run job now (blocking) or in a background thread at `priority` (checked
    by the caller before it snapshots anything), after the save in flight has
    finished."""
    global _in_flight
    settle()
    if blocking:
        job()
        return None
    h = SaveHandle(path, job, priority)
    with _lock:
        _in_flight = h
    return h
