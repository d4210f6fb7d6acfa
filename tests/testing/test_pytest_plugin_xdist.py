"""vk-adam's pytest plugin under pytest-xdist (``pytest -n 2 --vk-validation``, what
scripts/test.sh runs): each worker validates into a log of its own, a test's messages fail that
test on whichever worker ran it, and a worker's messages outside any test fail the session at
the controller."""

from __future__ import annotations

import json

import pytest

from .test_pytest_plugin import HAZARD, _clean_env, _failure, needs_layer

pytest_plugins = ["pytester"]
pytest.importorskip("xdist")


@needs_layer
def test_each_worker_validates_into_its_own_log_and_reports_reach_the_controller(pytester, monkeypatch):
    _clean_env(monkeypatch)
    pytester.makeconftest(HAZARD)
    pytester.makepyfile(
        test_a_collection="""
        import kp
        import conftest

        _mgr = kp.Manager()  # at collection, outside any test, in every worker
        conftest.copy_then_transfer(_mgr, barrier_b=False)
        _mgr.destroy()

        def test_collected():
            pass
        """,
        test_b_cases="""
        import json, os
        import pytest
        import conftest

        @pytest.mark.parametrize("i", range(4))
        def test_clean(kp_manager, worker_id, i):
            conftest.copy_then_transfer(kp_manager)
            with open("logs.jsonl", "a") as out:
                out.write(json.dumps([worker_id, os.environ["KOMPUTE_VALIDATION_LOG"]]) + "\\n")

        def test_planted(kp_manager):
            conftest.copy_then_transfer(kp_manager, barrier_b=False)
        """,
    )
    result = pytester.runpytest_subprocess(
        "--vk-validation", "-p", "no:cacheprovider", "-n", "2", "--dist", "load", "-rA", timeout=300
    )
    out = result.stdout.str()
    result.assert_outcomes(passed=5, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    planted = _failure(out, "test_planted").split("\n", 1)[1]  # after the "[gw0] linux" line
    assert planted.startswith("Vulkan validation: SYNC-HAZARD-READ-AFTER-WRITE (ERROR): 1 message while"), (
        planted
    )
    logs = {}
    for line in (pytester.path / "logs.jsonl").read_text().splitlines():
        worker, log = json.loads(line)
        logs.setdefault(worker, set()).add(log)
    assert all(len(v) == 1 for v in logs.values()), logs  # one log per worker
    if len(logs) == 2:  # both workers ran some of the clean tests: their logs differ
        assert len(set.union(*logs.values())) == 2, logs
    # Each worker collected test_a_collection.py and made the layer report there: the controller
    # shows the messages of both, and that alone would fail the session.
    outside = out.split("Vulkan validation messages outside any test", 1)[1].split("short test summary")[0]
    assert outside.count("SYNC-HAZARD-READ-AFTER-WRITE (ERROR)") == 2, outside


@needs_layer
def test_a_clean_parallel_session_passes(pytester, monkeypatch):
    _clean_env(monkeypatch)
    pytester.makeconftest(HAZARD)
    pytester.makepyfile(
        test_clean="""
        import pytest
        import conftest

        @pytest.mark.parametrize("i", range(4))
        def test_clean(kp_manager, i):
            conftest.copy_then_transfer(kp_manager)
        """
    )
    result = pytester.runpytest_subprocess(
        "--vk-validation", "-p", "no:cacheprovider", "-n", "2", timeout=300
    )
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.OK
    assert "outside any test" not in result.stdout.str()
