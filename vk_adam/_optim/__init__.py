"""The optimizer: param groups, hyperparameters and step orchestration (``optimizer``,
``stepping``), the torch-named classes (``presets``), the functional form (``functional``),
the flat-buffer layout, storage formats and state dicts. It speaks to the device only through
``vk_adam._runtime``.

This file is the package's face: ``distributed/``, ``lora/``, ``testing/``, ``_commands/`` and
the public surface import what they need from here, never from a module below.
"""

from .buffers import BufferSet, Group
from .clipping import check_harness, check_max_norm
from .emulation import FormatReference
from .functional import adam_update
from .groups import check_options, check_storage, group_options, prepare_grads, revalidate, shader_spec
from .host_imports import HOST_IMPORT_ENV
from .inflight import InFlight, StepHandle
from .layout import ALIGN_ELEMENTS, ParamSlot, align, plan_flat
from .optimizer import Optimizer
from .options import SHARD_OPTIONS, spell_out_options, split_options
from .presets import SGD, Adam, AdamW, create
from .state_dict import ABSMAX_SUFFIX, MASTER_KEY, read_state_dict, write_state_dict
from .storage import GroupFormat, Storage, Window, blocks, group_format, initial_state, is_signed, value_words
from .variants import INT8_VEC4S_ENV, INT8_WORKGROUPS_ENV, SUBGROUPS_ENV, VEC4S_ENV, subgroup_unsupported

__all__ = [
    "ABSMAX_SUFFIX",
    "ALIGN_ELEMENTS",
    "HOST_IMPORT_ENV",
    "INT8_VEC4S_ENV",
    "INT8_WORKGROUPS_ENV",
    "MASTER_KEY",
    "SGD",
    "SHARD_OPTIONS",
    "SUBGROUPS_ENV",
    "VEC4S_ENV",
    "Adam",
    "AdamW",
    "BufferSet",
    "FormatReference",
    "Group",
    "GroupFormat",
    "InFlight",
    "Optimizer",
    "ParamSlot",
    "StepHandle",
    "Storage",
    "Window",
    "adam_update",
    "align",
    "blocks",
    "check_harness",
    "check_max_norm",
    "check_options",
    "check_storage",
    "create",
    "group_format",
    "group_options",
    "initial_state",
    "is_signed",
    "plan_flat",
    "prepare_grads",
    "read_state_dict",
    "revalidate",
    "shader_spec",
    "spell_out_options",
    "split_options",
    "subgroup_unsupported",
    "value_words",
    "write_state_dict",
]
