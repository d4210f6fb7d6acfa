"""The runtime layer and the patched kp under it: features, barriers, submissions, lifetimes,
the validation layer as judge, and the stock-kp fallback."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import vk_adam
from vk_adam import pytest_plugin as vk_pytest
from vk_adam._optim.device import MAX_PIPELINES_PER_SET
from vk_adam._rules.builtin import ADAMW
from vk_adam._runtime import Runtime, kp_features
from vk_adam._runtime._kp import kp_module

from ..conftest import random_grad, scale_error
from .test_device_buffers import download, upload

ROOT = Path(__file__).resolve().parents[2]


def test_the_patched_kp_is_detected_by_feature():
    features = kp_features()
    assert features.patched, features.describe()
    assert features.memory_barriers and features.async_submit
    for patch in ("fence reuse", "spin wait", "OpMemoryBarrier", "timestamp reset", "validation opt-in"):
        assert patch in features.patches
    assert features.describe().startswith(f"kp {features.version}: kp 0.9.0 with vk-adam's patches")
    assert "\n  fence reuse" in features.describe(verbose=True)
    assert "+vkadam." in features.version


def test_async_step_is_one_submission(rng, kp_manager):
    n = 5000
    param = kp_manager.tensor(rng.standard_normal(n).astype(np.float32))
    upload(kp_manager, param, param.data().copy())
    with vk_adam.AdamW([param], manager=kp_manager) as opt:
        handle = opt.step(wait=False)
        assert handle._pending is not None and len(handle._pending._sequences) == 1
        handle.wait()
    param.destroy()


def test_async_steps_with_numpy_grads_on_device_params_do_not_race_on_staging(rng, kp_manager):
    """Regression: each step's NumPy gradient goes through the grad buffer's one staging copy;
    rewriting it while the previous step's upload was still queued changed that step's input."""
    n = 200_000
    init = rng.standard_normal(n).astype(np.float32)
    param = kp_manager.tensor(init.copy())
    upload(kp_manager, param, init)
    grads = [random_grad(rng, (n,)) for _ in range(8)]
    ref = init.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    with vk_adam.AdamW([param], lr=0.01, manager=kp_manager) as opt:
        handles = [opt.step([g], wait=False) for g in grads]
        handles[-1].wait()
    for t, g in enumerate(grads, start=1):
        ADAMW.reference(ref, g.astype(np.float64), state, hyper, t)
    assert scale_error(download(kp_manager, param), ref) <= 2e-6
    param.destroy()


@pytest.mark.parametrize("opt_out", [True, False], ids=["patched", "kp-without-the-opt-out"])
def test_a_step_without_an_upload_leaves_out_kps_barrier_per_dispatch(rng, kp_manager, opt_out):
    """kp patch 0016: with gradients on the device, a step's update dispatch is recorded without
    kp's own barrier (the step's barrier before it orders it after earlier writes); a step that
    uploads a NumPy gradient keeps it (the upload's transfer write); a kp without the patch
    keeps it everywhere. Sync, async and recorded steps, taking turns, match the float64
    reference (the suite runs under synchronization validation: a missing dependency in one
    command buffer is reported, as the step's own barrier taken out shows)."""
    assert kp_features().dispatch_barrier_opt_out
    n = 3000
    init = rng.standard_normal(n).astype(np.float32)
    param = kp_manager.tensor(init.copy())
    upload(kp_manager, param, init)
    ref, hyper = init.astype(np.float64), {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    seq = kp_manager.sequence()
    with vk_adam.AdamW([param], lr=0.01, manager=kp_manager) as opt:
        if not opt_out:
            features = opt._rt.features
            kept = tuple(p for p in features.patches if p != "dispatch barrier opt-out")
            opt._rt.features = dataclasses.replace(features, patches=kept)
        barriers: list[list[bool]] = []
        run, record, submit = opt._rt.run, opt._rt.record, opt._rt.submit

        def seen(ops: list[object]) -> None:
            # a step's dispatches are made into kp ops as the runtime records them: built so here
            built = opt._rt.build_ops(ops)
            barriers.append([op.barrier for op in built if type(op).__name__ == "OpAlgoDispatch"])

        opt._rt.run = lambda ops, **kw: (seen(ops), run(ops, **kw))[1]  # type: ignore[method-assign]
        opt._rt.record = lambda sq, ops, **kw: (seen(ops), record(sq, ops, **kw))[1]  # type: ignore[method-assign]
        opt._rt.submit = lambda ops: (seen(ops), submit(ops))[1]  # type: ignore[method-assign]
        for t in range(1, 6):
            g = random_grad(rng, (n,))
            if t == 2:  # a NumPy gradient: uploaded within the step
                opt.step([g])
            elif t == 4:  # the application's upload, then the step, in one command buffer
                opt.grad_buffer().data()[:] = g
                seq.record(kp_module().OpTensorSyncDevice([opt.grad_buffer()]))
                opt.record_step(seq)
                seq.eval()
            else:
                upload(kp_manager, opt.grad_buffer(), g)
                if t == 3:
                    opt.step(wait=False).wait()
                else:
                    opt.step()
            ADAMW.reference(ref, g.astype(np.float64), state, hyper, t)
    assert barriers == ([[False], [True], [False], [False], [False]] if opt_out else [[True]] * 5)
    assert scale_error(download(kp_manager, param), ref) <= 2e-6
    seq.destroy()
    param.destroy()


def test_record_step_with_too_many_gradient_buffers_is_an_error_not_a_crash(rng, kp_manager):
    """Regression: a pipeline a recorded (not yet evaluated) step uses was destroyed to make
    room for a new gradient buffer, and evaluating the sequence crashed the process."""
    n = 1000
    init = rng.standard_normal(n).astype(np.float32)
    param = kp_manager.tensor(init.copy())
    upload(kp_manager, param, init)
    count = MAX_PIPELINES_PER_SET
    grads = [random_grad(rng, (n,)) for _ in range(count + 1)]
    gtensors = [kp_manager.tensor(g) for g in grads]
    for t, g in zip(gtensors, grads, strict=True):
        upload(kp_manager, t, g)
    ref = init.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    seq = kp_manager.sequence()
    with vk_adam.AdamW([param], lr=0.01, manager=kp_manager, zero_grad=False) as opt:
        for t in range(count):
            opt.record_step(seq, [gtensors[t]])
            ADAMW.reference(ref, grads[t].astype(np.float64), state, hyper, t + 1)
        with pytest.raises(ValueError, match="distinct gradient buffers through record_step"):
            opt.record_step(seq, [gtensors[count]])
        with pytest.raises(ValueError, match="distinct gradient buffers"):
            opt.step([gtensors[count]])
        assert opt.param_groups[0]["lr"] == 0.01
        seq.eval()  # every recorded step's pipeline is still alive
        assert scale_error(download(kp_manager, param), ref) <= 2e-6
        opt.step([gtensors[0]])  # a cached gradient buffer still works
    seq.destroy()
    for t in [param, *gtensors]:
        t.destroy()


def test_record_step_refuses_numpy_gradients(kp_manager):
    param = kp_manager.tensor(np.ones(8, np.float32))
    kp_manager.sequence().eval(kp_module().OpTensorSyncDevice([param]))
    seq = kp_manager.sequence()
    with vk_adam.Adam([param], manager=kp_manager) as opt:
        with pytest.raises(TypeError, match="record_step takes gradients already on the device"):
            opt.record_step(seq, [np.ones(8, np.float32)])
        assert opt.state_dict()["state"] == {}
    seq.destroy()
    param.destroy()


def test_an_application_shader_after_a_recorded_step_sees_its_update(rng, kp_manager):
    """record_step ends with a barrier: the application's next dispatch (here the copy shader
    reading the param buffer) reads the updated weights, in the same command buffer."""
    from vk_adam._rules.spirv import load_spirv

    n = 4096
    init = rng.standard_normal(n).astype(np.float32)
    param = kp_manager.tensor(init.copy())
    upload(kp_manager, param, init)
    copy = kp_manager.tensor(np.zeros(n, np.float32))
    upload(kp_manager, copy, np.zeros(n, np.float32))
    kp = kp_module()
    push = np.array([n // 4], np.uint32).view(np.float32)
    # the copy shader's workgroup size is specialization constant 25: as wide as the device allows
    props = kp_manager.get_device_properties()
    threads = min(256, props["max_work_group_invocations"], props["max_work_group_size"][0])
    spec = np.zeros(26, np.float32)
    spec.view(np.uint32)[25] = threads
    algo = kp_manager.algorithm([param, copy], load_spirv("copy"), [n // 4 // threads, 1, 1], spec, push)
    seq = kp_manager.sequence()
    with vk_adam.AdamW([param], lr=0.01, manager=kp_manager) as opt:
        g = random_grad(rng, (n,))
        upload(kp_manager, opt.grad_buffer(), g)
        opt.record_step(seq)
        seq.record(kp.OpAlgoDispatch(algo, push))
        seq.eval()
    np.testing.assert_array_equal(download(kp_manager, copy), download(kp_manager, param))
    assert not np.array_equal(download(kp_manager, param), init)
    seq.destroy()
    algo.destroy()
    for t in (param, copy):
        t.destroy()


def _copy_workload(rt: Runtime, n: int = 1 << 22) -> tuple[object, object, object]:
    """Two buffers of ``n`` floats and a dispatch of the copy shader between them: GPU work that
    takes a while on lavapipe."""
    from vk_adam._rules.spirv import load_spirv

    a, b = rt.buffer(np.ones(n, np.float32)), rt.buffer(np.zeros(n, np.float32))
    push = np.array([n // 4], np.uint32).view(np.float32)
    algo = rt.pipeline([a, b], load_spirv("copy"), n // 4, rt.sized_spec(), 1, threads=rt.facts.threads)
    return a, b, rt.dispatch_op(algo, push)


def test_waits_release_the_gil():
    """A Python thread keeps running while the main thread waits for the GPU."""
    rt = Runtime()
    a, b, copy_op = _copy_workload(rt)
    ops = [rt.upload_op([a, b]), *[copy_op] * 20]
    ticks = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            ticks[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    try:
        time.sleep(0.01)
        before = ticks[0]
        started = time.perf_counter()
        rt.run(ops)
        waited = time.perf_counter() - started
        during = ticks[0] - before
    finally:
        stop.set()
        thread.join()
        rt.close()
    assert waited > 0.005  # the GPU (lavapipe) work takes a while
    assert during > 1000, f"the counting thread advanced {during} times in {waited * 1e3:.1f} ms"


def test_a_timed_out_wait_can_be_awaited_again():
    rt = Runtime()
    a, b, copy_op = _copy_workload(rt)
    pending = rt.submit([rt.upload_op([a, b]), *[copy_op] * 10])
    seq = pending._sequences[0]
    seq.eval_await(1)  # 1 ns: times out, the sequence stays running
    assert seq.is_running()
    pending.wait()
    assert not seq.is_running()
    rt.run([rt.download_op([b])])
    np.testing.assert_array_equal(b.data(), 1.0)
    rt.close()


def test_untimed_runs_stay_untimed_after_a_timed_one():
    """A sequence made with timestamp queries writes timestamps on every evaluation (hundreds of
    microseconds a step on lavapipe): run() keeps it for the runs that ask for timestamps."""
    rt = Runtime()
    if not rt.facts.info.timestamps_supported:
        rt.close()
        pytest.skip("the device has no timestamp queries (timestampComputeAndGraphics)")
    a, b, copy_op = _copy_workload(rt)
    try:
        rt.run([rt.upload_op([a, b])])
        ticks = rt.run([copy_op, copy_op], timestamps=True)
        assert ticks is not None and len(ticks) == 3 and ticks[0] <= ticks[1] <= ticks[2]
        assert rt.run([copy_op]) is None
        sequences = rt._sequences
        untimed, timed = sequences.run_sequence, sequences.timed_run_sequence
        assert id(untimed) not in sequences.timed and id(timed) in sequences.timed
        assert rt.run([copy_op], timestamps=True) is not None and sequences.timed_run_sequence is timed
        assert rt.run([copy_op, copy_op, copy_op], timestamps=True) is not None  # a bigger pool
        assert sequences.timed_run_sequence is not timed and sequences.run_sequence is untimed
        rt.run([rt.download_op([b])])
        np.testing.assert_array_equal(b.data(), 1.0)
    finally:
        rt.close()


# -- validation is the judge -------------------------------------------------------------

PLANTED_HAZARD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from vk_adam._runtime import Runtime
    from vk_adam._runtime._kp import kp_module
    from vk_adam._rules.spirv import load_spirv

    rt = Runtime()
    kp = kp_module()
    n = 4096
    a, b, c = (rt.buffer(np.full(n, i, np.float32)) for i in (1, 2, 3))
    push = np.array([n // 4], np.uint32).view(np.float32)
    algo = rt.pipeline([a, b], load_spirv("copy"), n // 4, (), 1)
    ops = [rt.upload_op([a, b, c]), rt.dispatch_op(algo, push)]
    # OpTensorCopy reads b and writes c by a transfer, and records no barrier. c is always
    # covered (after its upload); b only in the "barrier" variant: without it, the copy races the
    # shader's write of b (read after write).
    ops.append(rt.barrier_op([b, c] if sys.argv[1] == "barrier" else [c]))
    ops.append(kp.OpTensorCopy([b, c]))
    rt.run(ops)
    rt.close()
    """
)


@pytest.mark.skipif(
    vk_pytest.find_validation_layer() is None,
    reason="Khronos validation layer not installed (the test command installs it, and its "
    "--vk-validation makes a missing layer an error)",
)
@pytest.mark.parametrize("variant", ["missing", "barrier"])
def test_validation_catches_a_planted_missing_barrier(tmp_path, variant):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_LAYER", "VK_INSTANCE"))}
    log = vk_pytest.enable_validation(tmp_path, env)
    env["PYTHONPATH"] = str(ROOT)
    subprocess.run([sys.executable, "-c", PLANTED_HAZARD, variant], env=env, check=True, timeout=120)
    text = log.read_text()
    assert vk_pytest.STATUS_MESSAGE in text  # the layer ran, with our settings
    hazards = [m for m in vk_pytest.validation_messages(text) if "SYNC-HAZARD" in m]
    if variant == "missing":
        assert len(hazards) == 1 and "SYNC-HAZARD-READ-AFTER-WRITE" in hazards[0].replace("_", "-")
    else:
        assert vk_pytest.validation_messages(text) == []


# -- the stock kp fallback ---------------------------------------------------------------

STOCK_CHECK = textwrap.dedent(
    """
    import warnings
    import numpy as np
    import vk_adam
    from vk_adam._rules.builtin import ADAMW
    from vk_adam._runtime import StockKpWarning, kp_features
    from vk_adam._runtime._kp import kp_module

    features = kp_features()
    assert not features.patched and not features.memory_barriers, features
    assert features.describe().startswith("kp 0.9.0 (stock: lacks fence reuse")
    rng = np.random.default_rng(int(__import__("sys").argv[1]))
    n = 10_000
    p = rng.standard_normal(n).astype(np.float32)
    ref = p.astype(np.float64)
    hyper = {**ADAMW.defaults, "lr": 0.01}
    state = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with vk_adam.AdamW([p], lr=0.01) as opt:
            for t in range(1, 7):
                g = (rng.standard_normal(n) * 0.1).astype(np.float32)
                opt.step([g], wait=t % 2 == 0)
                ADAMW.reference(ref, g.astype(np.float64), state, hyper, t)
            opt.synchronize()
        with vk_adam.AdamW([np.ones(3, np.float32)]):
            pass
    stock = [w for w in caught if issubclass(w.category, StockKpWarning)]
    assert len(stock) == 1, [str(w.message) for w in caught]
    err = np.max(np.abs(p - ref)) / np.max(np.abs(ref))
    assert err <= 2e-6, err

    # device params, recorded steps: the bridge copy orders them
    kp = kp_module()
    mgr = kp.Manager()
    param = mgr.tensor(p.copy())
    grad = mgr.tensor((rng.standard_normal(n) * 0.1).astype(np.float32))
    mgr.sequence().eval(kp.OpTensorSyncDevice([param, grad]))
    ref2 = p.astype(np.float64)
    state2 = {k: np.zeros(n) for k in ADAMW.state_names(hyper)}
    seq = mgr.sequence()
    with vk_adam.AdamW([param], lr=0.01, manager=mgr, zero_grad=False) as opt:
        for t in range(1, 11):
            opt.record_step(seq, [grad])
            ADAMW.reference(ref2, grad.data().astype(np.float64), state2, hyper, t)
        seq.eval()
    mgr.sequence().eval(kp.OpTensorSyncLocal([param]))
    err2 = np.max(np.abs(param.data() - ref2)) / np.max(np.abs(ref2))
    assert err2 <= 2e-6, err2
    print("stock ok", err, err2)
    """
)


@pytest.mark.skipif(
    not os.environ.get("VK_ADAM_STOCK_KP"),
    reason="VK_ADAM_STOCK_KP (a folder holding the stock kp 0.9.0) is set by scripts/test.sh",
)
def test_a_stock_kp_still_works_through_the_bridge_path(rng):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_LAYER", "VK_INSTANCE"))}
    env["PYTHONPATH"] = os.pathsep.join([os.environ["VK_ADAM_STOCK_KP"], str(ROOT)])
    seed = str(int(rng.integers(2**31)))
    done = subprocess.run(
        [sys.executable, "-c", STOCK_CHECK, seed], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stock ok" in done.stdout
    info = subprocess.run(
        [sys.executable, "-m", "vk_adam", "info"], env=env, capture_output=True, text=True, timeout=120
    )
    assert info.returncode == 0, info.stderr
    assert "kp 0.9.0 (stock" in info.stdout and "bridge-copy fallback" in info.stdout
