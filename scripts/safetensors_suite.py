#!/usr/bin/python3
"""Run safetensors' own Python tests against ptwm, only their imports rewritten.

Usage: safetensors_suite.py SAFETENSORS [--commit SHA] [--keep] [-v]

SAFETENSORS is a clone of huggingface/safetensors (a work tree or a bare git
directory). The four test files of bindings/python/tests named in FILES are
taken at the pinned commit (git show, nothing is checked out), their imports
of safetensors, safetensors.torch and safetensors.numpy rewritten to ptwm,
ptwm.torch and ptwm.numpy (names ptwm does not have, the low-level
TensorSpec/serialize binding, are dropped from the import), and run in a
temporary directory with unittest: test classes and module-level test_*
functions, as pytest collects them. Not a CI step (CI has no network to fetch
the clone); scripts/safetensors_suite.sh runs it against the checkout's build.

Prints one line per test and the counts. Tests listed in NOT_APPLICABLE are
run and shown but counted apart, with the reason; the exit status is 1 when an
applicable test fails.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

PINNED = "24b0b2857fef49be734b9ab72ce97c09bb25f5b9"
TESTS_DIR = "bindings/python/tests"
FILES = ["test_pt_comparison.py", "test_simple.py", "test_pt_model.py", "test_multithreaded.py"]

# Test id -> why it does not apply to ptwm (ptwm writes .ptwm, compressed).
_BYTES = "compares safetensors' exact file bytes (ptwm writes .ptwm containers)"
_LOW = "uses safetensors' low-level Rust binding (TensorSpec, serialize)"
NOT_APPLICABLE = {
    "test_simple.TestCase.test_serialization": _BYTES,
    "test_simple.TestCase.test_serialization_forces_alignment": _BYTES,
    "test_simple.TestCase.test_serialization_metadata": _BYTES,
    "test_simple.TestCase.test_serialization_no_big_endian": _BYTES,
    "test_simple.ReadmeTestCase.test_exception": _LOW,
    "test_pt_comparison.TorchTestCase.test_serialization": _BYTES,
    "test_pt_comparison.TorchTestCase.test_complex": _BYTES,
    "test_pt_comparison.TorchTestCase.test_in_memory": _BYTES,
    "test_pt_model.TorchModelTestCase.test_save": _BYTES + " past offset 192",
}

_MODULES = {"safetensors": "ptwm", "safetensors.torch": "ptwm.torch",
            "safetensors.numpy": "ptwm.numpy"}


def rewrite_imports(source: str, available) -> str:
    """source with each import of safetensors(.torch|.numpy) made one of ptwm's.

    available(module, name) says whether ptwm's module has the name; names it
    lacks are dropped from a `from ... import` (a test using one then fails,
    and is listed in NOT_APPLICABLE). Nothing but import statements changes."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _MODULES and node.level == 0:
            target = _MODULES[node.module]
            names = [a for a in node.names if available(target, a.name)]
            text = ""
            if names:
                text = f"from {target} import " + ", ".join(
                    a.name + (f" as {a.asname}" if a.asname else "") for a in names)
            edits.append((node, text))
        elif isinstance(node, ast.Import) and any(a.name in _MODULES for a in node.names):
            parts = [_MODULES.get(a.name, a.name) + (f" as {a.asname}" if a.asname else "")
                     for a in node.names]
            edits.append((node, "import " + ", ".join(parts)))
    for node, text in sorted(edits, key=lambda e: e[0].lineno, reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        indent = lines[first][:node.col_offset]
        tail = lines[last][node.end_col_offset:]
        body = indent + (text or "pass") + tail
        lines[first:last + 1] = [body if body.endswith("\n") else body + "\n"]
    return "".join(lines)


def _available(module: str, name: str) -> bool:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    return hasattr(mod, name)


def fetch_tests(repo: str, commit: str, out_dir: str) -> None:
    """Write FILES at `commit` of the clone `repo` into out_dir."""
    for name in FILES:
        r = subprocess.run(["git", "-C", repo, "show", f"{commit}:{TESTS_DIR}/{name}"],
                           capture_output=True)
        if r.returncode:
            sys.exit(f"safetensors_suite: cannot read {TESTS_DIR}/{name} at {commit} in "
                     f"'{repo}': {r.stderr.decode().strip()} (is it a clone of "
                     f"huggingface/safetensors holding that commit? git -C {repo} fetch "
                     f"origin {commit})")
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(r.stdout)


def _collect(path: str):
    """A module's tests as pytest finds them: TestCase methods and test_* functions."""
    name = os.path.splitext(os.path.basename(path))[0]
    with open(path, encoding="utf-8") as f:
        source = rewrite_imports(f.read(), _available)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    for attr in sorted(vars(mod)):
        fn = getattr(mod, attr)
        if attr.startswith("test") and callable(fn) and not isinstance(fn, type):
            case = unittest.FunctionTestCase(fn)
            case.id = (lambda a=attr: f"{name}.{a}")
            suite.addTest(case)
    return suite


def _flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _flatten(t)
        else:
            yield t


class _Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = []   # (id, "pass" | "fail" | "skip", detail)

    def addSuccess(self, test):
        self.outcomes.append((test.id(), "pass", ""))

    def addFailure(self, test, err):
        self.outcomes.append((test.id(), "fail", self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        self.outcomes.append((test.id(), "fail", self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        self.outcomes.append((test.id(), "skip", reason))


def _run(tmp: str):
    """Run FILES (in tmp/tests) from tmp; the outcomes and the seconds taken."""
    tests = os.path.join(tmp, "tests")
    here = os.getcwd()
    os.chdir(tmp)   # the tests write ./tests/data/... and ./out_*.safetensors
    sys.path.insert(0, tests)
    result = _Result()
    t0 = time.monotonic()
    try:
        for name in FILES:
            try:
                suite = _collect(os.path.join(tests, name))
            except Exception as e:   # an import a rewrite cannot satisfy
                result.outcomes.append((name[:-3], "fail", f"collecting: {e!r}"))
                continue
            for case in _flatten(suite):
                case.run(result)
    finally:
        os.chdir(here)
    return result.outcomes, time.monotonic() - t0


def _report(outcomes, seconds: float, verbose: bool) -> int:
    """Print each outcome and the counts; return the applicable failures."""
    counts = {"pass": 0, "fail": 0, "skip": 0}
    na = []
    for test_id, outcome, detail in outcomes:
        if test_id in NOT_APPLICABLE:
            na.append((test_id, outcome, detail))
            continue
        counts[outcome] += 1
        print(f"{outcome.upper():4}  {test_id}" + (f"  ({detail})" if outcome == "skip" else ""))
        if outcome == "fail":
            text = detail.rstrip().splitlines()
            print("\n".join("      " + s for s in (text if verbose else text[-1:])))
    print("\nnot applicable (run, not counted):")
    for test_id, outcome, detail in na:
        print(f"  {outcome:4}  {test_id}: {NOT_APPLICABLE[test_id]}")
        if outcome == "fail" and verbose:
            print("\n".join("        " + s for s in detail.rstrip().splitlines()[-3:]))
    for test_id in sorted(set(NOT_APPLICABLE) - {t for t, _, _ in na}):
        print(f"  (absent at this commit) {test_id}")
    print(f"\napplicable: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped; not applicable: {len(na)}  ({seconds:.1f} s)")
    return counts["fail"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("safetensors", help="a clone of huggingface/safetensors (work tree or bare)")
    ap.add_argument("--commit", default=PINNED, help=f"the commit to test at (default {PINNED[:7]})")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failure's traceback")
    args = ap.parse_args(argv)

    import ptwm
    print(f"ptwm {ptwm.__version__} from {os.path.dirname(ptwm.__file__)}, "
          f"library {ptwm.library_path}")
    print(f"safetensors tests at {args.commit[:12]} from {args.safetensors}")
    tmp = tempfile.mkdtemp(prefix="ptwm-st-suite-")
    try:
        os.makedirs(os.path.join(tmp, "tests", "data"))
        fetch_tests(os.path.abspath(args.safetensors), args.commit, os.path.join(tmp, "tests"))
        failed = _report(*_run(tmp), args.verbose)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
