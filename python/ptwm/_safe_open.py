"""ptwm.safe_open: safetensors' safe_open over every kind of stored weights.

A framework ("pt" or "np") allocates each tensor and the library decodes
straight into its memory. get_slice(name)[index] decodes only the chunks that
hold the selected rows; as in safetensors, a slice object stays usable after
the handle that made it is closed (the open file lives as long as either).
"""

from __future__ import annotations

import weakref
from typing import Dict, List, Optional

from ._dtype import dtype_bits, dtype_name
from ._errors import ERR_INVALID_ARG, PtwmValueError
from ._slicing import plan, read_runs, runs
from ._stored import Stored, open_data, open_path

__all__ = ["safe_open", "adapter"]

_FRAMEWORKS = {"pt": "torch", "torch": "torch", "pytorch": "torch", "np": "numpy",
               "numpy": "numpy"}
_BACKENDS = ("mmap", "pread")   # safetensors' storage choices; ptwm decodes either way


def check_backend(backend) -> None:
    """Accept safetensors' backend= values (ptwm always decodes from the file)."""
    if backend not in _BACKENDS:
        raise PtwmValueError(ERR_INVALID_ARG, f"backend {backend!r} is invalid (expected one "
                             f"of: \"mmap\", \"pread\")")


def adapter(name, bf16=None):
    """The adapter of ptwm.torch or ptwm.numpy for a safetensors framework name."""
    module = _FRAMEWORKS.get(name) if isinstance(name, str) else None
    if module is None:
        raise PtwmValueError(ERR_INVALID_ARG, f"framework {name} is invalid: ptwm reads "
                             f"tensors for \"pt\" (or \"torch\", \"pytorch\") and \"np\" "
                             f"(or \"numpy\")")
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

    safe_open(filename, framework, device="cpu", *, backend="mmap") as in
    safetensors (backend is checked, not used: ptwm decodes from the file);
    extras: threads (decoding threads, 0 = all cores), base (the weights a file
    written against a base needs: a .safetensors or .ptwm file or a directory
    of either; docs/DELTA.md) and, for NumPy, bf16="uint16" to read BF16
    tensors as their raw uint16 bits where ml_dtypes is absent."""

    def __init__(self, filename, framework: str, device="cpu", *, backend: str = "mmap",
                 threads: int = 0, bf16: Optional[str] = None, base=None):
        check_backend(backend)
        self._setup(framework, bf16, device)
        self._stored = open_path(filename, threads, base)
        self._label = self._stored.label

    @classmethod
    def _from_bytes(cls, data, framework: str, threads: int = 0, bf16=None,
                    base=None) -> "safe_open":
        self = cls.__new__(cls)
        self._setup(framework, bf16, "cpu")
        self._stored = open_data(data, threads, base)
        self._label = self._stored.label
        return self

    def _setup(self, framework, bf16, device) -> None:
        self._fw = adapter(framework, bf16)
        self._device = self._fw.device(device)
        self._stored: Optional[Stored] = None
        self._slices = weakref.WeakSet()   # slices keep the file open past close()

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the file: now, or when the last of its slices goes (a
        safetensors slice outlives its handle too)."""
        stored, self._stored = self._stored, None
        if stored is not None and not self._slices:
            stored.close()

    def _open(self) -> Stored:
        if self._stored is None:
            raise PtwmValueError(ERR_INVALID_ARG, f"File is closed: '{self._label}' (use "
                                 f"the safe_open handle inside its with block)")
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

    def get_tensors(self) -> Dict[str, object]:
        """Every tensor by name in file order (as safetensors' load_file), decoded
        in one call so that the chunks of many small tensors share the threads."""
        stored = self._open()
        names, entries = stored.names, list(stored.entries.values())   # both in file order
        empty, place, device = self._fw.empty, self._fw.place, self._device
        made = [empty(e.dtype, e.shape, n) for n, e in zip(names, entries)]
        stored.read_many(entries, [addr for _, addr in made])
        return {n: place(obj, device) for n, (obj, _) in zip(names, made)}

    def get_slice(self, name: str) -> "_Slice":
        stored = self._open()
        s = _Slice(stored, self._fw, self._device, stored.entry(name), name)
        self._slices.add(s)
        return s

    def __repr__(self) -> str:
        return f"<ptwm.safe_open {self._label!r}{' (closed)' if self._stored is None else ''}>"


class _Slice:
    """A stored tensor not read yet: its shape and dtype, and [...] to read part of it."""

    def __init__(self, stored: Stored, fw, device, entry, name: str):
        self._stored = stored   # kept open while the slice lives
        self._fw = fw
        self._device = device
        self._entry = entry
        self._name = name

    def get_shape(self) -> List[int]:
        return list(self._entry.shape)

    def get_dtype(self) -> str:
        return dtype_name(self._entry.dtype)

    def __getitem__(self, index):
        e, fw = self._entry, self._fw
        bits = dtype_bits(e.dtype)
        if bits % 8:
            raise PtwmValueError(ERR_INVALID_ARG, f"tensor '{self._name}' is "
                                 f"{dtype_name(e.dtype)}, {bits} bits an element: it can "
                                 f"only be read whole (get_tensor)")
        p = plan(index, e.shape, fw.dialect)
        if p is None:   # torch's advanced indexing, on the whole tensor as safetensors does
            whole, addr = fw.empty(e.dtype, e.shape, self._name)
            self._stored.read_into(e, 0, addr, e.nbytes)
            return fw.place(whole[index], self._device)
        box_shape = tuple(b - a for a, b, drop in p.box if not drop)
        obj, addr = fw.empty(e.dtype, box_shape, self._name)
        read_runs(lambda off, dst, n: self._stored.read_into(e, off, dst, n),
                  runs(p.box, e.shape, bits // 8), addr)
        if p.steps is not None:
            obj = fw.take(obj, p.steps)
        if tuple(obj.shape) != p.shape:   # None's axes, or steps over an empty box
            obj = obj.reshape(p.shape)
        return fw.place(obj, self._device)

    def __repr__(self) -> str:
        return f"<ptwm slice of {self._name!r} {self.get_dtype()} {self.get_shape()}>"
