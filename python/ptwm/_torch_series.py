"""A training run's checkpoints in one directory, each coded against the one
before it, with a whole one (a keyframe) every `keyframe_every` saves
(docs/DELTA.md, "Series of checkpoints")."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

import torch

from ._background import SaveHandle, settle
from ._errors import ERR_EXISTS, ERR_INVALID_ARG, PtwmFileExistsError, PtwmValueError
from ._safe_open import safe_open
from ._torch_checkpoint import (_BASE, _DEPTH, _open_base, base_of, checkpoint_metadata,
                                load_checkpoint, save_checkpoint)

__all__ = ["CheckpointSeries"]

_NAME = re.compile(r"^step-(\d{12})\.ptwm$")


class CheckpointSeries:
    """Checkpoints "step-<12 digits>.ptwm" in `directory`. save() codes each
    against the latest earlier one, except every keyframe_every-th (and the
    first), which is whole, so at most keyframe_every files decode one.
    delete() keeps every other checkpoint decodable: a checkpoint coded
    against the deleted one is first rewritten whole."""

    def __init__(self, directory, keyframe_every: int = 10, *, method="microscale",
                 threads: int = 0):
        if isinstance(keyframe_every, bool) or not isinstance(keyframe_every, int) or \
                keyframe_every < 1:
            raise PtwmValueError(ERR_INVALID_ARG, f"keyframe_every must be an int >= 1, got "
                                 f"{keyframe_every!r}")
        self.directory = os.fspath(directory)
        self.keyframe_every = keyframe_every
        self._method, self._threads = method, threads
        self._depths: Dict[int, int] = {}   # steps saved by this object: their chain length
        os.makedirs(self.directory, exist_ok=True)

    def path(self, step: int) -> str:
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 10 ** 12:
            raise PtwmValueError(ERR_INVALID_ARG, f"step must be an int from 0 to 10**12 - 1, "
                                 f"got {step!r}")
        return os.path.join(self.directory, f"step-{step:012d}.ptwm")

    def steps(self) -> List[int]:
        """The steps saved, in order (a save in flight is not listed until done)."""
        found = (_NAME.match(n) for n in os.listdir(self.directory))
        return sorted(int(m.group(1)) for m in found if m)

    def needs(self, step: int) -> List[str]:
        """The files checkpoint `step` decodes with: itself, then its bases."""
        out = [self.path(step)]
        while len(out) <= len(self.steps()):
            base = base_of(out[-1])
            if base is None:
                break
            out.append(base)
        return out

    def save(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int,
             extra: Optional[Dict[str, Any]] = None, *,
             blocking: bool = True, priority: str = "idle",
             snapshot: str = "now") -> Optional[SaveHandle]:
        """save_checkpoint at `step` (the latest so far), against the previous
        checkpoint unless a keyframe is due."""
        path = self.path(step)
        settle()   # the previous save is the base: it must be complete
        steps = self.steps()
        if step in steps or (steps and steps[-1] > step):
            raise PtwmFileExistsError(ERR_EXISTS, f"'{path}': the series already holds step "
                                      f"{steps[-1]}; steps are saved in increasing order")
        depth = self._depth(steps[-1]) + 1 if steps else 0
        if depth >= self.keyframe_every:
            depth = 0
        base = self.path(steps[-1]) if depth else None
        self._depths = {step: depth}
        return save_checkpoint(path, model, optimizer, step, extra, method=self._method,
                               threads=self._threads, base=base, blocking=blocking,
                               priority=priority, snapshot=snapshot)

    def _depth(self, step: int) -> int:
        if step in self._depths:
            return self._depths[step]
        return int(checkpoint_metadata(self.path(step)).get(_DEPTH, "0"))

    def load(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer] = None,
             step: Optional[int] = None, **kwargs) -> Dict[str, Any]:
        """load_checkpoint of `step` (the latest when None)."""
        settle()
        if step is None:
            steps = self.steps()
            if not steps:
                raise FileNotFoundError(f"'{self.directory}' holds no checkpoint")
            step = steps[-1]
        return load_checkpoint(self.path(step), model, optimizer, **kwargs)

    def delete(self, step: int) -> None:
        """Remove checkpoint `step`. A checkpoint coded against it is first
        rewritten whole (atomically), so every kept one still decodes; a crash
        part way leaves both files, never an undecodable one."""
        settle()
        target = os.path.realpath(self.path(step))
        if not os.path.exists(target):
            raise FileNotFoundError(f"'{self.path(step)}' is not in the series")
        self._depths = {}   # rewriting shortens chains
        for s in self.steps():
            base = base_of(self.path(s))
            if base is not None and os.path.realpath(base) == target:
                _rewrite_whole(self.path(s), base)
        os.remove(target)

    def keep_last(self, n: int) -> None:
        """Delete all but the latest n checkpoints, oldest first."""
        steps = self.steps()
        for s in steps[:max(len(steps) - n, 0)]:
            self.delete(s)


def _rewrite_whole(path: str, base: str) -> None:
    """Decode `path` with its bases and write it back with none."""
    from .torch import save_file
    chain = _open_base(path, base, {os.path.realpath(path)})
    with safe_open(path, "pt", base=chain) as f:
        meta = dict(f.metadata() or {})
        tensors = f.get_tensors()
    meta.pop(_BASE, None)
    meta[_DEPTH] = "0"
    save_file(tensors, path, meta)
