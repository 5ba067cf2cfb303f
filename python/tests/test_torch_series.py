"""ptwm.torch checkpoints coded against earlier ones: save_checkpoint(base=...),
CheckpointSeries (keyframes, what each checkpoint needs, deleting), and
save_checkpoint(blocking=False). The network and its training are those of
test_torch_checkpoint (real weights, AdamW); every resume is compared bit for
bit with an uninterrupted run.

Run as a script (`resume-all DIR OUT N`) it is the fresh process that resumes
from every checkpoint of a series; (`crash PATH`) it starts a background save
and kills itself while it runs; (`exit PATH`) it starts one and ends."""

import json
import os
import signal
import subprocess
import sys
import unittest

import _support  # noqa: F401 (first: it finds the package in a checkout)
import ptwm
from _support import TempDirTest

import torch
import ptwm.torch as pt
from test_torch_checkpoint import bits, make, train

N = 6


def series_run(directory, keyframe_every, blocking=True):
    """Train N steps, saving into a series after each one; the final model."""
    model, opt = make("adamw")
    series = pt.CheckpointSeries(directory, keyframe_every=keyframe_every)
    for step in range(1, N + 1):
        train(model, opt, step - 1, step)
        h = series.save(model, opt, step, extra={"s": step}, blocking=blocking)
        if h is not None:
            h.wait()
    return series, model


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x10]))


class SeriesTest(TempDirTest):
    def test_resume_from_every_checkpoint_in_a_fresh_process(self):
        series, want = series_run(self.path("run"), keyframe_every=3)
        self.assertEqual(series.steps(), list(range(1, N + 1)))
        # Keyframes at 1 and 4; the others need their chain back to one.
        self.assertEqual([len(series.needs(s)) for s in series.steps()], [1, 2, 3, 1, 2, 3])
        self.assertEqual(series.needs(3), [series.path(3), series.path(2), series.path(1)])
        meta = pt.checkpoint_metadata(series.path(3))
        self.assertEqual((meta["ptwm.base"], meta["ptwm.base_depth"]),
                         ("step-000000000002.ptwm", "2"))
        self.assertNotIn("ptwm.base", pt.checkpoint_metadata(series.path(4)))
        # Coded against the one before, smaller than whole.
        self.assertLess(os.path.getsize(series.path(5)), os.path.getsize(series.path(4)))
        out = self.path("resumed.json")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "resume-all",
                               self.path("run"), out, str(N)], capture_output=True, text=True,
                              timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            got = json.load(f)
        expect = {k: v.hex() for k, v in bits(want).items()}
        self.assertEqual(sorted(got), [str(s) for s in range(1, N + 1)])
        for s, b in got.items():
            self.assertEqual(b, expect, f"resumed from step {s}")

    def test_missing_and_damaged_base(self):
        series, _ = series_run(self.path("run"), keyframe_every=10)
        model, opt = make("adamw")
        os.rename(series.path(2), self.path("away.ptwm"))
        with self.assertRaises(FileNotFoundError) as cm:
            series.load(model, opt, 3)
        self.assertIn("is coded against", str(cm.exception))
        self.assertIn("step-000000000002.ptwm', which is missing", str(cm.exception))
        self.assertEqual(cm.exception.name, "PTWM_ERR_BASE_MISSING")
        os.rename(self.path("away.ptwm"), series.path(2))
        series.load(model, opt, 3)
        # A damaged byte in the first tensor's payload of the keyframe: every
        # checkpoint coded on it fails with the CRC, naming the base.
        flip(series.path(1), 3000)
        for s in (2, 4):
            with self.subTest(step=s), self.assertRaises(ptwm.PtwmError) as cm:
                series.load(model, opt, s)
            self.assertEqual(cm.exception.name, "PTWM_ERR_CRC")
            self.assertIn("step-000000000001.ptwm", str(cm.exception))
        # Another run's checkpoint in its place: the recorded hash differs.
        other, _ = series_run(self.path("other"), keyframe_every=1)
        os.replace(other.path(3), series.path(1))   # whole, of another step
        with self.assertRaises(ptwm.PtwmError) as cm:
            series.load(model, opt, 2)
        self.assertEqual(cm.exception.name, "PTWM_ERR_BASE_HASH")

    def test_base_loop_is_refused(self):
        series, _ = series_run(self.path("run"), keyframe_every=10)
        # Step 1 rewritten to record step 2 as its base: a loop, refused by name.
        tensors = pt.load_file(series.path(1))
        meta = dict(pt.checkpoint_metadata(series.path(1)))
        meta["ptwm.base"] = "step-000000000003.ptwm"
        pt.save_file(tensors, series.path(1), meta)
        model, opt = make("adamw")
        with self.assertRaises(ValueError) as cm:
            series.load(model, opt, 3)
        self.assertIn("leads back to itself", str(cm.exception))

    def test_delete_keeps_every_kept_checkpoint_decodable(self):
        series, _ = series_run(self.path("run"), keyframe_every=10)
        want = {}
        for s in series.steps():
            m, o = make("adamw")
            series.load(m, o, s)
            want[s] = bits(m)
        before = os.path.getsize(series.path(2))
        series.delete(1)
        self.assertEqual(series.steps(), [2, 3, 4, 5, 6])
        self.assertEqual(series.needs(2), [series.path(2)])   # rewritten whole
        self.assertGreater(os.path.getsize(series.path(2)), before)
        series.delete(4)   # in the middle: 5 becomes whole, 3 keeps its base
        self.assertEqual(series.needs(5), [series.path(5)])
        self.assertEqual(len(series.needs(3)), 2)
        series.keep_last(2)
        self.assertEqual(series.steps(), [5, 6])
        for s in series.steps():
            m, o = make("adamw")
            self.assertEqual(series.load(m, o, s)["extra"], {"s": s})
            self.assertEqual(bits(m), want[s], f"step {s}")
        with self.assertRaises(FileNotFoundError):
            series.delete(1)

    def test_series_refuses_a_step_out_of_order(self):
        series = pt.CheckpointSeries(self.path("run"), keyframe_every=2)
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        series.save(model, opt, 5)
        for s in (5, 4):
            with self.assertRaises(FileExistsError):
                series.save(model, opt, s)
        with self.assertRaises(ValueError):
            pt.CheckpointSeries(self.path("x"), keyframe_every=0)


class BackgroundSaveTest(TempDirTest):
    def test_non_blocking_save_is_a_snapshot(self):
        model, opt = make("adamw")
        train(model, opt, 0, 2)
        pt.save_checkpoint(self.path("blocking.ptwm"), model, opt, step=2)
        h = pt.save_checkpoint(self.path("bg.ptwm"), model, opt, step=2, blocking=False)
        self.assertIsInstance(h, pt.SaveHandle)
        with torch.no_grad():   # the state changes at once, while it is written
            for p in model.parameters():
                p.add_(1.0)
                for t in opt.state[p].values():
                    t.add_(1.0)
        train(model, opt, 2, 4)
        h.wait()
        self.assertTrue(h.done())
        a, b = pt.load_file(self.path("blocking.ptwm")), pt.load_file(self.path("bg.ptwm"))
        self.assertEqual(sorted(a), sorted(b))
        for k in a:
            self.assertEqual(a[k].reshape(-1).view(torch.uint8).numpy().tobytes(),
                             b[k].reshape(-1).view(torch.uint8).numpy().tobytes(), k)

    def test_series_in_the_background_resumes_bit_exactly(self):
        series, want = series_run(self.path("run"), keyframe_every=3, blocking=False)
        model, opt = make("adamw")
        series.load(model, opt, 4)
        train(model, opt, 4, N)
        self.assertEqual(bits(model), bits(want))

    def test_threads_reach_the_writer(self):
        """A series' threads= is the writer's thread count, in the background
        too (one thread leaves the other cores to training)."""
        import ptwm._saving as saving
        from unittest import mock
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        series = pt.CheckpointSeries(self.path("run"), keyframe_every=5, threads=1)
        with mock.patch.object(saving, "cparams", wraps=saving.cparams) as cp:
            series.save(model, opt, 1)
            series.save(model, opt, 2, blocking=False).wait()
        self.assertEqual([c.kwargs.get("threads") for c in cp.call_args_list], [1, 1])
        bad = pt.CheckpointSeries(self.path("bad"), threads=-1)
        with self.assertRaisesRegex(ValueError, "threads must be an int >= 0"):
            bad.save(model, opt, 1)
        with self.assertRaisesRegex(ValueError, "threads must be an int >= 0"):
            bad.save(model, opt, 2, blocking=False).wait()
        self.assertEqual(bad.steps(), [])

    def test_background_saves_give_way_to_training(self):
        """A background save writes from a thread of idle priority (its library
        threads inherit it), unless priority="normal"; a blocking save keeps the
        caller's, and the caller's own is never changed."""
        import threading
        from unittest import mock
        seen = []
        real = pt.save_file

        def spy(*args, **kwargs):
            tid = threading.get_native_id()
            seen.append((os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, tid)))
            return real(*args, **kwargs)
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        before = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
        with mock.patch.object(pt, "save_file", spy):
            pt.save_checkpoint(self.path("a.ptwm"), model, opt, blocking=False).wait()
            pt.save_checkpoint(self.path("b.ptwm"), model, opt, blocking=False,
                               priority="normal").wait()
            pt.save_checkpoint(self.path("c.ptwm"), model, opt)
        idle = seen[0][0] == os.SCHED_IDLE or seen[0][1] == 19   # nice 19 where refused
        self.assertTrue(idle, seen)
        self.assertEqual(seen[1:], [before, before])
        self.assertEqual((os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)), before)
        for blocking in (True, False):
            with self.assertRaisesRegex(ValueError, "priority must be one of"):
                pt.save_checkpoint(self.path("d.ptwm"), model, opt, blocking=blocking,
                                   priority="low")
        self.assertFalse(os.path.exists(self.path("d.ptwm")))

    def _slow_copies(self):
        """The save's copies slowed (5 ms a tensor), so the loop's next step
        comes while they run."""
        import time
        from unittest import mock
        import ptwm._torch_checkpoint as tc
        real = tc._copy_of

        def slow(name, t):
            time.sleep(0.005)
            return real(name, t)
        return mock.patch.object(tc, "_copy_of", slow)

    def _same_file(self, a, b):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            self.assertEqual(fa.read(), fb.read())

    def test_snapshot_before_step_holds_the_next_step(self):
        model, opt = make("adamw")
        train(model, opt, 0, 2)
        pt.save_checkpoint(self.path("ref.ptwm"), model, opt, step=2)
        with self._slow_copies():
            h = pt.save_checkpoint(self.path("bg.ptwm"), model, opt, step=2, blocking=False,
                                   snapshot="before_step")
            self.assertIn("step", opt.__dict__)   # held while the copies run
            train(model, opt, 2, 4)
            h.wait()
        self.assertNotIn("step", opt.__dict__)
        self._same_file(self.path("ref.ptwm"), self.path("bg.ptwm"))
        # A scheduler's wrapper of step() is put back as it was.
        sched = torch.optim.lr_scheduler.StepLR(opt, 1)
        wrapper = opt.__dict__["step"]
        pt.save_checkpoint(self.path("ref2.ptwm"), model, opt, step=4)
        with self._slow_copies():
            h = pt.save_checkpoint(self.path("bg2.ptwm"), model, opt, step=4, blocking=False,
                                   snapshot="before_step")
            train(model, opt, 4, 5)
            sched.step()
            h.wait()
        self.assertIs(opt.__dict__["step"], wrapper)
        self._same_file(self.path("ref2.ptwm"), self.path("bg2.ptwm"))

    def test_snapshot_before_step_copies_buffers_at_once(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step():
            opt.zero_grad()
            model(torch.randn(8, 4)).square().sum().backward()   # running stats change
            opt.step()
        step()
        pt.save_checkpoint(self.path("ref.ptwm"), model, opt)
        with self._slow_copies():
            h = pt.save_checkpoint(self.path("bg.ptwm"), model, opt, blocking=False,
                                   snapshot="before_step")
            step()
            h.wait()
        self._same_file(self.path("ref.ptwm"), self.path("bg.ptwm"))

    def test_change_outside_step_fails_a_save_before_step(self):
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        with self._slow_copies():
            h = pt.save_checkpoint(self.path("bg.ptwm"), model, opt, blocking=False,
                                   snapshot="before_step")
            with torch.no_grad():
                list(model.parameters())[-1].add_(1.0)
            with self.assertRaisesRegex(ValueError, "changed in place outside "
                                        "optimizer.step\\(\\) before the background save"):
                h.wait()
        self.assertNotIn("step", opt.__dict__)
        self.assertEqual(os.listdir(self.tmp), [])
        for blocking, snapshot in ((True, "before_step"), (False, "later")):
            with self.assertRaisesRegex(ValueError, "snapshot"):
                pt.save_checkpoint(self.path("x.ptwm"), model, opt, blocking=blocking,
                                   snapshot=snapshot)
        self.assertNotIn("step", opt.__dict__)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_one_save_in_flight(self):
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        h1 = pt.save_checkpoint(self.path("a.ptwm"), model, opt, blocking=False)
        h2 = pt.save_checkpoint(self.path("b.ptwm"), model, opt, blocking=False)
        self.assertTrue(h1.done())   # the second waited for the first
        h2.wait()
        self.assertTrue(os.path.exists(self.path("a.ptwm")))

    def test_error_is_raised_at_wait_and_leaves_no_file(self):
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        path = self.path("missing-dir", "c.ptwm")
        h = pt.save_checkpoint(path, model, opt, blocking=False)
        with self.assertRaises(OSError):
            h.wait()
        self.assertTrue(h.done())
        self.assertFalse(os.path.exists(self.path("missing-dir")))
        # A missing base: raised at wait() too, nothing written.
        h = pt.save_checkpoint(self.path("d.ptwm"), model, opt, blocking=False,
                               base=self.path("a.ptwm"))
        with self.assertRaises(FileNotFoundError) as cm:
            h.wait()
        self.assertEqual(cm.exception.name, "PTWM_ERR_BASE_MISSING")
        self.assertEqual(os.listdir(self.tmp), [])

    def test_error_nobody_waited_for_is_raised_by_the_next_save(self):
        model, opt = make("adamw")
        train(model, opt, 0, 1)
        pt.save_checkpoint(self.path("no", "c.ptwm"), model, opt, blocking=False)
        with self.assertRaises(OSError):
            pt.save_checkpoint(self.path("d.ptwm"), model, opt)
        pt.save_checkpoint(self.path("d.ptwm"), model, opt)   # reported once
        self.assertTrue(os.path.exists(self.path("d.ptwm")))

    def test_the_interpreter_waits_for_a_background_save_at_exit(self):
        path = self.path("c.ptwm")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "exit", path],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("started", proc.stdout)
        self.assertEqual(len(pt.load_file(path)), 8 * 2 * 4)   # weights, 3 state tensors each

    def test_killed_during_a_background_save_leaves_no_checkpoint(self):
        path = self.path("run", "step-000000000001.ptwm")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "crash", path],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr)
        self.assertIn("started", proc.stdout)
        # Whatever the moment of the kill: no file at the name, or a whole one.
        series = pt.CheckpointSeries(self.path("run"))
        self.assertIn(series.steps(), ([], [1]))
        for s in series.steps():
            self.assertEqual(len(pt.load_file(series.path(s))), 8 * 2 * 4)


def _exit(path):
    """A background save nobody waits for, as the script ends."""
    model, opt = _big_state()
    pt.save_checkpoint(path, model, opt, step=1, blocking=False)
    print("started", flush=True)


def _resume_all(directory, out, n):
    """Resume from each checkpoint of the series, train to n, record the bits."""
    series = pt.CheckpointSeries(directory)
    got = {}
    for s in series.steps():
        model, opt = make("adamw")
        info = series.load(model, opt, s)
        assert info == {"step": s, "extra": {"s": s}}, info
        train(model, opt, s, int(n))
        got[str(s)] = {k: v.hex() for k, v in bits(model).items()}
    with open(out, "w") as f:
        json.dump(got, f)


def _big_state():
    """A bigger state than the test network's (101 MB with AdamW's moments)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(torch.randn(4, 1024)).sum().backward()
    opt.step()
    return model, opt


def _crash(path):
    """A bigger state saved in the background; the process kills itself while
    the save runs."""
    model, opt = _big_state()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    h = pt.save_checkpoint(path, model, opt, step=1, blocking=False)
    print("started", flush=True)
    assert not h.done()
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "resume-all":
        _resume_all(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "crash":
        _crash(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "exit":
        _exit(sys.argv[2])
    else:
        unittest.main()
