"""The optimizer: param groups, hyperparameters and step orchestration (``optimizer``,
``stepping``), the torch-named classes (``presets``), the functional form (``functional``),
the flat-buffer layout, storage formats and state dicts. It speaks to the device only through
``vk_adam._runtime``.

This file is the package's face: ``distributed/``, ``lora/``, ``testing/``, ``_commands/`` and
the public surface import what they need from here, never from a module below. It carries what
the public surface re-exports and what more than one package needs, nothing that serves one
package alone. The exceptions:

* ``sharding`` is the one sub-face: the building blocks ZeRO-1 plans a sharded optimizer from,
  which only ``distributed/`` imports (its docstring says why they are not here).
* What code that wraps an optimizer reads of an instance (the gradient scale, the status
  buffer, the buffer sets, the runtime) is no import at all: ``Optimizer.internals()``
  (``access.WrapperAccess``).
* Names one package alone imports, until their users change (the architecture test lists them,
  ``ONE_PACKAGE``): the loop-shape knobs (``_commands``' bench reports them),
  ``subgroup_unsupported`` (``cli``), ``is_signed`` (``testing``), ``blocks`` (``lora``), and
  ``initial_state`` and ``value_words`` (``tests/optim``; ``distributed/`` takes them from
  ``sharding``).
"""

from .emulation import FormatReference
from .functional import adam_update
from .host.imports import HOST_IMPORT_ENV
from .inflight import StepHandle
from .layout import ALIGN_ELEMENTS
from .optimizer import Optimizer
from .presets import SGD, Adam, AdamW, create
from .state_dict import ABSMAX_SUFFIX, MASTER_KEY
from .storage import blocks, group_format, initial_state, is_signed, value_words
from .variants import INT8_VEC4S_ENV, INT8_WORKGROUPS_ENV, SUBGROUPS_ENV, VEC4S_ENV, subgroup_unsupported

__all__ = [
    "ABSMAX_SUFFIX",
    "ALIGN_ELEMENTS",
    "HOST_IMPORT_ENV",
    "INT8_VEC4S_ENV",
    "INT8_WORKGROUPS_ENV",
    "MASTER_KEY",
    "SGD",
    "SUBGROUPS_ENV",
    "VEC4S_ENV",
    "Adam",
    "AdamW",
    "FormatReference",
    "Optimizer",
    "StepHandle",
    "adam_update",
    "blocks",
    "create",
    "group_format",
    "initial_state",
    "is_signed",
    "subgroup_unsupported",
    "value_words",
]
