"""Training checkpoints from PyTorch: a module's weights and its optimizer's
state in one compressed .ptwm (or sharded directory), resumed bit for bit.

Layout: tensors "model/<name>" (tied weights once), "optimizer/<i>/<key>" for
every tensor of the optimizer's per-parameter state (exp_avg, exp_avg_sq,
momentum_buffer, step, ...); metadata "ptwm.checkpoint" = "torch",
"ptwm.optimizer" (its class name), "ptwm.param_groups" (hyper-parameters),
"ptwm.state" (non-tensor state values), "ptwm.tied", "ptwm.step" and
"ptwm.extra", each JSON (floats written by repr, so read back exactly).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Dict, Optional

import torch

from ._errors import ERR_INVALID_ARG, PtwmValueError
from ._safe_open import safe_open

__all__ = ["save_checkpoint", "load_checkpoint"]

_KIND = "torch"
_MODEL = "model/"
_OPTIM = "optimizer/"


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


def save_checkpoint(path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    step: Optional[int] = None, extra: Optional[Dict[str, Any]] = None, *,
                    method="microscale", threads: int = 0, max_shard_size=None) -> None:
    """Save the module's weights and the optimizer's state (SGD with or without
    momentum, Adam, AdamW, or any optimizer whose state is tensors and plain
    values), compressed. `step` and `extra` (JSON-able) come back from
    load_checkpoint."""
    from .torch import _remove_duplicate_names, save_file
    state_dict = model.state_dict()
    tied = {}
    for kept, removed in _remove_duplicate_names(state_dict).items():
        for name in removed:
            tied[name] = kept
            del state_dict[name]
    # Packed as save_model packs them: save_file refuses strided views.
    tensors = {_MODEL + k: v.contiguous() for k, v in state_dict.items()}
    osd = optimizer.state_dict()
    plain = {}
    for i, per_param in osd["state"].items():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{_OPTIM}{i}/{key}"] = value.contiguous()
            else:
                plain[f"{i}/{key}"] = _encode(value, f"optimizer state {i}/{key}")
    meta = {"ptwm.checkpoint": _KIND, "ptwm.optimizer": type(optimizer).__name__,
            "ptwm.param_groups": json.dumps(_encode(osd["param_groups"], "param_groups")),
            "ptwm.state": json.dumps(plain), "ptwm.tied": json.dumps(tied),
            "ptwm.step": json.dumps(_encode(step, "step")),
            "ptwm.extra": json.dumps(_encode(extra, "extra"))}
    save_file(tensors, path, meta, method=method, threads=threads,
              max_shard_size=max_shard_size)


def _load_optimizer(optimizer, state, groups) -> None:
    """optimizer.load_state_dict without its deepcopy of every state tensor (which
    would double the state's memory and time): the groups go through it, the
    decoded tensors are then placed as it would place them."""
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
            if isinstance(value, torch.Tensor) and key != "step":   # as torch casts them
                if p.is_floating_point():
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
    optimizer of another kind."""
    with safe_open(path, "pt", device=device, threads=threads) as f:
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
            _load_optimizer(optimizer, state, _decode(json.loads(meta["ptwm.param_groups"])))
        return {"step": _decode(json.loads(meta["ptwm.step"])),
                "extra": _decode(json.loads(meta["ptwm.extra"]))}
