"""The first Python example of python/README.md runs as written."""

import contextlib
import io
import os
import re
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)

from _support import TESTS, TempDirTest


class ReadmeTest(TempDirTest):
    def test_first_example_runs(self):
        with open(os.path.join(os.path.dirname(TESTS), "README.md"), encoding="utf-8") as f:
            blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
        self.assertTrue(blocks, "README.md has a python example")
        cwd = os.getcwd()
        os.chdir(self.tmp)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(blocks[0], "README.md example", "exec"), {"__name__": "example"})
        finally:
            os.chdir(cwd)
        self.assertTrue(os.path.isfile(self.path("model.ptwm.index.json")))
        self.assertIn("split(e8m23) > entropy(*:zstd) True", out.getvalue(),
                      "the output the README's comment shows")


if __name__ == "__main__":
    unittest.main()
