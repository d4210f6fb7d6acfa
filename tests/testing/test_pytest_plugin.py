"""vk-adam's pytest plugin (vk_adam/pytest_plugin.py), tested through pytest's own ``pytester``:
an inner pytest session on files written here. Validation is per process (kp makes one
VkInstance per process, and the loader reads the environment only then), so an inner session
that validates runs in a subprocess; the rest run in this process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vk_adam
from vk_adam import pytest_plugin as vk_pytest
from vk_adam._runtime import list_devices

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
ENV_NAMES = ("VK_INSTANCE_LAYERS", "VK_LAYER_SETTINGS_PATH", "KOMPUTE_VALIDATION_LOG")
needs_layer = pytest.mark.skipif(
    vk_pytest.find_validation_layer() is None,
    reason="Khronos validation layer not installed (the test command installs it, and its "
    "--vk-validation makes a missing layer an error)",
)

#: The inner sessions' conftest: work that makes synchronization validation report, or not.
HAZARD = '''
import numpy as np


def copy_then_transfer(mgr, barrier_b=True, barrier_c=True):
    """A copy shader writes b (b = a), then a transfer copies b into c. Without a barrier on b
    the transfer's read of b races the shader's write (SYNC-HAZARD-READ-AFTER-WRITE); without
    one on c the transfer's write races c's upload (SYNC-HAZARD-WRITE-AFTER-WRITE)."""
    import kp
    from vk_adam._rules.spirv import load_spirv

    n = 4096
    a, b, c = (mgr.tensor(np.full(n, i, np.float32)) for i in (1, 2, 3))
    push = np.array([n // 4], np.uint32).view(np.float32)
    algo = mgr.algorithm([a, b], load_spirv("copy"), (4, 1, 1), [], push)
    acc, stage = kp.AccessFlagBits, kp.PipelineStageFlagBits
    xfer = stage.transfer
    seq = mgr.sequence()
    seq.record(kp.OpTensorSyncDevice([a, b, c]))
    seq.record(kp.OpAlgoDispatch(algo, push))
    if barrier_b:
        seq.record(kp.OpMemoryBarrier([b], acc.shader_write, acc.transfer_read, stage.compute_shader, xfer))
    if barrier_c:
        seq.record(kp.OpMemoryBarrier([c], acc.transfer_write, acc.transfer_write, xfer, xfer))
    seq.record(kp.OpTensorCopy([b, c]))
    seq.eval()
    seq.destroy()
    algo.destroy()
    for t in (a, b, c):
        t.destroy()
'''


@pytest.fixture(autouse=True, scope="module")
def _runtime_loaded_first() -> None:
    """In-process inner sessions drop the modules they imported first (pytester restores
    sys.modules): kp and vk-adam's runtime are loaded here, so they stay one per process."""
    list_devices()


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No validation inherited from this session (its own --vk-validation)."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def _failure(output: str, test: str) -> str:
    """The failure report of ``test`` (from its ``____ test ____`` header to the next one)."""
    match = re.search(rf"_{{3,}} {re.escape(test)} _{{3,}}\n(.*?)(?=\n_{{3,}} |\n={{3,}} )", output, re.S)
    assert match, f"no report for {test} in:\n{output}"
    return match.group(1)


# -- loading ---------------------------------------------------------------------------------------


def test_the_plugin_is_an_entry_point_and_loading_it_imports_no_kp_nor_numpy():
    code = textwrap.dedent(
        """
        import sys, time
        from importlib.metadata import entry_points
        import pytest
        started = time.perf_counter()
        [ep] = [ep for ep in entry_points(group="pytest11") if ep.name == "vk_adam"]
        ep.load()
        took = time.perf_counter() - started
        heavy = sorted(m for m in ("kp", "numpy", "ml_dtypes", "vk_adam._runtime") if m in sys.modules)
        print(ep.value, heavy, took < 2.0)  # a bound a busy machine keeps; the modules are the check
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["vk_adam.pytest_plugin", "[]", "True"]


def test_off_the_plugin_sets_nothing_and_an_unmarked_session_opens_no_device(pytester, monkeypatch):
    _clean_env(monkeypatch)
    pytester.makepyfile(
        """
        import os, sys
        import pytest

        def test_nothing_was_set_or_imported():
            names = {"VK_INSTANCE_LAYERS", "VK_LAYER_SETTINGS_PATH", "KOMPUTE_VALIDATION_LOG"}
            assert not names & set(os.environ)
            assert "kp" not in sys.modules and "numpy" not in sys.modules

        @pytest.mark.requires_gpu
        def test_marked_later():  # registered: --strict-markers accepts it
            pass
        """
    )
    # Only this plugin: other installed plugins (a GPU machine's environment has some) may
    # import NumPy themselves, which says nothing about ours.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess(
        "-p", "vk_adam.pytest_plugin", "--strict-markers", "-p", "no:cacheprovider", "-m", "not requires_gpu"
    )
    result.assert_outcomes(passed=1, deselected=1)


@pytest.mark.parametrize(
    ("ini", "args", "on"),
    [
        ("", [], False),
        ("", ["--vk-validation"], True),
        ("true", [], True),
        ("true", ["--no-vk-validation"], False),
    ],
)
@needs_layer
def test_the_option_and_the_ini_turn_validation_on(pytester, monkeypatch, ini, args, on):
    _clean_env(monkeypatch)
    if ini:
        pytester.makeini(f"[pytest]\nvk_validation = {ini}\n")
    pytester.makepyfile(
        """
        import json, os, sys
        from pathlib import Path

        def test_env():
            names = ("VK_INSTANCE_LAYERS", "VK_LAYER_SETTINGS_PATH", "KOMPUTE_VALIDATION_LOG")
            folder = os.environ.get("VK_LAYER_SETTINGS_PATH")
            settings = Path(folder, "vk_layer_settings.txt").read_text() if folder else ""
            print("ENV", json.dumps([os.environ.get(n) for n in names] + [settings, "kp" in sys.modules]))
        """
    )
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    [line] = re.findall(r"ENV (\[.*\])", result.stdout.str())
    layers, folder, log, settings, kp_imported = json.loads(line)
    assert not kp_imported  # configure never imports kp
    if not on:
        assert layers is folder is log is None
        return
    assert layers == vk_pytest.LAYER and Path(log) == Path(folder, "validation.log")
    assert "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT" in settings
    assert not Path(folder).exists(), "the session's validation folder is removed at the end"


# -- validation --------------------------------------------------------------------------------------


@needs_layer
def test_a_test_whose_vulkan_calls_made_the_layer_report_fails_with_the_whole_messages(pytester):
    pytester.makeconftest(HAZARD)
    pytester.makepyfile(
        test_a_collection="""
        import kp
        import conftest

        _mgr = kp.Manager()  # at collection, outside any test
        conftest.copy_then_transfer(_mgr, barrier_b=False)
        _mgr.destroy()

        def test_collected():
            pass
        """,
        test_b_cases="""
        import subprocess, sys
        import pytest
        import conftest

        def test_planted(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)

        def test_clean_after_the_planted_one(kp_manager):
            conftest.copy_then_transfer(kp_manager)

        def test_own_failure_keeps_its_report(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)
            assert 1 == 2

        def test_skipping_after_the_layer_reported(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)
            pytest.skip("too late")

        def test_planted_in_a_subprocess():
            code = "import kp, conftest; m = kp.Manager(); conftest.copy_then_transfer(m, False); m.destroy()"
            subprocess.run([sys.executable, "-c", code], check=True, timeout=120)

        @pytest.fixture
        def planted_at_setup(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)

        def test_setup(planted_at_setup):
            pass

        @pytest.fixture
        def planted_at_teardown(kp_manager):
            yield
            conftest.copy_then_transfer(kp_manager, barrier_b=False)

        def test_teardown(planted_at_teardown):
            pass
        """,
    )
    result = pytester.runpytest_subprocess("--vk-validation", "-p", "no:cacheprovider", "-rA", timeout=300)
    out = result.stdout.str()
    result.assert_outcomes(passed=3, failed=5, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    whole = re.compile(
        r"SYNC-HAZARD-READ-AFTER-WRITE \(ERROR\)\n +Validation Error: \[ SYNC-HAZARD-READ-AFTER-WRITE \] "
        r"Object 0: handle = 0x[0-9a-f]+, type = VK_OBJECT_TYPE_BUFFER; \| MessageID = 0x[0-9a-f]+ \| "
        r"vkCmdCopyBuffer: Hazard READ_AFTER_WRITE for srcBuffer .*Access info \(usage: "
        r"SYNC_COPY_TRANSFER_READ, prior_usage: SYNC_COMPUTE_SHADER_SHADER_STORAGE_WRITE, "
        r"write_barriers: 0, command: vkCmdDispatch, seq_no: \d+, reset_no: \d+\)\."
    )
    planted = _failure(out, "test_planted")
    assert planted.startswith("Vulkan validation: SYNC-HAZARD-READ-AFTER-WRITE (ERROR): 1 message while")
    assert len(whole.findall(planted)) == 1, planted
    assert "Traceback" not in planted and "pytest_plugin.py" not in planted  # the test's failure
    own = _failure(out, "test_own_failure_keeps_its_report")
    assert "assert 1 == 2" in own and "Vulkan validation (call)" in own and whole.search(own)
    assert whole.search(_failure(out, "test_skipping_after_the_layer_reported"))
    assert whole.search(_failure(out, "test_planted_in_a_subprocess"))
    assert whole.search(_failure(out, "test_setup"))  # a fixture's messages fail the test using it
    teardown = _failure(out, "ERROR at teardown of test_teardown")
    assert "during this test's teardown" in teardown and whole.search(teardown)
    assert "PASSED test_b_cases.py::test_clean_after_the_planted_one" in out
    outside = out.split("Vulkan validation messages outside any test", 1)[1]
    assert len(whole.findall(outside.split("short test summary")[0])) == 1


@needs_layer
def test_ignored_message_ids_do_not_fail_and_the_others_still_do(pytester):
    pytester.makeconftest(HAZARD)
    pytester.makeini(
        "[pytest]\nvk_validation = true\nvk_validation_ignore =\n    SYNC-HAZARD-READ-AFTER-WRITE\n"
    )
    pytester.makepyfile(
        """
        import conftest

        def test_read_after_write_is_ignored(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)

        def test_write_after_write_still_fails(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_c=False)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    failed = _failure(result.stdout.str(), "test_write_after_write_still_fails")
    assert "SYNC-HAZARD-WRITE-AFTER-WRITE (ERROR)" in failed and "READ-AFTER-WRITE" not in failed


def test_a_missing_layer_is_a_usage_error_that_says_how_to_install_it(pytester, monkeypatch, tmp_path):
    empty = tmp_path / "no-layers"
    empty.mkdir()
    monkeypatch.setenv("VK_LAYER_PATH", str(empty))
    pytester.makepyfile("def test_never_runs():\n    pass\n")
    result = pytester.runpytest("--vk-validation")  # refused before anything changes: in process
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"the Khronos validation layer ({vk_pytest.LAYER}) is not installed" in err
    assert str(empty) in err and "$VK_LAYER_PATH is set" in err
    assert "apt-get install vulkan-validationlayers" in err and "LunarG" in err


@needs_layer
@pytest.mark.parametrize("holds", [True, False])
def test_a_kp_instance_made_before_configure(pytester, holds):
    """Held by a Manager: validation cannot be enabled, and the session says so. Idle: it is
    released, and the next instance is validated."""
    pytester.makeconftest(
        HAZARD + ("import kp\n_held = kp.Manager()\n" if holds else "import kp\nkp.Manager().destroy()\n")
    )
    pytester.makepyfile(
        """
        import conftest
        def test_planted(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)
        """
    )
    result = pytester.runpytest_subprocess("--vk-validation", "-p", "no:cacheprovider", timeout=300)
    if holds:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert (
            "--vk-validation could not be enabled: kp's VkInstance was created before" in result.stderr.str()
        )
    else:
        result.assert_outcomes(failed=1)
        assert "SYNC-HAZARD-READ-AFTER-WRITE (ERROR)" in result.stdout.str()


@needs_layer
def test_a_layer_that_did_not_load_is_an_error_not_a_clean_pass(pytester):
    pytester.makeconftest(
        """
        import os
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            os.environ["VK_INSTANCE_LAYERS"] = ""  # undoes --vk-validation's layer
        """
    )
    pytester.makepyfile("def test_device(kp_manager):\n    pass\n")
    result = pytester.runpytest_subprocess("--vk-validation", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(errors=1)
    assert "reported nothing when this process created its VkInstance" in result.stdout.str()


@needs_layer
@pytest.mark.skipif(
    not os.environ.get("VK_ADAM_STOCK_KP"),
    reason="VK_ADAM_STOCK_KP (a folder holding the stock kp 0.9.0) is set by scripts/test.sh",
)
def test_a_kp_that_cannot_log_the_messages_ends_the_session(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.environ["VK_ADAM_STOCK_KP"], str(ROOT)]))
    pytester.makepyfile("def test_imports_kp():\n    import kp\n\ndef test_never_runs():\n    pass\n")
    result = pytester.runpytest_subprocess("--vk-validation", "-p", "no:cacheprovider", timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--vk-validation needs vk-adam's patched kp" in result.stdout.str() + result.stderr.str()
    result.assert_outcomes()  # the session ended in the first test, unvalidated: no pass


# -- the layer's manifest, as the loader finds it ----------------------------------------------------


def _manifest(folder: Path, name: str = vk_pytest.LAYER, many: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    layer = {"name": name, "type": "GLOBAL", "library_path": "libVkLayer_khronos_validation.so"}
    data = {"file_format_version": "1.2.0", **({"layers": [layer]} if many else {"layer": layer})}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_the_loaders_search_path_in_its_order(tmp_path):
    home = str(tmp_path)
    assert vk_pytest.layer_search_path({"HOME": home}) == [
        Path(p, "vulkan/explicit_layer.d")
        for p in (
            f"{home}/.config",
            "/etc/xdg",
            "/etc",
            f"{home}/.local/share",
            "/usr/local/share",
            "/usr/share",
        )
    ]
    env = {"HOME": home, "VK_ADD_LAYER_PATH": "/a:/b", "XDG_DATA_DIRS": "/d1:/d2", "XDG_CONFIG_DIRS": "/c"}
    assert vk_pytest.layer_search_path(env)[:4] == [
        Path("/a"),
        Path("/b"),
        Path(home, ".config/vulkan/explicit_layer.d"),
        Path("/c/vulkan/explicit_layer.d"),
    ]
    assert vk_pytest.layer_search_path(env)[-2:] == [
        Path("/d1/vulkan/explicit_layer.d"),
        Path("/d2/vulkan/explicit_layer.d"),
    ]
    assert vk_pytest.layer_search_path({**env, "VK_LAYER_PATH": "/only"}) == [Path("/only")]


def test_the_manifest_is_found_where_the_loader_looks(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    own = _manifest(tmp_path / "own")
    home = str(tmp_path / "home")
    assert vk_pytest.find_validation_layer({"HOME": home, "VK_LAYER_PATH": str(empty)}) is None
    assert vk_pytest.find_validation_layer({"HOME": home, "VK_LAYER_PATH": f"{empty}:{own.parent}"}) == own
    assert vk_pytest.find_validation_layer({"HOME": home, "VK_LAYER_PATH": str(own)}) == own  # a file
    assert vk_pytest.find_validation_layer({"HOME": home, "VK_ADD_LAYER_PATH": str(own.parent)}) == own
    data = _manifest(tmp_path / "data/vulkan/explicit_layer.d", many=True)
    env = {"HOME": home, "XDG_DATA_DIRS": str(tmp_path / "data"), "XDG_CONFIG_DIRS": str(empty)}
    # (the real /etc and ~ may hold the layer too; the XDG data folder is searched after them)
    found = vk_pytest.find_validation_layer(env)
    assert found == data or (found is not None and found.parent.parts[1] == "etc")
    other = tmp_path / "other"
    _manifest(other, name="VK_LAYER_MESA_overlay")
    (other / "broken.json").write_text("{not json")
    assert vk_pytest.find_validation_layer({"HOME": home, "VK_LAYER_PATH": str(other)}) is None


def test_enable_validation_adds_the_layer_to_those_already_asked_for(tmp_path):
    env = {"VK_INSTANCE_LAYERS": "VK_LAYER_MESA_overlay"}
    log = vk_pytest.enable_validation(tmp_path / "v", env)
    assert env["VK_INSTANCE_LAYERS"] == f"VK_LAYER_MESA_overlay{os.pathsep}{vk_pytest.LAYER}"
    assert env["KOMPUTE_VALIDATION_LOG"] == str(log) and log.read_text() == ""
    vk_pytest.enable_validation(tmp_path / "v", env)
    assert env["VK_INSTANCE_LAYERS"].count(vk_pytest.LAYER) == 1


def test_log_messages_are_split_whole_and_filtered():
    text = (
        f"{vk_pytest.STATUS_MESSAGE} (INFO)\n    Validation Information: active\n\n"
        "Loader Message (INFO)\n    searching\n"
        "SYNC-HAZARD-READ-AFTER-WRITE (ERROR)\n    Validation Error: first line\n    second line\n"
        "Loader Message (WARNING)\n    some other loader warning\n"
    )
    assert vk_pytest.split_messages(text)[2] == (
        "SYNC-HAZARD-READ-AFTER-WRITE (ERROR)\n    Validation Error: first line\n    second line"
    )
    kept = vk_pytest.validation_messages(text)
    assert [m.splitlines()[0] for m in kept] == [
        "SYNC-HAZARD-READ-AFTER-WRITE (ERROR)",
        "Loader Message (WARNING)",
    ]
    assert vk_pytest.validation_messages(text, ignore=["SYNC-HAZARD"]) == kept[1:]


# -- the marker and the fixtures ----------------------------------------------------------------------


def test_requires_gpu_skips_on_a_software_device_and_says_which(pytester):
    device = vk_adam.select_device()
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.requires_gpu
        def test_gpu():
            pass

        @pytest.mark.requires_gpu(reason="measures a GPU's bandwidth")
        def test_gpu_with_a_reason():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "-rs", "-p", "no:cacheprovider")
    if not device.is_software:
        result.assert_outcomes(passed=2)
        return
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            f"SKIPPED [[]1[]] test_requires_gpu_skips*.py:*: requires a hardware GPU; the session's Vulkan "
            f"device is {device.name}*",
            "SKIPPED [[]1[]] test_requires_gpu_skips*.py:*: requires a hardware GPU (measures a GPU's "
            "bandwidth)*",
        ]
    )


def test_kp_manager_is_vk_adams_shared_device_on_vulkan_device(kp_manager, vulkan_device):
    with vk_adam.open_device() as dev:
        assert dev.manager is kp_manager
        assert dev.info == vulkan_device == vk_adam.select_device()
    assert kp_manager.get_device_properties()["device_name"] == vulkan_device.name
    if not os.environ.get(vk_adam.DEVICE_ENV):  # the first hardware GPU, else lavapipe
        assert vulkan_device.is_software == all(d.is_software for d in vk_adam.list_devices())


@pytest.mark.parametrize("choice", ["name", "index", "missing"])
def test_vulkan_device_honours_vk_adam_device(pytester, monkeypatch, choice):
    devices = vk_adam.list_devices()
    last = devices[-1]
    value = {"name": last.name[:8], "index": str(last.index), "missing": "no such device"}[choice]
    expected = next((d.index for d in devices if value in d.name), last.index)  # a name: the first match
    monkeypatch.setenv(vk_adam.DEVICE_ENV, value)
    pytester.makepyfile(f"def test_device(vulkan_device):\n    assert vulkan_device.index == {expected}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    if choice == "missing":
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*no Vulkan device name contains 'no such device'*"])
    else:
        result.assert_outcomes(passed=1)


# -- the CI recipe in the docs is what .ci/ runs -------------------------------------------------------


def test_every_command_of_the_docs_ci_recipe_is_run_by_the_ci_script():
    doc = (ROOT / "docs" / "testing-your-vulkan-code.md").read_text()
    block = re.search(r"<!-- ci-recipe:[^\n]*-->\n```bash\n(.*?)```", doc, re.S)
    assert block, "the recipe block (after its ci-recipe marker) is missing"
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 5 and commands[-1] == '"$VENV/bin/python" -m pytest --vk-validation'
    script = (ROOT / ".ci" / "recipe-vulkan-testing.sh").read_text().splitlines()
    code = [line for line in script if not line.lstrip().startswith("#")]
    missing = [c for c in commands if not any(c in line for line in code)]
    assert not missing, f"the docs' recipe has commands .ci/recipe-vulkan-testing.sh does not run: {missing}"


def test_the_plugin_reaches_kp_only_through_the_runtime(monkeypatch):
    """``_runtime.instance`` is the plugin's view of the kp already imported: none, stock, or
    patched with a VkInstance that a Manager still holds."""
    import types

    from vk_adam._runtime import instance

    assert "sys.modules" not in Path(vk_pytest.__file__).read_text()
    monkeypatch.delitem(sys.modules, "kp", raising=False)
    assert instance.imported_kp_version() is None and instance.release_imported_instance()
    fake = types.ModuleType("kp")
    fake.__version__ = "0.9.0"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kp", fake)
    assert instance.imported_kp_version() == "0.9.0" and not instance.imported_kp_has_validation_log()
    fake.patches = ("validation log",)  # type: ignore[attr-defined]
    fake.release_instance = lambda: False  # type: ignore[attr-defined]
    assert instance.imported_kp_has_validation_log() and not instance.release_imported_instance()
