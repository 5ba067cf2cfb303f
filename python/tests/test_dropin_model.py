"""Drop-in for safetensors: tensors sharing memory, non-contiguous tensors, and
save_model / load_model (strict, device, tied weights, transformers-style
_tied_weights_keys) as safetensors.torch has them."""

import copy
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm

from _support import TempDirTest

import torch
import ptwm.torch as pt


class SharedTensorsTest(unittest.TestCase):
    def test_groups_in_first_seen_order(self):
        a, b, c = torch.zeros(4), torch.zeros(4), torch.zeros(4)
        # Not sorted by name: the order the storages are first met in the dict.
        self.assertEqual(pt._find_shared_tensors({"z": a, "m": b, "a": c}), [{"z"}, {"m"}, {"a"}])
        self.assertEqual(pt._find_shared_tensors({"z": a, "m": b, "y": a[1:], "a": c}),
                         [{"z", "y"}, {"m"}, {"a"}])
        meta = torch.zeros(4, device="meta")
        self.assertEqual(pt._find_shared_tensors({"meta": meta, "view": meta[1:]}), [])

    def test_overlap_within_one_storage(self):
        w = torch.zeros(12)
        self.assertEqual(pt._find_shared_tensors({"lo": w[:6], "hi": w[6:]}), [{"lo"}, {"hi"}])
        self.assertEqual(pt._find_shared_tensors({"lo": w[:7], "hi": w[6:]}), [{"lo", "hi"}])
        # Runs as safetensors cuts them: sorted by start, a name joins the run
        # before it when it starts before the previous name's end.
        self.assertEqual(pt._find_shared_tensors({"c": w[8:], "a": w[:4], "b": w[:2]}),
                         [{"a", "b"}, {"c"}])
        # ...the previous name's, not the run's: w[4:5] lies inside w[:8] yet starts
        # after w[1:2] ends, so safetensors puts it apart (and so does ptwm).
        self.assertEqual(pt._find_shared_tensors({"a": w[:8], "b": w[1:2], "c": w[4:5]}),
                         [{"a", "b"}, {"c"}])
        strided = w.view(3, 4)[:, :2]     # reaches byte 40: overlaps w[9:]
        self.assertEqual(pt._end_ptr(strided) - strided.data_ptr(), 40)
        self.assertEqual(pt._find_shared_tensors({"s": strided, "t": w[9:]}), [{"s", "t"}])

    def test_is_complete(self):
        w = torch.zeros(3, 4)
        self.assertTrue(pt._is_complete(w))
        self.assertTrue(pt._is_complete(w.t()))
        for part in (w[1:], w[:2], w[:, ::2], w[::2]):
            self.assertFalse(pt._is_complete(part))

    def test_remove_duplicate_names(self):
        w = torch.zeros(3, 4)
        self.assertEqual(pt._remove_duplicate_names({"w": w, "v": w[1:], "u": w}),
                         {"u": ["v", "w"]})
        self.assertEqual(pt._remove_duplicate_names({"w": w, "u": w},
                                                    preferred_names=["w"]), {"w": ["u"]})
        self.assertEqual(pt._remove_duplicate_names({"w": w, "u": w},
                                                    discard_names=["u"]), {"w": ["u"]})
        self.assertEqual(dict(pt._remove_duplicate_names({"a": torch.ones(2)})), {})
        # No name covers the storage: refused, also for a lone partial view.
        for sd in ({"v": w[1:]}, {"v": w[1:], "x": w[:1]}):
            with self.subTest(names=sorted(sd)), self.assertRaises(RuntimeError) as cm:
                pt._remove_duplicate_names(sd)
            self.assertIn("None is covering the entire storage", str(cm.exception))


class ContiguityTest(TempDirTest):
    def test_meta_tensor_refused_by_torch(self):
        with self.assertRaises(RuntimeError) as cm:
            pt.save({"m": torch.zeros(2, 2, device="meta")})
        self.assertIn("Cannot copy out of meta tensor", str(cm.exception))

    def test_save_model_packs_unless_told_not_to(self):
        class Transposed(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(6, 5)
                self.lin.weight = torch.nn.Parameter(torch.randn(6, 5).t())
        src = Transposed()
        self.assertFalse(src.lin.weight.is_contiguous())
        with self.assertRaises(ValueError) as cm:
            pt.save_model(src, self.path("c.ptwm"), force_contiguous=False)
        self.assertIn("non contiguous tensor: `lin.weight`", str(cm.exception))
        self.assertTrue(str(cm.exception).endswith(
            " Or use save_model(..., force_contiguous=True), read the docs for potential "
            "caveats."))
        pt.save_model(src, self.path("c.ptwm"))           # force_contiguous=True by default
        dst = Transposed()
        self.assertEqual(pt.load_model(dst, self.path("c.ptwm")), (set(), []))
        self.assertTrue(torch.equal(dst.lin.weight, src.lin.weight))


class Tied(torch.nn.Module):
    """A language-model shape: the output projection is the embedding."""
    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(40, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.lm_head = torch.nn.Linear(8, 40, bias=False)
        self.lm_head.weight = self.embed.weight


class Untied(Tied):
    def __init__(self):
        super().__init__()
        self.lm_head.weight = torch.nn.Parameter(self.embed.weight.detach().clone())


class ModelTest(TempDirTest):
    def test_tied_weights_stored_once_and_restored(self):
        torch.manual_seed(1)
        src = Tied()
        meta = {"format": "pt"}
        pt.save_model(src, self.path("m.ptwm"), metadata=meta)
        self.assertEqual(meta, {"format": "pt", "lm_head.weight": "embed.weight"})   # in place
        with ptwm.safe_open(self.path("m.ptwm"), framework="pt") as f:
            self.assertEqual(f.keys(), ["embed.weight", "norm.bias", "norm.weight"])
            self.assertEqual(f.metadata(), meta)
        dst = Tied()
        self.assertEqual(pt.load_model(dst, self.path("m.ptwm"), device="cpu"), (set(), []))
        self.assertIs(dst.lm_head.weight, dst.embed.weight)
        self.assertTrue(torch.equal(dst.embed.weight, src.embed.weight))
        # The caller's own entry for a dropped name is kept.
        pt.save_model(src, self.path("own.ptwm"), metadata={"lm_head.weight": "mine"})
        with ptwm.safe_open(self.path("own.ptwm"), framework="pt") as f:
            self.assertEqual(f.metadata(), {"lm_head.weight": "mine"})

    def test_tied_weights_under_the_other_name(self):
        # A file keeping lm_head.weight instead: the model's tie is filled from it.
        src = Tied()
        pt.save_file({"lm_head.weight": src.embed.weight.detach().clone(),
                      "norm.weight": src.norm.weight.detach(),
                      "norm.bias": src.norm.bias.detach()}, self.path("other.ptwm"))
        dst = Tied()
        self.assertEqual(pt.load_model(dst, self.path("other.ptwm"), device=torch.device("cpu")),
                         (set(), []))
        self.assertTrue(torch.equal(dst.embed.weight, src.embed.weight))

    def test_strict_names_what_differs(self):
        pt.save_model(Untied(), self.path("untied.ptwm"))     # two copies on disk
        with self.assertRaises(RuntimeError) as cm:
            pt.load_model(Tied(), self.path("untied.ptwm"))
        self.assertIn('Unexpected key(s) in state_dict: "lm_head.weight"', str(cm.exception))
        self.assertEqual(pt.load_model(Tied(), self.path("untied.ptwm"), strict=False),
                         (set(), ["lm_head.weight"]))
        pt.save_model(Tied(), self.path("tied.ptwm"))         # one copy on disk
        with self.assertRaises(RuntimeError) as cm:
            pt.load_model(Untied(), self.path("tied.ptwm"))
        self.assertIn("Error(s) in loading state_dict for Untied:", str(cm.exception))
        self.assertIn('Missing key(s) in state_dict: "lm_head.weight"', str(cm.exception))
        missing, unexpected = pt.load_model(Untied(), self.path("tied.ptwm"), strict=False)
        self.assertEqual((missing, unexpected), ({"lm_head.weight"}, []))

    def test_copies_are_not_ties(self):
        class Copies(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(3, 3)
                self.b = copy.deepcopy(self.a)
        src = Copies()
        self.assertEqual(pt._find_shared_tensors(src.state_dict()),
                         [{"a.weight"}, {"a.bias"}, {"b.weight"}, {"b.bias"}])
        pt.save_model(src, self.path("c.ptwm"))
        with ptwm.safe_open(self.path("c.ptwm"), framework="pt") as f:
            self.assertEqual(len(f.keys()), 4)
            self.assertIsNone(f.metadata())
        dst = Copies()
        pt.load_model(dst, self.path("c.ptwm"))
        self.assertTrue(torch.equal(dst.b.weight, src.b.weight))


if __name__ == "__main__":
    unittest.main()
