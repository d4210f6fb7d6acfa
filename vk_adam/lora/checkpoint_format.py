"""The checkpoint file format: a safetensors file sealed with a SHA-256 of all of its bytes.

This module knows bytes, not adapters: it seals a serialised file on save and, on load, hands
back metadata and tensors only from a file whose checksum matches. What those must contain for a
given adapter and optimizer is checked in :mod:`.checkpoint_verify`; :mod:`.checkpoint` holds
the public save and load.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy.typing as npt

from .errors import CheckpointError

Array = npt.NDArray[Any]

# -- checkpoints ---------------------------------------------------------------------------------
#
# A checkpoint is a safetensors file: tensors ``param/<peft key>`` (in the adapter's dtype: F32,
# F16 or BF16) and ``state/<name>/<peft key>`` (as the optimizer stores that state: F32, BF16, or
# U8 8-bit codes; ``state/master_param/<peft key>``, F32, is the master copy of 16-bit weights),
# ``absmax/<name>`` (F32, the block maxima of 8-bit state ``name`` over the whole flat buffer),
# and two metadata entries: ``vk_adam`` (JSON: format, rule, step, hyperparameters, LoRA config,
# module layout, RNG state, extra, the scheduler's state dict or null, the adapter's ``dtype``
# and the optimizer's ``storage``: state_dtype, stochastic_rounding, seed; a file without one of
# the last three keys, written before it existed, reads as null, "float32" and float32 storage)
# and ``vk_adam_sha256``, the SHA-256 of the whole file as written with those 64 hex digits set
# to "0". The checksum so covers every byte that loading reads: the header, both metadata
# entries and all tensor data.

#: The format this version writes, and the only one it loads.
CHECKPOINT_FORMAT = "vk-adam-checkpoint/2"
#: Metadata key of the whole-file checksum.
CHECKSUM_KEY = "vk_adam_sha256"
# Where the digest sits in the header: serialised metadata keys are JSON strings, and a quote
# inside any other key or value is escaped, so this pattern can only match the key itself.
_CHECKSUM_FIELD = re.compile(rf'"{re.escape(CHECKSUM_KEY)}"\s*:\s*"'.encode())
_CHECKSUM_PLACEHOLDER = b"0" * 64
#: Formats whose metadata is not covered by their checksum: refused, as they cannot be verified.
UNVERIFIABLE_FORMATS = ("vk-adam-checkpoint/1",)


def _checksum_position(data: bytes) -> int | None:
    """Offset of the 64 hex digits of the checksum in a safetensors file, or None if it has none.

    Raises CheckpointError for a file too short for its own header, or with two checksums.
    """
    if len(data) < 8:
        raise CheckpointError(f"the file has {len(data)} bytes: it is truncated")
    header_size = int.from_bytes(data[:8], "little")
    if header_size > len(data) - 8:
        raise CheckpointError(
            f"its header claims {header_size} bytes and the file has {len(data)}: it is truncated "
            "or corrupted"
        )
    fields = list(_CHECKSUM_FIELD.finditer(data, 8, 8 + header_size))
    if not fields:
        return None
    if len(fields) > 1:
        raise CheckpointError("its header holds two checksums: it is corrupted")
    return fields[0].end()


def _file_digest(data: bytes, position: int) -> bytes:
    """SHA-256 (hex) of ``data`` with the 64 bytes at ``position`` read as "0"s."""
    view = memoryview(data)
    h = hashlib.sha256()
    h.update(view[:position])
    h.update(_CHECKSUM_PLACEHOLDER)
    h.update(view[position + 64 :])
    return h.hexdigest().encode()


def _seal(data: bytes) -> bytes:
    """Fill in the checksum of a file serialised with the placeholder digest."""
    position = _checksum_position(data)
    if position is None or data[position : position + 64] != _CHECKSUM_PLACEHOLDER:
        raise RuntimeError("safetensors wrote the checkpoint's header in a layout vk-adam does not know")
    return data[:position] + _file_digest(data, position) + data[position + 64 :]


def _read_verified(path: Path) -> tuple[dict[str, Any], dict[str, Array]]:
    """The metadata and tensors of a checkpoint file whose whole-file checksum matches."""
    from .peft import read_safetensors  # safetensors.numpy cannot read BF16

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} not found") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {path} cannot be read: {exc}") from None
    try:
        position = _checksum_position(data)
    except CheckpointError as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}; keep using the previous one") from None
    if position is None:
        fmt = _unverified_format(data)
        if fmt in UNVERIFIABLE_FORMATS:
            raise CheckpointError(
                f"{path} is a {fmt} checkpoint, from an earlier vk-adam: its checksum does not cover "
                "its metadata (step, hyperparameters, RNG), so it cannot be verified and is refused; "
                "resume from a checkpoint saved by this version"
            )
        raise CheckpointError(
            f"{path} carries no vk-adam checksum: it is not a vk-adam checkpoint, or it is corrupted"
        )
    stored = data[position : position + 64]
    if stored != _file_digest(data, position):
        raise CheckpointError(
            f"{path}: checksum mismatch: the file is truncated or corrupted; keep using the previous "
            "checkpoint"
        )
    # From here the bytes are exactly what save_checkpoint wrote (or a hand-made file whose
    # checksum was recomputed): the checks below guard against the latter.
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    raw_meta = metadata.get("vk_adam") if isinstance(metadata, dict) else None
    if not isinstance(raw_meta, str):
        raise CheckpointError(f"{path} is a safetensors file but not a vk-adam checkpoint")
    meta = json.loads(raw_meta)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: its metadata is not a JSON object")
    return meta, read_safetensors(data)


def _unverified_format(data: bytes) -> str | None:
    """The format a file without a checksum claims to be (only to word the error), or None."""
    try:
        header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
        fmt = json.loads(header["__metadata__"]["vk_adam"])["format"]
    except Exception:
        return None
    return fmt if isinstance(fmt, str) else None
