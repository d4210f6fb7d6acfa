"""Hook specifications of the ``vk_adam`` plugin project (pluggy).

A plugin is a module (or object) with ``@vk_adam.hookimpl`` functions, registered through the
``vk_adam`` entry-point group::

    [project.entry-points.vk_adam]
    lion = "vk_adam_lion"
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .rule import UpdateRule

PROJECT_NAME = "vk_adam"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Marker for plugin implementations: ``@vk_adam.hookimpl def vk_adam_rules(): ...``
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

# ---------------------------------------------------------------------------------------------
# Update rules
# ---------------------------------------------------------------------------------------------


@hookspec
def vk_adam_rules() -> list[UpdateRule]:  # type: ignore[empty-body]
    """Return the update rules this plugin provides.

    Each rule's name must be unique across all installed plugins (two providers make the name
    unusable until one is blocked by its entry-point name), and the built-in names (adam,
    adamw, sgd) are refused unless the user allows the plugin to replace them
    (``$VK_ADAM_ALLOW_BUILTIN_OVERRIDE``). Each rule's shaders are checked against its
    declaration when the registry loads: bindings 0..2 + one per state buffer, push-constant
    block 4 + 4 * hyper_count bytes (at most 128), ``push_constants`` returning hyper_count
    values and ``spec_constants`` one value per specialization constant the shader declares
    beyond 0. A rule that fails is rejected with a warning while every other rule still loads.
    """
