"""Vulkan external memory (vk_adam.interop, kp patch 0017) on lavapipe: export and import across
devices and processes, fd ownership, the refusals, and the refusal of never-written kp tensors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
from vk_adam import interop  # noqa: E402
from vk_adam._runtime.external import supported  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not supported(), reason="kp without vk-adam's patch 0017 (stock kp)")


def _download(mgr: object, tensor: object) -> np.ndarray:
    mgr.sequence().eval(kp.OpTensorSyncLocal([tensor]))  # type: ignore[attr-defined]
    return np.array(tensor.data())  # type: ignore[attr-defined]


def _upload(mgr: object, tensor: object, values: np.ndarray) -> None:
    tensor.data()[:] = values  # type: ignore[attr-defined]
    mgr.sequence().eval(kp.OpTensorSyncDevice([tensor]))  # type: ignore[attr-defined]


@pytest.fixture()
def two_devices():
    a, b = kp.Manager(), kp.Manager()
    yield a, b
    b.destroy()
    a.destroy()


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_export_import_shares_memory_both_ways(two_devices, rng):
    a, b = two_devices
    values = rng.standard_normal((64, 33)).astype(np.float32)
    t = interop.exportable_tensor(a, values)
    ext = interop.export_memory(t)
    assert (ext.size, ext.offset, ext.dtype, ext.shape) == (values.nbytes, 0, "float32", (64, 33))
    meta = ext.metadata()
    assert json.loads(json.dumps(meta)) == meta and "fd" not in meta
    assert meta["device_uuid"] == interop.device_uuid(a) == interop.device_uuid(b) != ""
    t2 = interop.import_memory(ext.fd, meta, manager=b)
    assert not ext.closed  # the import took a dup: the fd is still the ExternalMemory's
    ext.close()
    np.testing.assert_array_equal(_download(b, t2), values.reshape(-1))
    # Writes through either device reach the other, with no copy between them.
    new = rng.standard_normal(values.size).astype(np.float32)
    _upload(b, t2, new)
    np.testing.assert_array_equal(_download(a, t), new)


def test_fd_counts_stay_flat_over_a_thousand_export_import_cycles(two_devices):
    a, b = two_devices
    t = interop.exportable_tensor(a, np.arange(1024, dtype=np.float32))
    before = _fd_count()
    for i in range(1000):
        ext = interop.export_memory(t)
        if i % 2:
            t2 = interop.import_memory(ext.fd, ext.metadata(), manager=b)  # imports a dup
            t2.destroy()  # the driver closes the dup with the memory
        ext.close()  # the caller's fd, imported or not
    assert _fd_count() == before


def test_a_second_process_reads_the_trainers_weights_live():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "interop" / "live_weights.py"), "--steps", "4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("reader sum") == 4
    assert "bit for bit" in out.stdout


def test_bad_input_is_refused_and_the_fd_stays_the_callers(two_devices):
    a, b = two_devices
    t = interop.exportable_tensor(a, np.ones(256, np.float32))
    ext = interop.export_memory(t)
    meta = ext.metadata()
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(ValueError, match="not the exported memory"):
            interop.import_memory(read_end, meta, manager=b)
        os.fstat(read_end)  # still open: a failed import leaves the fd with the caller
        with pytest.raises(ValueError, match="does not match shape"):
            interop.import_memory(ext.fd, {**meta, "shape": [257]}, manager=b)
        with pytest.raises(ValueError, match="dtype"):
            interop.import_memory(ext.fd, {**meta, "dtype": "float16"}, manager=b)
        other = "00" * 16
        with pytest.raises(ValueError, match=f"deviceUUID {other}.*deviceUUID {meta['device_uuid']}"):
            interop.import_memory(ext.fd, {**meta, "device_uuid": other}, manager=b)
        with pytest.raises(ValueError, match="lacks"):
            interop.import_memory(ext.fd, {"version": 1}, manager=b)
        os.fstat(ext.fd)  # none of the refusals took it
        fd = ext.fd
        ext.close()
        with pytest.raises(ValueError, match="closed"):
            interop.import_memory(ext, meta, manager=b)
        with pytest.raises(ValueError, match="closed"):
            ext.metadata()
        with pytest.raises(ValueError, match="not open"):
            interop.import_memory(fd, meta, manager=b)
    finally:
        os.close(read_end)
        os.close(write_end)
    with pytest.raises(ValueError, match="not exportable"):
        interop.export_memory(a.tensor(np.zeros(4, np.float32)))
    with pytest.raises(TypeError, match="float32, uint32 or int32"):
        interop.exportable_tensor(a, np.zeros(4, np.float64))


def test_an_exportable_tensor_steps_like_any_kp_tensor(two_devices, rng):
    a, _ = two_devices
    p0 = rng.standard_normal(512).astype(np.float32)
    g = rng.standard_normal(512).astype(np.float32)
    shared = interop.exportable_tensor(a, p0)
    plain = a.tensor(p0.copy())
    grad = a.tensor(g)
    a.sequence().eval(kp.OpTensorSyncDevice([plain, grad]))
    with vk_adam.AdamW([shared], manager=a) as o1, vk_adam.AdamW([plain], manager=a) as o2:
        o1.step([grad])
        a.sequence().eval(kp.OpTensorSyncDevice([grad]))  # the first step zeroed it
        o2.step([grad])
    np.testing.assert_array_equal(_download(a, shared), _download(a, plain))
    assert not np.array_equal(_download(a, shared), p0)


def test_a_kp_tensor_never_written_is_refused_until_uploaded(two_devices, rng):
    a, _ = two_devices
    p = a.tensor(rng.standard_normal(300).astype(np.float32))  # staging filled, device not
    g = a.tensor(rng.standard_normal(300).astype(np.float32))
    with vk_adam.AdamW([p], manager=a) as opt:
        with pytest.raises(ValueError, match=r"param 0 of group 0 .*never written.*OpTensorSyncDevice"):
            opt.step([g])
        a.sequence().eval(kp.OpTensorSyncDevice([p]))
        with pytest.raises(ValueError, match=r"grad for param 0 .*never written"):
            opt.step([g])
        assert opt.param_groups[0]["params"] is not None
        a.sequence().eval(kp.OpTensorSyncDevice([g]))
        before = _download(a, p)
        opt.step([g])
        after = _download(a, p)
    assert np.all(np.isfinite(after)) and not np.array_equal(before, after)


def test_adam_update_refuses_kp_tensors_never_written(two_devices):
    a, _ = two_devices
    values = np.full(64, 5.0, np.float32)
    buffers = [a.tensor(values.copy()) for _ in range(4)]  # staging filled, device memory not
    a.sequence().eval(kp.OpTensorSyncDevice(buffers[:2]))
    with pytest.raises(ValueError, match=r"exp_avg is a kp tensor whose device memory was never written"):
        vk_adam.adam_update(*buffers, 1, {"lr": 1e-3}, manager=a)
    assert np.array_equal(_download(a, buffers[0]), values)  # nothing was stepped
    a.sequence().eval(kp.OpTensorSyncDevice(buffers[2:]))
    vk_adam.adam_update(*buffers, 1, {"lr": 1e-3}, manager=a)
    assert np.all(_download(a, buffers[0]) < 5.0)


def test_device_info_reports_the_uuid_and_what_can_be_shared():
    with vk_adam.AdamW([np.zeros(8, np.float32)]) as opt:
        info = opt.device
    assert len(info.device_uuid) == 32
    assert "fd export" in info.external_memory and "fd import" in info.external_memory
