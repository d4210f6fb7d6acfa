"""The device classes that ship (issue 57): their profiles, where each number comes from, and what
vk-adam refuses on them.

``scripts/test-profiles.sh`` runs the device tests under each profile of :data:`SHIPPING`
through the Khronos profiles layer (docs/devices.md has the table of what runs where). This
module checks the profiles themselves and runs, under the layer, what the suite's in-process
tests cannot: a plugin rule with more state buffers than a class allows, refused when the
optimizer is made.

``VP_ANDROID_15_minimums`` is Vulkan-Profiles' own file, vendored unchanged; the layer vk-adam
builds (Vulkan-Profiles sdk-1.3.239.0, the tag of Debian 12's headers) cannot read it: its
capability list holds alternatives (``["a", "b"]``), on which that layer's JSON reader aborts the
process (``Json::LogicError: Type is not convertible to string``), and it requires
``VP_ANDROID_baseline_2022`` through a ``"profiles"`` entry, which that layer ignores. The suite
runs :func:`flatten_android_15` of it instead, committed as
``tests/profiles/vp_android_15_minimums_flat.json``: regenerate it with
``python -m tests.runtime.test_shipping_profiles`` from the repository root.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vk_adam import _validation as validation

ROOT = Path(__file__).resolve().parents[2]
VENDORED = ROOT / "third_party/vulkan-profiles/profiles"
OWN = ROOT / "tests/profiles"
ANDROID_15_FLAT = OWN / "vp_android_15_minimums_flat.json"

#: The shipping device classes the suite runs under: profile name -> file
#: (scripts/test-profiles.sh has the same table).
SHIPPING = {
    "VP_ANDROID_15_minimums": ANDROID_15_FLAT,
    "VP_ANDROID_vulkan_profile_2025": VENDORED / "VP_ANDROID_vulkan_profile_2025.json",
    "VP_VK_ADAM_moltenvk": OWN / "vk_adam_moltenvk.json",
    "VP_VK_ADAM_adreno_turnip": OWN / "vk_adam_adreno_turnip.json",
    "VP_VK_ADAM_mali_panvk": OWN / "vk_adam_mali_panvk.json",
    "VP_VK_ADAM_intel_windows": OWN / "vk_adam_intel_windows.json",
}

#: The vendored files, unchanged from KhronosGroup/Vulkan-Profiles: their git blob ids
#: (``git hash-object``), as third_party/vulkan-profiles/README.md lists them.
UPSTREAM_BLOBS = {
    "VP_ANDROID_baseline_2022.json": "84e65592e33fb77d40a71c6a08b465f1726f8bbc",
    "VP_ANDROID_15_minimums.json": "9e17253d754d062cd17b7e501b321760a3e2c820",
    "VP_ANDROID_vulkan_profile_2025.json": "d32aae3aa9ff4054034227c416f565c4e312a2fd",
}

#: Structures of VP_ANDROID_15_minimums that Vulkan 1.3.239's vk.xml (the layer's) does not
#: define: the layer would skip them without a word, so the flat file leaves them out and says so.
#: (VK_KHR_vertex_attribute_divisor came in header 1.3.280; a graphics feature either way.)
UNKNOWN_TO_THE_LAYER = ("VkPhysicalDeviceVertexAttributeDivisorFeaturesKHR",)
#: What revision 2 of VP_ANDROID_baseline_2022 (2024-04-03, the one VP_ANDROID_15_minimums
#: requires upstream) changed from the vendored revision 1: it removed this limit, "which was
#: incorrectly specified".
BASELINE_2022_REVISION_2_REMOVED = "minMemoryMapAlignment"


def _resolve(entries: list[Any]) -> list[str]:
    """A profile's capability list with each list of alternatives taken at its first entry (what
    Vulkan-Profiles' layer also does when the device supports it; here: graphics queries and
    line rasterization, nothing compute reads)."""
    return [entry[0] if isinstance(entry, list) else entry for entry in entries]


def flatten_android_15(android_15: dict[str, Any], baseline_2022: dict[str, Any]) -> dict[str, Any]:
    """VP_ANDROID_15_minimums as one self-contained profile the sdk-1.3.239 layer reads: the
    capabilities of the profile it requires (VP_ANDROID_baseline_2022, at revision 2) first,
    then its own, in its order (later ones override earlier limits, as upstream's layer
    applies them); each list of alternatives at its first entry; structures the layer's vk.xml
    lacks left out. Extensions, features, limits and formats are otherwise unchanged."""
    [name] = android_15["profiles"]
    profile = android_15["profiles"][name]
    [required] = profile["profiles"]
    base_profile = baseline_2022["profiles"][required]
    capabilities: dict[str, Any] = {}
    order: list[str] = []
    for source, entries in (
        (baseline_2022, base_profile["capabilities"]),
        (android_15, profile["capabilities"]),
    ):
        for cap in _resolve(entries):
            assert cap not in capabilities, f"capability {cap} defined twice"
            block = copy.deepcopy(source["capabilities"][cap])
            for section in ("features", "properties"):
                for struct in UNKNOWN_TO_THE_LAYER:
                    block.get(section, {}).pop(struct, None)
            limits = block.get("properties", {}).get("VkPhysicalDeviceProperties", {}).get("limits", {})
            if source is baseline_2022:
                limits.pop(BASELINE_2022_REVISION_2_REMOVED, None)
            capabilities[cap] = block
            order.append(cap)
    dropped = ", ".join(UNKNOWN_TO_THE_LAYER)
    return {
        "$schema": "https://schema.khronos.org/vulkan/profiles-0.8.1-239.json#",
        "capabilities": capabilities,
        "profiles": {
            name: {
                "version": profile["version"],
                "api-version": profile["api-version"],
                "label": profile["label"] + " (flattened for the sdk-1.3.239 profiles layer)",
                "description": (
                    f"{profile['description']}. Generated by vk-adam's "
                    "tests/runtime/test_shipping_profiles.py (flatten_android_15) from "
                    "third_party/vulkan-profiles/profiles/VP_ANDROID_15_minimums.json (Vulkan-Profiles "
                    f"blob {UPSTREAM_BLOBS['VP_ANDROID_15_minimums.json'][:12]}) and the profile it "
                    f"requires, {required} (the vendored revision 1 less {BASELINE_2022_REVISION_2_REMOVED}, "
                    "as revision 2 has it): its capabilities first, then these; each list of "
                    "alternatives at its first entry; left out, as the layer's Vulkan 1.3.239 vk.xml "
                    f"does not define it: {dropped}. The limits: {required}'s, with "
                    "maxPerStageDescriptorStorageBuffers 12 and the others the MUST block raises."
                ),
                "contributors": profile["contributors"],
                "history": [
                    {
                        "revision": 1,
                        "date": "2026-12-06",
                        "author": "vk-adam",
                        "comment": "flattened from upstream revision "
                        + str(profile["history"][-1]["revision"])
                        + f" and {required} revision 2",
                    }
                ],
                "capabilities": order,
            }
        },
    }


def _flat_from_vendored() -> dict[str, Any]:
    read = lambda name: json.loads((VENDORED / name).read_text())  # noqa: E731
    return flatten_android_15(read("VP_ANDROID_15_minimums.json"), read("VP_ANDROID_baseline_2022.json"))


def write_android_15_flat() -> Path:
    ANDROID_15_FLAT.write_text(json.dumps(_flat_from_vendored(), indent=4) + "\n")
    return ANDROID_15_FLAT


if __name__ == "__main__":
    print(write_android_15_flat())


# -- the profiles themselves ---------------------------------------------------------------------

#: What each shipping class reports of the limits vk-adam reads (the sources: tests/profiles/README.md
#: and each file's description). Storage buffers: per stage, then per set.
PUBLISHED: dict[str, dict[str, Any]] = {
    "VP_ANDROID_15_minimums": {
        "maxPerStageDescriptorStorageBuffers": 12,
        "maxDescriptorSetStorageBuffers": 24,
        "maxComputeWorkGroupInvocations": 128,
        "maxStorageBufferRange": 1 << 27,
        "maxPushConstantsSize": 128,
        "minStorageBufferOffsetAlignment": 256,
    },
    "VP_ANDROID_vulkan_profile_2025": {
        "maxPerStageDescriptorStorageBuffers": 35,
        "maxDescriptorSetStorageBuffers": 210,
        "maxComputeWorkGroupInvocations": 256,
        "maxStorageBufferRange": 1 << 27,
        "maxPushConstantsSize": 128,
        "minStorageBufferOffsetAlignment": 256,
    },
    "VP_VK_ADAM_moltenvk": {
        "maxPerStageDescriptorStorageBuffers": 31,
        "maxDescriptorSetStorageBuffers": 31 * 5,
        "maxComputeWorkGroupInvocations": 1024,
        "maxStorageBufferRange": 2**32 - 1,
        "maxPushConstantsSize": 4096,
        "minStorageBufferOffsetAlignment": 16,
    },
    "VP_VK_ADAM_adreno_turnip": {
        "maxPerStageDescriptorStorageBuffers": (1 << 28) * 4 // 64,
        "maxDescriptorSetStorageBuffers": (1 << 28) * 4 // 64,
        "maxComputeWorkGroupInvocations": 64 * 2 * 16,
        "maxComputeWorkGroupCount": [65535, 65535, 65535],
        "maxStorageBufferRange": 1 << 27,
        "maxPushConstantsSize": 256,
        "minStorageBufferOffsetAlignment": 4,
    },
    "VP_VK_ADAM_mali_panvk": {
        "maxPerStageDescriptorStorageBuffers": 1 << 20,
        "maxDescriptorSetStorageBuffers": 1 << 20,
        "maxComputeWorkGroupCount": [65535, 65535, 65535],
        "maxStorageBufferRange": 2**32 - 1,
        "maxPushConstantsSize": 256,
        "minStorageBufferOffsetAlignment": 4,
    },
    "VP_VK_ADAM_intel_windows": {
        "maxPerStageDescriptorStorageBuffers": 200,
        "maxDescriptorSetStorageBuffers": 1800,
        "maxComputeWorkGroupInvocations": 1024,
        "maxComputeWorkGroupCount": [65536, 65536, 65536],
        "maxStorageBufferRange": (1 << 30) - 4,
        "maxPushConstantsSize": 256,
        "minStorageBufferOffsetAlignment": 64,
    },
}


def profile_limits(file: Path, profile: str) -> dict[str, Any]:
    """The limits a profile sets, over its capabilities in order (a later one overrides)."""
    data = json.loads(file.read_text())
    limits: dict[str, Any] = {}
    for cap in _resolve(data["profiles"][profile]["capabilities"]):
        props = data["capabilities"][cap].get("properties", {})
        limits.update(props.get("VkPhysicalDeviceProperties", {}).get("limits", {}))
    return limits


def _blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_vendored_profiles_are_vulkan_profiles_files_unchanged():
    for name, blob in UPSTREAM_BLOBS.items():
        assert _blob(VENDORED / name) == blob, name


def test_the_flat_android_15_profile_is_derived_from_the_vendored_files():
    """Regenerate it with ``python -m tests.runtime.test_shipping_profiles`` when they change."""
    assert json.loads(ANDROID_15_FLAT.read_text()) == _flat_from_vendored()


def test_the_flat_android_15_profile_keeps_every_limit_of_both_profiles():
    """Nothing lost in the flattening: each limit is the Android 15 MUST block's where it sets
    one, the 2022 baseline's otherwise (less the one limit its revision 2 removed)."""
    upstream = json.loads((VENDORED / "VP_ANDROID_15_minimums.json").read_text())
    baseline = json.loads((VENDORED / "VP_ANDROID_baseline_2022.json").read_text())
    expected = dict(profile_limits(VENDORED / "VP_ANDROID_baseline_2022.json", "VP_ANDROID_baseline_2022"))
    expected.pop(BASELINE_2022_REVISION_2_REMOVED)
    expected.update(upstream["capabilities"]["MUST"]["properties"]["VkPhysicalDeviceProperties"]["limits"])
    assert profile_limits(ANDROID_15_FLAT, "VP_ANDROID_15_minimums") == expected
    flat = json.loads(ANDROID_15_FLAT.read_text())["capabilities"]
    sources = {**baseline["capabilities"], **upstream["capabilities"]}
    for cap, block in flat.items():
        assert block.get("extensions") == sources[cap].get("extensions"), cap
        assert block.get("formats") == sources[cap].get("formats"), cap


@pytest.mark.parametrize("profile", sorted(SHIPPING))
def test_each_shipping_profile_carries_the_published_limits(profile):
    data = json.loads(SHIPPING[profile].read_text())
    assert list(data["profiles"]) == [profile]
    limits = profile_limits(SHIPPING[profile], profile)
    for name, value in PUBLISHED[profile].items():
        assert limits[name] == value, name
    # every shipping class runs every built-in rule: AMSGrad binds 5 + 2 * 3 = 11
    assert min(limits["maxPerStageDescriptorStorageBuffers"], limits["maxDescriptorSetStorageBuffers"]) >= 11


@pytest.mark.parametrize("profile", sorted(SHIPPING))
def test_each_class_binds_a_buffer_past_its_range_in_aligned_windows(profile):
    """Arithmetic only (no buffer is made: lavapipe's memory holds none this large): a buffer set
    twice the class's maxStorageBufferRange is cut into windows that start at its
    minStorageBufferOffsetAlignment and stay within its range, for every kind of buffer a set
    binds. Intel's range (1 GiB less 4 bytes) is no multiple of its 64-byte alignment; turnip's
    and panvk's alignment is 4 bytes."""
    from vk_adam import _formats as fmt
    from vk_adam._optim.windows import chunks, window

    limits = profile_limits(SHIPPING[profile], profile)
    max_range, alignment = limits["maxStorageBufferRange"], limits["minStorageBufferOffsetAlignment"]
    n = 2 * (max_range // 4) + 17
    spans = chunks(n, max_range, alignment)
    assert len(spans) >= 3 and spans[0].start == 0 and sum(c.count for c in spans) == n
    for chunk in spans:
        for per in [(4, 1), (2, 1), (1, 1), (4, fmt.BLOCK)]:
            nbytes = -(-n * per[0] // per[1]) + 64
            offset, size = window(nbytes, per, chunk)
            assert offset % alignment == 0, (profile, chunk, per)
            assert 0 < size <= max_range and offset + size <= nbytes, (profile, chunk, per)


def test_each_own_profile_says_where_its_numbers_come_from():
    readme = (OWN / "README.md").read_text()
    for profile, file in SHIPPING.items():
        if file.parent == OWN and file != ANDROID_15_FLAT:
            [entry] = json.loads(file.read_text())["profiles"].values()
            assert "source" in entry["description"] or "report" in entry["description"], profile
            assert file.name in readme and profile in readme, profile


# -- a plugin rule with more state buffers than a class allows -------------------------------------

#: A plugin rule with the most state buffers a rule may declare (4): its shader binds
#: 5 + 2 * 4 = 13 storage buffers (param, grad, skip flag, 4 state, 4 absmax, master, qtable).
FOUR_STATES = """#version 450
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 4   // s[0] = E[g], s[1] = E[g^2], s[2] = max |g|, s[3] = E[|g|]
#define VK_ADAM_HYPER_COUNT 3   // lr, a, 1 - a
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    s[0] = HYPER(1) * s[0] + HYPER(2) * g;
    s[1] = HYPER(1) * s[1] + HYPER(2) * g * g;
    s[2] = max(s[2], abs(g));
    s[3] = HYPER(1) * s[3] + HYPER(2) * abs(g);
    p -= HYPER(0) * (s[0] + 0.25 * (s[2] - s[3]));
}
"""
FOUR_STATE_BINDINGS = 5 + 2 * 4


def four_state_rule(spv: Path) -> Any:
    from vk_adam import ShaderVariant, StateBuffer, UpdateRule

    def reference(param: Any, grad: Any, state: dict[str, Any], h: Any, step: int) -> None:
        a = h["a"]
        state["m"][...] = a * state["m"] + (1.0 - a) * grad
        state["v"][...] = a * state["v"] + (1.0 - a) * grad * grad
        state["peak"][...] = np.maximum(state["peak"], np.abs(grad))
        state["mabs"][...] = a * state["mabs"] + (1.0 - a) * np.abs(grad)
        param -= h["lr"] * (state["m"] + 0.25 * (state["peak"] - state["mabs"]))

    state = (
        StateBuffer("m"),
        StateBuffer("v", nonnegative=True),
        StateBuffer("peak", nonnegative=True),
        StateBuffer("mabs", nonnegative=True),
    )
    return UpdateRule(
        name="four_states",
        defaults={"lr": 1e-2, "a": 0.9},
        variants={"main": ShaderVariant(spv, state, hyper_count=3)},
        select_variant=lambda h: "main",
        push_constants=lambda h, step: (h["lr"], h["a"], 1.0 - h["a"]),
        reference=reference,
    )


@pytest.fixture(scope="module")
def four_state_spv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from vk_adam.shaderc import compile_shaders

    src = tmp_path_factory.mktemp("glsl")
    (src / "four_states.comp").write_text(FOUR_STATES)
    built = compile_shaders(src, tmp_path_factory.mktemp("spirv"))
    [spv] = [p for p in built if p.name == "four_states.spv"]
    return spv


def _storage_buffers(manager: Any) -> int:
    props = manager.get_device_properties()
    return min(props["max_per_stage_descriptor_storage_buffers"], props["max_descriptor_set_storage_buffers"])


def test_a_four_state_rule_runs_where_13_bindings_fit_and_is_refused_by_name_elsewhere(
    four_state_spv, kp_manager, vk_seed
):
    """Under scripts/test-profiles.sh this runs on each simulated class: every shipping class but
    Android 15 (12 storage buffers per stage) runs the rule in every storage format; Android 15,
    the 2022 baseline and the spec minimum refuse it when the optimizer is made, naming the limit
    and the device's value, with the params untouched."""
    import vk_adam
    from vk_adam.testing import FORMAT_CASES, check_rule

    rule = four_state_rule(four_state_spv)
    room = _storage_buffers(kp_manager)
    if room >= FOUR_STATE_BINDINGS:
        report = check_rule(rule, hyper=[{}], sizes=(7,), steps=3, seed=vk_seed)
        assert report.cases == 1 + len(FORMAT_CASES)
        return
    p = np.ones(64, np.float32)
    with pytest.raises(
        vk_adam.DeviceCapabilityError,
        match=rf"rule 'four_states' binds {FOUR_STATE_BINDINGS} storage buffers \(4 state buffers: "
        rf"5 \+ 2 x 4\), more than .* allows one compute pipeline "
        rf"\(maxPerStageDescriptorStorageBuffers / maxDescriptorSetStorageBuffers: {room}\)",
    ):
        vk_adam.Optimizer([p], rule)
    assert np.all(p == 1.0)


#: Opens the device under the stack (validation above the profiles layer), makes an optimizer
#: for the 4-state rule and prints what happened as JSON.
REFUSAL_PROBE = """
import json, sys
from pathlib import Path
import numpy as np
import vk_adam
sys.path.insert(0, sys.argv[2])
from tests.runtime.test_shipping_profiles import four_state_rule
p = np.ones(64, np.float32)
try:
    with vk_adam.Optimizer([p], four_state_rule(Path(sys.argv[1]))) as opt:
        opt.step([np.ones(64, np.float32)])
    print(json.dumps({"refused": None}))
except vk_adam.DeviceCapabilityError as exc:
    print(json.dumps({"refused": str(exc), "untouched": bool(np.all(p == 1.0))}))
"""


@pytest.mark.slow  # builds the layer on first use; the probe is a subprocess
def test_android_15_refuses_a_four_state_rule_when_the_optimizer_is_made(four_state_spv, tmp_path):
    """On the Android 15 minimum, through the profiles layer and under validation: 13 storage
    buffers are more than its 12, and vk-adam says so before it records anything, with no
    validation message."""
    from vk_adam._runtime import select_device

    from .test_profiles import PROFILES, _clean_env

    if "llvmpipe" not in select_device().name:
        pytest.skip("device profiles are simulated on lavapipe, CI's driver; this machine runs a real GPU")
    built = subprocess.run(
        ["bash", str(ROOT / "scripts/build-profiles-layer.sh")], capture_output=True, text=True, timeout=900
    )
    assert built.returncode == 0, built.stderr
    layer = Path(built.stdout.strip().splitlines()[-1])
    env = _clean_env()
    log = validation.enable_validation(tmp_path / "validation", env)
    validation.stack_profile(
        layer,
        PROFILES["VP_ANDROID_15_minimums"],
        "VP_ANDROID_15_minimums",
        log=tmp_path / "layer.log",
        env=env,
    )
    done = subprocess.run(
        [sys.executable, "-c", REFUSAL_PROBE, str(four_state_spv), str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["refused"] is not None, "the 4-state rule ran on a 12-storage-buffer device"
    assert "rule 'four_states' binds 13 storage buffers" in result["refused"], result
    assert "(maxPerStageDescriptorStorageBuffers / maxDescriptorSetStorageBuffers: 12)" in result["refused"]
    assert "a rule with at most 3 state buffers can" in result["refused"]
    assert result["untouched"]
    text = log.read_text(errors="replace")
    assert validation.STATUS_MESSAGE in text, "the validation layer did not run"
    assert validation.validation_messages(text) == []
