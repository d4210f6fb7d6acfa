"""LoRA adapters in one flat buffer: every A and B of every layer updated by one dispatch.

A LoRA adapter (Hu et al. 2021) adds ``scale * B @ A`` to each frozen target weight
``W [out, in]``, with ``A [rank, in]`` (Kaiming-uniform) and ``B [out, rank]`` (zeros), and
``scale = alpha / rank`` (or ``alpha / sqrt(rank)``, rsLoRA). All A and B tensors of an adapter
live in one array (``flat_params``: float32, float16 or bfloat16, the adapter's ``dtype``), each a
view at an offset aligned to 64 elements;
their gradients live in ``flat_grads`` with the same layout. An optimizer over the adapter sees
one parameter, so a step is one dispatch whatever the tensor count::

    adapter = LoRAAdapter.create(layers=32, in_features=4096, out_features=4096, rank=16,
                                 target_modules=("q_proj", "k_proj", "v_proj", "o_proj"))
    opt = adapter.optimizer("adamw", lr=1e-4)
    adapter.grad("model.layers.0.self_attn.q_proj", "B")[...] = dB    # write gradients
    update_lora_adapter(adapter, opt)                                  # one dispatch

Files: :meth:`LoRAAdapter.save_peft` / :meth:`LoRAAdapter.load_peft` (PEFT's layout), and
:func:`save_checkpoint` / :func:`load_checkpoint` (adapter + optimizer state + step + RNG).

Modules, each importing (at import time or when called) only those listed before it: ``errors``
(:class:`CheckpointError`), ``atomic_io`` (atomic file writes), ``modules`` (:class:`LoRAModule`,
the adapter dtypes and PEFT's tensor names), ``peft`` (PEFT's file layout, in plain values),
``adapter`` (the flat layout, the optimizer over it and :func:`update_lora_adapter`),
``torch_state`` (optimizer state by name; torch's AdamW state dicts), ``checkpoint_format`` (the
sealed file and its checksum), ``checkpoint_verify`` (checks before a load changes anything) and
``checkpoint`` (save and load). ``tests/architecture/test_architecture.py`` fails on any import cycle.
"""

from .adapter import LoRAAdapter, update_lora_adapter
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .errors import CheckpointError
from .modules import LoRAModule
from .peft import PeftFormatError
from .torch_state import export_torch_adamw_state, import_torch_adamw_state

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "LoRAAdapter",
    "LoRAModule",
    "PeftFormatError",
    "export_torch_adamw_state",
    "import_torch_adamw_state",
    "load_checkpoint",
    "save_checkpoint",
    "update_lora_adapter",
]
