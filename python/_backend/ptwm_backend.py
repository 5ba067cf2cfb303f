"""PEP 517 build backend for the ptwm Python package, standard library only.

`pip install ./python` builds a wheel here without downloading anything: the
backend needs no build requirements (not setuptools, not wheel), runs CMake on
the repository around this directory to build libptwm.so, and zips the package
with the library inside it.

Where the bundled library comes from, in order:
  1. config setting `library=PATH` (pip --config-settings library=PATH) or the
     environment variable PTWM_LIBRARY: that file is copied. pip runs this
     backend in python/, not where it was started, so a relative PATH is looked
     up from the directory pip was started in ($PWD, which the shell sets),
     then from the checkout (the directory above python/), then from python/;
  2. otherwise CMake builds the `ptwm_shared` target of the repository (the
     directory above python/, or PTWM_SOURCE_DIR) in a temporary directory
     (PTWM_CMAKE_ARGS adds arguments to the configure step).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # python/
NAME = "ptwm"


def _version() -> str:
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("python/pyproject.toml has no version")
    return m.group(1)


def _metadata() -> str:
    readme = ""
    path = os.path.join(HERE, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: Store, compress and load neural-network weights (bindings to libptwm)\n"
            "Requires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _tag() -> str:
    # Pure Python code plus a native library loaded through ctypes: any Python 3
    # of this platform can use it, but only this platform.
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{plat}"


def _dist_info() -> str:
    return f"{NAME}-{_version()}.dist-info"


def _lib_name() -> str:
    if sys.platform == "darwin":
        return "libptwm.dylib"
    if sys.platform == "win32":
        return "ptwm.dll"
    return "libptwm.so"


def _source_dir() -> str:
    src = os.environ.get("PTWM_SOURCE_DIR") or os.path.dirname(HERE)
    if not os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        raise RuntimeError(f"cannot build libptwm: no CMakeLists.txt in '{src}' (build from a "
                           f"checkout, set PTWM_SOURCE_DIR to one, or set PTWM_LIBRARY to a "
                           f"built libptwm)")
    return src


def _given_library(given: str) -> str:
    """The file a library path names: absolute as is; relative from where pip
    was started ($PWD), else from the checkout, else from here (python/)."""
    if os.path.isabs(given):
        tried = [given]
    else:
        bases = [os.environ.get("PWD"), os.path.dirname(HERE), os.getcwd()]
        tried = [os.path.join(b, given) for b in bases if b]
    for path in tried:
        if os.path.isfile(path):
            return os.path.realpath(path)
    raise RuntimeError(f"library '{given}' does not exist (tried " + ", ".join(
        f"'{t}'" for t in dict.fromkeys(tried)) + ")")


def _build_library(tmp: str, config_settings) -> str:
    """Path of the libptwm to bundle (built into tmp unless one is given)."""
    given = (config_settings or {}).get("library") or os.environ.get("PTWM_LIBRARY")
    if given:
        return _given_library(given)
    if shutil.which("cmake") is None:
        raise RuntimeError("cmake is needed to build libptwm (or set PTWM_LIBRARY)")
    build = os.path.join(tmp, "cmake")
    args = ["cmake", "-S", _source_dir(), "-B", build, "-DCMAKE_BUILD_TYPE=Release"]
    args += os.environ.get("PTWM_CMAKE_ARGS", "").split()
    jobs = os.environ.get("PTWM_BUILD_JOBS", "2")
    for cmd in (args, ["cmake", "--build", build, "--target", "ptwm_shared", "-j", jobs]):
        print("ptwm build:", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    for name in (_lib_name(), "libptwm.so"):
        path = os.path.join(build, name)
        if os.path.isfile(path):
            return os.path.realpath(path)
    raise RuntimeError(f"cmake finished but '{build}' has no {_lib_name()}")


class _Wheel:
    """A wheel being written: files plus their RECORD lines."""

    def __init__(self, path: str):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, arcname: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (mode | 0o100000) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        record = f"{dist_info}/RECORD"
        self.records.append(f"{record},,")
        info = zipfile.ZipInfo(record, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o100644 << 16
        self.zip.writestr(info, "\n".join(self.records) + "\n")
        self.zip.close()


def _package_files():
    """(archive name, path) of every module of the ptwm package."""
    root = os.path.join(HERE, NAME)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                path = os.path.join(dirpath, fn)
                yield os.path.relpath(path, HERE).replace(os.sep, "/"), path


def _write_dist_info(add, tag: str) -> None:
    di = _dist_info()
    add(f"{di}/METADATA", _metadata().encode())
    add(f"{di}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: ptwm_backend\nRoot-Is-Purelib: false\n"
                        f"Tag: {tag}\n").encode())
    add(f"{di}/top_level.txt", f"{NAME}\n".encode())


# -- PEP 517 hooks ----------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    di = os.path.join(metadata_directory, _dist_info())
    os.makedirs(di, exist_ok=True)

    def add(arcname, data):
        with open(os.path.join(metadata_directory, arcname), "wb") as f:
            f.write(data)
    _write_dist_info(add, _tag())
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tag = _tag()
    name = f"{NAME}-{_version()}-{tag}.whl"
    with tempfile.TemporaryDirectory(prefix="ptwm-build-") as tmp:
        library = _build_library(tmp, config_settings)
        with open(library, "rb") as f:
            lib_bytes = f.read()
        whl = _Wheel(os.path.join(wheel_directory, name))
        for arcname, path in _package_files():
            with open(path, "rb") as f:
                whl.add(arcname, f.read())
        whl.add(f"{NAME}/{_lib_name()}", lib_bytes, 0o755)
        _write_dist_info(whl.add, tag)
        whl.close(_dist_info())
    return name


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """`pip install -e ./python`: a .pth pointing at python/. Nothing is built; the
    package then loads $PTWM_LIBRARY or the checkout's build/libptwm.so."""
    tag = "py3-none-any"
    name = f"{NAME}-{_version()}-{tag}.whl"
    whl = _Wheel(os.path.join(wheel_directory, name))
    whl.add(f"__editable__.{NAME}.pth", (HERE + "\n").encode())
    _write_dist_info(whl.add, tag)
    whl.close(_dist_info())
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The Python sources only: building a wheel from it needs PTWM_SOURCE_DIR
    (a checkout with the C library) or PTWM_LIBRARY."""
    base = f"{NAME}-{_version()}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ("pyproject.toml", "README.md"):
            tar.add(os.path.join(HERE, rel), f"{base}/{rel}")
        for sub in ("_backend", NAME, "tests"):
            tar.add(os.path.join(HERE, sub), f"{base}/{sub}",
                    filter=lambda t: None if "__pycache__" in t.name else t)
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        pkg_info.size = len(data)
        import io
        tar.addfile(pkg_info, io.BytesIO(data))
    return name
