"""What the adapter (:mod:`.adapter`) and PEFT's file layout (:mod:`.peft`) share: the adapted
modules and their shapes (:class:`LoRAModule`), the dtypes an adapter's weights can have, and how
PEFT names the tensors. Kept apart so that neither of the two imports the other's users: this
module imports nothing of ``vk_adam.lora``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _formats as fmt

Array = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]
#: The dtypes an adapter's weights (and gradients) can have.
ADAPTER_DTYPES = fmt.PARAM_DTYPES

#: Module path of target ``module`` in layer ``layer`` (Llama-style names, as PEFT writes them).
DEFAULT_PATH_TEMPLATE = "model.layers.{layer}.self_attn.{module}"
PEFT_PREFIX = "base_model.model."


def peft_key(path: str, which: str) -> str:
    """PEFT's name of the A or B weight of module ``path``: ``base_model.model.<path>.lora_A.weight``."""
    return f"{PEFT_PREFIX}{path}.lora_{which}.weight"


@dataclass(frozen=True)
class LoRAModule:
    """One adapted linear layer: its path and the shapes of its A and B."""

    path: str  # e.g. "model.layers.0.self_attn.q_proj"
    in_features: int
    out_features: int
    rank: int

    @property
    def a_shape(self) -> tuple[int, int]:
        return (self.rank, self.in_features)

    @property
    def b_shape(self) -> tuple[int, int]:
        return (self.out_features, self.rank)


def adapter_dtype(dtype: Any) -> str:
    """``"float32"``, ``"float16"`` or ``"bfloat16"`` for a name or NumPy dtype; else ValueError."""
    try:
        name = dtype if isinstance(dtype, str) else fmt.dtype_name(dtype)
    except TypeError:
        name = None
    if name not in ADAPTER_DTYPES:
        raise ValueError(f"a LoRA adapter's dtype must be one of {list(ADAPTER_DTYPES)} (got {dtype!r})")
    return name
