"""ptwm.distributed on a LocalCluster of two worker processes (Debian's
python3-distributed): partitioned compression gives the directory one process
writes, byte for byte, also when a worker is killed in the middle of its part
and Dask retries it; parts compressed by hand join with assemble_checkpoint."""

from __future__ import annotations

import filecmp
import logging
import os
import unittest

from _support import TempDirTest, corpus_file, ptwm


def same_tree(a: str, b: str) -> bool:
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(
        same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


class SourceTest(TempDirTest):
    """A Hugging Face directory of real weights and its one-process compression."""

    def setUp(self):
        super().setUp()
        # A Hugging Face directory of real weights in nine shards, with a config.
        packed = self.path("packed")
        ptwm.compress_checkpoint(corpus_file("emotion.f32.safetensors"), packed,
                                 max_shard_size=100000)
        self.src = self.path("hf")
        ptwm.decompress_checkpoint(packed, self.src, max_shard_size=100000)
        with open(os.path.join(self.src, "config.json"), "w") as f:
            f.write('{"model": "emotion"}\n')
        self.whole = self.path("whole")
        ptwm.compress_checkpoint(self.src, self.whole)


class PartsTest(SourceTest):
    def test_parts_by_hand(self):
        out = self.path("by-hand")
        for k in (3, 1):
            ptwm.compress_checkpoint(self.src, out, part=(k, 3))
        with self.assertRaisesRegex(ptwm.PtwmError, "part 2 of 3 is missing"):
            ptwm.assemble_checkpoint(out)
        self.assertFalse(os.path.exists(os.path.join(out, "model.ptwm.index.json")))
        ptwm.compress_checkpoint(self.src, out, part=(2, 3))
        ptwm.assemble_checkpoint(out)
        self.assertTrue(same_tree(self.whole, out))
        back = self.path("back")
        for k in (1, 2):
            ptwm.decompress_checkpoint(out, back, part=(k, 2))
        ptwm.assemble_checkpoint(back)
        self.assertTrue(same_tree(self.src, back))
        with self.assertRaises(ptwm.PtwmValueError):
            ptwm.compress_checkpoint(self.src, self.path("bad"), part=(4, 3))


class DaskTest(SourceTest):
    def setUp(self):
        super().setUp()
        from distributed import Client, LocalCluster
        self.marker = self.path("killed-once")
        # Read by the workers when they start: part 2's first attempt kills
        # its worker process while it runs.
        os.environ["PTWM_TEST_KILL_PART"] = "2:" + self.marker
        self.addCleanup(os.environ.pop, "PTWM_TEST_KILL_PART", None)
        # Worker logs (the killed worker's restart, close-time noise of this
        # Dask version) would bury the test's own output.
        self.cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                    dashboard_address=":0", silence_logs=logging.CRITICAL)
        self.addCleanup(self.cluster.close)
        self.client = Client(self.cluster)
        self.addCleanup(self.client.close)

    def test_dask_with_a_killed_worker(self):
        from ptwm import distributed
        out = self.path("dask")
        distributed.compress_checkpoint(self.src, out, self.client, parts=3, threads=1)
        self.assertTrue(os.path.exists(self.marker), "part 2 never ran its first attempt")
        self.assertTrue(same_tree(self.whole, out))
        # Default part count: the cluster's worker threads.
        out2 = self.path("dask-default")
        distributed.compress_checkpoint(self.src, out2, self.client)
        self.assertTrue(same_tree(self.whole, out2))
        with self.assertRaises(ValueError):
            distributed.compress_checkpoint(self.src, self.path("x"), self.client, part=(1, 2))
        # And back: the original directory, byte for byte.
        back = self.path("back")
        distributed.decompress_checkpoint(out, back, self.client, parts=2)
        self.assertTrue(same_tree(self.src, back))


if __name__ == "__main__":
    unittest.main()
