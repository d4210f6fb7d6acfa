"""Hatchling build hook: compile glsl/*.comp to SPIR-V before a wheel (or editable) is built.

The sdist carries the GLSL only; every wheel built from it compiles its own SPIR-V.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ShaderBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        sys.path.insert(0, str(root))
        try:
            import build_shaders
        finally:
            sys.path.pop(0)
        build_shaders.build(root)
        # The package's SPIR-V and that of the resident demo's application (vk-adam demo runs it
        # from the wheel): generated, gitignored, so declared artifacts of the build.
        build_data.setdefault("artifacts", []).extend(
            ["vk_adam/_spirv/*.spv", f"{build_shaders.RESIDENT_EXAMPLE_DIR.as_posix()}/spirv/*.spv"]
        )
