"""Compile every glsl/*.comp to SPIR-V in vk_adam/_spirv/ and validate it with spirv-val.

Also compiles the resident demo's application shaders,
``vk_adam/_commands/demo/resident_example/shaders/*.comp``, into its ``spirv/`` (in the wheel, beside
the package's own), and each example's, ``examples/<name>/shaders/*.comp``, into
``examples/<name>/spirv/`` (checkouts and the sdist; examples/ is not in the wheel). Every
``spirv/`` folder is gitignored.

Run by the build hook (hatch_build.py) for every wheel and editable install; also by hand:
``python build_shaders.py``. The compiler driver itself lives in ``vk_adam/shaderc.py`` (standard
library only, loaded here by path so the build needs neither kp nor an installed vk_adam), where
plugin packages can call it too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent
#: The resident demo's application, relative to the root: its shaders/ compile into its spirv/.
RESIDENT_EXAMPLE_DIR = Path("vk_adam", "_commands", "demo", "resident_example")


def _load_shaderc(root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("_vk_adam_shaderc", root / "vk_adam" / "shaderc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(root: Path = ROOT) -> list[Path]:
    """Compile ``root/glsl/*.comp`` into ``root/vk_adam/_spirv``; return the written files."""
    shaderc = _load_shaderc(root)
    outputs: list[Path] = shaderc.compile_shaders(
        root / "glsl", root / "vk_adam" / "_spirv", include_dirs=[root / "glsl"]
    )
    # Deliberately broken rule shaders for the registry's negative tests (checkouts only;
    # they never enter the wheel).
    test_sources = root / "tests" / "glsl"
    if test_sources.is_dir():
        outputs += shaderc.compile_shaders(test_sources, root / "tests" / "spirv")
    # The resident demo's application, which the wheel carries (vk-adam demo runs it).
    example = root / RESIDENT_EXAMPLE_DIR
    outputs += shaderc.compile_shaders(example / "shaders", example / "spirv")
    # Example applications (checkouts and the sdist only).
    for example_sources in sorted((root / "examples").glob("*/shaders")):
        if any(example_sources.glob("*.comp")):  # a folder left behind by a moved example is skipped
            outputs += shaderc.compile_shaders(example_sources, example_sources.parent / "spirv")
    return outputs


if __name__ == "__main__":
    try:
        for path in build():
            print(path.relative_to(ROOT))
    except Exception as exc:  # a build tool: print the actionable message, not a traceback
        print(f"build_shaders.py: {exc}", file=sys.stderr)
        sys.exit(1)
