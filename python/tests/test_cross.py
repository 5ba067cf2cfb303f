"""Cross-checks with the C side: the C API's bytes, and the C CLI reading what
Python wrote and the reverse, on real weights from the corpus."""

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm.sharding import (PtwmIndex, compress_ptwm_blob, plan_shards, read_sharded_ptwm,
                           record_files, shard_filename, write_ptwm_shard)

from _support import REPO, TESTS, TempDirTest, corpus_file, corpus_tensors, run_cli


CORPUS = ["emotion.bf16.safetensors", "emotion.f32.safetensors",
          "handlandmark-full.f16.safetensors", "handtrack.u8.safetensors"]


class CReference:
    """tests/c_reference.c compiled against the libptwm this package loaded."""
    exe = None
    problem = None

    @classmethod
    def build(cls) -> str:
        if cls.exe or cls.problem:
            if cls.problem:
                raise AssertionError(cls.problem)
            return cls.exe
        tmp = tempfile.mkdtemp(prefix="ptwm-cref-")
        atexit.register(shutil.rmtree, tmp, True)   # also when tearDownModule never runs
        lib = os.path.realpath(ptwm.library_path)
        # The executable finds the library through an rpath to a directory whose
        # libptwm.so.0 (the SONAME) is the very file Python loaded.
        os.symlink(lib, os.path.join(tmp, "libptwm.so.0"))
        os.symlink(lib, os.path.join(tmp, "libptwm.so"))
        exe = os.path.join(tmp, "c_reference")
        cc = os.environ.get("CC", "cc")
        cmd = [cc, "-std=c11", "-O1", "-I", os.path.join(REPO, "include"),
               os.path.join(TESTS, "c_reference.c"), "-o", exe, "-L", tmp, "-lptwm",
               f"-Wl,-rpath,{tmp}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            cls.problem = f"cannot build the C reference ({' '.join(cmd)}):\n{proc.stderr}"
            raise AssertionError(cls.problem)
        cls.exe = exe
        return exe

    @classmethod
    def blob(cls, src: str, out: str, method: int = 3, chunk: int = 0,
             chains: bool = False) -> bytes:
        args = [cls.build(), src, out, str(method), str(chunk)]
        if chains:
            args.append("standard-chains")
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise AssertionError(f"c_reference failed: {proc.stderr}")
        with open(out, "rb") as f:
            return f.read()


class SameBytesAsCApiTest(TempDirTest):
    def test_compress_ptwm_blob_equals_c_api(self):
        for name in CORPUS:
            src = corpus_file(name)
            tensors = corpus_tensors(name)
            for method, chunk in [(3, 0), (2, 0), (3, 65536)]:
                with self.subTest(name=name, method=method, chunk=chunk):
                    c = CReference.blob(src, self.path("c.ptwm"), method, chunk)
                    py = compress_ptwm_blob(tensors, method_hint=method,
                                            streaming_chunk=chunk or None)
                    self.assertEqual(len(py), len(c))
                    self.assertEqual(py, c)

    def test_chains_per_tensor_equals_c_api(self):
        name = "emotion.bf16.safetensors"
        tensors = corpus_tensors(name)
        for method in (1, 4):
            with self.subTest(method=method):
                c = CReference.blob(corpus_file(name), self.path("c.ptwm"), method, 0, True)
                chains = [[ptwm.Chain.standard(t[2], method).to_bytes()] for t in tensors]
                self.assertEqual(compress_ptwm_blob(tensors, chains, method_hint=method), c)

    def test_shard_file_equals_c_api(self):
        name = "emotion.f32.safetensors"
        out = self.path("py.ptwm")
        write_ptwm_shard(out, corpus_tensors(name))
        with open(out, "rb") as f:
            self.assertEqual(f.read(), CReference.blob(corpus_file(name), self.path("c.ptwm")))


class CliReadsPythonTest(TempDirTest):
    def test_cli_verifies_and_inspects_a_python_shard(self):
        name = "emotion.bf16.safetensors"
        tensors = corpus_tensors(name)
        shard = self.path("model.ptwm")
        write_ptwm_shard(shard, tensors)
        run_cli("verify", shard)
        text = run_cli("inspect", shard).stdout
        for t in tensors[:5]:
            self.assertIn(t[0], text)
        doc = json.loads(run_cli("inspect", shard, "--json").stdout)
        self.assertIn(tensors[0][0], json.dumps(doc))
        # And the CLI decompresses it to safetensors holding the same tensors.
        run_cli("decompress", shard, "-o", self.path("out"))
        outs = [p for p in os.listdir(self.path("out")) if p.endswith(".safetensors")]
        self.assertEqual(len(outs), 1)
        got = ptwm.read_safetensors(self.path("out", outs[0]))
        self.assertEqual(got, {t[0]: t[1] for t in tensors})

    def test_cli_reads_a_python_sharded_directory(self):
        tensors = corpus_tensors("emotion.f32.safetensors")
        plan = plan_shards([(t[0], len(t[1])) for t in tensors], 200_000)
        self.assertGreater(len(plan), 2)
        by_name = {t[0]: t for t in tensors}
        wm, coded = {}, 0
        for k, shard in enumerate(plan, 1):
            fname = shard_filename(k, len(plan), "ptwm")
            write_ptwm_shard(self.path(fname), [by_name[n] for n, _ in shard])
            coded += os.path.getsize(self.path(fname))
            wm.update({n: fname for n, _ in shard})
        PtwmIndex(sum(len(t[1]) for t in tensors), coded, wm).write(
            self.path("model.ptwm.index.json"))
        # Without a file record, the index's bytes cannot be verified.
        self.assertEqual(run_cli("verify", self.tmp, check=False).returncode, 1)
        record_files(self.tmp)
        run_cli("verify", self.tmp)
        self.assertIn(tensors[-1][0], run_cli("inspect", self.tmp).stdout)
        self.assertEqual(read_sharded_ptwm(self.tmp), {t[0]: t[1] for t in tensors})

    def test_cli_rejects_a_damaged_python_shard(self):
        shard = self.path("model.ptwm")
        write_ptwm_shard(shard, corpus_tensors("emotion.bf16.safetensors"))
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 0x40]))
        proc = run_cli("verify", shard, check=False)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("ptwm:", proc.stderr)


class PythonReadsCliTest(TempDirTest):
    def test_python_reads_cli_output(self):
        for name in CORPUS:
            with self.subTest(name=name):
                src = corpus_file(name)
                out = self.path(name + ".d")
                run_cli("compress", src, "-o", out)
                raw = ptwm.read_safetensors(src)
                self.assertEqual(read_sharded_ptwm(out), raw)
                with ptwm.open(os.path.join(out, "model.ptwm")) as f:
                    f.verify()
                    self.assertEqual(f.source_name, name)
                    self.assertEqual(f.read_all(), raw)
                # The same C function behind both: the same file.
                mine = self.path(name + ".py")
                ptwm.compress_checkpoint(src, mine)
                with open(os.path.join(out, "model.ptwm"), "rb") as a, \
                        open(os.path.join(mine, "model.ptwm"), "rb") as b:
                    self.assertEqual(a.read(), b.read())

    def test_python_reads_cli_shards(self):
        src = corpus_file("handlandmark-full.f16.safetensors")
        out = self.path("sharded")
        run_cli("compress", src, "-o", out, "--max-shard-size", "1MB")
        idx = PtwmIndex.read(os.path.join(out, "model.ptwm.index.json"))
        shards = sorted(set(idx.weight_map.values()))
        self.assertGreater(len(shards), 2)
        self.assertEqual(shards[0], shard_filename(1, len(shards), "ptwm"))
        raw = ptwm.read_safetensors(src)
        self.assertEqual(list(idx.weight_map), list(raw))
        self.assertEqual(read_sharded_ptwm(out), raw)
        self.assertEqual(idx.total_size, sum(map(len, raw.values())))
        self.assertEqual(idx.compressed_total_size,
                         sum(os.path.getsize(os.path.join(out, s)) for s in shards))


def tearDownModule():
    if CReference.exe:
        shutil.rmtree(os.path.dirname(CReference.exe), True)
        CReference.exe = None   # other modules' tests build it again when they need it


if __name__ == "__main__":
    unittest.main()
