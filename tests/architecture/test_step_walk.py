"""The walk of one ``Optimizer.step`` goes down the modules of vk_adam and enters each at most once
(docs/architecture.md, "The path of one step()"): each part of a step is asked once, for all of
its work, rather than called back and forth. Traced with ``sys.setprofile``: every call of a
function of a vk_adam module from another module (or from outside vk_adam) is an entry; a call
within a module is none. The third synchronous step is traced (the first ones make pipelines,
imports and copy plans), over NumPy params (imported and staged, and with host imports off:
everything staged) and over kp tensor params and gradients. Needs a Vulkan device (lavapipe)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest

import vk_adam
from vk_adam._optim.host.imports import HOST_IMPORT_ENV

from ..runtime.test_device_buffers import upload

PACKAGE = Path(vk_adam.__file__).resolve().parent
#: (module, function, the module it was called from: None for outside vk_adam)
Entry = tuple[str, str, str | None]


def _module(frame: FrameType | None) -> str | None:
    """The module of vk_adam a frame runs code of (path relative to the package), or None."""
    if frame is None:
        return None
    path = Path(frame.f_code.co_filename)
    return str(path.relative_to(PACKAGE)) if path.is_relative_to(PACKAGE) else None


def walk(call: Callable[[], Any]) -> list[Entry]:
    """Every entry into a module of vk_adam while ``call()`` runs, in order."""
    entries: list[Entry] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = _module(frame)
        caller = _module(frame.f_back)
        if module is not None and caller != module:
            entries.append((module, frame.f_code.co_name, caller))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return entries


def check_each_module_entered_once(entries: list[Entry]) -> None:
    listing = "\n".join(f"  {module:28} {name:28} <- {caller}" for module, name, caller in entries)
    assert entries[0] == ("_optim/optimizer.py", "step", None), f"the tracer saw another walk:\n{listing}"
    assert any(module == "_runtime/runtime.py" for module, _, _ in entries), listing
    twice = {module: n for module, n in Counter(m for m, _, _ in entries).items() if n > 1}
    assert not twice, (
        f"modules entered more than once in one step ({twice}): ask each part once for all its "
        f"work (docs/architecture.md, 'The path of one step()'). The walk:\n{listing}"
    )


@pytest.fixture
def kp_params_and_grads(kp_manager, rng):
    """Params and gradients of 100,000 and 1,000 elements as kp tensors of the application's
    manager, uploaded; destroyed after the test."""
    params = [kp_manager.tensor(rng.standard_normal(n).astype(np.float32)) for n in (100_000, 1_000)]
    grads = [kp_manager.tensor(rng.standard_normal(n).astype(np.float32)) for n in (100_000, 1_000)]
    for tensor in [*params, *grads]:
        upload(kp_manager, tensor, tensor.data().copy())
    yield params, grads
    for tensor in [*params, *grads]:
        tensor.destroy()


@pytest.mark.parametrize("imports", ["1", "0"], ids=["host-imports", "staged"])
def test_a_numpy_step_enters_each_module_once(monkeypatch, rng, imports):
    """The walk of docs/architecture.md: Adam over NumPy float32 params of 100,000 and 1,000
    elements on the default device (the large one imported where the device can, the small
    one staged; with imports off both staged)."""
    monkeypatch.setenv(HOST_IMPORT_ENV, imports)
    params = [rng.standard_normal(n).astype(np.float32) for n in (100_000, 1_000)]
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    with vk_adam.Adam(params, lr=1e-3) as opt:
        opt.step(grads)
        opt.step(grads)
        entries = walk(lambda: opt.step(grads))
    check_each_module_entered_once(entries)
    assert ("_optim/host/to_host.py", "finish", "_optim/stepping.py") in entries  # the way back


def test_a_step_on_kp_tensors_enters_each_module_once(kp_manager, kp_params_and_grads):
    """The same over params and gradients that are kp tensors of the application's manager."""
    params, grads = kp_params_and_grads
    with vk_adam.Adam(params, lr=1e-3, manager=kp_manager) as opt:
        opt.step(grads)
        opt.step(grads)
        entries = walk(lambda: opt.step(grads))
    check_each_module_entered_once(entries)


@pytest.mark.parametrize("capturable", [False, True], ids=["push-constants", "captured"])
def test_recording_a_step_enters_each_module_once(kp_manager, kp_params_and_grads, capturable):
    """``record_step`` into the application's sequence, over kp tensor params and gradients: the
    checks, the step's ops and one call to the runtime that records them (with the
    evaluate-once guard of a push-constant step)."""
    params, grads = kp_params_and_grads
    sequence = kp_manager.sequence()
    try:
        with vk_adam.Adam(params, lr=1e-3, manager=kp_manager, capturable=capturable) as opt:
            for _ in range(2):
                sequence.clear()
                opt.record_step(sequence, grads)
                sequence.eval()
            sequence.clear()
            entries = walk(lambda: opt.record_step(sequence, grads))
            sequence.eval()
    finally:
        sequence.destroy()
    listing = "\n".join(f"  {module:28} {name:28} <- {caller}" for module, name, caller in entries)
    assert entries[0] == ("_optim/optimizer.py", "record_step", None), listing
    assert ("_runtime/runtime.py", "record", "_optim/stepping.py") in entries, listing
    twice = {module: n for module, n in Counter(m for m, _, _ in entries).items() if n > 1}
    assert not twice, f"modules entered more than once in one record_step ({twice}):\n{listing}"


def test_an_asynchronous_step_enters_each_module_once_but_two(kp_manager, kp_params_and_grads):
    """``step(wait=False)`` over kp tensors: ``inflight.py`` is asked twice (room in the queue
    before the step's inputs are staged, the handle after the submission), and ``_kp.py`` twice
    (two feature flags of this kp build, read as properties: the barrier opt-out and one
    submission per step), every other module once. (Over NumPy params the step first waits
    for the steps in flight, whose staging memory it rewrites, and copies their params back:
    that finishes earlier steps.)"""
    params, grads = kp_params_and_grads
    with vk_adam.Adam(params, lr=1e-3, manager=kp_manager) as opt:
        opt.step(grads, wait=False)
        opt.step(grads, wait=False)
        entries = walk(lambda: opt.step(grads, wait=False))
        opt.synchronize()
    listing = "\n".join(f"  {module:28} {name:28} <- {caller}" for module, name, caller in entries)
    twice = {"_optim/inflight.py", "_runtime/_kp.py"}
    counts = Counter(m for m, _, _ in entries)
    assert counts["_optim/inflight.py"] == 2, listing
    assert all(n == 1 for m, n in counts.items() if m not in twice), listing
    assert all(counts[m] <= 2 for m in twice), listing


@pytest.mark.parametrize(
    "options",
    [{"skip_nonfinite": True}, {"clip_grad_norm": 1.0}, {"state_dtype": "int8-blockwise"}],
    ids=["skip-nonfinite", "clipping", "int8-state"],
)
def test_a_numpy_step_with_options_enters_each_module_once(rng, options):
    """The non-finite check (its flag set before the step and read after it), clipping (its
    pre-passes) and 8-bit state change the ops, not the walk."""
    params = [rng.standard_normal(n).astype(np.float32) for n in (100_000, 1_000)]
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    with vk_adam.Adam(params, lr=1e-3, **options) as opt:
        opt.step(grads)
        opt.step(grads)
        entries = walk(lambda: opt.step(grads))
    check_each_module_entered_once(entries)
