"""Compile glsl/*.comp with vk-adam's shader driver when the wheel is built."""

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class LionShaders(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        from vk_adam.shaderc import compile_shaders  # build with --no-build-isolation

        root = Path(self.root)
        compile_shaders(root / "glsl", root / "vk_adam_lion" / "spirv")
        build_data.setdefault("artifacts", []).append("vk_adam_lion/spirv/*.spv")
