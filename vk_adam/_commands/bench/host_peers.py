"""The measurements of ``vk-adam bench --cases host`` (``host`` runs them and makes the table):
vk-adam's AdamW on NumPy params (host-memory imports, the params held on the device with
``device_params=True``, or staging memory with ``VK_ADAM_HOST_IMPORT=0``), torch CPU AdamW
(defaults, fused), torch CUDA fused AdamW with copies in and out (the NumPy arrays as they are, or
pinned staging tensors), DeepSpeed's CPU Adam
(where ``deepspeed`` imports and its op builds), and yardsticks.

Each row returns the median wall time of ``repeats`` steps after ``warmup``, each step timed
alone. Fresh arrays: the step's new gradient array is made (untimed) while the previous one
lives; the previous one is dropped inside the timed region, right after the step call, so what
a library does when an array dies (vk-adam: release its import) is counted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import time
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

Row = dict[str, Any]


class Grads:
    """A param, and the gradient of each step: ``next`` (untimed) makes it, ``release`` (timed,
    after the step call) drops the previous step's array on fresh arrays."""

    def __init__(self, n: int, arrays: str, pinned: np.ndarray | None = None) -> None:
        self.param = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        self.base = np.random.default_rng(1).standard_normal(n, dtype=np.float32) * np.float32(1e-2)
        self.arrays, self.addresses, self.freed = arrays, list[int](), list[bool]()
        self.current = self.base.copy() if pinned is None else pinned
        self.current[...] = self.base
        self.previous: np.ndarray | None = None
        self._gone: Callable[[], np.ndarray | None] = lambda: None

    def next(self) -> None:
        if self.arrays == "reused":
            np.negative(self.current, out=self.current)  # new values, in place
            return
        self.previous = self.current  # lives until ``release``, in the timed region
        self._gone = weakref.ref(self.previous)
        self.current = np.empty(self.base.size, np.float32)
        np.multiply(self.base, np.float32(1 + 1e-3 * len(self.addresses)), out=self.current)
        self.addresses.append(self.current.ctypes.data)

    def release(self) -> None:
        if self.previous is not None:
            self.previous = None  # the last reference: the array dies here
            self.freed.append(self._gone() is None)


def samples(
    step: Callable[[], Any],
    warmup: int,
    repeats: int,
    ready: Callable[[], Any],
    after: Callable[[], Any] = lambda: None,
) -> list[float]:
    """Seconds of ``repeats`` calls of ``step`` then ``after`` (timed together) after ``warmup``,
    each after ``ready`` (untimed)."""
    out = []
    for i in range(warmup + repeats):
        ready()
        t0 = time.perf_counter()
        step()
        after()
        if i >= warmup:
            out.append(time.perf_counter() - t0)
    return out


def _row(times: list[float], grads: Grads, before: np.ndarray, after: np.ndarray) -> Row:
    row = {"ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "timed_steps": len(times)}
    row["param_max_change"] = float(np.max(np.abs(after - before)))  # > 0: the steps ran
    if grads.arrays == "fresh":
        row["distinct_grad_addresses"] = len(set(grads.addresses[-len(times) :]))
        # timed steps whose previous gradient array died in the timed region (all of them)
        row["previous_grads_freed_in_step"] = sum(grads.freed[-len(times) :])
    return row


def bench_vk(
    n: int,
    arrays: str,
    device: int,
    warmup: int,
    repeats: int,
    host_import: bool = True,
    device_params: bool = False,
) -> Row:
    """``opt.step([g])`` with ``VK_ADAM_HOST_IMPORT`` 1 (``host_import``: imports where the device
    has them) or 0 (every array through staging memory) while the optimizer is made (where it is
    read), then restored; with ``device_params`` the optimizer holds the param on the device and
    each step copies it into the NumPy param (torch's params on a GPU, copied to the host). The
    row's ``host_import``: imports were on for this optimizer; ``param_sha256``: the param's bytes
    after the last step (equal across vk-adam's rows: they compute the same steps)."""
    import vk_adam
    from vk_adam._optim import HOST_IMPORT_ENV

    grads = Grads(n, arrays)
    p, before = grads.param, grads.param.copy()
    saved = os.environ.get(HOST_IMPORT_ENV)
    os.environ[HOST_IMPORT_ENV] = "1" if host_import else "0"  # whatever the caller's environment says
    try:
        opt = vk_adam.AdamW([p], lr=1e-3, device=device, device_params=device_params)
    finally:
        if saved is None:
            os.environ.pop(HOST_IMPORT_ENV, None)
        else:
            os.environ[HOST_IMPORT_ENV] = saved
    with opt:
        times = samples(lambda: opt.step([grads.current]), warmup, repeats, grads.next, grads.release)
        row = _row(times, grads, before, p)
        row["host_import"] = bool(opt.internals().host_traffic.imports.enabled)  # on for this optimizer
        row |= {"device_params": device_params, "param_sha256": hashlib.sha256(p.data).hexdigest()}
        return row | {"optimizer_steps": int(opt.state_dict()["state"][0]["step"])}


def bench_torch_cpu(n: int, arrays: str, fused: bool, warmup: int, repeats: int) -> Row:
    """``opt.step()`` of ``torch.optim.AdamW([tp], lr=1e-3)`` (torch's defaults) or with
    ``fused=True``, over ``from_numpy`` tensors (NumPy's memory, no copies)."""
    import torch

    grads = Grads(n, arrays)
    p, before = grads.param, grads.param.copy()
    tp = torch.from_numpy(p).requires_grad_()
    opt = torch.optim.AdamW([tp], lr=1e-3, fused=True) if fused else torch.optim.AdamW([tp], lr=1e-3)

    def ready() -> None:  # the step's gradient: a view of the NumPy array (the previous view goes)
        grads.next()
        tp.grad = torch.from_numpy(grads.current)

    return _row(samples(opt.step, warmup, repeats, ready, grads.release), grads, before, p)


#: How to get the DeepSpeed row, in its skip reason.
DEEPSPEED_HOW = (
    "DS_BUILD_OPS=0 pip install deepspeed; its CPU Adam op is built on first use, with g++ and ninja"
)
#: Why each DeepSpeedCPUAdam-like class could not be made, so a failed op build is tried once.
_DEEPSPEED_UNUSABLE: dict[Any, str] = {}


def deepspeed_cpu_adam() -> tuple[Any, str]:
    """``deepspeed.ops.adam.DeepSpeedCPUAdam`` and deepspeed's version; raises whatever importing
    them raises (``ImportError`` where deepspeed is not installed)."""
    import deepspeed  # type: ignore[import-not-found,import-untyped]
    from deepspeed.ops.adam import DeepSpeedCPUAdam  # type: ignore[import-not-found,import-untyped]

    return DeepSpeedCPUAdam, str(deepspeed.__version__)


def _ninja_dirs() -> list[str]:
    """Folders holding a ``ninja`` the op's JIT build may use where ``PATH`` has none: the
    interpreter's (a venv's ``bin``, run without activating it), the ``ninja`` wheel's own."""
    dirs = [os.path.dirname(sys.executable)]
    try:
        import ninja  # type: ignore[import-not-found,import-untyped]

        dirs.append(str(ninja.BIN_DIR))
    except (ImportError, AttributeError):
        pass
    return [d for d in dict.fromkeys(dirs) if shutil.which("ninja", path=d)]


def _openmp_runtimes() -> list[str]:
    """The OpenMP runtimes mapped into this process (Linux): one means torch's thread count is
    the op's too."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "omp" in line.rsplit("/", 1)[-1]}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/"))


def bench_deepspeed_cpu(n: int, arrays: str, warmup: int, repeats: int) -> Row:
    """``opt.step()`` of ``DeepSpeedCPUAdam([tp], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=1e-2, adamw_mode=True)`` (torch AdamW's defaults, which DeepSpeed's differ from
    in ``weight_decay``), over ``from_numpy`` tensors as in ``bench_torch_cpu``, on the threads
    the process has (``threads``: torch's OpenMP count, which the op's ``-fopenmp`` build shares
    where one OpenMP runtime is mapped, ``openmp_runtimes``). Skipped, with the reason, where
    deepspeed does not import or its CPU Adam op does not build or load."""
    import torch

    try:
        cls, version = deepspeed_cpu_adam()
    except ImportError as exc:
        return {"skipped": f"deepspeed not installed ({exc}): {DEEPSPEED_HOW}", "cell": "no deepspeed"}
    except Exception as exc:  # deepspeed's import runs its accelerator detection
        return {"skipped": f"deepspeed failed to import: {type(exc).__name__}: {exc}", "cell": "n/a"}
    if cls in _DEEPSPEED_UNUSABLE:
        return {"skipped": _DEEPSPEED_UNUSABLE[cls], "cell": "n/a"}
    grads = Grads(n, arrays)
    p, before = grads.param, grads.param.copy()
    tp = torch.from_numpy(p).requires_grad_()
    path = os.environ.get("PATH")
    if shutil.which("ninja") is None:  # the JIT build runs ``ninja`` from PATH
        os.environ["PATH"] = os.pathsep.join([*_ninja_dirs(), *([path] if path else [])])
    try:  # builds (once, then from torch's extension cache) and loads the op
        opt = cls([tp], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, adamw_mode=True)
    except Exception as exc:
        cause = f" ({type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ else ""
        why = f"DeepSpeedCPUAdam's CPU Adam op did not build or load: {type(exc).__name__}: {exc}{cause}"
        _DEEPSPEED_UNUSABLE[cls] = " ".join(f"{why}; it needs g++ and ninja".split())[:600]
        return {"skipped": _DEEPSPEED_UNUSABLE[cls], "cell": "n/a"}
    finally:
        if path is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = path

    def ready() -> None:
        grads.next()
        tp.grad = torch.from_numpy(grads.current)

    row = _row(samples(opt.step, warmup, repeats, ready, grads.release), grads, before, p)
    return row | {
        "deepspeed": version,
        "threads": torch.get_num_threads(),
        "openmp_runtimes": _openmp_runtimes(),
    }


def bench_torch_cuda(n: int, arrays: str, warmup: int, repeats: int) -> Row:
    """Fused AdamW on a resident CUDA param, the user's NumPy arrays as they are (pageable):
    the grad copied in from ``from_numpy(g)``, the param copied out into the NumPy param."""
    import torch

    grads = Grads(n, arrays)
    p, before = grads.param, grads.param.copy()
    pc = torch.from_numpy(p).cuda().requires_grad_()
    pc.grad = torch.zeros_like(pc)
    opt = torch.optim.AdamW([pc], lr=1e-3, fused=True)

    def ready() -> None:
        grads.next()
        torch.cuda.synchronize()

    @torch.no_grad()  # as a training loop copies its params out
    def step() -> None:
        pc.grad.copy_(torch.from_numpy(grads.current), non_blocking=True)  # type: ignore[union-attr]
        opt.step()
        torch.from_numpy(p).copy_(pc)
        torch.cuda.synchronize()

    return _row(samples(step, warmup, repeats, ready, grads.release), grads, before, p)


def bench_torch_cuda_pinned(n: int, warmup: int, repeats: int) -> Row:
    """As ``bench_torch_cuda``, through pinned staging tensors the application keeps (the grad
    written into one, the param copied out into another), on reused arrays."""
    import torch

    host_grad, host_param = torch.empty(n, pin_memory=True), torch.empty(n, pin_memory=True)
    grads = Grads(n, "reused", host_grad.numpy())
    before = grads.param.copy()
    pc = torch.from_numpy(grads.param).cuda().requires_grad_()
    pc.grad = torch.zeros_like(pc)
    opt = torch.optim.AdamW([pc], lr=1e-3, fused=True)

    def ready() -> None:
        grads.next()
        torch.cuda.synchronize()

    @torch.no_grad()
    def step() -> None:
        pc.grad.copy_(host_grad, non_blocking=True)  # type: ignore[union-attr]
        opt.step()
        host_param.copy_(pc, non_blocking=True)
        torch.cuda.synchronize()

    return _row(samples(step, warmup, repeats, ready), grads, before, host_param.numpy())


def yardsticks(n: int, cuda: bool, warmup: int, repeats: int) -> dict[str, float]:
    """ms of np.copyto of the gradient, and of one copy of its bytes to the GPU (pinned, pageable)."""
    g = Grads(n, "reused").current
    dst = np.empty_like(g)
    fns: dict[str, Callable[[], Any]] = {"copyto_ms": lambda: np.copyto(dst, g)}
    if cuda:
        import torch

        dev = torch.empty(n, device="cuda")
        for key, src in (("pinned", torch.empty(n, pin_memory=True)), ("pageable", torch.from_numpy(g))):
            fns[f"{key}_h2d_ms"] = partial(dev.copy_, src)  # blocking: returns when the copy is done
    ms = {k: statistics.median(samples(fn, warmup, repeats, lambda: None)) for k, fn in fns.items()}
    return {k: v * 1e3 for k, v in ms.items()}
