"""The bindings agree with include/ptwm.h and the loaded library."""

import ctypes
import os
import re
import subprocess
import sys
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import _errors, _lib

from _support import REPO


def header() -> str:
    path = os.path.join(REPO, "include", "ptwm.h")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)   # comments may hold ';' and '('
    return text


def code_only(text: str) -> str:
    return re.sub(r"^\s*#.*$", "", text, flags=re.M)   # PTWM_API's own #define


def declarations(text: str) -> dict:
    """PTWM_API function name -> number of parameters."""
    out = {}
    for m in re.finditer(r"PTWM_API\s+[^;(]*?\b(\w+)\s*\(([^;]*?)\)\s*;", text, re.S):
        params = m.group(2).strip()
        out[m.group(1)] = 0 if params in ("", "void") else params.count(",") + 1
    return out


def struct_fields(text: str, name: str) -> list:
    m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (name, name), text, re.S)
    if not m:
        raise AssertionError(f"struct {name} not found in ptwm.h")
    fields = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        if fp:
            fields.append(fp.group(1))
            continue
        decl = re.sub(r"\[[^\]]*\]", "", decl)
        for part in decl.split(","):   # "float *m, *v;"
            fields.append(re.findall(r"\w+", part)[-1])
    return fields


class HeaderAgreementTest(unittest.TestCase):
    def test_every_binding_is_declared_with_its_arity(self):
        decls = declarations(code_only(header()))
        for name, (_, argtypes) in _lib._SIGNATURES.items():
            with self.subTest(name=name):
                self.assertIn(name, decls, "bound but not declared in ptwm.h")
                self.assertEqual(len(argtypes), decls[name], "parameter count")

    def test_every_binding_is_defined_by_the_library(self):
        missing = [n for n in _lib._SIGNATURES if isinstance(getattr(_lib.lib, n), _lib.MISSING)]
        self.assertEqual(missing, [], f"{ptwm.library_path} lacks these functions")

    def test_structs_match(self):
        text = header()
        for cname, cls in [("ptwm_err", _lib.ErrStruct), ("ptwm_tensor_info", _lib.TensorInfo),
                           ("ptwm_tensor_desc", _lib.TensorDesc), ("ptwm_kv", _lib.KV),
                           ("ptwm_cparams", _lib.CParams), ("ptwm_chain_list", _lib.ChainList),
                           ("ptwm_checkpoint_options", _lib.CheckpointOptions)]:
            with self.subTest(struct=cname):
                self.assertEqual([f[0] for f in cls._fields_], struct_fields(text, cname))

    def test_constants_match(self):
        text = header()

        def define(name):
            return int(re.search(r"#define\s+%s\s+(\d+)" % name, text).group(1))
        self.assertEqual(_lib.ERR_MESSAGE_MAX, define("PTWM_ERR_MESSAGE_MAX"))
        self.assertEqual(_lib.CHAIN_MAX_BYTES, define("PTWM_CHAIN_MAX_BYTES"))
        for attr in dir(_errors):
            if attr.startswith("ERR_"):
                m = re.search(r"\bPTWM_%s\s*=\s*(\d+)" % attr, text)
                self.assertIsNotNone(m, attr)
                self.assertEqual(getattr(_errors, attr), int(m.group(1)), attr)
        for name, code in ptwm.METHODS.items():
            m = re.search(r"\bPTWM_METHOD_%s\s*=\s*(\d+)" % name.upper(), text)
            self.assertEqual(code, int(m.group(1)), name)

    def test_versions(self):
        m = re.search(r'#define\s+PTWM_VERSION_STRING\s+"([^"]+)"', header())
        self.assertEqual(ptwm.library_version(), m.group(1))
        self.assertEqual(ptwm.__version__, m.group(1))


class StructSizeTest(unittest.TestCase):
    def test_sizes_agree_with_the_library(self):
        for cls, sid in _lib._STRUCT_IDS:
            self.assertEqual(_lib.lib.ptwm_struct_size(sid), ctypes.sizeof(cls), cls.__name__)
        self.assertEqual(_lib.lib.ptwm_struct_size(99), 0)

    def test_options_carry_their_size(self):
        """The package fills in each options struct's size; the library refuses a wrong one."""
        from ptwm._params import cparams
        from ptwm.convert import _checkpoint_options

        class NoProgress:
            fn = _lib.ProgressFn()
        p = cparams()
        self.assertEqual(p.size, ctypes.sizeof(_lib.CParams))
        o = _checkpoint_options(None, 3, 0, None, False, NoProgress)
        self.assertEqual(o.size, ctypes.sizeof(_lib.CheckpointOptions))
        for size, msg in ((0, b"ptwm_cparams.size is 0"),
                          (ctypes.sizeof(_lib.CParams) + 8, b"larger than this library's")):
            p.size = size
            w, err = ctypes.c_void_p(), _lib.ErrStruct()
            rc = _lib.lib.ptwm_writer_open_memory(ctypes.byref(p), ctypes.byref(w),
                                                  ctypes.byref(err))
            self.assertEqual(rc, _errors.ERR_INVALID_ARG)
            self.assertIn(msg, err.message)
            self.assertFalse(w.value)

    def test_a_library_of_other_structs_is_refused(self):
        class Other:
            @staticmethod
            def ptwm_struct_size(sid):
                return 999 if sid == 4 else _lib.lib.ptwm_struct_size(sid)
        with self.assertRaisesRegex(OSError, "has a CParams of 999 bytes where this package "
                                             "expects"):
            _lib._check_struct_sizes(Other, "/some/libptwm.so")


class LibraryLookupTest(unittest.TestCase):
    def test_explicit_path_is_never_overridden(self):
        env = dict(os.environ, PTWM_LIBRARY="/nonexistent/libptwm.so")
        code = "import ptwm"
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.dirname(ptwm.__file__)))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("/nonexistent/libptwm.so", proc.stderr)

    def test_loaded_library_is_reported(self):
        self.assertTrue(os.path.isfile(ptwm.library_path))
        self.assertEqual(_lib.find_library(), ptwm.library_path)


class ErrorTest(unittest.TestCase):
    def test_error_classes(self):
        e = ptwm.PtwmError(19, "file 'x': bad CRC")
        self.assertEqual((e.code, e.name, e.message, str(e)),
                         (19, "PTWM_ERR_CRC", "file 'x': bad CRC", "file 'x': bad CRC"))
        self.assertTrue(issubclass(ptwm.PtwmValueError, ValueError))
        self.assertTrue(issubclass(ptwm.PtwmFileNotFoundError, FileNotFoundError))
        self.assertTrue(issubclass(ptwm.PtwmFileExistsError, FileExistsError))
        self.assertTrue(issubclass(ptwm.PtwmMemoryError, MemoryError))
        for cls in (ptwm.PtwmValueError, ptwm.PtwmFileNotFoundError, ptwm.PtwmFileExistsError,
                    ptwm.PtwmMemoryError, _errors.PtwmOSError):
            self.assertTrue(issubclass(cls, ptwm.PtwmError))
        self.assertEqual(ptwm.PtwmFileNotFoundError(13, "m").errno, 2)

    def test_message_falls_back_to_the_error_string(self):
        with self.assertRaises(ptwm.PtwmError) as cm:
            _errors.check(18, None)
        self.assertTrue(str(cm.exception))
        self.assertEqual(cm.exception.name, "PTWM_ERR_CORRUPT")


class IsaTest(unittest.TestCase):
    def test_cap_round_trip(self):
        best = ptwm.isa_level()   # the CPU's best, or PTWM_ISA's cap
        self.assertIn(best, ("scalar", "ssse3", "avx2", "avx512", "avx512vbmi"))
        try:
            self.assertEqual(ptwm.set_isa_limit("scalar"), "scalar")
            self.assertEqual(ptwm.isa_level(), "scalar")
            blob = ptwm.sharding.compress_ptwm_blob([("w", bytes(range(256)) * 64, "BF16", (8192,))])
            self.assertEqual(ptwm.set_isa_limit("avx512vbmi"), ptwm.isa_level())
        finally:
            ptwm.set_isa_limit(best)   # the level in effect before (PTWM_ISA may cap it)
        self.assertEqual(ptwm.isa_level(), best)
        self.assertEqual(ptwm.sharding.compress_ptwm_blob(
            [("w", bytes(range(256)) * 64, "BF16", (8192,))]), blob)

    def test_unknown_name_is_value_error(self):
        with self.assertRaises(ValueError):
            ptwm.set_isa_limit("avx9")


if __name__ == "__main__":
    unittest.main()
