"""ZeRO-1 with the collectives on the Vulkan buffers themselves (``distributed._nccl``): NCCL
on their CUDA mappings on an NVIDIA GPU; here, on lavapipe, the same Vulkan submissions and
ownership transfers with a host mirror standing in for CUDA under gloo
(``vk_adam._runtime.stand_in_for_cuda``), so every submission of the path runs under
validation, and the results are checked against one process bit for bit (one rank) and by
tests/distributed/test_zero1_device.py's checks (several ranks, torchrun). The NCCL transport itself runs on
the H200 (benchmarks/h200/, results in benchmarks/results/h200-2026-12-03-cuda/)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
import vk_adam.distributed as vkd  # noqa: E402
from vk_adam._runtime import stand_in_for_cuda  # noqa: E402
from vk_adam._runtime.external import ownership_transfers  # noqa: E402

from ..conftest import random_grad  # noqa: E402
from . import zero1_worker as worker  # noqa: E402
from .test_zero1_device import _run_case  # noqa: E402

pytestmark = pytest.mark.skipif(not ownership_transfers(), reason="kp without vk-adam's patch 0018")

MIRROR = "host mirror"


@pytest.fixture()
def mirror():
    stand_in_for_cuda(True)
    yield
    stand_in_for_cuda(False)


def _bytes(manager: Any, tensors: list[Any]) -> list[bytes]:
    return [a.tobytes() for a in worker.download(manager, tensors)]


@pytest.mark.parametrize(
    "options",
    [
        {"lr": 1e-2, "state_dtype": "int8-blockwise", "skip_nonfinite": True},
        {"lr": 3e-3, "weight_decay": 0.1, "state_dtype": "bfloat16"},
    ],
)
def test_one_rank_is_one_process_bit_for_bit(rng, one_rank, kp_manager, mirror, options):
    mgr = kp_manager
    sizes = [[6300, 130], [17, 4099]]
    start = [[rng.standard_normal(n).astype(np.float32) for n in group] for group in sizes]
    mine = [[worker.upload(mgr, a) for a in group] for group in start]
    theirs = [[worker.upload(mgr, a) for a in group] for group in start]

    def groups(tensors: list[list[Any]]) -> list[dict[str, Any]]:
        return [{"params": tensors[0], "lr": 3e-3}, {"params": tensors[1]}]

    opt = vkd.ZeroRedundancyOptimizer(groups(mine), "adamw", manager=mgr, **options)
    ref = vk_adam.create("adamw", groups(theirs), manager=mgr, **options)
    assert opt.device_staging is not None and opt.device_staging.startswith(MIRROR)
    flat = [n for group in sizes for n in group]
    for t in range(5):
        grads = [random_grad(rng, (n,)) for n in flat]
        if t == 3 and options.get("skip_nonfinite"):
            grads[2][5] = np.nan
        if t % 2 == 0:  # kp tensors, zeroed by the step as one process zeroes them
            given = [worker.upload(mgr, g) for g in grads]
            skipped = opt.step(given).skipped
            assert skipped or not any(a.any() for a in worker.download(mgr, given))
        else:  # NumPy arrays for kp params
            skipped = opt.step(grads).skipped
        assert ref.step(grads).skipped == skipped == (t == 3 and bool(options.get("skip_nonfinite")))
        assert set(opt.last_timings) >= {"staging", "reduce_scatter", "update", "all_gather", "total"}
    ours, expected = [t for g in mine for t in g], [t for g in theirs for t in g]
    assert _bytes(mgr, ours) == _bytes(mgr, expected)
    opt.consolidate_state_dict()
    saved, single = opt.state_dict(), ref.state_dict()
    assert saved["param_groups"] == single["param_groups"]
    for i, entry in single["state"].items():
        for key, value in entry.items():
            assert np.asarray(saved["state"][i][key]).tobytes() == np.asarray(value).tobytes(), (i, key)
    # a fresh optimizer loads the checkpoint and goes on as one process does
    fresh = vkd.ZeroRedundancyOptimizer(groups(mine), "adamw", manager=mgr, **options)
    fresh.load_state_dict(saved)
    grads = [random_grad(rng, (n,)) for n in flat]
    fresh.step([worker.upload(mgr, g) for g in grads])
    ref.step(grads)
    assert _bytes(mgr, ours) == _bytes(mgr, expected)
    for o in (opt, fresh, ref):
        o.close()


def test_step_without_grads_reads_the_grad_buffers(rng, one_rank, kp_manager, mirror):
    mgr = kp_manager
    start = rng.standard_normal(3000).astype(np.float32)
    param, other = worker.upload(mgr, start), worker.upload(mgr, start)
    opt = vkd.ZeroRedundancyOptimizer([param], "adamw", manager=mgr, lr=1e-2, clip_grad_norm=0.5)
    ref = vk_adam.AdamW([other], manager=mgr, lr=1e-2, clip_grad_norm=0.5)
    for _ in range(3):
        grad = random_grad(rng, (3000,))
        worker.upload(mgr, grad, opt.grad_buffer(0, 0))
        opt.step()
        ref.step([grad])
        assert not worker.download(mgr, [opt.grad_buffer(0, 0)])[0].any()
    # the same gradient buffers every step: the pull and the push were recorded once each (a
    # sequence made and recorded again each step costs more than the step's GPU work)
    assert opt._nccl is not None and opt._nccl.recordings == 2
    # clipping: the norm is summed in float64 on the collectives' side, in float32 by one
    # process's device, so the results agree to float32 rounding, not bit for bit
    a, b = worker.download(mgr, [param, other])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 * np.abs(b).max())
    assert abs(opt.last_grad_norm() - ref.last_grad_norm()) <= 1e-6 * ref.last_grad_norm()
    opt.close()
    ref.close()


def test_fresh_gradient_tensors_each_step_keep_nothing_of_earlier_steps(rng, one_rank, kp_manager, mirror):
    """A new kp tensor for the gradients every step: the copies recorded for earlier ones (and
    their pipelines, which hold the tensors) are freed, so memory stays flat."""
    mgr = kp_manager
    param = worker.upload(mgr, rng.standard_normal(5000).astype(np.float32))
    opt = vkd.ZeroRedundancyOptimizer([param], "adamw", manager=mgr, lr=1e-2)
    counts = []
    for _ in range(6):
        grad = worker.upload(mgr, random_grad(rng, (5000,)))
        opt.step([grad])
        counts.append(len(opt._nccl._pipelines))  # type: ignore[union-attr]
        grad.destroy()
    assert counts[1:] == [counts[1]] * 5, counts
    opt.close()


def test_without_the_stand_in_gloo_keeps_the_host_path(rng, one_rank, kp_manager):
    param = worker.upload(kp_manager, rng.standard_normal(100).astype(np.float32))
    opt = vkd.ZeroRedundancyOptimizer([param], "adamw", manager=kp_manager)
    assert opt.device_staging is not None and not opt.device_staging.startswith(MIRROR)
    opt.close()


@pytest.mark.exclusive  # needs the machine to itself (scripts/test.sh runs it alone)
@pytest.mark.slow  # multi-process
@pytest.mark.parametrize(("world", "case"), [(2, "kp-adamw-clip-groups"), (3, "kp-int8-skip")])
def test_torchrun_over_the_vulkan_buffers_matches_one_process(tmp_path, kp_manager, world, case, vk_seed):
    _run_case("torch", world, case, tmp_path, kp_manager, MIRROR, vk_seed, host_mirror=True)


def test_the_nccl_transport_is_chosen_only_for_nccl_on_the_same_gpu(
    one_rank, kp_manager, mirror, monkeypatch
):
    from vk_adam.distributed import _nccl
    from vk_adam.distributed._comm import make_communicator
    from vk_adam.distributed._plan import Unit

    comm = make_communicator(None, None)  # gloo
    units = [Unit(0, 0, 0, [], 256, 100, "float32", tensor=object())]
    host_units = [Unit(0, 0, 0, [], 256, 100, "float32")]
    assert _nccl.wanted(comm, host_units, kp_manager) is None  # NumPy params: the host path
    monkeypatch.setenv("VK_ADAM_NCCL_ON_VULKAN", "0")
    assert _nccl.wanted(comm, units, kp_manager) is None  # turned off
    monkeypatch.delenv("VK_ADAM_NCCL_ON_VULKAN")
    assert isinstance(_nccl.wanted(comm, units, kp_manager), _nccl.HostMirrorBridge)
    stand_in_for_cuda(False)
    assert _nccl.wanted(comm, units, kp_manager) is None  # gloo: no NCCL


NCCL_WORLD_OF_ONE = r"""
import json, sys
import numpy as np, torch, torch.distributed as dist
import vk_adam, vk_adam.distributed as vkd
from vk_adam._runtime import Runtime
torch.cuda.set_device(0)
dist.init_process_group("nccl")
rng = np.random.default_rng(int(sys.argv[1]))
rt = Runtime(device=0)
sizes = [1 << 20, 4099, 130]
start = [rng.standard_normal(n).astype(np.float32) for n in sizes]
mine, theirs = [rt.buffer(a) for a in start], [rt.buffer(a) for a in start]
rt.run([rt.upload_op(mine + theirs)])
options = {"lr": 1e-2, "weight_decay": 0.1, "skip_nonfinite": True}
opt = vkd.ZeroRedundancyOptimizer(mine, "adamw", manager=rt.manager, **options)
ref = vk_adam.AdamW(theirs, manager=rt.manager, **options)
skipped = []
for t in range(6):
    grads = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    if t == 2:
        grads[1][3] = np.inf
    given = [rt.buffer(g) for g in grads]
    rt.run([rt.upload_op(given)])
    skipped.append([opt.step(given).skipped, ref.step(grads).skipped])
rt.run([rt.download_op(mine + theirs)])
same = [a.data().tobytes() == b.data().tobytes() for a, b in zip(mine, theirs)]
print(json.dumps({"staging": opt.device_staging, "comm": opt.communicator, "same": same,
                  "skipped": skipped, "timings": opt.last_timings}))
opt.close(); ref.close()
dist.destroy_process_group()
"""


def _run_on_nccl(script: str, rng: Any, order: str) -> dict[str, Any]:
    """``script`` in a process of its own, as rank 0 of an NCCL group of one on this machine's
    GPU, Vulkan's and CUDA's work ordered by ``order``; the JSON its last line prints. Skipped
    without CUDA and NCCL."""
    import json
    import os
    import socket
    import subprocess
    import sys

    import torch

    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        pytest.skip("needs CUDA and NCCL (runs on the H200)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    env["MASTER_PORT"] = str(port)
    env["VK_ADAM_NCCL_ORDER"] = order
    seed = str(int(rng.integers(2**31)))
    done = subprocess.run(
        [sys.executable, "-c", script, seed], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["staging"].startswith("NCCL on the Vulkan buffers"), result
    assert ("timeline semaphores" in result["staging"]) == (order == "semaphores"), result
    return result


@pytest.mark.parametrize("order", ["host", "semaphores"])
def test_nccl_at_world_size_one_on_the_vulkan_buffers_is_one_process_bit_for_bit(rng, order):
    """Both ways of ordering Vulkan's and CUDA's work: host waits, and a timeline semaphore."""
    result = _run_on_nccl(NCCL_WORLD_OF_ONE, rng, order)
    assert "nccl" in result["comm"]
    assert result["same"] == [True, True, True]
    assert result["skipped"] == [[t == 2, t == 2] for t in range(6)]


NCCL_IN_PLACE = r"""
import json, sys
import numpy as np, torch, torch.distributed as dist
import vk_adam, vk_adam.distributed as vkd
from vk_adam._runtime import Runtime
torch.cuda.set_device(0)
dist.init_process_group("nccl")
rng = np.random.default_rng(int(sys.argv[1]))
rt = Runtime(device=0)
sizes = [[3 << 18, 1000], [4099, 64, 77]]  # lengths that are not whole blocks: padded pieces
start = [[rng.standard_normal(n).astype(np.float32) for n in group] for group in sizes]
mine = [[rt.buffer(a) for a in group] for group in start]
theirs = [[rt.buffer(a) for a in group] for group in start]
rt.run([rt.upload_op([t for group in mine + theirs for t in group])])

def groups(tensors):
    return [{"params": tensors[0], "lr": 3e-3, "weight_decay": 0.1}, {"params": tensors[1]}]

options = {"lr": 1e-2, "state_dtype": "bfloat16"}
opt = vkd.ZeroRedundancyOptimizer(groups(mine), "adamw", manager=rt.manager, **options)
ref = vk_adam.create("adamw", groups(theirs), manager=rt.manager, **options)
flat = [n for group in sizes for n in group]
cleared = []
for t in range(12):
    grads = [rng.standard_normal(n).astype(np.float32) for n in flat]
    if t % 3 == 2:  # the optimizer's gradient buffers, written on the device, step() without grads
        read = [opt.grad_buffer(g, i) for g, group in enumerate(sizes) for i in range(len(group))]
        for buffer, grad in zip(read, grads):
            rt.host_view(buffer)[:] = grad
        rt.run([rt.upload_op(read)])
        opt.step()
    else:  # fresh kp tensors
        read = [rt.buffer(g) for g in grads]
        rt.run([rt.upload_op(read)])
        opt.step(read)
    ref.step(grads)
    rt.run([rt.download_op(read)])
    cleared.append(all(not rt.host_view(b).any() for b in read))
ours, expected = [t for g in mine for t in g], [t for g in theirs for t in g]
rt.run([rt.download_op(ours + expected)])
same = [a.data().tobytes() == b.data().tobytes() for a, b in zip(ours, expected)]
opt.consolidate_state_dict()
saved, single = opt.state_dict(), ref.state_dict()
state = saved["param_groups"] == single["param_groups"] and all(
    np.asarray(saved["state"][i][key]).tobytes() == np.asarray(value).tobytes()
    for i, entry in single["state"].items()
    for key, value in entry.items()
)
print(json.dumps({"staging": opt.device_staging, "same": same, "state": state, "cleared": cleared}))
opt.close(); ref.close()
dist.destroy_process_group()
"""


@pytest.mark.parametrize("order", ["host", "semaphores"])
def test_nccl_in_place_at_world_size_one_keeps_params_and_state_one_process_bit_for_bit(rng, order):
    """The collectives run in place on the two shared buffers (at one rank NCCL copies nothing):
    after 12 steps over two param groups of padded pieces, with fresh gradient tensors and the
    optimizer's gradient buffers in turn, every param and the whole state dict are one process's,
    bit for bit, and every gradient read was cleared."""
    result = _run_on_nccl(NCCL_IN_PLACE, rng, order)
    assert result["same"] == [True] * 5, result
    assert result["state"] is True, result
    assert result["cleared"] == [True] * 12, result
