"""A buffer the device cannot allocate is a clear error, never a crash, and the device goes on
working: vk-adam's kp checks vkAllocateMemory's result (patch 0022) and vk-adam raises
``DeviceMemoryError`` naming the memory that ran out.

lavapipe takes its memory from the process's address space, so each case runs in a child process
whose address space is capped (``RLIMIT_AS``) just above what it holds once the device is open.
A GPU's device memory is not in that address space: there these cases are skipped.
Under ``--vk-validation`` the child runs under the layer too, with a log of its own: the driver's
report of the failed allocation (VK_ERROR_OUT_OF_DEVICE_MEMORY) is the only message allowed there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vk_adam
from vk_adam._runtime import kp_features
from vk_adam._validation import validation_messages

#: The driver's own report of the allocation the test makes fail (lavapipe logs it as an error).
EXPECTED = "VK_ERROR_OUT_OF_DEVICE_MEMORY"

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's"),
    pytest.mark.skipif(
        "allocation results" not in kp_features().patches,
        reason="this kp build does not check vkAllocateMemory's result (vk-adam's patch 0022)",
    ),
]

PRELUDE = """
import resource
import numpy as np
import vk_adam

def cap(extra):
    status = open("/proc/self/status").read()
    held = int(status.split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (held + extra, resource.RLIM_INFINITY))

def uncap():
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

def adamw_first_step_works(handle):
    rng = np.random.default_rng(1)
    p = rng.standard_normal(4096).astype(np.float32)
    g = rng.standard_normal(4096).astype(np.float32)
    want = p.astype(np.float64) * (1 - 1e-3 * 1e-2) - 1e-3 * g / (np.abs(g) + 1e-8)
    opt = vk_adam.AdamW([p], lr=1e-3, weight_decay=1e-2, manager=handle.manager)
    opt.step([g])
    opt.close()
    assert np.max(np.abs(p - want)) < 1e-6, np.max(np.abs(p - want))
"""


@pytest.fixture(autouse=True)
def _software_device(vulkan_device: vk_adam.DeviceInfo) -> None:
    if not vulkan_device.is_software:
        pytest.skip(f"{vulkan_device.name}: device memory is not the process's address space (RLIMIT_AS)")


def run_child(body: str, tmp_path: Path) -> str:
    code = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ)
    log = tmp_path / "child-validation.log"
    if "KOMPUTE_VALIDATION_LOG" in env:  # under --vk-validation: the child's messages apart
        env["KOMPUTE_VALIDATION_LOG"] = str(log)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"the child failed (rc {done.returncode}):\n{done.stdout}\n{done.stderr}"
    if log.exists():
        unexpected = [m for m in validation_messages(log.read_text()) if EXPECTED not in m]
        assert not unexpected, "validation messages in the child:\n" + "\n".join(unexpected)
    return done.stdout


def test_a_buffer_past_the_memory_left_raises_and_the_device_goes_on(tmp_path: Path) -> None:
    out = run_child(
        """
        from vk_adam._runtime import Runtime
        handle = vk_adam.open_device()
        rt = Runtime(manager=handle.manager)
        data = np.zeros(1 << 27, np.float32)  # 512 MiB, its pages never touched
        cap(1 << 28)  # room for 256 MiB more
        try:
            rt.buffer(data)
        except vk_adam.DeviceMemoryError as exc:
            assert isinstance(exc, MemoryError)
            print("refused:", exc)
        else:
            raise SystemExit("a 512 MiB buffer was made with 256 MiB of address space left")
        uncap()
        assert rt.buffers == [], "the failed buffer is not the runtime's"
        adamw_first_step_works(handle)
        rt.close()
        print("ok")
        """,
        tmp_path,
    )
    assert "out of device memory for a 536,870,912-byte buffer" in out
    assert "vkAllocateMemory failed" in out and out.rstrip().endswith("ok")


def test_an_optimizer_that_cannot_allocate_its_buffers_raises_and_changes_nothing(
    tmp_path: Path,
) -> None:
    out = run_child(
        """
        handle = vk_adam.open_device()
        n = 1 << 27
        param = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        before = param.copy()
        cap(8 << 28)  # 2 GiB: the param's device buffer fits, not every staging copy
        try:
            vk_adam.AdamW([param], lr=1e-3, manager=handle.manager)
        except vk_adam.DeviceMemoryError as exc:
            print("refused:", exc)
        else:
            raise SystemExit("the optimizer was built")
        uncap()
        assert np.array_equal(param, before), "the param changed"
        adamw_first_step_works(handle)
        print("ok")
        """,
        tmp_path,
    )
    assert "refused:" in out and "vkAllocateMemory failed" in out
    assert out.rstrip().endswith("ok")
