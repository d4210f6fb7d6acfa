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
        build_data.setdefault("artifacts", []).append("vk_adam/_spirv/*.spv")
        # The resident demo's application (examples/resident_training: its driver, GLSL and the
        # SPIR-V just compiled) rides in the wheel as vk_adam/_examples/, so `vk-adam demo` runs
        # from an installed wheel too. The checkout's copy stays the one to read and copy.
        example = root / "examples" / "resident_training"
        if example.is_dir():
            include = build_data.setdefault("force_include", {})
            for path in (
                sorted(example.glob("train.py"))
                + sorted(example.glob("shaders/*.comp"))
                + sorted(example.glob("shaders/*.glsl"))
                + sorted(example.glob("spirv/*.spv"))
            ):
                include[str(path)] = f"vk_adam/_examples/resident_training/{path.relative_to(example)}"
