"""Optimizers and shared memory (kp patch 0017): ``exportable=True`` buffers read through another
VkDevice, and an application's exportable tensors as params and gradients."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

kp = pytest.importorskip("kp")

import vk_adam  # noqa: E402
from vk_adam import interop  # noqa: E402
from vk_adam._runtime import facts as facts_module  # noqa: E402
from vk_adam._runtime.external import supported  # noqa: E402

from ..conftest import random_grad, scale_error  # noqa: E402

pytestmark = pytest.mark.skipif(not supported(), reason="kp without vk-adam's patch 0017 (stock kp)")


def _read(manager: object, tensor: object) -> np.ndarray:
    manager.sequence().eval(kp.OpTensorSyncLocal([tensor]))  # type: ignore[attr-defined]
    return np.array(tensor.data())  # type: ignore[attr-defined]


@pytest.fixture()
def reader():
    manager = kp.Manager()
    yield manager
    manager.destroy()


def _shared(tensor: object, reader: object) -> object:
    ext = interop.export_memory(tensor)
    return interop.import_memory(ext, ext.metadata(), manager=reader)


def test_exportable_optimizer_buffers_are_read_live_by_another_device(rng, reader):
    shapes = [(40, 30), (7,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with vk_adam.AdamW(params, lr=1e-2, exportable=True) as opt:
        offsets = opt.param_offsets()
        views = {
            "param": _shared(opt.param_buffer(), reader),
            "grad": _shared(opt.grad_buffer(), reader),
            "exp_avg": _shared(opt.state_buffer("exp_avg"), reader),
            "exp_avg_sq": _shared(opt.state_buffer("exp_avg_sq"), reader),
        }
        for _ in range(3):
            grads = [random_grad(rng, s) for s in shapes]
            opt.step(grads, wait=True)
            seen = {name: _read(reader, t) for name, t in views.items()}
            state = opt.state_dict()["state"]
            for i, ((offset, shape), p) in enumerate(zip(offsets, params, strict=True)):
                size = int(np.prod(shape))
                assert seen["param"][offset : offset + size].tobytes() == p.tobytes()
                for name in ("exp_avg", "exp_avg_sq"):
                    np.testing.assert_array_equal(
                        seen[name][offset : offset + size], state[i][name].reshape(-1)
                    )
            assert not seen["grad"].any()  # zero_grad=True: the step zeroed it on the device
        with pytest.raises(KeyError, match="exp_avg"):
            opt.state_buffer("momentum_buffer")


def test_buffers_are_not_exportable_by_default(rng):
    with vk_adam.AdamW([rng.standard_normal(16).astype(np.float32)], lr=1e-3) as opt:
        with pytest.raises(ValueError, match="exportable=True"):
            interop.export_memory(opt.param_buffer())


def test_exportable_is_refused_where_the_device_cannot_export(rng, monkeypatch):
    real = facts_module.with_sharing

    def without_export(info, sharing):
        found = real(info, sharing)
        return replace(found, external_memory=tuple(a for a in found.external_memory if a != "fd export"))

    monkeypatch.setattr(facts_module, "with_sharing", without_export)
    with pytest.raises(ValueError, match="cannot export"):
        vk_adam.AdamW([rng.standard_normal(16).astype(np.float32)], lr=1e-3, exportable=True)
    with pytest.raises(TypeError, match="exportable must be True or False"):
        vk_adam.AdamW([rng.standard_normal(16).astype(np.float32)], lr=1e-3, exportable="yes")


def test_an_applications_exportable_tensors_as_params_and_grads(rng, kp_manager, reader):
    start = rng.standard_normal(4096).astype(np.float32)
    param = interop.exportable_tensor(kp_manager, start)
    grad = interop.exportable_tensor(kp_manager, np.zeros(4096, np.float32))
    seen = _shared(param, reader)
    expected = start.copy()
    f64, m, v = start.astype(np.float64), np.zeros(4096), np.zeros(4096)
    with (
        vk_adam.AdamW([param], lr=1e-2, manager=kp_manager) as opt,
        vk_adam.AdamW([expected], lr=1e-2) as ref,
    ):
        for step in range(1, 4):
            g = random_grad(rng, (4096,))
            grad.data()[:] = g
            kp_manager.sequence().eval(kp.OpTensorSyncDevice([grad]))
            opt.step([grad])
            ref.step([g.copy()])
            # the same bits as NumPy params, read through the other device
            assert _read(reader, seen).tobytes() == expected.tobytes()
            f64 *= 1 - 1e-2 * 1e-2  # torch's AdamW in float64
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g.astype(np.float64) ** 2
            f64 -= 1e-2 / (1 - 0.9**step) * m / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    assert scale_error(_read(reader, seen), f64) < 2e-6
