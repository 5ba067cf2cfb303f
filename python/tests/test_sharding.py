"""ptwm.sharding: the reference API, checked against the C library's own output."""

import array
import inspect
import json
import os
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from ptwm import Chain, PtwmError
from ptwm.sharding import (PtwmIndex, compress_ptwm_blob, plan_shards, read_sharded_ptwm,
                           shard_filename, write_ptwm_shard)

from _support import TempDirTest, synthetic_tensors



def decoded(blob: bytes) -> dict:
    with ptwm.open_bytes(blob) as f:
        return f.read_all()


def expected(tensors) -> dict:
    return {name: bytes(raw) for name, raw, _, _ in tensors}


class SignatureTest(unittest.TestCase):
    """Names, order and defaults exactly as the reference documents them."""

    def params(self, fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    def test_writer_signatures(self):
        tail = [("chains_per_tensor", None), ("method_hint", 3), ("emit_payload_hash", True),
                ("emit_plane_crc", True), ("streaming_chunk", None)]
        empty = inspect.Parameter.empty
        self.assertEqual(self.params(compress_ptwm_blob), [("tensors", empty)] + tail)
        self.assertEqual(self.params(write_ptwm_shard),
                         [("out_path", empty), ("tensors", empty)] + tail)

    def test_other_signatures(self):
        empty = inspect.Parameter.empty
        self.assertEqual(self.params(plan_shards), [("sized_tensors", empty),
                                                    ("max_shard_size", empty)])
        self.assertEqual(self.params(shard_filename), [("idx_one_based", empty),
                                                       ("total", empty), ("suffix", empty)])
        self.assertEqual(self.params(read_sharded_ptwm), [("model_dir", empty)])
        self.assertEqual([p[0] for p in self.params(PtwmIndex)],
                         ["total_size", "compressed_total_size", "weight_map"])
        self.assertEqual(PtwmIndex(1, 2).weight_map, {})
        a, b = PtwmIndex(1, 2), PtwmIndex(1, 2)
        a.weight_map["x"] = "model.ptwm"
        self.assertEqual(b.weight_map, {}, "weight_map default must not be shared")
        self.assertTrue(inspect.ismethod(PtwmIndex.read))


class CompressBlobTest(TempDirTest):
    def test_round_trip_every_dtype(self):
        tensors = synthetic_tensors()
        blob = compress_ptwm_blob(tensors)
        self.assertIsInstance(blob, bytes)
        self.assertEqual(decoded(blob), expected(tensors))
        with ptwm.open_bytes(blob) as f:
            self.assertEqual(f.names(), [t[0] for t in tensors])
            for name, raw, dtype, shape in tensors:
                info = f.info(name)
                self.assertEqual((info.dtype, info.shape, info.nbytes),
                                 (dtype, tuple(shape), len(raw)))
            f.verify()

    def test_file_bytes_equal_blob_bytes(self):
        tensors = synthetic_tensors()
        variants = [{}, {"method_hint": 2}, {"method_hint": 1, "emit_plane_crc": False},
                    {"emit_payload_hash": False}, {"streaming_chunk": 4096}]
        for kw in variants:
            with self.subTest(**kw):
                out = self.path("shard.ptwm")
                write_ptwm_shard(out, tensors, **kw)
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), compress_ptwm_blob(tensors, **kw))
        self.assertEqual(compress_ptwm_blob(tensors), compress_ptwm_blob(tensors))

    def test_every_method_round_trips(self):
        tensors = synthetic_tensors(seed=7)
        sizes = {}
        for method in range(1, 6):
            with self.subTest(method=method):
                blob = compress_ptwm_blob(tensors, method_hint=method)
                self.assertEqual(decoded(blob), expected(tensors))
                sizes[method] = len(blob)
        raw = sum(len(t[1]) for t in tensors)
        self.assertGreater(sizes[5], raw, "identity stores everything plus framing")
        self.assertLess(sizes[3], raw, "microscale compresses weight-like floats")

    def test_checks_can_be_turned_off(self):
        tensors = synthetic_tensors()
        full = compress_ptwm_blob(tensors)
        no_hash = compress_ptwm_blob(tensors, emit_payload_hash=False)
        no_crc = compress_ptwm_blob(tensors, emit_plane_crc=False)
        bare = compress_ptwm_blob(tensors, emit_payload_hash=False, emit_plane_crc=False)
        self.assertLess(len(no_hash), len(full))
        self.assertLess(len(no_crc), len(full))
        self.assertLess(len(bare), min(len(no_hash), len(no_crc)))
        for blob in (no_hash, no_crc, bare):
            self.assertEqual(decoded(blob), expected(tensors))

    def test_streaming_chunk(self):
        tensors = synthetic_tensors()
        small = compress_ptwm_blob(tensors, streaming_chunk=4096)
        self.assertNotEqual(small, compress_ptwm_blob(tensors))
        self.assertEqual(decoded(small), expected(tensors))
        with ptwm.open_bytes(small) as f:
            self.assertEqual(f.read_range("layer.0.weight", 4000, 600),
                             tensors[0][1][4000:4600])

    def test_chains_per_tensor(self):
        tensors = synthetic_tensors()
        standard = [[Chain.standard(t[2]).to_bytes()] for t in tensors]
        self.assertEqual(decoded(compress_ptwm_blob(tensors, standard)), expected(tensors))
        zstd = [[Chain.standard(t[2], "zstd").to_bytes()] for t in tensors]
        blob = compress_ptwm_blob(tensors, chains_per_tensor=zstd)
        self.assertEqual(decoded(blob), expected(tensors))
        with ptwm.open_bytes(blob) as f:
            self.assertIn("zstd", f.chain_text("layer.0.weight"))
        # Several candidates per tensor, given as Chain objects or bytes.
        several = [[Chain.standard(t[2], m) for m in (2, 3)] for t in tensors]
        self.assertEqual(decoded(compress_ptwm_blob(tensors, several)), expected(tensors))
        # The same through the file writer: the same bytes.
        out = self.path("c.ptwm")
        write_ptwm_shard(out, tensors, zstd)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), blob)

    def test_buffer_kinds(self):
        f32 = array.array("f", [0.5 * i for i in range(64)])
        raw = f32.tobytes()
        sources = {"bytes": raw, "bytearray": bytearray(raw), "memoryview": memoryview(raw),
                   "array": f32, "strided": memoryview(raw + raw).cast("B")[::1][:len(raw)]}
        for kind, src in sources.items():
            with self.subTest(kind=kind):
                blob = compress_ptwm_blob([("t", src, "float32", (64,))])
                self.assertEqual(decoded(blob), {"t": raw})
        # A non-contiguous view is copied once, not refused.
        doubled = bytes(b for b in raw for _ in (0, 1))
        view = memoryview(doubled)[::2]
        self.assertEqual(decoded(compress_ptwm_blob([("t", view, "U8", (len(raw),))])),
                         {"t": raw})

    def test_bad_arguments(self):
        good = synthetic_tensors()[:1]
        name, raw, dtype, shape = good[0]
        cases = {
            "short tuple": ([(name, raw, dtype)], {}),
            "name not str": ([(1, raw, dtype, shape)], {}),
            "bad dtype": ([(name, raw, "F33", shape)], {}),
            "size mismatch": ([(name, raw[:-4], dtype, shape)], {}),
            "negative dim": ([(name, raw, dtype, (-1,))], {}),
            "duplicate name": (good + good, {}),
            "chain count": (good, {"chains_per_tensor": []}),
            "method": (good, {"method_hint": 9}),
            "chunk": (good, {"streaming_chunk": -1}),
        }
        for what, (tensors, kw) in cases.items():
            with self.subTest(what):
                with self.assertRaises(ValueError) as cm:
                    compress_ptwm_blob(tensors, **kw)
                self.assertIsInstance(cm.exception, PtwmError)
                self.assertTrue(str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            compress_ptwm_blob([(name, raw[:-4], dtype, shape)])
        self.assertIn(name, str(cm.exception), "the C message names the tensor")
        with self.assertRaises(TypeError):
            compress_ptwm_blob([(name, "not bytes", dtype, shape)])
        with self.assertRaises(PtwmError):
            compress_ptwm_blob(good, chains_per_tensor=[[b"\x01"]])

    def test_write_errors(self):
        tensors = synthetic_tensors()[:1]
        with self.assertRaises(OSError):
            write_ptwm_shard(self.path("no", "such", "dir", "x.ptwm"), tensors)
        with self.assertRaises(PtwmError):
            write_ptwm_shard(self.path("no", "such", "dir", "x.ptwm"), tensors)


class PlanTest(unittest.TestCase):
    def test_plan_shards(self):
        self.assertEqual(plan_shards([], 10), [])
        t = [("a", 3), ("b", 3), ("c", 3)]
        self.assertEqual(plan_shards(t, 6), [[("a", 3), ("b", 3)], [("c", 3)]])
        self.assertEqual(plan_shards(t, 9), [t])
        self.assertEqual(plan_shards(t, 3), [[x] for x in t])
        big = [("a", 1), ("big", 10), ("b", 1), ("c", 1)]
        self.assertEqual(plan_shards(big, 5), [[("a", 1)], [("big", 10)], [("b", 1), ("c", 1)]])
        zero = [("z", 0), ("a", 5), ("y", 0)]
        self.assertEqual(sum(len(s) for s in plan_shards(zero, 5)), 3)
        self.assertEqual([n for s in plan_shards(zero, 5) for n, _ in s], ["z", "a", "y"])

    def test_plan_keeps_order_and_limit(self):
        sizes = [(f"t{i}", (i * 37) % 11 + 1) for i in range(50)]
        shards = plan_shards(sizes, 20)
        self.assertEqual([x for s in shards for x in s], sizes)
        for s in shards:
            self.assertTrue(sum(n for _, n in s) <= 20 or len(s) == 1)
        for a, b in zip(shards, shards[1:]):   # greedy: the next tensor did not fit
            self.assertGreater(sum(n for _, n in a) + b[0][1], 20)

    def test_plan_bad_arguments(self):
        for bad in ([("a", -1)], [("a",)], [("a", "3")]):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    plan_shards(bad, 10)
        with self.assertRaises(ValueError):
            plan_shards([("a", 1)], -5)

    def test_shard_filename(self):
        self.assertEqual(shard_filename(1, 3, "ptwm"), "model-00001-of-00003.ptwm")
        self.assertEqual(shard_filename(3, 3, "safetensors"), "model-00003-of-00003.safetensors")
        self.assertEqual(shard_filename(12, 345, "ptwm"), "model-00012-of-00345.ptwm")
        for idx, total in [(0, 3), (4, 3), (1, 0), (-1, 3)]:
            with self.subTest(idx=idx, total=total):
                with self.assertRaises(ValueError):
                    shard_filename(idx, total, "ptwm")


class IndexTest(TempDirTest):
    def test_write_read_round_trip(self):
        wm = {"b.weight": "model-00002-of-00002.ptwm", "a.weight": "model-00001-of-00002.ptwm",
              "a.bias": "model-00001-of-00002.ptwm"}
        idx = PtwmIndex(total_size=1234, compressed_total_size=567, weight_map=wm)
        path = self.path("model.ptwm.index.json")
        idx.write(path)
        back = PtwmIndex.read(path)
        self.assertEqual(back, idx)
        self.assertEqual(list(back.weight_map), list(wm), "entries keep their order")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        self.assertEqual(doc["weight_map"], wm)
        self.assertEqual(doc["metadata"]["total_size"], 1234)
        self.assertEqual(doc["metadata"]["compressed_total_size"], 567)
        empty = PtwmIndex(0, 0)
        empty.write(path)
        self.assertEqual(PtwmIndex.read(path), empty)

    def test_read_errors(self):
        with self.assertRaises(FileNotFoundError):
            PtwmIndex.read(self.path("missing.json"))
        bad = self.path("bad.json")
        for text, code in [("{", "PTWM_ERR_JSON"), ('{"weight_map": []}', "PTWM_ERR_SCHEMA")]:
            with self.subTest(text=text):
                with open(bad, "w") as f:
                    f.write(text)
                with self.assertRaises(PtwmError) as cm:
                    PtwmIndex.read(bad)
                self.assertEqual(cm.exception.name, code)
                self.assertIn("bad.json", str(cm.exception))

    def test_unsafe_shard_name_is_refused(self):
        for shard in ["../x.ptwm", "a/b.ptwm", "x.bin", ""]:
            with self.subTest(shard=shard):
                with self.assertRaises(ValueError):
                    PtwmIndex(1, 1, {"t": shard}).write(self.path("i.json"))


def write_sharded(root: str, tensors, max_shard_size: int) -> PtwmIndex:
    """The reference way to write a sharded checkpoint with this API."""
    by_name = {t[0]: t for t in tensors}
    plan = plan_shards([(t[0], len(t[1])) for t in tensors], max_shard_size)
    weight_map, coded = {}, 0
    for k, shard in enumerate(plan, 1):
        fname = shard_filename(k, len(plan), "ptwm")
        write_ptwm_shard(os.path.join(root, fname), [by_name[n] for n, _ in shard])
        coded += os.path.getsize(os.path.join(root, fname))
        weight_map.update({n: fname for n, _ in shard})
    idx = PtwmIndex(sum(len(t[1]) for t in tensors), coded, weight_map)
    idx.write(os.path.join(root, "model.ptwm.index.json"))
    return idx


class ReadShardedTest(TempDirTest):
    def test_single_model_ptwm(self):
        tensors = synthetic_tensors()
        write_ptwm_shard(self.path("model.ptwm"), tensors)
        self.assertEqual(read_sharded_ptwm(self.tmp), expected(tensors))

    def test_sharded_directory(self):
        tensors = synthetic_tensors()
        idx = write_sharded(self.tmp, tensors, 3000)
        self.assertGreater(len(set(idx.weight_map.values())), 2)
        got = read_sharded_ptwm(self.tmp)
        self.assertEqual(got, expected(tensors))
        from pathlib import Path
        self.assertEqual(read_sharded_ptwm(Path(self.tmp)), got)

    def test_index_wins_over_model_ptwm(self):
        tensors = synthetic_tensors()
        write_sharded(self.tmp, tensors[:2], 1 << 20)
        write_ptwm_shard(self.path("model.ptwm"), tensors[2:])
        self.assertEqual(set(read_sharded_ptwm(self.tmp)), {t[0] for t in tensors[:2]})

    def test_neither_file_is_file_not_found(self):
        with self.assertRaises(FileNotFoundError):
            read_sharded_ptwm(self.tmp)
        with self.assertRaises(FileNotFoundError):
            read_sharded_ptwm(self.path("does-not-exist"))
        write_ptwm_shard(self.path("other.ptwm"), synthetic_tensors()[:1])
        with self.assertRaises(FileNotFoundError):
            read_sharded_ptwm(self.tmp)

    def test_missing_shard_is_file_not_found(self):
        idx = write_sharded(self.tmp, synthetic_tensors(), 3000)
        shards = sorted(set(idx.weight_map.values()))
        os.remove(self.path(shards[1]))
        with self.assertRaises(FileNotFoundError) as cm:
            read_sharded_ptwm(self.tmp)
        self.assertIsInstance(cm.exception, PtwmError)
        self.assertIn(shards[1], str(cm.exception))

    def test_tensor_in_two_shards_is_value_error(self):
        t = synthetic_tensors()
        s1, s2 = "model-00001-of-00002.ptwm", "model-00002-of-00002.ptwm"
        write_ptwm_shard(self.path(s1), [t[0], t[1]])
        write_ptwm_shard(self.path(s2), [t[1], t[2]])   # t[1] is in both
        coded = os.path.getsize(self.path(s1)) + os.path.getsize(self.path(s2))
        raw = sum(len(x[1]) for x in (t[0], t[1], t[1], t[2]))
        PtwmIndex(raw, coded, {t[0][0]: s1, t[1][0]: s1, t[2][0]: s2}).write(
            self.path("model.ptwm.index.json"))
        with self.assertRaises(ValueError) as cm:
            read_sharded_ptwm(self.tmp)
        self.assertIsInstance(cm.exception, PtwmError)
        self.assertIn(t[1][0], str(cm.exception))

    def test_damaged_shard_is_ptwm_error_with_c_message(self):
        tensors = synthetic_tensors()
        write_ptwm_shard(self.path("model.ptwm"), tensors)
        with open(self.path("model.ptwm"), "r+b") as f:
            data = bytearray(f.read())
            # Flip a byte inside the first tensor's coded payload (past the header).
            blob_len = len(data)
            data[blob_len // 3] ^= 0x5A
            f.seek(0)
            f.write(data)
        with self.assertRaises(PtwmError) as cm:
            read_sharded_ptwm(self.tmp)
        self.assertNotIsInstance(cm.exception, (ValueError, FileNotFoundError))
        self.assertTrue(cm.exception.name.startswith("PTWM_ERR_"))
        self.assertIn("model.ptwm", str(cm.exception))

    def test_index_disagreeing_with_shards(self):
        tensors = synthetic_tensors()
        idx = write_sharded(self.tmp, tensors, 1 << 20)
        PtwmIndex(idx.total_size + 1, idx.compressed_total_size, idx.weight_map).write(
            self.path("model.ptwm.index.json"))
        with self.assertRaises(PtwmError) as cm:
            read_sharded_ptwm(self.tmp)
        self.assertEqual(cm.exception.name, "PTWM_ERR_INDEX")


if __name__ == "__main__":
    unittest.main()
