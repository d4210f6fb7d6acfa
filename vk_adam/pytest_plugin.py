"""vk-adam's pytest plugin: test Vulkan code on lavapipe or a GPU, under Khronos validation.

pytest loads it by itself wherever vk-adam is installed (entry point ``vk_adam`` in the
``pytest11`` group; ``-p no:vk_adam`` turns it off). It gives:

* fixture ``vulkan_device`` (session): the :class:`~vk_adam.DeviceInfo` of the device the
  session uses: ``$VK_ADAM_DEVICE`` (an index or a name substring) if set, else the first
  hardware GPU, else lavapipe.
* fixture ``kp_manager`` (session): a ``kp.Manager`` on that device, the one vk-adam's own
  optimizers use (``vk_adam.open_device().manager``), so a process holds one Vulkan device.
* option ``--vk-validation`` (or ini ``vk_validation = true``; ``--no-vk-validation`` wins over
  the ini): the session runs under Khronos core + synchronization validation, and a test whose
  Vulkan calls (its own, its fixtures', its subprocesses') made the layer report anything
  fails, with the whole messages in its report. Ini ``vk_validation_ignore``: message-id
  prefixes to ignore, one a line.
* marker ``requires_gpu``: skip the test when the session's device is a software one.
* fixture ``vk_seed`` (function): this test's seed, derived from the session's seed
  (``--vk-seed``, else ``$VK_ADAM_TEST_SEED``, else a fresh one, printed in the header) and the
  test's node id, so one test replays alone; a failing test that drew from it reports the one
  command that replays it. Option ``--vk-seeds=N``: a seed sweep, every test that drew from its
  seed runs for the session seeds S .. S+N-1, and the summary lists the failures with their seeds.

Loading it costs almost nothing: it imports neither kp nor NumPy and opens no device. The
fixtures and the marker open the device when a test first needs one. Validation is switched on
in ``pytest_configure`` by environment variables that the Vulkan loader, the layer and vk-adam's
patched kp read when a VkInstance is created (kp creates one per process, lazily), so
subprocesses that tests start are validated too, into the same log. The messages reach the log
through the patched kp's ``KOMPUTE_VALIDATION_LOG`` (a debug-utils messenger that appends each
message whole, one ``write()`` to a file opened ``O_APPEND``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._pytest_seeds import _SEEDS, SEED_ENV, Seeds, derive_seed, seed_of, session_seed
from ._validation import (
    BENIGN,
    INSTALL_HINT,
    LAYER,
    SETTINGS,
    STATUS_MESSAGE,
    enable_validation,
    find_validation_layer,
    layer_search_path,
    split_messages,
    validation_messages,
)

if TYPE_CHECKING:
    from ._runtime import DeviceInfo

__all__ = [
    "BENIGN",
    "INSTALL_HINT",
    "LAYER",
    "SEED_ENV",
    "SETTINGS",
    "STATUS_MESSAGE",
    "Seeds",
    "Validation",
    "derive_seed",
    "enable_validation",
    "find_validation_layer",
    "kp_manager",
    "layer_search_path",
    "seed_of",
    "session_seed",
    "split_messages",
    "validation_messages",
    "vk_seed",
    "vulkan_device",
]

_ENV_NAMES = ("VK_INSTANCE_LAYERS", "VK_LAYER_SETTINGS_PATH", "KOMPUTE_VALIDATION_LOG")
#: The most messages one report shows (each whole); a count of the rest follows.
_MAX_SHOWN = 50


# -- the plugin's hooks ------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vk-adam", "Vulkan testing (vk-adam)")
    group.addoption(
        "--vk-validation",
        action="store_true",
        default=None,
        dest="vk_validation",
        help="run under Khronos core + synchronization validation; a test whose Vulkan calls made "
        "the layer report anything fails (ini: vk_validation)",
    )
    group.addoption(
        "--no-vk-validation",
        action="store_false",
        dest="vk_validation",
        help="no Khronos validation, whatever the ini says",
    )
    group.addoption(
        "--vk-seed",
        type=int,
        default=None,
        dest="vk_seed",
        metavar="S",
        help=f"the session's seed, from which each test's seed (fixture vk_seed) is derived with its "
        f"node id (default: ${SEED_ENV}, else a fresh one, printed in the header)",
    )
    group.addoption(
        "--vk-seeds",
        type=int,
        default=1,
        dest="vk_seeds",
        metavar="N",
        help="a seed sweep: every test that drew from its seed runs once per session seed S .. S+N-1 "
        "(S: the session's seed); the summary lists each failure with its seed",
    )
    group.addoption(
        "--vk-seeds-report",
        default=None,
        dest="vk_seeds_report",
        metavar="FILE",
        help="write the seed sweep's counts (runs and failing seeds per test) to FILE as JSON",
    )
    parser.addini(
        "vk_validation", "run under Khronos validation (as --vk-validation)", type="bool", default=False
    )
    parser.addini(
        "vk_validation_ignore",
        "validation message ids (prefixes) that do not fail a test, one a line",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires_gpu: skip unless the session's Vulkan device is a hardware GPU (not lavapipe "
        "or another software device)",
    )
    seeds = Seeds(config)
    config.stash[_SEEDS] = seeds
    config.pluginmanager.register(seeds, "vk_adam-seeds")
    wanted = config.getoption("vk_validation")
    if not (config.getini("vk_validation") if wanted is None else wanted):
        return
    if find_validation_layer() is None:
        searched = ", ".join(str(p) for p in layer_search_path())
        only = (
            " ($VK_LAYER_PATH is set, so the loader searches only there)"
            if os.environ.get("VK_LAYER_PATH")
            else ""
        )
        raise pytest.UsageError(
            f"--vk-validation: the Khronos validation layer ({LAYER}) is not installed: no layer "
            f"manifest names it in {searched}{only}. {INSTALL_HINT}"
        )
    _refuse_a_kp_instance_made_before_configure()
    validation = Validation(tuple(config.getini("vk_validation_ignore")))
    config.stash[_VALIDATION] = validation
    config.pluginmanager.register(validation, "vk_adam-validation")


def pytest_unconfigure(config: pytest.Config) -> None:
    seeds = config.stash.get(_SEEDS, None)
    if seeds is not None:
        del config.stash[_SEEDS]
        config.pluginmanager.unregister(seeds)
    validation = config.stash.get(_VALIDATION, None)
    if validation is not None:
        del config.stash[_VALIDATION]
        config.pluginmanager.unregister(validation)
        validation.close()


def _refuse_a_kp_instance_made_before_configure() -> None:
    """kp makes one VkInstance per process and keeps it; the loader reads the environment only
    when it is created. One made before now (a conftest.py or plugin that used kp at import) has
    no layer: drop it if nothing holds it, else say that validation cannot be enabled."""
    from ._runtime import imported_kp_has_validation_log, imported_kp_version, release_imported_instance

    version = imported_kp_version()  # imports no kp: only one already imported matters
    if version is None:
        return
    if not imported_kp_has_validation_log():
        raise pytest.UsageError(_NO_LOG.format(version=version))
    if not release_imported_instance():
        raise pytest.UsageError(
            "--vk-validation could not be enabled: kp's VkInstance was created before "
            "pytest_configure (a conftest.py or plugin opened a Vulkan device at import) and a "
            "kp.Manager still uses it, so the validation layer cannot be added to it. Open "
            "devices in fixtures instead (vk-adam's kp_manager fixture does)."
        )


_NO_LOG = (
    "--vk-validation needs vk-adam's patched kp, whose KOMPUTE_VALIDATION_LOG collects the layer's "
    "messages; the kp imported (version {version}) lacks it, so its messages would be lost. Install "
    "the kp wheel built with vk-adam (scripts/build-kp.sh)."
)


@pytest.fixture(scope="session")
def vulkan_device() -> DeviceInfo:
    """The Vulkan device of this session: ``$VK_ADAM_DEVICE`` if set, else the first hardware GPU,
    else a software device such as lavapipe."""
    from ._runtime import select_device

    return select_device()


@pytest.fixture(scope="session")
def kp_manager(request: pytest.FixtureRequest, vulkan_device: DeviceInfo) -> Iterator[Any]:
    """A ``kp.Manager`` on ``vulkan_device``: the one vk-adam's optimizers use in this process
    (``vk_adam.open_device().manager``). Free what you make on it (``tensor.destroy()``)."""
    from ._runtime import open_device

    handle = open_device(vulkan_device.index)
    validation = request.config.stash.get(_VALIDATION, None)
    try:
        if validation is not None:
            validation.check_layer_ran()
    except RuntimeError:
        handle.close()
        raise
    yield handle.manager
    handle.close()


@pytest.fixture
def vk_seed(request: pytest.FixtureRequest) -> int:
    """This test's seed (31 bits): derived from the session's seed and the test's node id, so
    ``VK_ADAM_TEST_SEED=<session seed> pytest <node id>`` draws the same data alone as in the
    whole session. Seed your generators from it (``numpy.random.default_rng(vk_seed)``)."""
    return seed_of(request.node)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``requires_gpu``: skip on a software device (the device is looked up only here)."""
    marker = item.get_closest_marker("requires_gpu")
    if marker is None:
        return
    from ._errors import NoVulkanDeviceError
    from ._runtime import select_device

    why = f" ({marker.kwargs['reason']})" if "reason" in marker.kwargs else ""
    try:
        device = select_device()
    except NoVulkanDeviceError as exc:
        reason = f"requires a hardware GPU{why}; there is no Vulkan device: {exc}"
    else:
        if not device.is_software:
            return
        reason = (
            f"requires a hardware GPU{why}; the session's Vulkan device is {device.name} "
            f"(software: {device.device_type}; $VK_ADAM_DEVICE picks another)"
        )
    # Reported at the test, as a skip mark is (pytest's skipping plugin raises it the same way).
    raise pytest.skip.Exception(reason, _use_item_location=True)


# -- validation, registered only when it is on -------------------------------------------------


class Validation:
    """The session under validation: the environment it set, its log, and which messages belong
    to which test (those read between two tests are reported at the end of the session)."""

    def __init__(self, ignore: tuple[str, ...]) -> None:
        self.ignore = ignore
        self._saved = {name: os.environ.get(name) for name in _ENV_NAMES}
        self.directory = Path(tempfile.mkdtemp(prefix="vk-validation-"))
        self.log = enable_validation(self.directory)
        self._offset = 0
        self._layer_ran = False
        self._kp_checked = False
        self.outside: list[str] = []

    def close(self) -> None:
        """Give the environment back and remove the log (the report holds what mattered)."""
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(self.directory, ignore_errors=True)

    def take(self) -> list[str]:
        """The messages appended since the last call that count (whole messages only)."""
        with self.log.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        end = data.rfind(b"\n") + 1  # a message being written now is read next time
        self._offset += end
        return validation_messages(data[:end].decode(errors="replace"), self.ignore)

    def check_layer_ran(self) -> None:
        """After this process opened a device: the layer must have reported from its instance."""
        if not self._layer_ran:
            self._layer_ran = STATUS_MESSAGE in self.log.read_text(errors="replace")
        if not self._layer_ran:
            raise RuntimeError(
                f"--vk-validation is on, yet {LAYER} reported nothing when this process created its "
                "VkInstance (the layer failed to load, or VK_INSTANCE_LAYERS / "
                "KOMPUTE_VALIDATION_LOG were changed after pytest_configure); `VK_LOADER_DEBUG=all` "
                "shows what the loader did."
            )

    def _check_kp(self) -> None:
        """A kp imported during the session must be able to log (checked once)."""
        if self._kp_checked:
            return
        from ._runtime import imported_kp_has_validation_log, imported_kp_version

        version = imported_kp_version()  # imports no kp
        if version is None:
            return
        self._kp_checked = True
        if not imported_kp_has_validation_log():
            pytest.exit(_NO_LOG.format(version=version), pytest.ExitCode.USAGE_ERROR)

    def _fail(self, messages: list[str], when: str) -> None:
        ids = list(dict.fromkeys(m.splitlines()[0] for m in messages))
        shown = "\n\n".join(messages[:_MAX_SHOWN])
        more = f"\n\n... and {len(messages) - _MAX_SHOWN} more" if len(messages) > _MAX_SHOWN else ""
        pytest.fail(
            f"Vulkan validation: {', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}: {len(messages)} "
            f"message{'s' if len(messages) > 1 else ''} {when} ({LAYER}, core + synchronization "
            f"validation)\n\n{shown}{more}\n\n(the ini option vk_validation_ignore lists message ids "
            "not to fail on)",
            pytrace=False,
        )

    def _phase(self, item: pytest.Item, when: str, judge: bool = True) -> Generator[None, object, object]:
        """Around one phase of a test: its messages fail it (``judge``; setup's wait for the call),
        or go beside the phase's own failure."""
        try:
            result = yield
        except pytest.skip.Exception:
            messages = self.take()
            if messages:  # a test that made the layer report is not skipped away
                self._fail(messages, "before this test skipped itself")
            raise
        except BaseException:
            item.stash[_BESIDE] = self.take()  # shown beside the test's own failure
            raise
        if judge:
            self._check_kp()
            messages = self.take()
            if messages:
                self._fail(messages, when)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        self.outside += self.take()  # since the last test: collection, background threads
        return (yield from self._phase(item, "during this test's setup", judge=False))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._phase(item, "while this test set up and ran"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._phase(item, "during this test's teardown"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        beside = item.stash.get(_BESIDE, None)
        if beside:
            report.sections.append((f"Vulkan validation ({report.when})", "\n\n".join(beside)))
        item.stash[_BESIDE] = []
        return report

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.outside += self.take()
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # a pytest-xdist worker: its controller reports them
            workeroutput[_OUTSIDE_KEY] = self.outside
            return
        if self.outside and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist's controller: a worker's messages outside any test (each worker has its
        own log, made by its own ``pytest_configure``) count as this session's."""
        self.outside += list(getattr(node, "workeroutput", {}).get(_OUTSIDE_KEY, []))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.outside:
            terminalreporter.section("Vulkan validation messages outside any test", sep="=", red=True)
            terminalreporter.line("\n\n".join(self.outside))


_VALIDATION = pytest.StashKey[Validation]()
_OUTSIDE_KEY = "vk_adam_validation_outside"

_BESIDE = pytest.StashKey[list[str]]()
