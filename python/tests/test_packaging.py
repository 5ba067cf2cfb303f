"""`pip install ./python` works offline and bundles the library.

The wheel bundles the library this test run loaded (PTWM_LIBRARY at build
time), which skips the CMake step; the CMake path is the same code with the
library built first.
"""

import base64
import hashlib
import os
import subprocess
import sys
import unittest
import zipfile

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import REPO, TESTS, TempDirTest

PYTHON_DIR = os.path.dirname(TESTS)


def pip(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


class PackagingTest(TempDirTest):
    def env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PTWM_LIBRARY", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
        env["PIP_NO_INDEX"] = "1"        # offline: never look at a package index
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env.update(extra)
        return env

    def test_wheel_contents(self):
        proc = pip("wheel", "--no-deps", "-w", self.tmp, PYTHON_DIR,
                   env=self.env(PTWM_LIBRARY=os.path.realpath(ptwm.library_path)))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        wheels = [f for f in os.listdir(self.tmp) if f.endswith(".whl")]
        self.assertEqual(len(wheels), 1)
        self.assertTrue(wheels[0].startswith(f"ptwm-{ptwm.__version__}-py3-none-"), wheels[0])
        with zipfile.ZipFile(self.path(wheels[0])) as z:
            names = set(z.namelist())
            for mod in ("ptwm/__init__.py", "ptwm/_lib.py", "ptwm/chain.py",
                        "ptwm/sharding/__init__.py", "ptwm/sharding/_writer.py",
                        "ptwm/sharding/_sharder.py", "ptwm/sharding/_index.py",
                        "ptwm/sharding/_reader.py", "ptwm/torch.py", "ptwm/numpy.py",
                        "ptwm/_safe_open.py", "ptwm/_stored.py", "ptwm/_slicing.py",
                        "ptwm/_torch_checkpoint.py", "ptwm/libptwm.so"):
                self.assertIn(mod, names)
            di = f"ptwm-{ptwm.__version__}.dist-info"
            record = z.read(f"{di}/RECORD").decode().splitlines()
            self.assertEqual({r.split(",")[0] for r in record}, names)
            for line in record:
                path, digest, size = line.split(",")
                if path.endswith("RECORD"):
                    continue
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual(digest, "sha256=" + want.decode(), path)
                self.assertEqual(int(size), len(data), path)
            with open(os.path.realpath(ptwm.library_path), "rb") as f:
                self.assertEqual(z.read("ptwm/libptwm.so"), f.read())

    def test_install_offline_and_use_the_bundled_library(self):
        target = self.path("site")
        proc = pip("install", "--no-deps", "--target", target, PYTHON_DIR,
                   env=self.env(PTWM_LIBRARY=os.path.realpath(ptwm.library_path)))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        code = ("import ptwm, ptwm.sharding as s\n"
                "blob = s.compress_ptwm_blob([('t', bytes(range(64)), 'U8', (64,))])\n"
                "assert ptwm.open_bytes(blob).read('t') == bytes(range(64))\n"
                "print(ptwm.library_path)\n")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=self.env(PYTHONPATH=target), cwd=self.tmp, timeout=600)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), os.path.join(target, "ptwm", "libptwm.so"))

    def test_relative_library_as_the_readme_writes_it(self):
        """PTWM_LIBRARY=build/libptwm.so python3 -m pip install ./python, run in the
        checkout: pip runs the backend in python/, yet the path names the
        checkout's file. Run elsewhere, it names the file there ($PWD)."""
        lib = os.path.realpath(ptwm.library_path)
        with open(lib, "rb") as f:
            want = f.read()
        target = self.path("site")
        env = self.env(PTWM_LIBRARY=os.path.relpath(lib, REPO))
        env.pop("PWD", None)   # not started from a shell: the checkout is the base
        proc = pip("install", "--no-deps", "--target", target, "./python", env=env, cwd=REPO)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(os.path.join(target, "ptwm", "libptwm.so"), "rb") as f:
            self.assertEqual(f.read(), want)
        here = self.path("elsewhere")
        os.makedirs(os.path.join(here, "lib"))
        with open(os.path.join(here, "lib", "libptwm.so"), "wb") as f:
            f.write(want + b"\0")   # not the checkout's: the wheel shows which one it took
        proc = pip("wheel", "--no-deps", "-w", here, PYTHON_DIR, cwd=here,
                   env=self.env(PTWM_LIBRARY="lib/libptwm.so", PWD=here))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        wheel = [f for f in os.listdir(here) if f.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(here, wheel)) as z:
            self.assertEqual(z.read("ptwm/libptwm.so"), want + b"\0")
        proc = pip("wheel", "--no-deps", "-w", here, PYTHON_DIR, cwd=here,
                   env=self.env(PTWM_LIBRARY="lib/absent.so", PWD=here))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(f"'{os.path.join(here, 'lib', 'absent.so')}'", proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
