"""ptwm.safe_open: safetensors' safe_open over every kind of stored weights.

A framework ("pt" or "np") allocates each tensor and the library decodes
straight into its memory. get_slice(name)[index] decodes only the chunks that
hold the selected rows.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ._dtype import dtype_bits, dtype_name
from ._errors import ERR_INVALID_ARG, PtwmValueError
from ._slicing import read_runs, select
from ._stored import Stored, open_data, open_path

__all__ = ["safe_open", "adapter"]

_FRAMEWORKS = {"pt": "torch", "torch": "torch", "np": "numpy", "numpy": "numpy"}


def adapter(name, bf16=None):
    """The adapter of ptwm.torch or ptwm.numpy for a safetensors framework name."""
    module = _FRAMEWORKS.get(name) if isinstance(name, str) else None
    if module is None:
        raise PtwmValueError(ERR_INVALID_ARG, f"framework {name!r} is not supported: use "
                             f"\"pt\" (PyTorch) or \"np\" (NumPy)")
    if module == "torch":
        if bf16 is not None:
            raise PtwmValueError(ERR_INVALID_ARG, "bf16= applies to NumPy only (torch has "
                                 "bfloat16)")
        from .torch import _Adapter
        return _Adapter()
    from .numpy import _Adapter
    return _Adapter(bf16)


class safe_open:   # noqa: N801 (the name safetensors users call)
    """Open stored tensors: a .ptwm file, a sharded .ptwm directory, a
    .safetensors file or a Hugging Face directory.

    safe_open(filename, framework, device="cpu") as in safetensors; extras:
    threads (decoding threads, 0 = all cores), base (the weights a file
    written against a base needs: a .safetensors or .ptwm file or a directory
    of either; docs/DELTA.md) and, for NumPy, bf16="uint16" to read BF16
    tensors as their raw uint16 bits where ml_dtypes is absent."""

    def __init__(self, filename, framework: str, device="cpu", *, threads: int = 0,
                 bf16: Optional[str] = None, base=None):
        self._fw = adapter(framework, bf16)
        self._device = self._fw.device(device)
        self._stored: Optional[Stored] = None
        self._stored = open_path(filename, threads, base)

    @classmethod
    def _from_bytes(cls, data, framework: str, threads: int = 0, bf16=None,
                    base=None) -> "safe_open":
        self = cls.__new__(cls)
        self._fw = adapter(framework, bf16)
        self._device = self._fw.device("cpu")
        self._stored = None
        self._stored = open_data(data, threads, base)
        return self

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._stored is not None:
            self._stored.close()

    def _open(self) -> Stored:
        if self._stored is None or not self._stored._handle:
            raise ValueError("the file is closed (use safe_open inside its with block)")
        return self._stored

    def keys(self) -> List[str]:
        """Tensor names, sorted (as safetensors lists them)."""
        return sorted(self._open().names)

    def offset_keys(self) -> List[str]:
        """Tensor names in file order (index order for a sharded directory)."""
        return list(self._open().names)

    def metadata(self) -> Optional[Dict[str, str]]:
        """The stored metadata, or None when there is none."""
        return self._open().metadata()

    def get_tensor(self, name: str):
        stored = self._open()
        e = stored.entry(name)
        obj, addr = self._fw.empty(e.dtype, e.shape, name)
        stored.read_into(e, 0, addr, e.nbytes)
        return self._fw.place(obj, self._device)

    def _load_all(self) -> Dict[str, object]:
        """Every tensor by name in file order (as safetensors' load_file), decoded
        in one call so that the chunks of many small tensors share the threads."""
        stored = self._open()
        names = self.offset_keys()
        entries = [stored.entry(n) for n in names]
        made = [self._fw.empty(e.dtype, e.shape, n) for n, e in zip(names, entries)]
        stored.read_many(entries, [addr for _, addr in made])
        return {n: self._fw.place(obj, self._device) for n, (obj, _) in zip(names, made)}

    def get_slice(self, name: str) -> "_Slice":
        stored = self._open()
        return _Slice(self, stored.entry(name), name)

    def __repr__(self) -> str:
        label = self._stored.label if self._stored is not None else "?"
        return f"<ptwm.safe_open {label!r}>"


class _Slice:
    """A stored tensor not read yet: its shape and dtype, and [...] to read part of it."""

    def __init__(self, owner: safe_open, entry, name: str):
        self._owner = owner
        self._entry = entry
        self._name = name

    def get_shape(self) -> List[int]:
        return list(self._entry.shape)

    def get_dtype(self) -> str:
        return dtype_name(self._entry.dtype)

    def __getitem__(self, index):
        e = self._entry
        bits = dtype_bits(e.dtype)
        if bits % 8:
            raise PtwmValueError(ERR_INVALID_ARG, f"tensor '{self._name}' is "
                                 f"{dtype_name(e.dtype)}, {bits} bits an element: it can "
                                 f"only be read whole (get_tensor)")
        shape, runs = select(index, e.shape, bits // 8)
        fw = self._owner._fw
        obj, addr = fw.empty(e.dtype, shape, self._name)
        stored = self._owner._open()
        read_runs(lambda off, dst, n: stored.read_into(e, off, dst, n), runs, addr)
        return fw.place(obj, self._owner._device)

    def __repr__(self) -> str:
        return f"<ptwm slice of {self._name!r} {self.get_dtype()} {self.get_shape()}>"
