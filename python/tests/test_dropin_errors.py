"""Drop-in for safetensors: the names code imports from it and the errors it
catches. Where safetensors raises, ptwm raises the same class (SafetensorError,
FileNotFoundError, ValueError, TypeError, RuntimeError), with safetensors'
message where callers match on it."""

import importlib
import os
import pathlib
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import SafetensorError

from _support import TempDirTest

import numpy as np
import torch
import ptwm.numpy as pn
import ptwm.torch as pt


class NamesTest(unittest.TestCase):
    def test_safetensor_error_is_every_ptwm_error(self):
        self.assertTrue(issubclass(SafetensorError, Exception))
        self.assertIs(getattr(importlib.import_module(SafetensorError.__module__),
                              "SafetensorError"), SafetensorError)
        for cls in (ptwm.PtwmError, ptwm.PtwmValueError, ptwm.PtwmTypeError,
                    ptwm.PtwmIndexError, ptwm.PtwmKeyError, ptwm.PtwmFileNotFoundError,
                    ptwm.PtwmFileExistsError, ptwm.PtwmMemoryError):
            self.assertTrue(issubclass(cls, SafetensorError), cls)
        self.assertTrue(issubclass(ptwm.PtwmTypeError, TypeError))
        self.assertTrue(issubclass(ptwm.PtwmTypeError, ValueError))
        self.assertTrue(issubclass(ptwm.PtwmIndexError, IndexError))

    def test_storage_ptr_and_size(self):
        m = torch.arange(10, dtype=torch.float32)
        for view in (m, m[3:], m[::2], m.view(2, 5)):
            self.assertEqual(pt.storage_ptr(view), m.data_ptr())
            self.assertEqual(pt.storage_size(view), 40)
        # A smaller storage starting at the same address: same pointer, other size.
        whole = m.untyped_storage() if hasattr(m, "untyped_storage") else m.storage().untyped()
        n = torch.empty(0, dtype=torch.float32).set_(whole[:16])
        self.assertEqual(n.data_ptr(), m.data_ptr())
        self.assertEqual((pt.storage_ptr(n), pt.storage_size(n)), (m.data_ptr(), 16))
        self.assertEqual(pt._find_shared_tensors({"m": m, "n": n}), [{"m"}, {"n"}])
        meta = torch.zeros(3, device="meta")
        self.assertEqual(pt.storage_ptr(meta), 0)
        self.assertEqual(pt.storage_size(meta), 12)


class ArgumentErrorsTest(TempDirTest):
    def test_not_a_dict(self):
        for save, kind in ((pt.save, "torch.Tensor"), (pn.save, "numpy.ndarray")):
            with self.assertRaises(ValueError) as cm:
                save("notadict")
            self.assertEqual(str(cm.exception),
                             f"Expected a dict of [str, {kind}] but received <class 'str'>")
        with self.assertRaises(ValueError):
            pt.save_file([("w", torch.ones(1))], self.path("x.ptwm"))
        self.assertFalse(os.path.exists(self.path("x.ptwm")))

    def test_wrong_types_are_type_errors(self):
        cases = [lambda: pt.save({3: torch.ones(1)}), lambda: pn.save({3: np.ones(1)}),
                 lambda: pt.save({"w": torch.ones(1)}, metadata={"n": 1}),
                 lambda: pt.save({"w": torch.ones(1)}, metadata=[("a", "b")]),
                 lambda: pn.save({"w": np.ones(1)}, metadata={1: "x"}),
                 lambda: pt.load("not bytes"), lambda: pn.load(12345)]
        for i, case in enumerate(cases):
            with self.subTest(case=i), self.assertRaises(TypeError):
                case()

    def test_framework_names(self):
        pt.save_file({"w": torch.arange(3)}, self.path("m.ptwm"))
        for name in ("pt", "torch", "pytorch"):
            with ptwm.safe_open(self.path("m.ptwm"), framework=name) as f:
                self.assertTrue(torch.equal(f.get_tensor("w"), torch.arange(3)), name)
        for name in ("np", "numpy"):
            with ptwm.safe_open(self.path("m.ptwm"), framework=name) as f:
                self.assertEqual(f.get_tensor("w").tolist(), [0, 1, 2], name)
        for name in ("tf", "PT", "jax", ""):
            with self.subTest(framework=name), self.assertRaises(SafetensorError) as cm:
                ptwm.safe_open(self.path("m.ptwm"), framework=name)
            self.assertIn(f"framework {name} is invalid", str(cm.exception))

    def test_backend_accepted_and_checked(self):
        pt.save_file({"w": torch.arange(3)}, self.path("m.ptwm"))
        for backend in ("mmap", "pread"):
            self.assertTrue(torch.equal(pt.load_file(self.path("m.ptwm"), backend=backend)["w"],
                                        torch.arange(3)))
            self.assertEqual(pn.load_file(self.path("m.ptwm"), backend=backend)["w"].tolist(),
                             [0, 1, 2])
            with ptwm.safe_open(self.path("m.ptwm"), "pt", backend=backend) as f:
                self.assertEqual(f.keys(), ["w"])
        with self.assertRaises(SafetensorError) as cm:
            pt.load_file(self.path("m.ptwm"), backend="mmap2")
        self.assertIn("backend 'mmap2' is invalid", str(cm.exception))
        model = torch.nn.Linear(2, 2)
        pt.save_model(model, self.path("lin.ptwm"))
        self.assertEqual(pt.load_model(model, self.path("lin.ptwm"), backend="pread"),
                         (set(), []))

    def test_devices(self):
        pt.save_file({"w": torch.ones(2)}, self.path("m.ptwm"))
        for device in (None, "cpu", torch.device("cpu")):
            self.assertEqual(pt.load_file(self.path("m.ptwm"), device=device)["w"].device.type,
                             "cpu")
        with ptwm.safe_open(self.path("m.ptwm"), "np", device=None) as f:
            self.assertEqual(f.get_tensor("w").tolist(), [1.0, 1.0])
        with self.assertRaises(SafetensorError):
            pt.load_file(self.path("m.ptwm"), device="no-such-device")
        with self.assertRaises(SafetensorError) as cm:
            ptwm.safe_open(self.path("m.ptwm"), "np", device="cuda:0")
        self.assertIn("Device cuda:0 is not supported for framework numpy", str(cm.exception))


class FileErrorsTest(TempDirTest):
    def test_missing_file_message(self):
        for name in ("notafile", self.path("absent.ptwm"), pathlib.Path(self.path("gone"))):
            for load in (lambda n: ptwm.safe_open(n, framework="pt"), pt.load_file,
                         pn.load_file):
                with self.subTest(name=str(name)), self.assertRaises(FileNotFoundError) as cm:
                    load(name)
                self.assertEqual(str(cm.exception), f"No such file or directory: {name}")
                self.assertIsInstance(cm.exception, SafetensorError)

    def test_closed_handle(self):
        pt.save_file({"w": torch.ones(2), "b": torch.zeros(3)}, self.path("m.ptwm"))
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            pass
        for call in (f.keys, f.offset_keys, f.metadata, f.get_tensors,
                     lambda: f.get_tensor("w"), lambda: f.get_slice("w")):
            with self.subTest(call=call), self.assertRaises(SafetensorError) as cm:
                call()
            self.assertIn("File is closed", str(cm.exception))
            self.assertIsInstance(cm.exception, ValueError)   # as ptwm raised before
        # The file can be replaced once its handle is closed.
        with open(self.path("m.ptwm"), "w") as g:
            g.write("something")
        self.assertIn("closed", repr(f))

    def test_slice_outlives_its_handle(self):
        w = torch.arange(24, dtype=torch.int32).reshape(4, 6)
        path = self.path("m.ptwm")
        pt.save_file({"w": w}, path)

        def open_fds():   # descriptors of this process open on the file
            fd_dir = "/proc/self/fd"
            return sum(1 for d in os.listdir(fd_dir)
                       if os.path.realpath(os.path.join(fd_dir, d)) == os.path.realpath(path))
        with ptwm.safe_open(path, framework="pt") as f:
            self.assertEqual(open_fds(), 1)
        self.assertEqual(open_fds(), 0)                  # no slice: released at close
        with ptwm.safe_open(path, framework="pt") as f:
            s = f.get_slice("w")
        self.assertTrue(torch.equal(s[1:3, ::2], w[1:3, ::2]))   # as safetensors' slices do
        self.assertEqual(open_fds(), 1)
        del s
        self.assertEqual(open_fds(), 0)                  # released with the last slice

    def test_unknown_tensor_name(self):
        pt.save_file({"w": torch.ones(2)}, self.path("m.ptwm"))
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            for call in (f.get_tensor, f.get_slice):
                with self.assertRaises(SafetensorError) as cm:
                    call("nope")
                self.assertIsInstance(cm.exception, KeyError)
                self.assertIn("'nope'", str(cm.exception))

    def test_damaged_and_foreign_files(self):
        with open(self.path("junk.safetensors"), "wb") as f:
            f.write(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
        with open(self.path("short.ptwm"), "wb") as f:
            f.write(b"\x89PTWM\r\n\x1a\x05")
        for name in ("junk.safetensors", "short.ptwm"):
            with self.subTest(name=name), self.assertRaises(SafetensorError):
                pt.load_file(self.path(name))
        with self.assertRaises(SafetensorError):
            pt.load(b"\x01\x00")


if __name__ == "__main__":
    unittest.main()
