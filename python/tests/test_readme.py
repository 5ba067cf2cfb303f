"""The first Python example of python/README.md, and its PyTorch example, run as written."""

import contextlib
import io
import os
import re
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)

from _support import TESTS, TempDirTest


def python_blocks() -> list:
    with open(os.path.join(os.path.dirname(TESTS), "README.md"), encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


class ReadmeTest(TempDirTest):
    def run_block(self, block: str) -> str:
        """Run an example in the temporary directory; return what it printed."""
        cwd = os.getcwd()
        os.chdir(self.tmp)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(block, "README.md example", "exec"), {"__name__": "example"})
        finally:
            os.chdir(cwd)
        return out.getvalue()

    def test_first_example_runs(self):
        blocks = python_blocks()
        self.assertTrue(blocks, "README.md has a python example")
        out = self.run_block(blocks[0])
        self.assertTrue(os.path.isfile(self.path("model.ptwm.index.json")))
        self.assertIn("split(e8m23) > entropy(*:zstd) True", out,
                      "the output the README's comment shows")

    def test_pytorch_example_runs(self):
        import torch  # noqa: F401 (required: scripts/deps.sh installs it)
        blocks = [b for b in python_blocks() if "import ptwm.torch as st" in b]
        self.assertEqual(len(blocks), 1, "README.md has one PyTorch example")
        out = self.run_block(blocks[0])
        self.assertIn("['embed.weight', 'head.bias'] {'format': 'pt'}", out)
        self.assertIn("model.ptwm.index.json", os.listdir(self.path("sharded")))

if __name__ == "__main__":
    unittest.main()
