"""The seeds of vk-adam's pytest plugin: the session's seed, each test's seed derived from it and
its node id, the replay command of a failing test that drew from its seed, and the seed sweep
(``--vk-seeds``). ``pytest_plugin`` registers :class:`Seeds` and re-exports the helpers."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

import pytest

#: The environment variable that sets the session's seed (as ``--vk-seed`` does).
SEED_ENV = "VK_ADAM_TEST_SEED"


def derive_seed(session_seed: int, nodeid: str) -> int:
    """A test's seed (31 bits): BLAKE2b of the session's seed and the test's node id. The same
    pair gives the same seed in any session, whatever else runs, in any pytest-xdist worker."""
    digest = hashlib.blake2b(f"{session_seed}:{nodeid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF


def seed_of(item: pytest.Item, *, draws: bool = True) -> int:
    """``item``'s seed for its current run (what the ``vk_seed`` fixture gives). ``draws``: the
    test draws random data from it, so a failure reports the command that replays it and a seed
    sweep (``--vk-seeds``) repeats it; a conftest that seeds a library on every test's behalf
    passes ``draws=False`` and calls again with ``draws=True`` once it sees the test drew."""
    if draws:
        item.stash[_DRAWS] = True
    session = item.stash.get(_RUN_SEED, None)
    if session is None:
        session = item.config.stash[_SEEDS].session
    return derive_seed(session, item.nodeid)


def session_seed(config: pytest.Config) -> int:
    """The session's seed: ``--vk-seed``, else ``$VK_ADAM_TEST_SEED``, else a fresh one (in a
    pytest-xdist worker, its controller's)."""
    return config.stash[_SEEDS].session


class Seeds:
    """The session's seed, each test's seed derived from it, the replay command of a failing
    test that drew from its seed, and the seed sweep (``--vk-seeds``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session = self._session_seed(config)
        self.runs = int(config.getoption("vk_seeds") or 1)
        if self.runs < 1:
            raise pytest.UsageError(f"--vk-seeds={self.runs}: give the number of seeds to run, at least 1")
        self.report_path = config.getoption("vk_seeds_report")
        # Per test that drew from its seed: the session seeds it ran with, and those it failed at.
        self.ran: dict[str, list[int]] = {}
        self.failed: dict[str, list[int]] = {}

    @staticmethod
    def _session_seed(config: pytest.Config) -> int:
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None and "vk_adam_seed" in workerinput:
            return int(workerinput["vk_adam_seed"])  # a pytest-xdist worker: the controller's
        given = config.getoption("vk_seed")
        where = "--vk-seed"
        if given is None and os.environ.get(SEED_ENV, "").strip():
            text, where = os.environ[SEED_ENV].strip(), f"${SEED_ENV}"
            try:
                given = int(text)
            except ValueError:
                raise pytest.UsageError(
                    f"{SEED_ENV}={text!r} is not a seed: set it to the non-negative integer a failing "
                    "test's report names (or unset it for a fresh seed)"
                ) from None
        if given is None:
            return secrets.randbits(32)
        if given < 0:
            raise pytest.UsageError(f"{where}={given}: a seed is a non-negative integer")
        return int(given)

    def replay_command(self, nodeid: str, session_seed: int) -> str:
        """The one shell command that replays test ``nodeid`` with ``session_seed``."""
        where = ""
        if self.config.invocation_params.dir != self.config.rootpath:
            where = f"cd {shlex.quote(str(self.config.rootpath))} && "
        return f"{where}{SEED_ENV}={session_seed} python -m pytest {shlex.quote(nodeid)}"

    def pytest_report_header(self) -> str:
        how = f"{SEED_ENV}={self.session} python -m pytest NODEID"
        sweep = f"; sweep of {self.runs} seeds: {self.session} .. {self.session + self.runs - 1}"
        return f"vk-adam seed: {self.session} (replay a test: {how}){sweep if self.runs > 1 else ''}"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist's controller: every worker derives its tests' seeds from this session's."""
        node.workerinput["vk_adam_seed"] = self.session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """The seed sweep: a test that drew from its seed runs again for each further seed."""
        if self.runs == 1:
            item.stash[_RUN_SEED] = self.session
            return None
        from _pytest.runner import runtestprotocol

        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for run in range(self.runs):
            item.stash[_RUN_SEED] = self.session + run
            item.stash[_DRAWS] = False
            after = _NextItem(item, nextitem, more=run < self.runs - 1)
            runtestprotocol(item, nextitem=cast("pytest.Item", after), log=True)
            if not after.again:
                break
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if item.stash.get(_DRAWS, False):
            session = item.stash.get(_RUN_SEED, self.session)
            report.user_properties.append(("vk_adam_seed", session))
            if report.failed:
                report.sections.append(
                    ("vk-adam seed", f"replay: {self.replay_command(item.nodeid, session)}")
                )
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        seeds = [value for name, value in report.user_properties if name == "vk_adam_seed"]
        if not seeds or not isinstance(seeds[-1], int):
            return
        seed = seeds[-1]
        if report.when == "call" or (report.failed and report.when == "setup"):
            self.ran.setdefault(report.nodeid, []).append(seed)
        if report.failed:
            failed = self.failed.setdefault(report.nodeid, [])
            if seed not in failed:
                failed.append(seed)

    def pytest_sessionfinish(self) -> None:
        if self.report_path and not hasattr(self.config, "workerinput"):
            tests = {
                nodeid: {"runs": len(ran), "failed_seeds": self.failed.get(nodeid, [])}
                for nodeid, ran in sorted(self.ran.items())
            }
            seeds = [self.session, self.session + self.runs - 1]
            Path(self.report_path).write_text(json.dumps({"session_seeds": seeds, "tests": tests}, indent=1))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.failed and self.runs == 1:
            return
        terminalreporter.section("vk-adam seeds", sep="=", red=bool(self.failed))
        if self.runs > 1:
            runs = sum(len(r) for r in self.ran.values())
            terminalreporter.line(
                f"seed sweep over session seeds {self.session} .. {self.session + self.runs - 1}: "
                f"{len(self.ran)} tests drew from their seed, {runs} runs, "
                f"{sum(len(f) for f in self.failed.values())} failed"
            )
        for nodeid, failed in self.failed.items():
            shown = ", ".join(map(str, failed[:20])) + (
                f", ... ({len(failed)} in all)" if len(failed) > 20 else ""
            )
            terminalreporter.line(f"{nodeid} failed at session seed {shown}")
            terminalreporter.line(f"  replay: {self.replay_command(nodeid, failed[0])}")


class _NextItem:
    """What a sweep's run tears down to, decided at its teardown: the test's own fixtures only
    when it drew from its seed and runs again (its module's and session's stay up), else down to
    the next test's, as a single run does. pytest asks only for its ``listchain()``."""

    def __init__(self, item: pytest.Item, nextitem: pytest.Item | None, more: bool) -> None:
        self.item, self.nextitem, self.more = item, nextitem, more
        self.again = False

    def listchain(self) -> list[Any]:
        self.again = self.more and self.item.stash.get(_DRAWS, False) and not self.item.session.shouldstop
        if self.again:
            return self.item.listchain()[:-1]
        return self.nextitem.listchain() if self.nextitem is not None else []


_SEEDS = pytest.StashKey[Seeds]()
_RUN_SEED = pytest.StashKey[int]()
_DRAWS = pytest.StashKey[bool]()


__all__ = ["SEED_ENV", "Seeds", "derive_seed", "seed_of", "session_seed"]
