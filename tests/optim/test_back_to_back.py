"""Steps recorded back to back and in overlapped batches (docs/usage.md, "Recording while the GPU
runs"): each result equals the synchronous step's bit for bit, and what ``record_step`` keeps from
one call to the next (the sequence it checked, the params seen written, the upload counts) never
lets a check pass that should fail."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import vk_adam
from vk_adam._commands.bench.measure import overlapped_steps
from vk_adam._runtime import Runtime, kp_features
from vk_adam._runtime._kp import kp_module
from vk_adam._runtime.barriers import full_barrier_op

from ..conftest import random_grad
from ..runtime.test_device_buffers import download, upload

needs_patch = pytest.mark.skipif(
    "upload counter" not in kp_features().patches, reason="needs vk-adam's kp (upload counter, eval once)"
)


def _params_and_grads(mgr: Any, rng: np.random.Generator, n: int, grads: int) -> tuple[Any, Any, list[Any]]:
    """Two kp params holding the same values, and ``grads`` gradient tensors, all uploaded."""
    init = rng.standard_normal(n).astype(np.float32)
    a, b = mgr.tensor(init.copy()), mgr.tensor(init.copy())
    gtensors = [mgr.tensor(random_grad(rng, (n,))) for _ in range(grads)]
    for t in [a, b, *gtensors]:
        upload(mgr, t, t.data().copy())
    return a, b, gtensors


def _state(opt: vk_adam.Optimizer) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in opt.state_dict()["state"][0].items() if k != "step"}


def test_steps_in_overlapped_batches_equal_synchronous_steps_bit_for_bit(rng, kp_manager):
    """docs/usage.md's pattern: batches of 1, 2, 4, ... steps over two sequences, each submitted
    with eval_async while the next is recorded; params and state equal step()'s exactly."""
    mgr, steps = kp_manager, 23
    a, b, gtensors = _params_and_grads(mgr, rng, 50_000, 3)
    kw = {"lr": 1e-2, "manager": mgr, "zero_grad": False, "weight_decay": 0.01}
    with vk_adam.AdamW([a], **kw) as sync, vk_adam.AdamW([b], **kw) as recorded:
        for t in range(1, steps + 1):
            sync.step([gtensors[t % 3]])
        sequences = [mgr.sequence(), mgr.sequence()]
        submitted = [False, False]
        done, batch, i, numbers = 0, 1, 0, []
        while done < steps:
            seq = sequences[i]
            if submitted[i]:
                seq.eval_await()
            seq.clear()
            for _ in range(min(batch, steps - done)):
                done += 1
                numbers.append(recorded.record_step(seq, [gtensors[done % 3]]))
            seq.eval_async()
            submitted[i] = True
            i, batch = 1 - i, min(2 * batch, 4)
        for seq, pending in zip(sequences, submitted, strict=True):
            if pending:
                seq.eval_await()
        assert numbers == list(range(1, steps + 1))
        assert np.array_equal(download(mgr, b), download(mgr, a))
        expected, got = _state(sync), _state(recorded)
        assert expected.keys() == got.keys() and all(np.array_equal(got[k], expected[k]) for k in expected)
        for seq in sequences:
            seq.destroy()
    for t in [a, b, *gtensors]:
        t.destroy()


def test_the_bench_overlapped_steps_run_every_step_in_order(rng, kp_manager):
    """``overlapped_steps`` (the bench's figure) through ``Runtime.evaluate_async``: after two
    rounds of 11 steps, the params equal 22 synchronous steps' exactly."""
    mgr = kp_manager
    a, b, (g,) = _params_and_grads(mgr, rng, 10_000, 1)
    rt = Runtime(manager=mgr)
    kw = {"lr": 1e-2, "manager": mgr, "zero_grad": False}
    try:
        with vk_adam.Adam([a], **kw) as sync, vk_adam.Adam([b], **kw) as recorded:
            for _ in range(22):
                sync.step([g])
            pair = [rt.new_sequence(), rt.new_sequence()]
            for _ in range(2):
                overlapped_steps(rt, lambda seq: recorded.record_step(seq, [g]), pair, 11, max_batch=4)
            assert recorded.state_dict()["state"][0]["step"] == 22
            assert np.array_equal(download(mgr, b), download(mgr, a))
    finally:
        rt.close()
    for t in (a, b, g):
        t.destroy()


def test_evaluate_async_returns_before_a_wait_and_its_wait_finishes_the_work(rng, kp_manager):
    mgr = kp_manager
    a, b, (g,) = _params_and_grads(mgr, rng, 4096, 1)
    rt = Runtime(manager=mgr)
    try:
        with vk_adam.Adam([a], lr=1e-2, manager=mgr, zero_grad=False) as opt:
            before = download(mgr, a)
            seq = rt.new_sequence()
            opt.record_step(seq, [g])
            pending = rt.evaluate_async(seq)
            pending.wait()
            assert pending.done
            pending.wait()  # a second wait is a no-op
            assert not np.array_equal(download(mgr, a), before)
            rt.rerecord(seq, [])  # cleared once waited for, it records again
            opt.record_step(seq, [g])
            rt.evaluate(seq)
            assert opt.state_dict()["state"][0]["step"] == 2
    finally:
        rt.close()
    for t in (a, b, g):
        t.destroy()


def test_a_new_sequence_is_checked_after_steps_recorded_into_another(rng, kp_manager):
    """record_step checks a sequence's type and device once per sequence it records into: a
    different object (not a sequence, another device's) is still refused after many steps."""
    kp = kp_module()
    mgr = kp_manager
    w = mgr.tensor(rng.standard_normal(64).astype(np.float32))
    upload(mgr, w, w.data().copy())
    with vk_adam.Adam([w], lr=1e-2, manager=mgr) as opt:
        opt.grad_buffer()  # the application writes the gradients there
        seq = mgr.sequence()
        for _ in range(3):
            opt.record_step(seq)
        with pytest.raises(TypeError, match=r"sequence must be a kp\.Sequence"):
            opt.record_step(None)
        with pytest.raises(TypeError, match=r"sequence must be a kp\.Sequence"):
            opt.record_step(w)
        if "device handles" in kp_features().patches:
            other = kp.Manager()
            try:
                with pytest.raises(ValueError, match="the sequence belongs to another Vulkan device"):
                    opt.record_step(other.sequence())
            finally:
                other.destroy()
        assert opt.record_step(seq) == 4  # the refusals recorded and counted nothing
        assert opt.record_step(mgr.sequence()) == 5  # another sequence of the same device: fine
        seq.eval()
    w.destroy()


def test_gradients_checked_at_one_step_are_checked_again_when_they_change(rng, kp_manager):
    """record_step keeps the kp tensor gradients it checked; another tensor, a NumPy array or a
    tensor destroyed since is checked (and refused) as at the first step."""
    mgr = kp_manager
    w = mgr.tensor(rng.standard_normal(64).astype(np.float32))
    g, other = mgr.tensor(random_grad(rng, (64,))), mgr.tensor(random_grad(rng, (64,)))
    small = mgr.tensor(random_grad(rng, (32,)))
    for t in (w, g, other, small):
        upload(mgr, t, t.data().copy())
    with vk_adam.Adam([w], lr=1e-2, manager=mgr, zero_grad=False) as opt:
        seq = mgr.sequence()
        assert [opt.record_step(seq, [g]) for _ in range(3)] == [1, 2, 3]
        with pytest.raises(ValueError, match="grad for param 0 has 32 elements; the param has 64"):
            opt.record_step(seq, [small])
        with pytest.raises(TypeError, match="record_step takes gradients already on the device"):
            opt.record_step(seq, [random_grad(rng, (64,))])
        with pytest.raises(ValueError, match="got 2 gradient"):
            opt.record_step(seq, [g, g])
        assert opt.record_step(seq, (other,)) == 4
        assert opt.record_step(seq, [g]) == 5
        seq.eval()
        g.destroy()
        with pytest.raises(ValueError, match="grad for param 0 has 0 elements"):
            opt.record_step(seq, [g])
    for t in (w, other, small):
        t.destroy()


@needs_patch
def test_an_unwritten_param_is_refused_until_it_is_written(rng, kp_manager):
    mgr = kp_manager
    w = mgr.tensor(rng.standard_normal(32).astype(np.float32))  # never uploaded
    with vk_adam.Adam([w], lr=1e-2, manager=mgr) as opt:
        opt.grad_buffer()  # the application writes the gradients there
        seq = mgr.sequence()
        for _ in range(2):  # refused each time, not once
            with pytest.raises(ValueError, match="param 0 of group 0 is a kp tensor whose device memory"):
                opt.record_step(seq)
        upload(mgr, w, w.data().copy())
        assert opt.record_step(seq) == 1
        seq.eval()
    w.destroy()


@needs_patch
def test_an_upload_between_recorded_steps_warns(rng, kp_manager):
    """The upload counts a recorded step keeps are the ones its checks read: an upload of the
    param evaluated between two recorded steps still warns at the second."""
    kp = kp_module()
    mgr = kp_manager
    w = mgr.tensor(rng.standard_normal(64).astype(np.float32))
    upload(mgr, w, w.data().copy())
    with vk_adam.Adam([w], lr=1e-2, manager=mgr) as opt:
        opt.grad_buffer()  # the application writes the gradients there
        seq = mgr.sequence()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt.record_step(seq)
            opt.record_step(seq)
        seq.eval()
        mgr.sequence().eval(kp.OpTensorSyncDevice([w]))
        seq.clear()
        with pytest.warns(vk_adam.LostUpdateWarning, match=r"param 0 .*uploaded .*1 time\(s\) since step 2"):
            opt.record_step(seq)
        seq.eval()
    w.destroy()


def test_a_barrier_lists_each_buffer_once():
    """A step's param is also the param its pipeline binds: its buffer barrier is recorded once."""
    made: list[list[object]] = []

    def op_memory_barrier(buffers: list[object], *masks: int) -> str:
        made.append(buffers)
        return "op"

    flags = SimpleNamespace(shader_write=1, transfer_write=2, shader_read=4, transfer_read=8)
    fake = SimpleNamespace(
        AccessFlagBits=flags,
        PipelineStageFlagBits=SimpleNamespace(compute_shader=16, transfer=32),
        OpMemoryBarrier=op_memory_barrier,
    )
    a, b, c = object(), object(), object()
    assert full_barrier_op(fake, [a, b, a, c, b]) == "op"
    assert made == [[a, b, c]]
