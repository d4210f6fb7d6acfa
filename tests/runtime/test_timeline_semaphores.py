"""Timeline semaphores (kp patch 0019): a submission that waits for a value and signals one,
the host's waits and signals, the refusals; on the H200, Vulkan and CUDA ordered by one exported
semaphore with no host wait between them (what the semaphores probe in benchmarks/h200/
measures against host waits), under validation."""

from __future__ import annotations

import time

import numpy as np
import pytest

kp = pytest.importorskip("kp")

from vk_adam._runtime._kp import kp_features  # noqa: E402
from vk_adam._runtime.external import ownership_transfer_op  # noqa: E402

from ..interop.test_cuda_interop import _cuda_sees, _download  # noqa: E402

pytestmark = pytest.mark.skipif(
    "timeline semaphores" not in kp_features().patches, reason="kp without vk-adam's patch 0019"
)


def _copy_after_earlier_transfers(source, target):
    """``source`` into ``target`` (kp's OpTensorCopy), after every earlier transfer to either:
    kp records no barrier of its own before it."""
    access, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
    written, used = int(access.transfer_write), int(access.transfer_read | access.transfer_write)
    barrier = kp.OpMemoryBarrier([source, target], written, used, int(stage.transfer), int(stage.transfer))
    return [barrier, kp.OpTensorCopy([source, target])]


@pytest.fixture()
def manager():
    mgr = kp.Manager()
    if not mgr.has_timeline_semaphores():
        mgr.destroy()
        pytest.skip("this Vulkan device has no timeline semaphores")
    yield mgr
    mgr.destroy()


def test_a_submission_runs_once_its_wait_is_signalled_and_signals_its_value(manager, rng):
    data = rng.standard_normal(1000).astype(np.float32)
    source, target = manager.tensor(data), manager.tensor(np.zeros(1000, np.float32))
    semaphore = manager.timeline_semaphore(3)
    assert semaphore.value() == 3
    seq = manager.sequence()
    for op in [kp.OpTensorSyncDevice([source]), *_copy_after_earlier_transfers(source, target)]:
        seq.record(op)
    seq.eval_async_with(wait=[(semaphore, 4)], signal=[(semaphore, 6)])
    time.sleep(0.05)
    assert seq.is_running() and semaphore.value() == 3  # nothing ran before the wait's value
    assert semaphore.wait(6, 1_000_000) is False  # a timeout is False, not an error
    semaphore.signal(4)
    assert semaphore.wait(6, 10_000_000_000) is True
    seq.eval_await()
    assert semaphore.value() == 6
    assert _download(manager, target).tobytes() == data.tobytes()
    semaphore.destroy()
    with pytest.raises(RuntimeError, match="destroyed"):
        seq.eval_async_with(wait=[(semaphore, 7)])
    assert not seq.is_running()  # the refused submission left the sequence usable
    seq.eval()
    for t in (source, target):
        t.destroy()


def test_export_needs_exportable_and_the_fd_extension(manager):
    plain = manager.timeline_semaphore()
    with pytest.raises(RuntimeError, match="exportable=True"):
        plain.fd()
    if manager.has_semaphore_fd_export():
        exported = manager.timeline_semaphore(exportable=True)
        fd = exported.fd()
        assert fd >= 0
        import os

        os.close(fd)
    else:  # lavapipe (Mesa 22.3) has no VK_KHR_external_semaphore_fd
        with pytest.raises(RuntimeError, match="VK_KHR_external_semaphore_fd"):
            manager.timeline_semaphore(exportable=True)


def test_cuda_and_vulkan_ordered_by_one_semaphore_alone(manager):
    """200 round trips: Vulkan releases the buffer and signals; a CUDA stream waits for that
    value, adds 1 to the buffer's view, signals the next; Vulkan's next submission waits for it,
    acquires the buffer and copies it. No host wait but the last fences; every value right."""
    if not _cuda_sees(manager) or not manager.has_semaphore_fd_export():
        pytest.skip("needs CUDA on the Vulkan device's GPU and exportable semaphores (runs on the H200)")
    import torch

    from vk_adam import interop
    from vk_adam._runtime import cuda

    n = 1 << 20
    t = interop.exportable_tensor(manager, np.zeros(n, np.float32))
    copy = manager.tensor(np.zeros(n, np.float32))
    manager.sequence().eval(kp.OpTensorSyncDevice([t, copy]))
    ordinal = cuda.device_for_uuid(interop.device_uuid(manager)).ordinal
    view = interop.as_torch(t)
    release = manager.sequence()
    release.record(ownership_transfer_op([t], manager, to_external=True))
    acquire = manager.sequence()
    acquire.record(ownership_transfer_op([t], manager, to_external=False))
    for op in _copy_after_earlier_transfers(t, copy):
        acquire.record(op)
    semaphore = manager.timeline_semaphore(0, exportable=True)
    driver = cuda.driver()
    imported = driver.import_semaphore(ordinal, semaphore.fd())
    stream = torch.cuda.current_stream().cuda_stream
    for i in range(200):
        v = 3 * i
        release.eval_async_with(signal=[(semaphore, v + 1)])
        driver.semaphore_async(ordinal, imported, v + 1, stream, signal=False)
        view.add_(1.0)
        driver.semaphore_async(ordinal, imported, v + 2, stream, signal=True)
        acquire.eval_async_with(wait=[(semaphore, v + 2)], signal=[(semaphore, v + 3)])
        release.eval_await()
        acquire.eval_await()
        if i in (0, 199):
            assert np.all(_download(manager, copy) == i + 1)
    driver.destroy_semaphore(ordinal, imported)
    semaphore.destroy()
    del view
    for x in (t, copy):
        x.destroy()
