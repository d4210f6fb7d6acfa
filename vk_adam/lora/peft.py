"""PEFT's file layout for a LoRA adapter: ``adapter_model.safetensors`` + ``adapter_config.json``.

Kept apart from :mod:`.adapter` because it is a file format, not the adapter: what the keys are
called, which config fields PEFT writes, and how a folder from any PEFT writer is checked and
read back in :meth:`LoRAAdapter.create`'s layout. :meth:`LoRAAdapter.save_peft`,
:meth:`LoRAAdapter.load_peft` and :meth:`LoRAAdapter.peft_config` are the public entry points;
they call the functions here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from .adapter import PEFT_PREFIX, Array, LoRAAdapter, LoRAModule
from .atomic_io import _atomic_write

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


class PeftFormatError(ValueError):
    """A PEFT adapter file has unknown or missing keys, wrong shapes, or a bad config."""


def peft_config(adapter: LoRAAdapter) -> dict[str, Any]:
    """The ``adapter_config.json`` PEFT writes for this adapter."""
    return {
        "peft_type": "LORA",
        "r": adapter.rank,
        "lora_alpha": adapter.alpha,
        "target_modules": list(adapter.target_modules),
        "use_rslora": adapter.use_rslora,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "init_lora_weights": True,
        "inference_mode": True,
        "modules_to_save": None,
        "task_type": None,
        "base_model_name_or_path": None,
        "revision": None,
    }


def save_peft(adapter: LoRAAdapter, directory: str | Path) -> Path:
    """Write ``adapter_model.safetensors`` + ``adapter_config.json`` (PEFT's layout)."""
    from safetensors.numpy import save

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    adapter.pull_params()
    tensors = {k: np.ascontiguousarray(v) for k, v in adapter.named_tensors().items()}
    _atomic_write(directory / ADAPTER_WEIGHTS, save(tensors, metadata={"format": "pt"}))
    config = json.dumps(adapter.peft_config(), indent=2, sort_keys=True).encode()
    _atomic_write(directory / ADAPTER_CONFIG, config)
    return directory


def load_peft(directory: str | Path, cls: type[LoRAAdapter] = LoRAAdapter) -> LoRAAdapter:
    """Read a PEFT LoRA adapter folder (any writer). Bad keys/shapes raise PeftFormatError."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    directory = Path(directory)
    try:
        config = json.loads((directory / ADAPTER_CONFIG).read_text())
    except FileNotFoundError:
        raise PeftFormatError(f"{directory / ADAPTER_CONFIG} not found") from None
    except json.JSONDecodeError as exc:
        raise PeftFormatError(f"{directory / ADAPTER_CONFIG} is not valid JSON: {exc}") from None
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise PeftFormatError(f"peft_type is {config.get('peft_type')!r}; only LORA adapters load")
    for key in ("r", "lora_alpha"):
        if key not in config:
            raise PeftFormatError(f"{ADAPTER_CONFIG} lacks {key!r}")
    rank = int(config["r"])
    try:
        tensors = load_file(str(directory / ADAPTER_WEIGHTS))
    except FileNotFoundError:
        raise PeftFormatError(f"{directory / ADAPTER_WEIGHTS} not found") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise PeftFormatError(f"{directory / ADAPTER_WEIGHTS} is unreadable: {exc}") from None
    pattern = re.compile(r"^base_model\.model\.(?P<path>.+)\.lora_(?P<which>[AB])(?:\.default)?\.weight$")
    found: dict[str, dict[str, Array]] = {}
    unknown = []
    for key, value in tensors.items():
        match = pattern.match(key)
        if match is None:
            unknown.append(key)
            continue
        found.setdefault(match["path"], {})[match["which"]] = value
    if unknown:
        raise PeftFormatError(f"unknown keys in {ADAPTER_WEIGHTS}: {sorted(unknown)}")
    targets = config.get("target_modules")
    modules = []
    order = list(targets) if isinstance(targets, list) else []

    def module_order(path: str) -> tuple[Any, ...]:
        # Layer by layer (natural order), then the config's target_modules order: the
        # layout LoRAAdapter.create gives, so a saved adapter reloads with the same layout.
        prefix, _, name = path.rpartition(".")
        return (_natural_key(prefix), order.index(name) if name in order else len(order), name)

    for path in sorted(found, key=module_order):
        pair = found[path]
        missing = [f"{PEFT_PREFIX}{path}.lora_{w}.weight" for w in ("A", "B") if w not in pair]
        if missing:
            raise PeftFormatError(f"missing keys in {ADAPTER_WEIGHTS}: {missing}")
        a, b = pair["A"], pair["B"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != rank or b.shape[1] != rank:
            raise PeftFormatError(
                f"{path}: lora_A {a.shape} must be [r={rank}, in] and lora_B {b.shape} [out, r={rank}]"
            )
        if isinstance(targets, list) and targets and path.rsplit(".", 1)[-1] not in targets:
            raise PeftFormatError(f"{path} is not one of target_modules {targets}")
        modules.append(LoRAModule(path, int(a.shape[1]), int(b.shape[0]), rank))
    if not modules:
        raise PeftFormatError(f"{ADAPTER_WEIGHTS} holds no LoRA tensors")
    adapter = cls(
        modules,
        alpha=float(config["lora_alpha"]),
        use_rslora=bool(config.get("use_rslora", False)),
        target_modules=targets if isinstance(targets, list) else None,
    )
    for path, pair in found.items():
        adapter.weight(path, "A")[...] = pair["A"].astype(np.float32)
        adapter.weight(path, "B")[...] = pair["B"].astype(np.float32)
    return adapter


def _natural_key(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]
