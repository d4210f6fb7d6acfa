"""``vk-adam demo`` (the default): the GPU-resident fine-tune.

Forward, loss, backward and the update of every step run on the Vulkan device. A batch of steps
is recorded once and its sequence evaluated again and again, each evaluation the next steps; the
optimizer is capturable and the lr schedule runs on the device, so the host does nothing per
step: it reads back only the losses (once per evaluation) and the final adapter.
The shaders and their driver are an application, not part of the library: the package
``resident_example`` beside this module (an example to copy; it calls kp directly, as an
application does). Its SPIR-V is compiled by the build (``build_shaders.py``), as the package's
own is, and ships in the wheel with it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..._runtime import open_device
from ...lora import CheckpointError, LoRAAdapter, load_checkpoint, save_checkpoint
from ...schedules import CosineDecay, LambdaLR, LinearWarmup, LRScheduler
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


def submissions(
    start: int, stop: int, per_submit: int, checkpoint_every: int, breaks: Iterable[int] = ()
) -> list[tuple[int, int]]:
    """Step ranges, one per evaluation: at most ``per_submit`` steps, ending on checkpoints and
    on ``breaks`` (steps where the host must act between evaluations)."""
    ends = set(range(per_submit, stop, per_submit)) | {stop} | {b for b in breaks if 0 < b < stop}
    if checkpoint_every:
        ends |= set(range(checkpoint_every, stop, checkpoint_every))
    bounds = [start, *sorted(e for e in ends if e > start)]
    return list(itertools.pairwise(bounds))


def warmup_steps(cfg: DemoConfig) -> int:
    """The warm-up of ``cfg.lr_at``: 5% of the steps, at least one."""
    return max(1, cfg.steps // 20)


#: ``cfg.lr_at``'s floor, as a fraction of the peak.
MIN_LR_RATIO = 0.01


def device_schedule(cfg: DemoConfig, opt: Any, step: int) -> LRScheduler:
    """The demo's schedule (``cfg.lr_at``) from step ``step`` (0-based) on, as a
    :mod:`vk_adam.schedules` scheduler the device can run, positioned so that its next lr is
    step ``step``'s. Its formulas give the same lrs as ``lr_at`` (tests check every step).

    ``lr_at`` warms up to the peak at step ``warm - 1`` and decays from step ``warm``; no one
    device schedule does both (CosineDecay's warm-up reaches the peak one step later), so there
    are two phases: before step ``warm`` a LinearWarmup from ``1 / warm`` over ``warm - 1``
    steps, ``(t + 1) / warm`` at step ``t``; from step ``warm`` the CosineDecay with that warm-up,
    ``lr_at``'s cosine. The host hands the second to the device once, between two evaluations.
    Needs the device schedule handed back first (``opt.schedule_on_device(None)``): building a
    scheduler sets the optimizer's lr."""
    warm = warmup_steps(cfg)
    if step < warm:
        return LinearWarmup(opt, warmup_steps=warm - 1, start_factor=1.0 / warm, last_epoch=step - 1)
    return CosineDecay(
        opt, warmup_steps=warm, total_steps=cfg.steps, min_lr_ratio=MIN_LR_RATIO, last_epoch=step - 1
    )


def schedule_from(cfg: DemoConfig, opt: Any, step: int) -> None:
    """Run the demo's schedule on the device from step ``step`` on (replacing any running)."""
    opt.schedule_on_device(None)
    opt.schedule_on_device(device_schedule(cfg, opt, step))


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
    """The resident run: ``per_submit`` steps per evaluation of one recording (a shorter range,
    at the warm-up's end, a checkpoint or the last steps, gets a recording of its own)."""
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
        # capturable: the step count and lr live on the device, so one recording of a batch of
        # steps can be evaluated again and again (the trainer refuses an optimizer without it).
        opt = adapter.optimizer(cfg.rule, manager=mgr, capturable=True, **cfg.optimizer_options())
        with opt:
            # The schedule as the checkpoints record it: lr_at as a LambdaLR, brought to the
            # step before each save (the device runs device_schedule's phases meanwhile).
            peak = float(opt.param_groups[0]["lr"])
            lr_record = LambdaLR(opt, lambda step: cfg.lr_at(step) / peak)
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
                state = load_checkpoint(ckpt, adapter, opt, rng=rng, scheduler=lr_record)
                if state.extra.get("config") != cfg.config_json("resident"):
                    raise CheckpointError(
                        f"{ckpt} was written by a run with other settings; use another --out"
                    )
                start = state.step
                losses = list(state.extra.get("losses", []))[:start]
                info["resumed_from_step"] = start
            schedule_from(cfg, opt, start)
            warm = warmup_steps(cfg)
            bar = progress_bar(cfg.steps, start, progress, "vk-adam resident")
            t0 = time.perf_counter()
            for first, stop in submissions(start, cfg.steps, per_submit, checkpoint_every, [warm]):
                if first == warm:
                    schedule_from(cfg, opt, first)  # the warm-up is over: the cosine phase
                for loss in trainer.run(first, stop):
                    losses.append(float(loss))
                    bar(float(loss))
                if checkpoint_every and stop % checkpoint_every == 0:
                    opt.schedule_on_device(None)  # the lr back on the host, for the record's step
                    lr_record.last_epoch = stop - 1
                    lr_record.step()  # the lr and the schedule's place of a run that stopped here
                    extra = {"losses": losses, "config": cfg.config_json("resident")}
                    save_checkpoint(ckpt, adapter, opt, rng=rng, extra=extra, scheduler=lr_record)
                    schedule_from(cfg, opt, stop)
            info["train_seconds"] = time.perf_counter() - t0
            info["recordings"] = len(trainer.recordings)
            info["evaluations"] = trainer.evaluations
            bar(None)
            adapter.pull_params()  # the final adapter: the only other download
            trainer.close()
        adapter.device_params = None  # the weights are on the host now; the device may go
    finally:
        dev.close()
    return adapter, losses, info
