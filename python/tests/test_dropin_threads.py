"""Drop-in for safetensors: threads. One safe_open handle read from many
threads at once, several handles on one file, and threads each saving and
loading their own files, every result checked against the tensors saved."""

import os
import threading
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import TempDirTest

import numpy as np
import torch
import ptwm.numpy as pn
import ptwm.torch as pt

THREADS = 6


def run_threads(target, n=THREADS):
    """Run target(i) in n threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors = []

    def body(i):
        try:
            barrier.wait(timeout=60)
            target(i)
        except BaseException as e:   # reported in the main thread
            errors.append(e)
    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    if errors:
        raise errors[0]


class ThreadsTest(TempDirTest):
    def setUp(self):
        super().setUp()
        g = torch.Generator().manual_seed(2)
        # Big enough for several chunks a tensor, so decodes overlap in time.
        self.sd = {f"layer{i}.weight": torch.randn(512, 1024, generator=g) * 0.02
                   for i in range(3)}
        self.sd["ids"] = torch.arange(5000, dtype=torch.int64)
        pt.save_file(self.sd, self.path("m.ptwm"))

    def test_one_handle_many_threads(self):
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            def read(i):
                for k in range(4):
                    name = f"layer{(i + k) % 3}.weight"
                    self.assertTrue(torch.equal(f.get_tensor(name), self.sd[name]))
                    rows = slice(37 * i, 37 * i + 100, k + 1)
                    self.assertTrue(torch.equal(f.get_slice(name)[rows], self.sd[name][rows]))
                self.assertEqual(f.keys(), sorted(self.sd))
            run_threads(read)

    def test_several_handles_one_file(self):
        def read(i):
            with ptwm.safe_open(self.path("m.ptwm"), framework="pt" if i % 2 else "np") as f:
                got = f.get_tensors()
            for k, v in self.sd.items():
                g = got[k] if i % 2 else torch.from_numpy(got[k])
                self.assertTrue(torch.equal(g, v), k)
        run_threads(read)

    def test_threads_saving_and_loading_their_own_files(self):
        arrays = {"a": np.random.default_rng(3).standard_normal((300, 200)),
                  "b": np.array(7.0), "c": np.arange(999, dtype=np.int32)}

        def work(i):
            for k in range(3):
                path = self.path(f"t{i}-{k}.ptwm")
                if i % 2:
                    pt.save_file(self.sd, path)
                    got = pt.load_file(path)
                    self.assertTrue(all(torch.equal(got[n], v) for n, v in self.sd.items()))
                else:
                    pn.save_file(arrays, path)
                    got = pn.load_file(path)
                    self.assertTrue(all(np.array_equal(got[n], v) for n, v in arrays.items()))
                os.remove(path)
        run_threads(work)


if __name__ == "__main__":
    unittest.main()
