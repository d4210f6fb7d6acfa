"""PEFT's file layout for a LoRA adapter: ``adapter_model.safetensors`` + ``adapter_config.json``.

Kept apart from :mod:`.adapter` because it is a file format, not the adapter: what the keys are
called, which config fields PEFT writes, and how a folder from any PEFT writer is checked and
read back in :meth:`LoRAAdapter.create`'s layout. :meth:`LoRAAdapter.save_peft`,
:meth:`LoRAAdapter.load_peft` and :meth:`LoRAAdapter.peft_config` are the public entry points;
they call the functions here, which deal in plain values (tensors, config fields,
:class:`PeftFolder`) and so never import the adapter: :mod:`.adapter` imports this module, and
both import what they share from :mod:`.modules`.

Weights are written in the adapter's dtype (safetensors ``F32``, ``F16`` or ``BF16``) and a
folder loads as an adapter of its file's dtype. ``safetensors.numpy`` cannot read ``BF16``, so
files are read here (:func:`read_safetensors`, also used for checkpoints), into
``ml_dtypes.bfloat16`` arrays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import _formats as fmt
from .atomic_io import _atomic_write
from .modules import Array, LoRAModule, adapter_dtype, peft_key

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"

#: safetensors dtype names -> NumPy dtypes (``BF16`` as ``ml_dtypes.bfloat16``).
_KINDS: dict[str, Any] = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": fmt.BFLOAT16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}  # fmt: skip
SAFETENSORS_DTYPES: dict[str, np.dtype[Any]] = {name: np.dtype(kind) for name, kind in _KINDS.items()}


class PeftFormatError(ValueError):
    """A PEFT adapter file has unknown or missing keys, wrong shapes or dtypes, or a bad config."""


@dataclass(frozen=True)
class PeftFolder:
    """A checked PEFT adapter folder, in :meth:`LoRAAdapter.create`'s layout: the modules in
    order, the adapter's settings and dtype, and each module's ``{"A": ..., "B": ...}`` weights
    as read (the adapter converts them to its dtype)."""

    modules: list[LoRAModule]
    alpha: float
    use_rslora: bool
    target_modules: list[str] | None
    dtype: str
    weights: dict[str, dict[str, Array]]


def read_safetensors(data: bytes) -> dict[str, Array]:
    """The tensors of a safetensors file's bytes, ``BF16`` included (``ml_dtypes.bfloat16``).

    Raises ``safetensors.SafetensorError`` for a malformed file and ValueError for a dtype
    NumPy cannot hold (such as the float8 kinds)."""
    from safetensors import deserialize

    out: dict[str, Array] = {}
    for name, view in deserialize(data):  # type: ignore[no-untyped-call]
        dtype = SAFETENSORS_DTYPES.get(view["dtype"])
        if dtype is None:
            raise ValueError(f"tensor {name!r} has dtype {view['dtype']}, which vk-adam does not read")
        out[name] = np.frombuffer(view["data"], dtype).reshape(view["shape"])  # little-endian hosts
    return out


def peft_config(
    *, rank: int, alpha: float, target_modules: Sequence[str], use_rslora: bool
) -> dict[str, Any]:
    """The ``adapter_config.json`` PEFT writes for an adapter of these settings."""
    return {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": alpha,
        "target_modules": list(target_modules),
        "use_rslora": use_rslora,
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


def write_peft(directory: str | Path, tensors: Mapping[str, Array], config: Mapping[str, Any]) -> Path:
    """Write ``adapter_model.safetensors`` (PEFT key -> weight, in the weights' dtype: F32, F16 or
    BF16) + ``adapter_config.json`` (``config``, from :func:`peft_config`), each atomically."""
    from safetensors.numpy import save

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    contiguous = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    _atomic_write(directory / ADAPTER_WEIGHTS, save(contiguous, metadata={"format": "pt"}))
    _atomic_write(directory / ADAPTER_CONFIG, json.dumps(config, indent=2, sort_keys=True).encode())
    return directory


def read_peft(directory: str | Path, *, dtype: Any = None) -> PeftFolder:
    """Read and check a PEFT LoRA adapter folder (any writer). Bad keys/shapes raise PeftFormatError.

    The folder's dtype is the one its tensors were saved in (F16 -> float16, BF16 -> bfloat16,
    F32 -> float32); a file that mixes dtypes, or holds F64, reads as float32, which holds
    F16 and BF16 values exactly. ``dtype`` (``"float32"``, ``"float16"``, ``"bfloat16"``)
    overrides it: values are then converted (nearest-even) by the adapter. Integer or bool
    tensors raise PeftFormatError.
    """
    from safetensors import SafetensorError

    wanted = adapter_dtype(dtype) if dtype is not None else None
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
        tensors = read_safetensors((directory / ADAPTER_WEIGHTS).read_bytes())
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
        missing = [peft_key(path, w) for w in ("A", "B") if w not in pair]
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
    saved_dtype = _file_dtype(found)  # checks every tensor is floating point
    return PeftFolder(
        modules=modules,
        alpha=float(config["lora_alpha"]),
        use_rslora=bool(config.get("use_rslora", False)),
        target_modules=targets if isinstance(targets, list) else None,
        dtype=saved_dtype if wanted is None else wanted,
        weights=found,
    )


def _file_dtype(found: dict[str, dict[str, Array]]) -> str:
    """The adapter dtype for these tensors: theirs when all share float32, float16 or bfloat16,
    else float32. PeftFormatError for a tensor that is not floating point."""
    names = set()
    for path, pair in found.items():
        for which, value in pair.items():
            if not (np.issubdtype(value.dtype, np.floating) or value.dtype == fmt.BFLOAT16):
                raise PeftFormatError(
                    f"{peft_key(path, which)} is {value.dtype}; LoRA weights are float32, float16 or bfloat16"
                )
            names.add(fmt.dtype_name(value.dtype))
    single = names.pop() if len(names) == 1 else None
    return single or "float32"


def _natural_key(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]
