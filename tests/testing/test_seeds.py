"""One seed drives every random draw of the suite (tests/conftest.py over vk-adam's pytest plugin):
two sessions with the same seed draw the same data, a test alone draws what it drew in the whole
session (and in a pytest-xdist worker), a failing test prints the one command that replays it, a
fresh seed is printed in the header, and a seed sweep (``--vk-seeds``) lists each failure with
its seed. Each inner session runs in a subprocess, on the suite's own conftest.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from vk_adam.pytest_plugin import derive_seed

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

#: Tests that record what they drew from every source the suite seeds (to $SEED_PROBE_OUT).
PROBE = """
import json, os, random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st


def record(name, value):
    with open(os.environ["SEED_PROBE_OUT"], "a") as out:
        out.write(json.dumps([name, value]) + "\\n")


def test_numpy(rng, vk_seed):
    record("numpy", [vk_seed, rng.standard_normal(3).tolist()])


def test_globals():
    record("globals", [random.random(), float(np.random.random_sample())])


def test_torch():
    torch = pytest.importorskip("torch")
    record("torch", torch.rand(3).tolist())


@settings(max_examples=5)
@given(st.integers(0, 10**9))
def test_hypothesis(n):
    record("hypothesis", n)


@pytest.mark.parametrize("case", ["a", "b"])
def test_parametrized(rng, case):
    record("parametrized-" + case, rng.integers(10**9).item())


def test_fails_when_asked(rng):
    drawn = rng.integers(10**9).item()
    record("fails", drawn)
    assert not os.environ.get("SEED_PROBE_FAIL"), f"drew {drawn}"


def test_draws_nothing():
    record("nothing", 1)
"""

#: A test that fails for about one seed in three, and one that draws nothing (for the sweep).
SWEEP = """
def test_one_in_three(vk_seed):
    assert vk_seed % 3 != 0, vk_seed


def test_no_draw():
    pass
"""


@pytest.fixture
def probe(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_probe=PROBE)
    monkeypatch.delenv("VK_ADAM_TEST_SEED", raising=False)
    monkeypatch.delenv("SEED_PROBE_FAIL", raising=False)
    return pytester


def _run(
    pytester: pytest.Pytester, seed: int | None, *args: str, env: dict[str, str] | None = None
) -> tuple[dict[str, list[object]], str, int]:
    """One inner session in a subprocess: (what each test drew, its output, its exit code)."""
    out = pytester.path / f"draws-{len(list(pytester.path.glob('draws-*')))}.jsonl"
    environment = {k: v for k, v in os.environ.items() if k != "VK_ADAM_TEST_SEED"}
    environment.update({"SEED_PROBE_OUT": str(out), **(env or {})})
    if seed is not None:
        environment["VK_ADAM_TEST_SEED"] = str(seed)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    draws: dict[str, list[object]] = {}
    if out.exists():
        for line in out.read_text().splitlines():
            name, value = json.loads(line)
            draws.setdefault(name, []).append(value)
    return draws, done.stdout + done.stderr, done.returncode


def test_two_sessions_with_one_seed_draw_the_same_data(probe):
    first, output, code = _run(probe, 1234)
    assert code == 0, output
    assert "vk-adam seed: 1234" in output
    # Every source drew something, and each test's draws differ from the others'.
    expected = {"numpy", "globals", "hypothesis", "parametrized-a", "parametrized-b", "fails", "nothing"}
    assert expected <= set(first), first
    assert len(first["hypothesis"]) >= 2 and first["parametrized-a"] != first["parametrized-b"]
    second, output, code = _run(probe, 1234)
    assert code == 0, output
    assert second == first
    other, output, code = _run(probe, 1235)
    assert code == 0, output
    for name in expected - {"nothing"}:
        assert other[name] != first[name], name
    if "torch" in first:
        assert other["torch"] != first["torch"]


def test_a_test_alone_or_in_a_worker_draws_what_it_drew_in_the_whole_session(probe):
    whole, output, code = _run(probe, 99)
    assert code == 0, output
    # Some tests of the module, in another order (a test's seed does not depend on what ran before).
    chosen = {
        "test_probe.py::test_parametrized[b]": "parametrized-b",
        "test_probe.py::test_hypothesis": "hypothesis",
        "test_probe.py::test_globals": "globals",
    }
    alone, output, code = _run(probe, 99, *chosen)
    assert code == 0, output
    assert alone == {name: whole[name] for name in chosen.values()}
    # The seed is the session's and the test's node id: what derive_seed gives.
    assert whole["numpy"][0][0] == derive_seed(99, "test_probe.py::test_numpy")
    pytest.importorskip("xdist")
    parallel, output, code = _run(probe, 99, "-n", "2")
    assert code == 0, output
    assert {k: sorted(map(json.dumps, v)) for k, v in parallel.items()} == {
        k: sorted(map(json.dumps, v)) for k, v in whole.items()
    }


def test_a_failing_test_prints_the_command_that_replays_it(probe):
    draws, output, code = _run(probe, 4321, env={"SEED_PROBE_FAIL": "1"})
    assert code == 1, output
    (drawn,) = draws["fails"]
    command = "VK_ADAM_TEST_SEED=4321 python -m pytest test_probe.py::test_fails_when_asked"
    assert f"replay: {command}" in output, output
    assert f"drew {drawn}" in output
    # A test that drew nothing from its seed has no replay line, passing or failing.
    assert output.count("replay: VK_ADAM_TEST_SEED=") == 2  # the failure's section, the summary
    # The command, run as printed, replays the failure with the same draw.
    seed, nodeid = re.fullmatch(r"VK_ADAM_TEST_SEED=(\d+) python -m pytest (\S+)", command).groups()
    again, output, code = _run(probe, int(seed), *shlex.split(nodeid), env={"SEED_PROBE_FAIL": "1"})
    assert code == 1 and again == {"fails": [drawn]}, output


def test_without_a_seed_a_fresh_one_is_printed_and_replays_the_session(probe):
    first, output, code = _run(probe, None)
    assert code == 0, output
    printed = re.search(r"^vk-adam seed: (\d+) \(replay a test: VK_ADAM_TEST_SEED=\1 ", output, re.M)
    assert printed, output
    again, output, code = _run(probe, int(printed[1]))
    assert code == 0 and again == first, output


def test_a_seed_that_is_not_a_number_is_a_usage_error(probe):
    _, output, code = _run(probe, None, env={"VK_ADAM_TEST_SEED": "abc"})
    assert code == pytest.ExitCode.USAGE_ERROR, output
    assert "VK_ADAM_TEST_SEED='abc' is not a seed" in output


def test_a_seed_sweep_lists_each_failure_with_its_seed(pytester, monkeypatch):
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_sweep=SWEEP)
    monkeypatch.delenv("VK_ADAM_TEST_SEED", raising=False)
    report = pytester.path / "sweep.json"
    _, output, code = _run(pytester, 1000, "--vk-seeds=12", f"--vk-seeds-report={report}")
    failing = [s for s in range(1000, 1012) if derive_seed(s, "test_sweep.py::test_one_in_three") % 3 == 0]
    assert failing, "no seed of 12 fails: pick another range"
    assert code == 1, output
    counts = json.loads(report.read_text())
    assert counts == {
        "session_seeds": [1000, 1011],
        "tests": {"test_sweep.py::test_one_in_three": {"runs": 12, "failed_seeds": failing}},
    }
    assert (
        f"{len(failing)} failed, {13 - len(failing)} passed" in output
    )  # the test that drew nothing ran once
    assert f"test_sweep.py::test_one_in_three failed at session seed {', '.join(map(str, failing))}" in output
    assert (
        f"replay: VK_ADAM_TEST_SEED={failing[0]} python -m pytest test_sweep.py::test_one_in_three" in output
    )


def test_the_flake_hunt_script_lists_each_failure_with_its_seed(tmp_path):
    """scripts/flake-hunt.sh splits the seeds over processes and merges what they found."""
    (tmp_path / "test_hunted.py").write_text(SWEEP)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir, whatever lies above tmp_path
    out = tmp_path / "hunt"
    env = {k: v for k, v in os.environ.items() if k != "VK_ADAM_TEST_SEED"}
    env["VK_ADAM_VENV"] = str(Path(sys.executable).parent.parent)
    hunt = [str(ROOT / "scripts" / "flake-hunt.sh"), "-n", "9", "--start", "500", "--jobs", "2"]
    done = subprocess.run(
        ["bash", *hunt, "--out", str(out), str(tmp_path / "test_hunted.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    nodeid = "test_hunted.py::test_one_in_three"
    failing = [s for s in range(500, 509) if derive_seed(s, nodeid) % 3 == 0]
    assert failing, "no seed of 9 fails: pick another range"
    assert done.returncode == 1, output
    counts = json.loads((out / "counts.json").read_text())
    assert counts["session_seed_ranges"] == [[500, 504], [505, 508]]
    assert counts["tests"] == {nodeid: {"runs": 9, "failed_seeds": failing}}
    assert f"1 tests drew from their seed; 9 runs; {len(failing)} failed" in output
    assert f"FAILED at seed {failing[0]}: VK_ADAM_TEST_SEED={failing[0]} python -m pytest {nodeid}" in output
