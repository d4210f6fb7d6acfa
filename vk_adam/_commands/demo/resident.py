"""``vk-adam demo`` (the default): the GPU-resident fine-tune.

Forward, loss, backward and the update of every step run on the Vulkan device, many steps per
submission; the host reads back only the losses (once per submission) and the final adapter.
The shaders and their driver are an application, not part of the library: the package
``resident_example`` beside this module (an example to copy; it calls kp directly, as an
application does). Its SPIR-V is compiled by the build (``build_shaders.py``), as the package's
own is, and ships in the wheel with it.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..._runtime import open_device
from ...lora import CheckpointError, LoRAAdapter, load_checkpoint, save_checkpoint
from ...schedules import LambdaLR
from .config import (
    CHECKPOINT_NAME,
    HOST_ONLY,
    DemoConfig,
    memory_info,
)
from .model import fresh_run, make_dataset
from .output import progress_bar


def load_example() -> ModuleType:
    """The resident application's driver, ``resident_example/train.py``: the one place the demo
    and the bench import it."""
    from .resident_example import train

    return train


def submissions(start: int, stop: int, per_submit: int, checkpoint_every: int) -> list[tuple[int, int]]:
    """Step ranges, one per submission: at most ``per_submit`` steps, ending on checkpoints."""
    ends = set(range(per_submit, stop, per_submit)) | {stop}
    if checkpoint_every:
        ends |= set(range(checkpoint_every, stop, checkpoint_every))
    bounds = [start, *sorted(e for e in ends if e > start)]
    return list(itertools.pairwise(bounds))


def train_resident(
    cfg: DemoConfig,
    out: Path,
    *,
    device: str | None,
    checkpoint_every: int,
    resume: bool,
    progress: bool,
    per_submit: int = 25,
) -> tuple[LoRAAdapter, list[float], dict[str, Any]]:
    if cfg.param_dtype != "float32":
        raise ValueError(f"the resident path takes float32 params ({HOST_ONLY}): use the host path")
    example = load_example()
    adapter, model, rng = fresh_run(cfg)
    x, y = make_dataset(cfg, model)
    base = {path: w.astype(np.float32) for path, w in model.base.items()}
    # The process's shared device: the optimizer and the example's shaders use one VkDevice.
    dev = open_device(device)
    mgr = dev.manager
    ckpt = out / CHECKPOINT_NAME
    losses: list[float] = []
    start = 0
    try:
        opt = adapter.optimizer(cfg.rule, manager=mgr, **cfg.optimizer_options())
        with opt:
            # The demo's schedule (warm-up, then cosine decay) as a vk_adam.schedules scheduler:
            # each recorded step runs at its own lr, and checkpoints carry the schedule.
            peak = float(opt.param_groups[0]["lr"])
            sched = LambdaLR(opt, lambda step: cfg.lr_at(step) / peak)
            trainer = example.ResidentTrainer(mgr, adapter, opt, model.blocks, base, x, y)
            info: dict[str, Any] = {
                "path": "resident",
                "device": opt.device.name,
                "tensors": adapter.tensor_count,
                "elements": int(adapter.flat_params.size),
                "dispatches_per_step": opt.dispatches_per_step(),
                "steps_per_submission": per_submit,
                **memory_info(opt, int(adapter.flat_params.size)),
            }
            if resume and ckpt.exists():
                state = load_checkpoint(ckpt, adapter, opt, rng=rng, scheduler=sched)
                if state.extra.get("config") != cfg.config_json("resident"):
                    raise CheckpointError(
                        f"{ckpt} was written by a run with other settings; use another --out"
                    )
                start = state.step
                losses = list(state.extra.get("losses", []))[:start]
                info["resumed_from_step"] = start
            bar = progress_bar(cfg.steps, start, progress, "vk-adam resident")
            t0 = time.perf_counter()
            for first, stop in submissions(start, cfg.steps, per_submit, checkpoint_every):
                for loss in trainer.run(first, stop, on_step=lambda _step: sched.step()):
                    losses.append(float(loss))
                    bar(float(loss))
                if checkpoint_every and stop % checkpoint_every == 0:
                    extra = {"losses": losses, "config": cfg.config_json("resident")}
                    save_checkpoint(ckpt, adapter, opt, rng=rng, extra=extra, scheduler=sched)
            info["train_seconds"] = time.perf_counter() - t0
            bar(None)
            adapter.pull_params()  # the final adapter: the only other download
            trainer.close()
        adapter.device_params = None  # the weights are on the host now; the device may go
    finally:
        dev.close()
    return adapter, losses, info
