"""ptwm.torch: safetensors.torch's API over .ptwm. Round trips compare bits
(NaN payloads, -0.0), a saved file equals the C API's from the same bytes,
and real weights from tests/corpus go through torch and back."""

import os
import shutil
import subprocess
import sys
import tracemalloc
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import REPO, TempDirTest, parse_safetensors, safetensors_order

# The package works without torch; these tests need it (scripts/deps.sh
# installs it), and fail rather than skip without it.
import torch
import ptwm.torch as pt

REAL = os.path.join(REPO, "tests", "corpus", "emotion.bf16.safetensors")


def bits(t) -> bytes:
    """A tensor's bytes (scalars and empties included), for bit-exact comparison."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def random_tensor(dtype, shape, seed):
    """Every bit pattern is possible (NaNs with payloads, -0.0, subnormals)."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for d in shape:
        n *= d
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).to(torch.bool)
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (n * size,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


def specials(dtype):
    """NaNs with payloads (quiet, signalling, negative), +-0, +-inf, as raw bits."""
    pats = {torch.float32: (torch.int32, [0x7fc00001, -0x5edcba9, 0x7f800001, -0x80000000, 0,
                                          0x7f800000, -0x800000]),
            torch.float64: (torch.int64, [0x7ff8000000000123, 0x7ff0000000000001,
                                          -0x8000000000000000, 0x7ff0000000000000]),
            torch.float16: (torch.int16, [0x7e01, 0x7c01, -0x8000, -0x0201, 0x7c00]),
            torch.bfloat16: (torch.int16, [0x7fc1, 0x7f81, -0x8000, -0x003f, 0x7f80])}
    itype, values = pats[dtype]
    return torch.tensor(values, dtype=itype).view(dtype)


# torch dtypes that safetensors names, present in this torch (float8 from 2.1, uint16.. 2.3).
DTYPE_NAMES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
               "uint8", "bool", "complex64", "uint16", "uint32", "uint64", "float8_e4m3fn",
               "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]


class TorchRoundTripTest(TempDirTest):
    def assertSameTensors(self, got, want):
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertEqual(got[k].dtype, want[k].dtype, k)
            self.assertEqual(tuple(got[k].shape), tuple(want[k].shape), k)
            self.assertEqual(bits(got[k]), bits(want[k]), k)

    def test_every_dtype_bit_exact_through_file_and_bytes(self):
        present = [getattr(torch, n) for n in DTYPE_NAMES if hasattr(torch, n)]
        self.assertGreaterEqual(len(present), 11)
        sd = {f"t.{str(dt)[6:]}": random_tensor(dt, (37, 23), i) for i, dt in enumerate(present)}
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            sd[f"special.{str(dt)[6:]}"] = specials(dt)
        path = self.path("m.ptwm")
        pt.save_file(sd, path)
        self.assertSameTensors(pt.load_file(path), sd)
        self.assertSameTensors(pt.load(pt.save(sd)), sd)
        neg_zero = pt.load_file(path)["special.float32"][3]
        self.assertEqual(bits(neg_zero), b"\x00\x00\x00\x80")   # -0.0 stays negative

    def test_float8_bit_exact_or_named(self):
        """Whichever this torch has: float8 tensors bit for bit (torch 2.1
        on), or an F8 file refused naming the tensor."""
        if hasattr(torch, "float8_e4m3fn"):
            sd = {n: random_tensor(getattr(torch, n), (64,), 7) for n in DTYPE_NAMES
                  if n.startswith("float8") and hasattr(torch, n)}
            self.assertSameTensors(pt.load(pt.save(sd)), sd)
            return
        path = self.path("f8.safetensors")
        ptwm.write_safetensors(path, [("q.weight", bytes(range(16)), "F8_E4M3", (16,))])
        with self.assertRaises(ValueError) as cm:
            pt.load_file(path)
        self.assertIn("tensor 'q.weight' is F8_E4M3, which torch", str(cm.exception))

    def test_scalars_and_empty_tensors(self):
        sd = {"scalar": torch.tensor(-0.0), "int_scalar": torch.tensor(7, dtype=torch.int64),
              "empty": torch.zeros(0), "empty3d": torch.zeros(3, 0, 2, dtype=torch.bfloat16),
              "one": torch.ones(1, 1)}
        out = pt.load(pt.save(sd))
        self.assertSameTensors(out, sd)
        self.assertEqual(out["scalar"].dim(), 0)

    def test_non_contiguous_tensors_refused_as_safetensors_does(self):
        sd = {"t": random_tensor(torch.float32, (16, 24), 3).t(),
              "every_other": random_tensor(torch.bfloat16, (9, 10), 4)[:, ::2],
              "expanded": torch.ones(4, 1).expand(4, 6)}
        for k, v in sd.items():
            self.assertFalse(v.is_contiguous(), k)
            with self.subTest(name=k), self.assertRaises(ValueError) as cm:
                pt.save_file({k: v}, self.path("x.ptwm"))
            self.assertIn(f"You are trying to save a non contiguous tensor: `{k}`",
                          str(cm.exception))
            self.assertIn("call `.contiguous()` on your tensor", str(cm.exception))
            self.assertIsInstance(cm.exception, ptwm.SafetensorError)
        self.assertFalse(os.path.exists(self.path("x.ptwm")))
        packed = {k: v.contiguous() for k, v in sd.items()}   # the remedy the message names
        out = pt.load(pt.save(packed))
        for k, v in sd.items():
            self.assertEqual(bits(out[k]), bits(v), k)

    def test_shared_storage_refused_with_safetensors_message(self):
        w = torch.randn(8, 8)
        with self.assertRaises(RuntimeError) as cm:
            pt.save_file({"a": w, "b": w}, self.path("x.ptwm"))
        self.assertIn("Some tensors share memory, this will lead to duplicate memory on disk",
                      str(cm.exception))
        self.assertIn("save_model", str(cm.exception))
        self.assertFalse(os.path.exists(self.path("x.ptwm")))
        with self.assertRaises(RuntimeError):
            pt.save({"a": w, "view": w[2:4]})
        # Disjoint parts of one storage do not overlap: saved, as safetensors does.
        out = pt.load(pt.save({"top": w[:4], "bottom": w[4:]}))
        self.assertTrue(torch.equal(out["bottom"], w[4:]))

    def test_device_moves_after_decoding(self):
        pt.save_file({"w": torch.randn(3, 4)}, self.path("m.ptwm"))
        self.assertEqual(pt.load_file(self.path("m.ptwm"), device="meta")["w"].device.type, "meta")
        on_cpu = pt.load_file(self.path("m.ptwm"), device=torch.device("cpu"))["w"]
        self.assertEqual(on_cpu.device.type, "cpu")
        with self.assertRaises(ValueError):
            pt.load_file(self.path("m.ptwm"), device="no-such-device")

    def test_method_extra(self):
        sd = {"w": torch.randn(64, 64), "b": torch.randn(64).to(torch.bfloat16)}
        default = pt.save(sd)
        for method in ("zstd", "huffman", "rans", 5):
            with self.subTest(method=method):
                blob = pt.save(sd, method=method)
                self.assertNotEqual(blob, default)
                self.assertSameTensors(pt.load(blob), sd)
        self.assertEqual(pt.save(sd, method="microscale"), default)

    def test_metadata_kept_and_checked(self):
        pt.save_file({"w": torch.ones(2)}, self.path("m.ptwm"), metadata={"format": "pt"})
        with ptwm.safe_open(self.path("m.ptwm"), "pt") as f:
            self.assertEqual(f.metadata(), {"format": "pt"})
        for bad in ({"n": 1}, {1: "x"}, ["format", "pt"]):
            with self.subTest(metadata=bad), self.assertRaises(ValueError):
                pt.save({"w": torch.ones(2)}, metadata=bad)


class TorchSameAsCApiTest(TempDirTest):
    def test_save_equals_c_api_blob_of_the_same_bytes(self):
        from test_cross import CReference
        sd = {"emb": random_tensor(torch.bfloat16, (300, 64), 1),
              "w": torch.randn(128, 96), "b": torch.randn(96).half(),
              "q": random_tensor(torch.uint8, (1000,), 2), "s": torch.tensor(2.5)}
        # The same bytes in the order safetensors (and so ptwm.torch) writes them.
        src = self.path("same.safetensors")
        ptwm.write_safetensors(src, [(k, bits(sd[k]), sd[k].dtype, tuple(sd[k].shape))
                                     for k in safetensors_order(sd)])
        c = CReference.blob(src, self.path("c.ptwm"))
        self.assertEqual(pt.save(sd), c)
        pt.save_file(sd, self.path("py.ptwm"))
        with open(self.path("py.ptwm"), "rb") as f:
            self.assertEqual(f.read(), c)
        # Thread count never changes the bytes.
        self.assertEqual(pt.save(sd, threads=1), c)


class TorchRealWeightsTest(TempDirTest):
    def test_real_file_through_torch_and_back(self):
        want = parse_safetensors(REAL)
        from_st = pt.load_file(REAL)          # a plain .safetensors loads as is
        self.assertEqual(sorted(from_st), sorted(want))
        for k, (dt, shape, raw) in want.items():
            self.assertEqual(ptwm.dtype_code(from_st[k].dtype), ptwm.dtype_code(dt), k)
            self.assertEqual(tuple(from_st[k].shape), shape, k)
            self.assertEqual(bits(from_st[k]), raw, k)
        pt.save_file(from_st, self.path("m.ptwm"))
        self.assertLess(os.path.getsize(self.path("m.ptwm")), os.path.getsize(REAL))
        again = pt.load_file(self.path("m.ptwm"))
        for k, (_, _, raw) in want.items():
            self.assertEqual(bits(again[k]), raw, k)

    def test_every_loader_reads_every_kind(self):
        want = parse_safetensors(REAL)
        hf = self.path("hf")
        os.mkdir(hf)
        shutil.copy(REAL, os.path.join(hf, "model.safetensors"))
        hf_sharded = self.path("hf-sharded")
        ptwm.compress_checkpoint(hf, self.path("pdir"))
        ptwm.decompress_checkpoint(self.path("pdir"), hf_sharded, max_shard_size="100kB")
        self.assertIn("model.safetensors.index.json", os.listdir(hf_sharded))
        sd = pt.load_file(REAL)
        pt.save_file(sd, self.path("m.ptwm"))
        pt.save_file(sd, self.path("sharded"), max_shard_size="100kB")
        shards = [f for f in os.listdir(self.path("sharded")) if f.endswith(".ptwm")]
        self.assertGreater(len(shards), 1)
        self.assertIn("model.ptwm.index.json", os.listdir(self.path("sharded")))
        for src in (REAL, hf, hf_sharded, self.path("m.ptwm"), self.path("sharded")):
            with self.subTest(src=os.path.basename(src)):
                got = pt.load_file(src)
                self.assertEqual(sorted(got), sorted(want))
                self.assertTrue(all(bits(got[k]) == want[k][2] for k in want))
        with open(REAL, "rb") as f:
            got = pt.load(f.read())            # safetensors bytes load too
        self.assertTrue(all(bits(got[k]) == want[k][2] for k in want))

    def test_sharded_save_replaces_only_a_ptwm_directory(self):
        sd = {"a": torch.randn(1000), "b": torch.randn(1000)}
        d = self.path("out")
        pt.save_file(sd, d, max_shard_size=4000)
        self.assertEqual(len([f for f in os.listdir(d) if f.endswith(".ptwm")]), 2)
        pt.save_file(sd, d, max_shard_size="1MB")            # one shard now: no index left
        self.assertEqual(sorted(os.listdir(d)), ["model.ptwm"])
        self.assertTrue(torch.equal(pt.load_file(d)["b"], sd["b"]))
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("mine")
        with self.assertRaises(FileExistsError):
            pt.save_file(sd, d, max_shard_size="1MB")
        self.assertTrue(os.path.isfile(os.path.join(d, "notes.txt")))
        for bad in (0, -5, "lots", 1.5):
            with self.subTest(max_shard_size=bad), self.assertRaises(ValueError):
                pt.save_file(sd, self.path("x"), max_shard_size=bad)
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith("x")], [])


class TorchModelTest(TempDirTest):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 16)
            self.proj = torch.nn.Linear(16, 16)
            self.lm_head = torch.nn.Linear(16, 50, bias=False)
            self.lm_head.weight = self.embed.weight
            self.register_buffer("steps", torch.tensor(3, dtype=torch.int64))

    def test_tied_weights_stored_once_and_restored(self):
        torch.manual_seed(0)
        src = self.Tied()
        path = self.path("model.ptwm")
        with self.assertRaises(RuntimeError):
            pt.save_file(src.state_dict(), path)           # as safetensors refuses
        pt.save_model(src, path)
        with ptwm.safe_open(path, "pt") as f:
            self.assertEqual(f.keys(), ["embed.weight", "proj.bias", "proj.weight", "steps"])
            self.assertEqual(f.metadata(), {"lm_head.weight": "embed.weight"})
        dst = self.Tied()
        missing, unexpected = pt.load_model(dst, path)
        self.assertEqual((sorted(missing), unexpected), ([], []))
        for k, v in src.state_dict().items():
            self.assertEqual(bits(dst.state_dict()[k]), bits(v), k)
        self.assertIs(dst.lm_head.weight, dst.embed.weight)

    def test_load_model_strict_names_missing_and_unexpected(self):
        pt.save_file({"proj.weight": torch.zeros(16, 16), "extra": torch.zeros(1)},
                     self.path("m.ptwm"))
        model = self.Tied()
        with self.assertRaises(RuntimeError) as cm:
            pt.load_model(model, self.path("m.ptwm"))
        msg = str(cm.exception)
        self.assertIn("Error(s) in loading state_dict for Tied", msg)
        self.assertIn('Missing key(s) in state_dict: "embed.weight", "proj.bias", "steps"', msg)
        self.assertIn('Unexpected key(s) in state_dict: "extra"', msg)
        missing, unexpected = pt.load_model(model, self.path("m.ptwm"), strict=False)
        self.assertEqual(sorted(missing), ["embed.weight", "proj.bias", "steps"])
        self.assertEqual(unexpected, ["extra"])
        self.assertTrue(torch.equal(model.proj.weight, torch.zeros(16, 16)))


class TorchErrorsTest(TempDirTest):
    def test_missing_file(self):
        with self.assertRaises(FileNotFoundError):
            pt.load_file(self.path("absent.ptwm"))
        with self.assertRaises(FileNotFoundError):
            pt.save_file({"w": torch.ones(1)}, self.path("no-dir", "m.ptwm"))

    def test_bad_arguments_are_value_errors(self):
        good = {"w": torch.ones(2)}
        cases = [lambda: pt.save({"w": [1.0, 2.0]}),
                 lambda: pt.save({3: torch.ones(1)}),
                 lambda: pt.save([("w", torch.ones(1))]),
                 lambda: pt.save({"w": torch.ones(2, dtype=torch.complex128)}),
                 lambda: pt.save({"w": torch.ones(2).to_sparse()}),
                 lambda: pt.save(good, method="nope"),
                 lambda: pt.save(good, threads=-1),
                 lambda: pt.load(12345),
                 lambda: ptwm.safe_open(self.path("m.ptwm"), "tf")]
        for i, case in enumerate(cases):
            with self.subTest(case=i), self.assertRaises(ValueError):
                case()
        with self.assertRaises(ValueError) as cm:
            pt.save({"w": [1.0]})
        self.assertIn("Key `w` is invalid, expected torch.Tensor", str(cm.exception))

    def test_damaged_file_is_a_ptwm_error_naming_the_tensor(self):
        sd = {"small": torch.randn(10), "big.weight": torch.randn(256, 256)}
        path = self.path("m.ptwm")
        pt.save_file(sd, path)
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            at = len(data) // 2                   # inside big.weight's coded planes
            data[at] ^= 0x40
            f.seek(0)
            f.write(data)
        with self.assertRaises(ptwm.PtwmError) as cm:
            pt.load_file(path)
        self.assertNotIsInstance(cm.exception, ValueError)
        self.assertIn("big.weight", str(cm.exception))
        self.assertIn(cm.exception.name, ("PTWM_ERR_CRC", "PTWM_ERR_HASH", "PTWM_ERR_CORRUPT"))

    def test_unknown_tensor_name_is_a_key_error(self):
        pt.save_file({"w": torch.ones(2)}, self.path("m.ptwm"))
        with ptwm.safe_open(self.path("m.ptwm"), "pt") as f:
            with self.assertRaises(KeyError) as cm:
                f.get_tensor("nope")
            self.assertIn("'nope'", str(cm.exception))
            self.assertIsInstance(cm.exception, ptwm.PtwmError)


class TorchNoCopyTest(TempDirTest):
    def test_load_decodes_into_the_tensor_without_a_bytes_copy(self):
        # tracemalloc sees Python objects (a bytes copy would be 8 MB) but not
        # torch's own allocator, which holds the tensor itself.
        sd = {"w": torch.randn(2048, 1024)}
        pt.save_file(sd, self.path("m.ptwm"))
        with open(self.path("m.ptwm"), "rb") as f:
            data = f.read()
        tracemalloc.start()
        try:
            out = pt.load_file(self.path("m.ptwm"))
            from_file = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            out2 = pt.load(data)
            from_bytes = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertTrue(torch.equal(out["w"], sd["w"]) and torch.equal(out2["w"], sd["w"]))
        self.assertLess(from_file, 1 << 20)
        self.assertLess(from_bytes, 1 << 20)


PEAK_CHILD = """
import sys
import ptwm.torch as pt

def kb(field):
    with open("/proc/self/status") as f:
        return [int(line.split()[1]) for line in f if line.startswith(field)][0]

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")   # the peak (VmHWM) restarts from what the process holds now
base = kb("VmRSS:")
sd = pt.load_file(sys.argv[1], threads=2)   # per-thread buffers: fixed, whatever the cores
print((kb("VmHWM:") - base) * 1024)
"""


class TorchPeakMemoryTest(TempDirTest):
    def test_load_peaks_at_the_tensors_plus_a_little(self):
        # One 32 MiB tensor: a bytes copy on the way would add 32 MiB to the peak.
        g = torch.Generator().manual_seed(5)
        w = torch.randn(8 << 20, generator=g) * 0.02
        pt.save_file({"w": w}, self.path("m.ptwm"))
        del w
        proc = subprocess.run([sys.executable, "-c", PEAK_CHILD, self.path("m.ptwm")],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        peak = int(proc.stdout.split()[-1])
        self.assertGreaterEqual(peak, 32 << 20)
        self.assertLess(peak, (32 << 20) + (16 << 20))


if __name__ == "__main__":
    unittest.main()
