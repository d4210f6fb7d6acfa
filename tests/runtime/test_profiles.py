"""Device classes simulated by the Khronos profiles layer (VK_LAYER_KHRONOS_profiles), stacked below
the validation layer so that validation checks a program against the simulated device.

The layer is built (once, then cached) by ``scripts/build-profiles-layer.sh``. Each probe runs in
a subprocess: the Vulkan loader reads the layer settings when kp creates the process's VkInstance.
``scripts/test-profiles.sh`` runs the device tests under each profile of :data:`PROFILES`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vk_adam import _validation as validation
from vk_adam.shaderc import compile_shaders

from .test_shipping_profiles import SHIPPING

pytestmark = pytest.mark.slow  # builds the layer on first use; every probe is a subprocess

ROOT = Path(__file__).resolve().parents[2]
#: The device classes the suite runs under (scripts/test-profiles.sh has the same table): three
#: reference classes, then the classes that ship (test_shipping_profiles.SHIPPING, issue 57).
PROFILES = {
    "VP_ANDROID_baseline_2022": ROOT / "third_party/vulkan-profiles/profiles/VP_ANDROID_baseline_2022.json",
    "VP_KHR_roadmap_2022": Path("/usr/share/vulkan/registry/profiles/VP_KHR_roadmap_2022.json"),
    "VP_VK_ADAM_spec_min": ROOT / "tests/profiles/vk_adam_spec_min.json",
    **SHIPPING,
}

#: 256 invocations per workgroup: past the spec minimum of maxComputeWorkGroupInvocations (128)
#: and the width of vk-adam's glsl/*.comp.
WIDE = """#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Values { float v[]; };
void main() { v[gl_GlobalInvocationID.x] = float(gl_GlobalInvocationID.x); }
"""

#: Opens the device through kp, prints its properties (as the program sees them: through the
#: layers), and runs the 256-wide shader once on 512 floats, checking what it wrote.
PROBE = """
import json, sys
import numpy as np
import kp
mgr = kp.Manager()
print(json.dumps(mgr.get_device_properties()))
t = mgr.tensor(np.zeros(512, np.float32))
algo = mgr.algorithm([t], open(sys.argv[1], "rb").read(), (2, 1, 1))
mgr.sequence().record(kp.OpTensorSyncDevice([t])).record(kp.OpAlgoDispatch(algo)).record(
    kp.OpTensorSyncLocal([t])).eval()
assert np.array_equal(t.data(), np.arange(512, dtype=np.float32)), t.data()[:8]
"""


@pytest.fixture(scope="session")
def profiles_layer() -> Path:
    """The folder of the profiles layer's manifest (built and cached by the project's script)."""
    from vk_adam._runtime import select_device

    if "llvmpipe" not in select_device().name:
        pytest.skip("device profiles are simulated on lavapipe, CI's driver; this machine runs a real GPU")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/build-profiles-layer.sh")], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"scripts/build-profiles-layer.sh failed:\n{done.stderr}"
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def wide_shader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("glsl")
    (src / "wide256.comp").write_text(WIDE)
    out = tmp_path_factory.mktemp("spirv")
    compile_shaders(src, out)
    return out / "wide256.spv"


def _clean_env() -> dict[str, str]:
    """This environment without any layer settings (the session may itself run under some)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VK_KHRONOS_PROFILES_")}
    for name in (
        "VK_INSTANCE_LAYERS",
        "VK_ADD_LAYER_PATH",
        "VK_LAYER_SETTINGS_PATH",
        "KOMPUTE_VALIDATION_LOG",
    ):
        env.pop(name, None)
    return env


def _probe(
    shader: Path, directory: Path, layer: Path | None, profile: str | None
) -> tuple[dict, list[str], str]:
    """Run the probe under validation (and a profile, if one is named): the device properties it
    saw, the validation messages that count, and the profiles layer's own log."""
    env = _clean_env()
    log = validation.enable_validation(directory / "validation", env)
    layer_log = directory / "profiles-layer.log"
    if profile is not None:
        assert layer is not None
        validation.stack_profile(layer, PROFILES[profile], profile, log=layer_log, env=env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(shader)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    text = log.read_text(errors="replace")
    assert validation.STATUS_MESSAGE in text, f"the validation layer did not run:\n{done.stderr}"
    properties = json.loads(done.stdout.splitlines()[0])  # JSON: tuples are lists
    notes = layer_log.read_text(errors="replace") if layer_log.exists() else ""
    return properties, validation.validation_messages(text), notes


def test_validation_checks_the_android_profiles_workgroup_limit(profiles_layer, wide_shader, tmp_path):
    """Under VP_ANDROID_baseline_2022 the device reports 128 invocations per workgroup, and the
    validation layer above the profiles layer sees that limit: the 256-wide shader draws
    VUID-RuntimeSpirv-x-06429 (and -06432, the workgroup's total)."""
    properties, messages, _ = _probe(wide_shader, tmp_path, profiles_layer, "VP_ANDROID_baseline_2022")
    assert properties["max_work_group_invocations"] == 128
    assert properties["max_work_group_size"][0] == 128
    ids = {m.splitlines()[0].split(" ")[0] for m in messages}
    assert "VUID-RuntimeSpirv-x-06429" in ids, messages
    assert "VUID-RuntimeSpirv-x-06432" in ids, messages


def test_without_a_profile_the_same_shader_is_valid(wide_shader, tmp_path):
    """The control: on the device as it is (lavapipe and the GPUs this project runs on allow 1,024
    invocations), the same program under the same validation draws no message."""
    properties, messages, _ = _probe(wide_shader, tmp_path, None, None)
    assert properties["max_work_group_invocations"] >= 256, properties
    assert messages == []


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_profile_is_what_the_device_reports(profile, profiles_layer, wide_shader, tmp_path):
    """The device, seen through the stack, reports the profile's API version and limits: the layer
    loaded the file and the profile by name, and nothing in the profile was rejected."""
    properties, _, notes = _probe(wide_shader, tmp_path, profiles_layer, profile)
    expected = _expected(PROFILES[profile], profile)
    api = properties["api_version"]
    assert (api >> 22 & 0x7F, api >> 12 & 0x3FF) == expected["api"], (api, expected)
    for name, key in (
        ("maxComputeWorkGroupInvocations", "max_work_group_invocations"),
        ("maxComputeWorkGroupSize", "max_work_group_size"),
        ("maxComputeWorkGroupCount", "max_work_group_count"),
        ("maxPushConstantsSize", "max_push_constants_size"),
        ("maxStorageBufferRange", "max_storage_buffer_range"),
    ):
        if name in expected["limits"]:
            want = expected["limits"][name]
            assert properties[key] == want, name
    assert "PROFILES ERROR" not in notes, notes


def _expected(file: Path, profile: str) -> dict:
    """The API version and the limits a profile sets (the union over its capabilities)."""
    data = json.loads(file.read_text())
    entry = data["profiles"][profile]
    major, minor = (int(x) for x in entry["api-version"].split(".")[:2])
    limits: dict = {}
    for block in entry["capabilities"]:
        names = block if isinstance(block, list) else [block]
        for name in names[:1]:  # a list holds alternatives: the layer takes the first
            props = data["capabilities"][name].get("properties", {})
            limits.update(props.get("VkPhysicalDeviceProperties", {}).get("limits", {}))
    return {"api": (major, minor), "limits": limits}


def test_spec_min_profile_is_the_vulkan_1_1_minimum():
    """The project's own profile: Vulkan 1.1, the spec's least limits, no optional feature (only
    those every 1.1 device has), no extension, basic subgroups only."""
    data = json.loads(PROFILES["VP_VK_ADAM_spec_min"].read_text())
    [name] = data["profiles"]
    assert name == "VP_VK_ADAM_spec_min" and data["profiles"][name]["api-version"].startswith("1.1.")
    [caps] = data["capabilities"].values()
    assert caps["extensions"] == {}
    limits = caps["properties"]["VkPhysicalDeviceProperties"]["limits"]
    assert limits["maxComputeWorkGroupInvocations"] == 128
    assert limits["maxComputeWorkGroupSize"] == [128, 128, 64]
    assert limits["maxStorageBufferRange"] == 2**27
    assert limits["maxPushConstantsSize"] == 128
    assert limits["maxPerStageDescriptorStorageBuffers"] == 4
    assert limits["minStorageBufferOffsetAlignment"] == 256
    assert caps["properties"]["VkPhysicalDeviceMaintenance3Properties"]["maxMemoryAllocationSize"] == 2**30
    assert caps["properties"]["VkPhysicalDeviceSubgroupProperties"]["supportedOperations"] == [
        "VK_SUBGROUP_FEATURE_BASIC_BIT"
    ]
    required = {
        ("VkPhysicalDeviceFeatures", "robustBufferAccess"),
        ("VkPhysicalDeviceMultiviewFeatures", "multiview"),
    }
    enabled = {(s, f) for s, fs in caps["features"].items() for f, on in fs.items() if on}
    assert enabled == required


def test_stack_profile_says_what_is_missing(tmp_path):
    env: dict[str, str] = {"HOME": str(tmp_path)}
    with pytest.raises(FileNotFoundError, match=r"build-profiles-layer\.sh"):
        validation.stack_profile(tmp_path, PROFILES["VP_VK_ADAM_spec_min"], log=tmp_path / "l", env=env)
    layer = tmp_path / "layer"
    layer.mkdir()
    (layer / validation.PROFILES_MANIFEST).write_text(
        json.dumps({"file_format_version": "1.2.0", "layer": {"name": validation.PROFILES_LAYER}})
    )
    with pytest.raises(ValueError, match=r"no profile 'VP_NOPE'; it has VP_VK_ADAM_spec_min"):
        validation.stack_profile(
            layer, PROFILES["VP_VK_ADAM_spec_min"], "VP_NOPE", log=tmp_path / "l", env=env
        )


def test_stack_profile_puts_validation_above_the_profiles_layer(tmp_path):
    """Both orders the loader may follow: VK_INSTANCE_LAYERS (profiles last, nearest the driver),
    and the manifest folders (validation's first, as Debian 12's loader orders by folder)."""
    layer = tmp_path / "layer"
    layer.mkdir()
    (layer / validation.PROFILES_MANIFEST).write_text(
        json.dumps({"file_format_version": "1.2.0", "layer": {"name": validation.PROFILES_LAYER}})
    )
    found = validation.find_validation_layer()
    if found is None:
        pytest.fail(f"the validation layer is not installed. {validation.INSTALL_HINT}")
    env = {"HOME": str(tmp_path), "VK_INSTANCE_LAYERS": validation.LAYER, "VK_ADD_LAYER_PATH": "/elsewhere"}
    validation.stack_profile(layer, PROFILES["VP_ANDROID_baseline_2022"], log=tmp_path / "l", env=env)
    assert env["VK_INSTANCE_LAYERS"].split(os.pathsep) == [validation.LAYER, validation.PROFILES_LAYER]
    assert env["VK_ADD_LAYER_PATH"].split(os.pathsep) == [str(found.parent), str(layer), "/elsewhere"]
    assert env["VK_KHRONOS_PROFILES_PROFILE_NAME"] == "VP_ANDROID_baseline_2022"
    assert env["VK_KHRONOS_PROFILES_EMULATE_PORTABILITY"] == "false"
    assert "SIMULATE_EXTENSIONS_BIT" in env["VK_KHRONOS_PROFILES_SIMULATE_CAPABILITIES"]
