"""CUDA views of Vulkan buffers (``interop.as_torch``) and the hand-over between the APIs
(``to_cuda`` / ``to_vulkan``, kp patch 0018's queue family ownership transfers).

On lavapipe: the hand-over's barriers under validation, and the refusals. On a machine where
CUDA sees the Vulkan device's GPU (the H200): bit-exact round trips, 1,000 hand-overs each way
with this process's GPU memory, CUDA imports, fds and RSS flat, and an optimizer's exportable
buffers viewed by torch.

Memory is measured for this process only, so that the checks hold on a GPU other processes use
(pytest-xdist's other workers, another job): NVML's per-process usage (nvidia-ml-py) where NVML
lists this process, and always the CUDA imports vk-adam made and has not released (counted at
its driver) and torch's reserved memory. Never the device's free memory, which moves with every
other process on the GPU."""

from __future__ import annotations

import os
import resource

import numpy as np
import pytest

kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
from vk_adam import interop  # noqa: E402
from vk_adam._runtime.external import ownership_transfers  # noqa: E402

pytestmark = pytest.mark.skipif(not ownership_transfers(), reason="kp without vk-adam's patch 0018")


def _cuda_sees(manager: object) -> bool:
    """torch with CUDA, and a CUDA device that is ``manager``'s GPU."""
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    from vk_adam._runtime import cuda

    uuid = interop.device_uuid(manager)
    return any(d.uuid == uuid for d in cuda.driver().devices())


@pytest.fixture()
def manager():
    mgr = kp.Manager()
    yield mgr
    mgr.destroy()


@pytest.fixture()
def cuda_manager(manager):
    if not _cuda_sees(manager):
        pytest.skip("needs CUDA on the Vulkan device's GPU (runs on the H200)")
    return manager


def _download(mgr: object, tensor: object) -> np.ndarray:
    mgr.sequence().eval(kp.OpTensorSyncLocal([tensor]))  # type: ignore[attr-defined]
    return np.array(tensor.data())  # type: ignore[attr-defined]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _nvml_process_bytes(ordinal: int) -> int | None:
    """This process's GPU memory on CUDA device ``ordinal`` as NVML counts it (its compute and
    graphics contexts: CUDA's and Vulkan's allocations), or None where NVML cannot say: no
    nvidia-ml-py, a driver that withholds per-process usage, or a PID namespace (a container)
    that hides this process from NVML."""
    try:
        import pynvml
    except ImportError:
        return None
    from vk_adam._runtime import cuda

    hexed = cuda.driver().devices()[ordinal].uuid
    uuid = "GPU-" + "-".join((hexed[:8], hexed[8:12], hexed[12:16], hexed[16:20], hexed[20:]))
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        used = [
            proc.usedGpuMemory
            for query in (
                pynvml.nvmlDeviceGetComputeRunningProcesses,
                pynvml.nvmlDeviceGetGraphicsRunningProcesses,
            )
            for proc in query(handle)
            if proc.pid == os.getpid()
        ]
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()
    if not used or any(u is None for u in used):
        return None
    return int(sum(used))


@pytest.fixture
def cuda_imports(monkeypatch):
    """The CUDA objects vk-adam's driver imported in this test and has not released yet
    (external memory, semaphores): counted at the driver, so other processes do not move them."""
    from vk_adam._runtime import cuda

    driver = cuda.driver()
    live = {"memory": 0, "semaphores": 0}

    def counted(name, key, delta):
        original = getattr(driver, name)

        def call(*args, **kwargs):
            result = original(*args, **kwargs)
            live[key] += delta
            return result

        monkeypatch.setattr(driver, name, call)

    counted("import_fd", "memory", 1)
    counted("release", "memory", -1)
    counted("import_semaphore", "semaphores", 1)
    counted("destroy_semaphore", "semaphores", -1)
    return live


def _process_marks(ordinal: int, cuda_imports: dict[str, int]) -> dict[str, object]:
    """What this process holds now: NVML's per-process bytes (None where NVML cannot say), the
    live CUDA imports, torch's reserved CUDA memory, open fds and RSS."""
    import torch

    torch.cuda.synchronize()
    return {
        "nvml_bytes": _nvml_process_bytes(ordinal),
        "imports": dict(cuda_imports),
        "torch_reserved": torch.cuda.memory_reserved(ordinal),
        "fds": _fds(),
        "rss_mib": _rss_mib(),
    }


def _assert_flat(before: dict[str, object], after: dict[str, object], what: str, rss_mib: float = 16) -> None:
    assert after["fds"] == before["fds"], f"{what} leaked fds: {before['fds']} -> {after['fds']}"
    assert after["imports"] == before["imports"], (
        f"{what} left CUDA imports: {before['imports']} -> {after['imports']}"
    )
    assert after["torch_reserved"] == before["torch_reserved"], f"{what} grew torch's CUDA memory"
    if before["nvml_bytes"] is not None and after["nvml_bytes"] is not None:
        moved = after["nvml_bytes"] - before["nvml_bytes"]
        assert abs(moved) <= 2 * 2**20, f"{what}: this process's GPU memory (NVML) moved {moved} bytes"
    grew = after["rss_mib"] - before["rss_mib"]
    assert grew < rss_mib, f"{what}: RSS grew {grew:.1f} MiB"


# -- any Vulkan device --------------------------------------------------------------------------


def test_hand_over_keeps_the_contents_and_pairs_release_with_acquire(manager, rng):
    values = rng.standard_normal(4099).astype(np.float32)
    t = interop.exportable_tensor(manager, values)
    for _ in range(3):
        interop.to_cuda(t)
        interop.to_cuda(t)  # already CUDA's: skipped, no second release
        interop.to_vulkan(t)
        interop.to_vulkan(t)  # already Vulkan's: skipped
    np.testing.assert_array_equal(_download(manager, t), values)


def test_an_optimizer_steps_a_buffer_that_came_back_from_the_other_api(manager, rng):
    values = rng.standard_normal(3000).astype(np.float32)
    grad = rng.standard_normal(3000).astype(np.float32)
    p = interop.exportable_tensor(manager, values)
    g = interop.exportable_tensor(manager, grad)
    with vk_adam.AdamW([p], lr=1e-2, manager=manager, zero_grad=False) as opt:
        opt.step([g])
        interop.to_cuda(p, g)
        interop.to_vulkan(p, g)
        opt.step([g])
    expected = values.copy()
    with vk_adam.AdamW([expected], lr=1e-2) as ref:
        ref.step([grad])
        ref.step([grad])
    np.testing.assert_array_equal(_download(manager, p), expected)


def test_refusals(manager):
    plain = manager.tensor(np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="exportable_tensor"):
        interop.as_torch(plain)
    with pytest.raises(ValueError, match="exportable_tensor"):
        interop.to_cuda(plain)
    with pytest.raises(TypeError, match="kp tensors"):
        interop.as_torch(np.zeros(4, np.float32))
    t = interop.exportable_tensor(manager, np.zeros(16, np.float32))
    t.destroy()
    with pytest.raises(ValueError, match="destroyed"):
        interop.to_vulkan(t)


def test_without_cuda_as_torch_says_what_it_needs(manager):
    if _cuda_sees(manager):
        pytest.skip("CUDA sees this GPU: the refusal is for machines without it")
    t = interop.exportable_tensor(manager, np.zeros(16, np.float32))
    with pytest.raises((RuntimeError, ImportError, ValueError), match=r"CUDA|torch"):
        interop.as_torch(t)


# -- CUDA on the same GPU (H200) ----------------------------------------------------------------


def test_as_torch_sees_the_vulkan_bytes_and_vulkan_sees_cuda_writes(cuda_manager, rng):
    import torch

    values = rng.standard_normal((257, 33)).astype(np.float32)
    t = interop.exportable_tensor(cuda_manager, values)
    view = interop.as_torch(t)
    assert view.is_cuda and view.dtype == torch.float32 and tuple(view.shape) == (257, 33)
    interop.to_cuda(t)
    np.testing.assert_array_equal(view.cpu().numpy(), values)
    view.mul_(2.0).add_(1.0)
    interop.to_vulkan(t)
    expected = torch.from_numpy(values).cuda().mul_(2.0).add_(1.0).cpu().numpy()
    np.testing.assert_array_equal(_download(cuda_manager, t).reshape(257, 33), expected)
    assert interop.as_torch(t).data_ptr() == view.data_ptr()  # one mapping per buffer


def test_a_thousand_hand_overs_each_way_exact_and_flat(cuda_manager, rng, cuda_imports):
    import torch

    n = 1 << 16
    values = rng.standard_normal(n).astype(np.float32)
    grad = rng.standard_normal(n).astype(np.float32)
    p = interop.exportable_tensor(cuda_manager, values)
    g = interop.exportable_tensor(cuda_manager, grad)
    view = interop.as_torch(p)
    ordinal = view.device.index
    reference = torch.from_numpy(values).cuda()
    expected_host = values.copy()
    with (
        vk_adam.SGD([p], lr=0.5, manager=cuda_manager, zero_grad=False) as opt,
        vk_adam.SGD([expected_host], lr=0.5, zero_grad=False) as ref,
    ):
        marks = []
        for i in range(1000):
            opt.step([g])  # Vulkan writes p
            ref.step([grad])
            interop.to_cuda(p, g)
            view.add_(1.0)  # CUDA writes p
            expected_host += np.float32(1.0)
            interop.to_vulkan(p, g)
            if i in (99, 999):
                marks.append(_process_marks(ordinal, cuda_imports))
        interop.to_cuda(p)
        np.testing.assert_array_equal(view.cpu().numpy(), expected_host)
        interop.to_vulkan(p)
        np.testing.assert_array_equal(_download(cuda_manager, p), expected_host)
    del reference
    _assert_flat(*marks, "900 hand-overs")


def test_mapping_and_unmapping_does_not_leak(cuda_manager, cuda_imports):
    t = interop.exportable_tensor(cuda_manager, np.arange(1 << 20, dtype=np.float32))
    ordinal = interop.as_torch(t).device.index
    before = _process_marks(ordinal, cuda_imports)
    for _ in range(200):
        view = interop.as_torch(t)
        assert float(view[5]) == 5.0
        del view  # the last torch tensor over it: the mapping goes
    after = _process_marks(ordinal, cuda_imports)
    assert cuda_imports["memory"] == 0, "a mapping outlived its last torch tensor"
    _assert_flat(before, after, "200 mappings", rss_mib=8)


def test_an_optimizers_exportable_buffers_are_viewed_by_torch(cuda_manager, rng):
    params = rng.standard_normal(5000).astype(np.float32)
    grads = rng.standard_normal(5000).astype(np.float32)
    p = interop.exportable_tensor(cuda_manager, params)
    with vk_adam.AdamW([p], lr=1e-3, manager=cuda_manager, exportable=True) as opt:
        opt.step([interop.exportable_tensor(cuda_manager, grads)])
        m = opt.state_buffer("exp_avg")
        interop.to_cuda(m)
        # exp_avg after one step is (1 - beta1) * grad, computed in float32 by the shader
        np.testing.assert_allclose(interop.as_torch(m).cpu().numpy()[:5000], 0.1 * grads, rtol=1e-6)
        interop.to_vulkan(m)


def test_the_cuda_view_example_in_a_fresh_process(cuda_manager):
    """examples/interop/cuda_view.py, whose first CUDA call is as_torch: the process's first
    mapping must alias the Vulkan buffer as later ones do."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "interop" / "cuda_view.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[:3] == ["step 1: -0.1000 on CUDA", "step 2: -0.2000 on CUDA", "step 3: -0.3000 on CUDA"]
    assert lines[-1] == "after 3 steps, clamped at -0.25: -0.2500 on Vulkan"
