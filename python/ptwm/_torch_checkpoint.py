"""Training checkpoints from PyTorch: a module's weights and its optimizer's
state in one compressed .ptwm (or sharded directory), resumed bit for bit.

Layout: tensors "model/<name>" (tied weights once), "optimizer/<i>/<key>" for
every tensor of the optimizer's per-parameter state (exp_avg, exp_avg_sq,
momentum_buffer, step, ...); metadata "ptwm.checkpoint" = "torch",
"ptwm.optimizer" (its class name), "ptwm.param_groups" (hyper-parameters),
"ptwm.state" (non-tensor state values), "ptwm.tied", "ptwm.step" and
"ptwm.extra", each JSON (floats written by repr, so read back exactly).
A checkpoint coded against an earlier one records it: "ptwm.base" (its path
relative to this checkpoint's directory) and "ptwm.base_depth" (how many
checkpoints its chain of bases holds); loading follows the chain.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections import defaultdict
from typing import Any, Dict, Optional

import torch

from ._background import SaveHandle, check_priority, run_save, settle
from ._errors import (ERR_BASE_MISSING, ERR_INVALID_ARG, PtwmFileNotFoundError,
                      PtwmValueError)
from ._safe_open import safe_open
from ._stored import open_path
from ._torch_pin import StepGate, check_snapshot

__all__ = ["save_checkpoint", "load_checkpoint", "SaveHandle"]

_KIND = "torch"
_MODEL = "model/"
_OPTIM = "optimizer/"
_BASE = "ptwm.base"
_DEPTH = "ptwm.base_depth"
_MAX_CHAIN = 10000   # bases followed before a chain is taken for a loop


def _encode(value, what: str):
    """JSON-ready value; tuples are marked so they come back as tuples."""
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, what) for v in value]}
    if isinstance(value, list):
        return [_encode(v, what) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v, what) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return {"__scalar__": value.item(), "dtype": str(value.dtype)[6:]}
    raise PtwmValueError(ERR_INVALID_ARG, f"{what}: cannot store {type(value).__name__} "
                         f"{value!r} (numbers, strings, lists, tuples, dicts and None only)")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(_decode(v) for v in value["__tuple__"])
        if set(value) == {"__scalar__", "dtype"}:
            return torch.tensor(value["__scalar__"], dtype=getattr(torch, value["dtype"]))
        return {k: _decode(v) for k, v in value.items()}
    return value


# The copies the last background save wrote from, reused by the next one
# (no save is in flight then): copying into memory already mapped takes a
# third of the time of fresh copies (bench/RESULTS.md, "Checkpoint series").
_copies: Dict[str, torch.Tensor] = {}


def _copy_of(name: str, t: torch.Tensor) -> torch.Tensor:
    c = _copies.get(name)
    if c is None or c.shape != t.shape or c.dtype != t.dtype or c.device != t.device:
        c = _copies[name] = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    if t.device.type == "cpu" and t.is_contiguous():
        ctypes.memmove(c.data_ptr(), t.data_ptr(), t.nelement() * t.element_size())
        return c   # memmove: 1.8x copy_'s speed on large tensors here
    with torch.no_grad():
        return c.copy_(t)


def _tied(state_dict) -> Dict[str, list]:
    """{kept name: [names sharing its storage]}, as _remove_duplicate_names finds
    them, asked only of the names whose storage another name shares (found by
    address: _remove_duplicate_names asks torch for every storage)."""
    from .torch import _remove_duplicate_names, _storage_at
    by_storage = defaultdict(list)
    for k, v in state_dict.items():
        if not v.is_meta and v.nelement():
            by_storage[(v.device, _storage_at(v))].append(k)
    shared = {k: state_dict[k] for names in by_storage.values() if len(names) > 1
              for k in names}
    return _remove_duplicate_names(shared) if shared else {}


def _snapshot(model, optimizer, step, extra, copy: bool, live=None):
    """The tensors and metadata of a checkpoint; with copy, the tensors are
    copies, so training may go on while they are written (call it with no
    background save in flight). With a dict `live`, the parameters and the
    optimizer's state go into it uncopied (for a StepGate to copy) and only
    the buffers are copied."""
    own = _copy_of if copy else (lambda _, t: t.contiguous())   # save_file refuses strided views
    state_dict = model.state_dict()
    tied = {}
    for kept, removed in _tied(state_dict).items():
        for name in removed:
            tied[name] = kept
            del state_dict[name]
    params = {n for n, _ in model.named_parameters()} if live is not None else ()
    tensors = {}
    for k, v in state_dict.items():
        if k in params:
            live[_MODEL + k] = v
        else:
            tensors[_MODEL + k] = own(_MODEL + k, v)
    osd = optimizer.state_dict()
    plain = {}
    for i, per_param in osd["state"].items():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor):
                name = f"{_OPTIM}{i}/{key}"
                if live is not None:
                    live[name] = value
                else:
                    tensors[name] = own(name, value)
            else:
                plain[f"{i}/{key}"] = _encode(value, f"optimizer state {i}/{key}")
    meta = {"ptwm.checkpoint": _KIND, "ptwm.optimizer": type(optimizer).__name__,
            "ptwm.param_groups": json.dumps(_encode(osd["param_groups"], "param_groups")),
            "ptwm.state": json.dumps(plain), "ptwm.tied": json.dumps(tied),
            "ptwm.step": json.dumps(_encode(step, "step")),
            "ptwm.extra": json.dumps(_encode(extra, "extra"))}
    for name in set(_copies) - set(tensors) - set(live or ()) if copy else ():
        # only this save's copies stay
        del _copies[name]
    return tensors, meta


def checkpoint_metadata(path) -> Dict[str, str]:
    """The metadata of a checkpoint file or directory (its header only)."""
    stored = open_path(path, 1)
    try:
        return stored.metadata() or {}
    finally:
        stored.close()


def base_of(path, meta=None) -> Optional[str]:
    """The path of the checkpoint `path` is coded against, or None."""
    meta = checkpoint_metadata(path) if meta is None else meta
    rel = meta.get(_BASE)
    if rel is None:
        return None
    if not rel or os.path.isabs(rel):
        raise PtwmValueError(ERR_INVALID_ARG, f"'{path}': its base {rel!r} is not a path "
                             f"relative to its directory")
    return os.path.join(os.path.dirname(os.path.abspath(os.fspath(path))), rel)


def open_chain(path, seen=None):
    if not os.path.exists(path):
        raise PtwmFileNotFoundError(ERR_BASE_MISSING, f"base '{path}' is missing")
    return _open_chain(path, seen)


def _open_chain(path, seen=None):
    """`path` opened with the chain of bases it needs (each checkpoint's
    recorded base, opened with its own). A missing base is FileNotFoundError
    naming it; a damaged or different one fails when its bytes are read."""
    seen = set() if seen is None else seen
    real = os.path.realpath(path)
    if real in seen or len(seen) >= _MAX_CHAIN:
        raise PtwmValueError(ERR_INVALID_ARG, f"'{path}': its chain of bases leads back to "
                             f"itself")
    seen.add(real)
    stored = open_path(path, 1)
    try:
        base = base_of(path, stored.metadata() or {})
        if base is not None:
            stored.set_base(_open_base(path, base, seen))
    except BaseException:
        stored.close()
        raise
    return stored


def _open_base(path, base, seen):
    if not os.path.exists(base):
        raise PtwmFileNotFoundError(ERR_BASE_MISSING, f"checkpoint '{path}' is coded against "
                                    f"'{base}', which is missing (a checkpoint whose base is "
                                    f"deleted cannot be decoded)")
    return _open_chain(base, seen)


def save_checkpoint(path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    step: Optional[int] = None, extra: Optional[Dict[str, Any]] = None, *,
                    method="microscale", threads: int = 0, max_shard_size=None, base=None,
                    blocking: bool = True, priority: str = "idle",
                    snapshot: str = "now") -> Optional[SaveHandle]:
    """Save the module's weights and the optimizer's state (SGD with or without
    momentum, Adam, AdamW, or any optimizer whose state is tensors and plain
    values), compressed. `step` and `extra` (JSON-able) come back from
    load_checkpoint.

    base: an earlier checkpoint of the same run; each tensor is coded against
    its tensor there where that is smaller, and the file records its base (by
    path relative to its own directory) so load_checkpoint finds it.

    blocking=False: returns a SaveHandle as soon as the state is copied; the
    coding, writing and fsync run in a background thread (the library's calls
    release the GIL). handle.wait() raises what went wrong; a failed save
    leaves no file. One save is in flight at a time: the next waits for it.
    priority="idle" (the default): the background save runs only on cores the
    caller leaves idle (Linux's SCHED_IDLE), so training steps keep their speed
    and the save takes longer when they use every core; "normal" shares them.
    snapshot="before_step" (with blocking=False): the call returns before the
    state is copied; the save's thread copies it while the loop goes on, and
    optimizer.step() waits until it has (buffers are copied at once). A
    parameter or state tensor changed in place outside step() before it was
    copied fails the save (its version counter moved); in-place changes
    through .data are not seen, so code that makes them saves with "now"."""
    check_priority(priority)
    check_snapshot(snapshot, blocking)
    if not blocking:
        settle()   # its copies are reused
    live = {} if snapshot == "before_step" else None
    tensors, meta = _snapshot(model, optimizer, step, extra, copy=not blocking, live=live)
    gate = StepGate(optimizer, live) if live is not None else None
    base = os.fspath(base) if base is not None else None

    def write():
        from .torch import save_file
        if gate is not None:
            gate.copy(_copy_of, tensors)
        chain = open_chain(base) if base is not None else None
        try:
            if chain is not None:
                meta[_BASE] = os.path.relpath(os.path.abspath(base),
                                              os.path.dirname(os.path.abspath(os.fspath(path))))
                meta[_DEPTH] = str(int((chain.metadata() or {}).get(_DEPTH, "0")) + 1)
            save_file(tensors, path, meta, method=method, threads=threads,
                      max_shard_size=max_shard_size, base=chain)
        finally:
            if chain is not None:
                chain.close()
    try:
        return run_save(write, os.fspath(path), blocking, priority)
    except BaseException:
        if gate is not None:   # its thread never ran: step() must not wait for it
            gate.release()
        raise


def _load_optimizer(optimizer, state, groups, saved_dtype) -> None:
    """optimizer.load_state_dict without its deepcopy of every state tensor (which
    would double the state's memory and time): the groups go through it, the
    decoded tensors are then placed as it would place them, but for one rule:
    torch casts floating state to its parameter's dtype, which would round the
    F32 moments of an optimizer kept beside BF16 weights, so the state keeps its
    stored dtype unless the parameter's dtype changed since the save
    (saved_dtype: the dtype each parameter, by identity, had in the file)."""
    optimizer.load_state_dict({"state": {}, "param_groups": groups})
    params = [p for g in optimizer.param_groups for p in g["params"]]
    id_map = dict(zip([i for g in groups for i in g["params"]], params))
    for i, per_param in state.items():
        p = id_map.get(i)
        if p is None:
            raise PtwmValueError(ERR_INVALID_ARG, f"optimizer state for parameter {i}, which "
                                 f"no param group lists")
        placed = {}
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor) and key != "step":
                if p.is_floating_point() and saved_dtype.get(id(p)) != p.dtype:
                    value = value.to(p.dtype)
                value = value.to(p.device)
            placed[key] = value
        optimizer.state[p] = placed


def load_checkpoint(path, model: torch.nn.Module,
                    optimizer: Optional[torch.optim.Optimizer] = None, *, strict: bool = True,
                    device="cpu", threads: int = 0) -> Dict[str, Any]:
    """Restore what save_checkpoint wrote into `model` and `optimizer` (built as
    for training, same parameters in the same order); returns {"step": ...,
    "extra": ...}. ValueError for a file that is not such a checkpoint or an
    optimizer of another kind. A checkpoint saved against a base is decoded
    with the chain of bases it records (FileNotFoundError if one is missing)."""
    base = base_of(path)
    chain = _open_base(path, base, {os.path.realpath(path)}) if base is not None else None
    with safe_open(path, "pt", device=device, threads=threads, base=chain) as f:
        meta = f.metadata() or {}
        if meta.get("ptwm.checkpoint") != _KIND:
            raise PtwmValueError(ERR_INVALID_ARG, f"'{path}' is not a training checkpoint "
                                 f"written by ptwm.torch.save_checkpoint")
        tensors = f.get_tensors()
        weights = {k[len(_MODEL):]: t for k, t in tensors.items() if k.startswith(_MODEL)}
        for name, kept in json.loads(meta["ptwm.tied"]).items():
            weights[name] = weights[kept]
        model.load_state_dict(weights, strict=strict)
        if optimizer is not None:
            kind = meta.get("ptwm.optimizer")
            if kind != type(optimizer).__name__:
                raise PtwmValueError(ERR_INVALID_ARG, f"'{path}' holds the state of a {kind} "
                                     f"optimizer, not {type(optimizer).__name__}")
            state: Dict[int, Dict[str, Any]] = defaultdict(dict)
            for k, t in tensors.items():
                if k.startswith(_OPTIM):
                    i, key = k[len(_OPTIM):].split("/", 1)
                    state[int(i)][key] = t
            for k, value in json.loads(meta["ptwm.state"]).items():
                i, key = k.split("/", 1)
                state[int(i)][key] = _decode(value)
            saved_dtype = {id(p): weights[n].dtype for n, p in model.named_parameters()
                           if n in weights}
            _load_optimizer(optimizer, state, _decode(json.loads(meta["ptwm.param_groups"])),
                            saved_dtype)
        return {"step": _decode(json.loads(meta["ptwm.step"])),
                "extra": _decode(json.loads(meta["ptwm.extra"]))}
