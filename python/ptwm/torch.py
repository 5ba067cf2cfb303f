"""ptwm.torch: safetensors.torch's API, storing compressed .ptwm.

    import ptwm.torch as st          # instead of: import safetensors.torch as st
    st.save_file(model.state_dict(), "model.ptwm")
    state = st.load_file("model.ptwm")          # or a .safetensors file, or a directory

Every function has safetensors' name, arguments and defaults (plus
save_checkpoint / load_checkpoint for training state); keyword extras:
method= (the entropy method), threads= (0 = all cores), max_shard_size= (save
a sharded directory with its index). Loaders read a .ptwm file, a sharded
.ptwm directory, a .safetensors file or a Hugging Face directory. Tensors are
decoded straight into their own storage; writes read it in place.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Set, Tuple

import torch

from ._dtype import dtype_code, dtype_name
from ._errors import ERR_DTYPE, ERR_INVALID_ARG, PtwmTypeError, PtwmValueError
from ._safe_open import safe_open
from ._saving import Item, write_bytes, write_file

__all__ = ["save_file", "load_file", "save", "load", "save_model", "load_model",
           "storage_ptr", "storage_size", "save_checkpoint", "load_checkpoint", "SaveHandle",
           "CheckpointSeries", "checkpoint_metadata"]

# safetensors dtype names -> torch attribute names; a torch without the
# attribute (float8 before 2.1, uint16 before 2.3) cannot hold that dtype.
_TORCH_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                "BOOL": "bool", "C64": "complex64", "U16": "uint16", "U32": "uint32",
                "U64": "uint64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
                "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
                "F8_E5M2FNUZ": "float8_e5m2fnuz"}


def _torch_dtype(code: int, name: str):
    dt = _BY_CODE.get(code)
    if dt is not None:
        return dt
    st_name = dtype_name(code)
    dt = getattr(torch, _TORCH_NAMES.get(st_name, ""), None)
    if not isinstance(dt, torch.dtype):
        raise PtwmValueError(ERR_DTYPE, f"tensor '{name}' is {st_name}, which torch "
                             f"{torch.__version__} has no dtype for (ptwm.numpy or "
                             f"ptwm.open can read it)")
    _BY_CODE[code] = dt
    return dt


_BY_CODE: Dict[int, "torch.dtype"] = {}


class _Adapter:
    """How safe_open makes torch tensors (and indexes them as torch does)."""

    dialect = "pt"

    @staticmethod
    def device(device):
        if device is None:   # safetensors reads None as the CPU
            device = "cpu"
        if isinstance(device, int) and not isinstance(device, bool):
            device = f"cuda:{device}"
        try:
            return torch.device(device)
        except (RuntimeError, TypeError) as e:
            raise PtwmValueError(ERR_INVALID_ARG, f"device {device!r}: {e}") from None

    @staticmethod
    def empty(code: int, shape, name: str):
        t = torch.empty(tuple(shape), dtype=_torch_dtype(code, name))
        return t, t.data_ptr()

    @staticmethod
    def place(t, device):
        return t if device.type == "cpu" else t.to(device)

    @staticmethod
    def take(t, steps):
        return t[steps].contiguous()


# -- tensors that share memory, found as safetensors finds them -----------------
# storage_ptr and storage_size are public in safetensors.torch (transformers,
# peft and huggingface_hub import them); the _-prefixed helpers are its
# private ones, same names and same results, which code written for it calls.

def storage_ptr(tensor: torch.Tensor) -> int:
    """Address of the storage under a tensor (0 for a meta tensor)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:   # torch before 2.0; meta storage
        try:
            return tensor.storage().data_ptr()
        except NotImplementedError:
            return 0


def storage_size(tensor: torch.Tensor) -> int:
    """Bytes of the storage under a tensor (its own bytes for a meta tensor)."""
    try:
        return tensor.untyped_storage().nbytes()
    except AttributeError:   # torch before 2.0
        try:
            return tensor.storage().size() * tensor.element_size()
        except NotImplementedError:
            return tensor.nelement() * tensor.element_size()


def _storage_at(t: torch.Tensor) -> int:
    """storage_ptr(t) of a tensor with elements, without asking torch for its
    storage (which costs ten times as much): its storage starts offset
    elements below it."""
    return t.data_ptr() - t.storage_offset() * t.element_size()


def _end_ptr(t: torch.Tensor) -> int:
    """One past the last byte the tensor reaches (strided views included)."""
    if not t.nelement():
        return t.data_ptr()
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return t.data_ptr() + (last + 1) * t.element_size()


def _filter_shared_not_shared(groups: List[Set[str]], state_dict) -> List[Set[str]]:
    """Each group of names on one storage split into runs whose bytes overlap
    (sorted by start, a name joins the run before it if it starts before the
    previous name's end, exactly as safetensors compares them)."""
    out = []
    for shared in groups:
        if len(shared) < 2:
            out.append(shared)
            continue
        areas = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in shared)
        _, last_stop, last_name = areas[0]
        out.append({last_name})
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                out.append({name})
            else:
                out[-1].add(name)
            last_stop = stop
    return out


def _find_shared_tensors(state_dict: Dict[str, torch.Tensor]) -> List[Set[str]]:
    """Groups of names whose bytes overlap in one storage, in safetensors' order
    (its sort of the groups as sets, which keeps them in first-seen order)."""
    at, count = {}, defaultdict(int)
    for k, v in state_dict.items():
        if v.is_meta:
            continue
        if v.nelement():
            at[k] = (v.device, _storage_at(v))
        elif storage_ptr(v) != 0 and storage_size(v) != 0:
            at[k] = (v.device, storage_ptr(v))
        else:
            continue
        count[at[k]] += 1
    by_storage = defaultdict(set)
    for k, where in at.items():   # storages at one address may differ in size
        by_storage[where + (storage_size(state_dict[k]) if count[where] > 1 else 0,)].add(k)
    return _filter_shared_not_shared(list(sorted(by_storage.values())), state_dict)


def _is_complete(t: torch.Tensor) -> bool:
    """The tensor covers its whole storage, from its first byte."""
    return t.data_ptr() == storage_ptr(t) and \
        t.nelement() * t.element_size() == storage_size(t)


def _remove_duplicate_names(state_dict, *, preferred_names=None, discard_names=None):
    """{kept name: [names dropped because they share its storage]}, chosen as
    safetensors chooses: a name covering the whole storage, preferred_names
    first, discard_names last, then the first by name. RuntimeError for a
    storage no name covers whole (saving it would store more than its tensors)."""
    preferred_names = set(preferred_names or [])
    discard_names = set(discard_names or [])
    to_remove = defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = {n for n in shared if _is_complete(state_dict[n])}
        if not complete:
            raise RuntimeError(f"Error while trying to find names to remove to save state dict, "
                               f"but found no suitable name to keep for saving amongst: "
                               f"{shared}. None is covering the entire storage. Refusing to "
                               f"save/load the model since you could be storing much more "
                               f"memory than needed. Please refer to "
                               f"https://huggingface.co/docs/safetensors/torch_shared_tensors "
                               f"for more information.")
        keep = sorted(complete)[0]
        if complete - discard_names:
            keep = sorted(complete - discard_names)[0]
        if preferred_names & complete:
            keep = sorted(preferred_names & complete)[0]
        for name in sorted(shared):
            if name != keep:
                to_remove[keep].append(name)
    return to_remove


def _items(tensors) -> Tuple[List[Item], list]:
    """Writer items for a dict of tensors, and the tensors holding their bytes;
    refused as safetensors refuses them (same classes and messages)."""
    if not isinstance(tensors, dict):
        raise PtwmValueError(ERR_INVALID_ARG, f"Expected a dict of [str, torch.Tensor] but "
                             f"received {type(tensors)}")
    sparse = []
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise PtwmTypeError(ERR_INVALID_ARG, f"Key {k!r} is invalid, expected str but "
                                f"received {type(k)}")
        if not isinstance(v, torch.Tensor):
            raise PtwmValueError(ERR_INVALID_ARG, f"Key `{k}` is invalid, expected "
                                 f"torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise PtwmValueError(ERR_INVALID_ARG, f"You are trying to save a sparse tensors: "
                             f"`{sparse}` which this library does not support. You can make "
                             f"it a dense tensor before saving with `.to_dense()` but be aware "
                             f"this might make a much larger file than needed.")
    failing = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(
            f"""
            Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: {failing}.
            A potential way to correctly save your model is to use `save_model`.
            More information at https://huggingface.co/docs/safetensors/torch_shared_tensors
            """)
    items, keep = [], []
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise PtwmValueError(ERR_INVALID_ARG, f"You are trying to save a non contiguous "
                                 f"tensor: `{k}` which is not allowed. It either means you are "
                                 f"trying to save tensors which are reference of each other in "
                                 f"which case it's recommended to save only the full tensors, "
                                 f"and reslice at load time, or simply call `.contiguous()` on "
                                 f"your tensor to pack it before saving.")
        code = dtype_code(v.dtype)
        t = v.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        keep.append(t)
        items.append(Item(k, code, tuple(t.shape), t.data_ptr(), t.nelement() * t.element_size()))
    return items, keep


def save(tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None, *,
         method="microscale", threads: int = 0, base=None) -> bytes:
    """The tensors as the bytes of a .ptwm file; with base (a weights path), each
    tensor matching a base tensor's name, dtype and shape is coded against it."""
    items, keep = _items(tensors)
    out = write_bytes(items, metadata, method=method, threads=threads, base=base)
    del keep
    return out


def save_file(tensors: Dict[str, torch.Tensor], filename, metadata: Optional[Dict[str, str]] = None,
              *, method="microscale", threads: int = 0, max_shard_size=None,
              base=None) -> None:
    """Write the tensors as a .ptwm file (atomically: a temporary file renamed into
    place), or with max_shard_size ("5GB" or bytes) as a directory of shards
    model-0000k-of-0000n.ptwm with model.ptwm.index.json; base as for save()."""
    items, keep = _items(tensors)
    write_file(filename, items, metadata, method=method, threads=threads,
               max_shard_size=max_shard_size, base=base)
    del keep


def load_file(filename, device="cpu", *, backend: str = "mmap", threads: int = 0,
              base=None) -> Dict[str, torch.Tensor]:
    """Every tensor of a .ptwm file or directory, a .safetensors file or a Hugging
    Face directory, by name in file order, decoded into its own storage, then moved
    to `device`; base: the weights a file saved against a base needs. backend
    ("mmap" or "pread", as safetensors takes it) changes nothing."""
    with safe_open(filename, framework="pt", device=device, backend=backend, threads=threads,
                   base=base) as f:
        return f.get_tensors()


def load(data: bytes, *, threads: int = 0, base=None) -> Dict[str, torch.Tensor]:
    """Every tensor of .ptwm (or safetensors) bytes, by name in file order."""
    with safe_open._from_bytes(data, "pt", threads, base=base) as f:
        return f.get_tensors()


_CONTIGUOUS_HINT = (" Or use save_model(..., force_contiguous=True), read the docs for "
                    "potential caveats.")


def save_model(model: torch.nn.Module, filename, metadata: Optional[Dict[str, str]] = None,
               force_contiguous: bool = True, *, method="microscale", threads: int = 0,
               max_shard_size=None, base=None) -> None:
    """Save a module's state_dict; tensors that share storage (tied weights) are
    stored once, the other names recorded in metadata as name -> kept name (the
    caller's metadata dict gets them, as in safetensors). force_contiguous=False
    refuses non-contiguous tensors instead of packing them."""
    state_dict = model.state_dict()
    for kept, removed in _remove_duplicate_names(state_dict).items():
        for name in removed:
            if metadata is None:
                metadata = {}
            if name not in metadata:   # never override the caller's entries
                metadata[name] = kept
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata, method=method, threads=threads,
                  max_shard_size=max_shard_size, base=base)
    except PtwmValueError as e:
        raise type(e)(e.code, str(e) + _CONTIGUOUS_HINT) from None


def load_model(model: torch.nn.Module, filename, strict: bool = True, device="cpu", *,
               backend: str = "mmap", threads: int = 0,
               base=None) -> Tuple[List[str], List[str]]:
    """Load a file into a module (tied weights filled from the one stored copy).
    Returns (missing, unexpected) names; with strict, raises RuntimeError when
    either is not empty, as safetensors does."""
    state_dict = load_file(filename, device=device, backend=backend, threads=threads,
                           base=base)
    to_removes = _remove_duplicate_names(model.state_dict(), preferred_names=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    for group in to_removes.values():
        for name in group:
            if name not in missing:
                unexpected.append(name)
            else:
                missing.remove(name)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected


from ._torch_checkpoint import (SaveHandle, checkpoint_metadata, load_checkpoint,  # noqa: E402
                                save_checkpoint)
from ._torch_series import CheckpointSeries   # noqa: E402 (both use the above)
