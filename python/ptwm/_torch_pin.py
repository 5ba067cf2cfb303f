"""Background saves whose copy of the state runs on the save's own thread
(save_checkpoint(..., blocking=False, snapshot="before_step")): the call
returns before a byte is copied, and the optimizer's next step() waits until
the parameters and optimizer state it would change are copied. Buffers (which
a forward pass may change, as batch norm's running statistics) are copied
before the call returns. A tensor changed in place some other way before it
was copied is caught by its version counter and fails the save."""

from __future__ import annotations

import threading
from typing import Callable, Dict

import torch

from ._errors import ERR_INVALID_ARG, PtwmValueError

__all__ = ["StepGate", "SNAPSHOTS"]

SNAPSHOTS = ("now", "before_step")
_MISSING = object()


def check_snapshot(snapshot, blocking: bool) -> None:
    if snapshot not in SNAPSHOTS:
        raise PtwmValueError(ERR_INVALID_ARG, f"snapshot must be one of {SNAPSHOTS}, got "
                             f"{snapshot!r}")
    if snapshot != "now" and blocking:
        raise PtwmValueError(ERR_INVALID_ARG, f"snapshot={snapshot!r} is for blocking=False "
                             f"(a blocking save copies nothing)")


class StepGate:
    """Holds optimizer.step() (the bound method, or a wrapper a scheduler set on
    the instance, which is put back as it was) until copy() has run."""

    def __init__(self, optimizer, live: Dict[str, torch.Tensor]):
        self.live = live
        self.versions = {k: t._version for k, t in live.items()}
        self.copied = threading.Event()
        self._opt = optimizer
        self._prev = optimizer.__dict__.get("step", _MISSING)
        inner = optimizer.step

        def gated(*args, **kwargs):
            self.copied.wait()
            return inner(*args, **kwargs)
        self._gated = gated
        optimizer.step = gated

    def copy(self, copy_of: Callable[[str, torch.Tensor], torch.Tensor],
             tensors: Dict[str, torch.Tensor]) -> None:
        """Copy each live tensor into tensors[name], then let step() run; a
        tensor whose version moved before it was copied fails the save."""
        changed = []
        try:
            for name, t in self.live.items():
                tensors[name] = copy_of(name, t)
                if t._version != self.versions[name]:
                    changed.append(name)
        finally:
            self.release()
        if changed:
            raise PtwmValueError(ERR_INVALID_ARG, f"'{changed[0]}' ({len(changed)} tensor(s) in "
                                 f"all) changed in place outside optimizer.step() before the "
                                 f"background save had copied it; nothing was written "
                                 f"(snapshot=\"now\" copies before the call returns)")

    def release(self) -> None:
        if self._opt.__dict__.get("step") is self._gated:
            if self._prev is _MISSING:
                del self._opt.step
            else:
                self._opt.step = self._prev
        self.copied.set()
