"""The load a long-lived process puts on the shared device, for tests/runtime/test_shared_device.py: run as
``python -m tests.lifecycle_load NAME N`` in a fresh process, it prints one JSON line per sample
(about 50 per run) with the process's RSS (MiB), open file descriptors and threads.

* ``manager-cycles``: N raw ``kp.Manager`` create/use/destroy cycles;
* ``optimizer-cycles``: N cycles of build an AdamW optimizer, one step, close;
* ``optimizers-alive``: N AdamW optimizers alive at once, then each stepped, then all closed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np


def process_sample() -> dict[str, float]:
    """RSS (MiB), open file descriptors and threads of this process (Linux)."""
    fields: dict[str, float] = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                fields[key] = float(value.split()[0])
    return {
        "rss_mib": round(fields["VmRSS"] / 1024, 1),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": int(fields["Threads"]),
    }


def _emit(**record: Any) -> None:
    print(json.dumps(record), flush=True)


def _sampled(i: int, n: int) -> bool:
    return i % max(1, n // 50) == 0 or i == n - 1


def manager_cycles(n: int) -> None:
    from vk_adam._runtime._kp import kp_module

    kp = kp_module()
    for i in range(n):
        mgr = kp.Manager(0)
        buf = mgr.tensor_t(np.zeros(256, np.float32))
        seq = mgr.sequence()
        seq.record(kp.OpTensorSyncDevice([buf]))
        seq.eval()
        mgr.destroy()
        del buf, seq, mgr
        if _sampled(i, n):
            _emit(i=i, **process_sample())


def optimizer_cycles(n: int) -> None:
    import vk_adam

    grad = [np.ones(1024, np.float32)]
    for i in range(n):
        t0 = time.perf_counter()
        opt = vk_adam.AdamW([np.zeros(1024, np.float32)], lr=1e-3)
        t1 = time.perf_counter()
        opt.step(grad)
        t2 = time.perf_counter()
        opt.close()
        t3 = time.perf_counter()
        if _sampled(i, n):
            _emit(i=i, create_s=t1 - t0, close_s=t3 - t2, **process_sample())


def optimizers_alive(n: int) -> None:
    import vk_adam

    alive = []
    for i in range(n):
        alive.append(vk_adam.AdamW([np.zeros(256, np.float32)], lr=1e-3))
        if _sampled(i, n):
            _emit(i=i, alive=len(alive), **process_sample())
    for opt in alive:
        opt.step([np.ones(256, np.float32)])
    for opt in alive:
        opt.close()
    _emit(i=n, alive=0, stepped=n, **process_sample())


LOADS = {
    "manager-cycles": manager_cycles,
    "optimizer-cycles": optimizer_cycles,
    "optimizers-alive": optimizers_alive,
}

if __name__ == "__main__":
    LOADS[sys.argv[1]](int(sys.argv[2]))
